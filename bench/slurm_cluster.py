#!/usr/bin/env python3
"""Provisioning benchmark of the slurm role: the molecule scenario `cluster`
(roles/slurm/molecule/cluster: one controller, two compute containers).

For each of N rounds (default 3):
  1. `molecule destroy` + `molecule create`: three fresh containers (not timed);
  2. `molecule converge`, timed: provisioning from scratch;
  3. `molecule converge` again at once, timed: the re-run a site does across its
     nodes; the changed count of its PLAY RECAP (summed over hosts) must be 0.
Then the containers are destroyed. Prints each round and the medians, as text and
(with --json FILE) as JSON.

Wall-clock times of the whole `molecule converge` command (molecule's own start-up,
about 2-3 s, included). Run it on a quiet machine: the containers share its cores.

Usage (from the repository root):
  source .venv/bin/activate
  python bench/slurm_cluster.py [--rounds 3] [--json out.json]
Environment: RACKGATE_IMAGE (default: the output of scripts/build-image.sh),
CONTAINERS_CONF (default molecule/containers.conf).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROLE = ROOT / "roles" / "slurm"
SCENARIO = "cluster"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
RECAP = re.compile(r"^\W*(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


def molecule(action: str, env: dict[str, str]) -> tuple[float, str]:
    """Run `molecule <action> -s cluster`; return (seconds, output without colours)."""
    start = time.monotonic()
    proc = subprocess.run(
        ["molecule", action, "-s", SCENARIO],
        cwd=ROLE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    elapsed = time.monotonic() - start
    output = ANSI.sub("", proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(output[-4000:])
        raise SystemExit(f"molecule {action} failed (rc={proc.returncode})")
    return elapsed, output


def recap(output: str) -> dict[str, dict[str, int]]:
    """Per host ok/changed/unreachable/failed from the last PLAY RECAP in `output`."""
    hosts: dict[str, dict[str, int]] = {}
    for line in output.splitlines():
        match = RECAP.match(line)
        if match:
            host, ok, changed, unreachable, failed = match.groups()
            hosts[host] = {
                "ok": int(ok),
                "changed": int(changed),
                "unreachable": int(unreachable),
                "failed": int(failed),
            }
    if not hosts:
        raise SystemExit("no PLAY RECAP found in the molecule output")
    return hosts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(ROOT / "molecule" / "containers.conf"))
    env.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    env.setdefault("RACKGATE_MOLECULE_INSTANCE", "rg-slurm")
    if "RACKGATE_IMAGE" not in env:
        env["RACKGATE_IMAGE"] = subprocess.run(
            [str(ROOT / "scripts" / "build-image.sh")],
            env=env,
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout.strip()

    rounds: list[dict[str, Any]] = []
    try:
        for number in range(1, args.rounds + 1):
            molecule("destroy", env)
            molecule("create", env)
            converge_s, out1 = molecule("converge", env)
            rerun_s, out2 = molecule("converge", env)
            first, second = recap(out1), recap(out2)
            result = {
                "round": number,
                "converge_s": round(converge_s, 1),
                "converge_changed": sum(h["changed"] for h in first.values()),
                "rerun_s": round(rerun_s, 1),
                "rerun_changed": sum(h["changed"] for h in second.values()),
                "rerun_recap": second,
                "load_avg_1m": os.getloadavg()[0],
            }
            rounds.append(result)
            print(
                f"round {number}: converge {result['converge_s']} s "
                f"(changed={result['converge_changed']}), re-run {result['rerun_s']} s "
                f"(changed={result['rerun_changed']}), load {result['load_avg_1m']:.1f}",
                flush=True,
            )
    finally:
        molecule("destroy", env)

    summary = {
        "scenario": f"roles/slurm/molecule/{SCENARIO}",
        "rounds": rounds,
        "converge_median_s": statistics.median(r["converge_s"] for r in rounds),
        "rerun_median_s": statistics.median(r["rerun_s"] for r in rounds),
        "rerun_changed_max": max(r["rerun_changed"] for r in rounds),
        "cpus": os.cpu_count(),
    }
    print(
        f"median converge {summary['converge_median_s']} s, median re-run "
        f"{summary['rerun_median_s']} s, "
        f"re-run changed (max over rounds) {summary['rerun_changed_max']}"
    )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0 if summary["rerun_changed_max"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
