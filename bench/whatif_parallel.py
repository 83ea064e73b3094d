"""What-if, not rackgate's code path: judge_run's per-result loop on 1 process vs N.

    python bench/whatif_parallel.py /var/tmp/rackgate-bench/run-10k --procs 1 2

The loop ``judge_run`` runs for every (host, check) — ``EvidenceStore.read`` then
``judge_evidence`` with the host's profile — is about 70-80 % of judging a stored run and
needs nothing from other nodes, so it can be split by node over a process pool. This
script runs exactly that loop with rackgate's own functions, serially and with a fork
pool (results pickled back to the parent, as a real implementation would need), so the
gain on a 2-core machine is measured rather than guessed. Reports are not written.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

import standin_checks

from rackgate.checks import REGISTRY
from rackgate.judge.evidence import judge_evidence, missing_evidence
from rackgate.model import Result
from rackgate.run import recorded_profile
from rackgate.selection import node_profiles
from rackgate.store.evidence import EvidenceError, EvidenceStore
from rackgate.store.manifest import read_manifest

_STATE: dict[str, Any] = {}


def _judge_hosts(bounds: tuple[int, int]) -> list[Result]:
    run_dir, hosts, checks, profiles = (_STATE[k] for k in
                                        ("run_dir", "hosts", "checks", "profiles"))
    store = EvidenceStore(run_dir)
    out = []
    for h in hosts[bounds[0]:bounds[1]]:
        host = h["name"]
        for name in checks:
            try:
                ev, stdout = store.read(host, name)
            except EvidenceError as exc:
                out.append(missing_evidence(host, name, str(exc)))
                continue
            out.append(judge_evidence(REGISTRY[name], ev, stdout, profiles[host]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)

    manifest = read_manifest(args.run_dir)
    standin_checks.register_for_manifest(manifest)
    hosts = manifest["hosts"]
    profiles = node_profiles(recorded_profile(manifest, args.run_dir),
                             {h["name"]: h.get("profile_overrides") for h in hosts})
    _STATE.update(run_dir=args.run_dir, hosts=hosts, checks=manifest["checks"],
                  profiles=profiles)
    for procs in args.procs:
        t = time.perf_counter()
        if procs == 1:
            results = _judge_hosts((0, len(hosts)))
        else:
            step = max(1, len(hosts) // (procs * 16))
            chunks = [(a, min(a + step, len(hosts))) for a in range(0, len(hosts), step)]
            with multiprocessing.get_context("fork").Pool(procs) as pool:
                results = [r for part in pool.imap(_judge_hosts, chunks) for r in part]
        dt = time.perf_counter() - t
        print(f"read + judge_evidence of {len(results)} results, {procs} process(es): "
              f"{dt:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
