"""Generate a stored rackgate run directory for the judging/reporting benchmark.

    python bench/make_run.py /var/tmp/rackgate-bench/run-10k --nodes 10000 --checks 20

The run directory looks like one ``rackgate validate`` leaves behind: ``manifest.json``
(schema rackgate.manifest/1, the keys run.validate writes) and, per host and check,
``evidence/<host>/<check>.out`` + ``.json`` written through
``EvidenceStore(run_dir, sync=False).write(...)``. Evidence text comes from the project's
real fixtures (tests/fixtures/fio: fio 3.33 captures; tests/fixtures/identity), with
their ``#`` provenance header removed (it is not part of what the command printed):

- fio: the healthy capture with its read figures (bw_bytes, bw, iops, io_bytes, total_ios,
  bw/iops min/max/mean, latencies and percentiles) scaled by a per-node factor
  (lognormal, sigma 4 %, times 1.5 % per-measurement noise); a few slow nodes
  (0.45-0.85 x: peer outliers), a few broken ones (0.01-0.035 x: below the 50 MB/s floor);
  some outputs keep fio's "note:" line before the JSON (the note-before-json capture);
- faults, per (node, check): fio job error ENOENT (the enoent capture, rc 1), truncated
  output, timeout (rc 124, no output), write-only capture (no read data), evidence
  never collected; per node: unreachable (every check), no DMI serials (VM capture);
- a few nodes carry ``rackgate_profile_overrides``.

Checks: node.identity, fio.seq_read, then bench.fio_NN stand-ins (bench/standin_checks.py).
Every random choice is seeded per node, so a seed gives the same run on any machine.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import standin_checks  # registers the bench.fio_NN stand-ins before any profile is built

from rackgate.checks import REGISTRY, load_profile, profile_from_document
from rackgate.commands.task import KILLED_RC, TIMEOUT_RC, Task, wrapped
from rackgate.profile import Profile
from rackgate.store.evidence import EvidenceStore, write_json
from rackgate.store.manifest import MANIFEST_SCHEMA, Manifest, versions

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"

# Fault rates. Per node:
UNREACHABLE = 0.002
SLOW = 0.005  # factor 0.45-0.85: passes the floor, flagged as a peer outlier
BROKEN = 0.0005  # factor 0.01-0.035: below the 50 MB/s floor -> fail
NO_DMI = 0.001  # identity without serials -> warn
OVERRIDE = 0.01  # host with rackgate_profile_overrides
# Per (node, fio check):
ENOENT = 0.001
TRUNCATED = 0.0005
TIMEOUT = 0.0005
WRITE_ONLY = 0.0002
MISSING = 0.0001  # no evidence at all ("not collected")
NOTE = 0.02  # fio's "note:" line before the JSON (parses fine)

NODE_SIGMA = 0.04
MEASUREMENT_SIGMA = 0.015
T0 = datetime(2026, 11, 30, 1, 0, 0)
RACK_SIZE = 4  # DGX-class nodes per rack (power-limited)


def strip_header(text: str) -> str:
    """A fixture without its leading ``#`` provenance lines."""
    lines = text.splitlines(keepends=True)
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        n += 1
    return "".join(lines[n:])


def fixture(rel: str) -> str:
    return strip_header((FIXTURES / rel).read_text(encoding="utf-8"))


def header_line(rel: str, prefix: str) -> str:
    for line in (FIXTURES / rel).read_text(encoding="utf-8").splitlines():
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    return ""


_NUM = re.compile(r'"([^"]+)" : (-?[0-9]+(?:\.[0-9]+)?)')
_UP = {"bw_bytes", "bw", "iops", "bw_min", "bw_max", "bw_mean", "bw_dev", "iops_min",
       "iops_max", "iops_mean", "iops_stddev"}
_DOWN = {"min", "max", "mean", "stddev"}  # latencies (slat/clat/lat), ns


def _fmt(original: str, value: float) -> str:
    return f"{value:.6f}" if "." in original else str(round(value))


class FioVariant:
    """The healthy fio capture with its read figures scaled by a factor."""

    def __init__(self, text: str) -> None:
        start = text.index('"read" : {')
        end = text.index('"write" : {')
        self.head, self.read, self.tail = text[:start], text[start:end], text[end:]
        found = re.search(r'"total_ios" : ([0-9]+)', self.read)
        if found is None:
            raise ValueError("the fio capture has no read total_ios")
        self.total_ios = int(found.group(1))

    def render(self, f: float, when: datetime) -> str:
        ios = max(1, round(self.total_ios * f))

        def sub(m: re.Match[str]) -> str:
            key, val = m.group(1), m.group(2)
            x = float(val)
            if key == "io_bytes":
                new = str(ios * 2**20)
            elif key == "io_kbytes":
                new = str(ios * 1024)
            elif key in ("total_ios", "N"):
                new = str(ios) if x else val
            elif key in _UP:
                new = _fmt(val, x * f)
            elif key in _DOWN or key.replace(".", "").isdigit():
                new = _fmt(val, x / f)
            else:
                return m.group(0)
            return f'"{key}" : {new}'

        ts = int(when.replace(tzinfo=UTC).timestamp())
        head = re.sub(r'"timestamp" : [0-9]+', f'"timestamp" : {ts}', self.head)
        ms = ts * 1000 + when.microsecond // 1000
        head = re.sub(r'"timestamp_ms" : [0-9]+', f'"timestamp_ms" : {ms}', head)
        head = re.sub(r'"time" : "[^"]*"', f'"time" : "{when.strftime("%a %b %d %H:%M:%S %Y")}"',
                      head)
        return head + _NUM.sub(sub, self.read) + self.tail


def check_params(profile: Profile, checks: Sequence[str]) -> dict[str, Any]:
    """Each check's parameters from ``profile`` (every check must be in it)."""
    out: dict[str, Any] = {}
    for c in checks:
        section = profile.check(c)
        if section is None:
            raise ValueError(f"profile {profile.name} has no section for check {c}")
        out[c] = REGISTRY[c].params_model.model_validate(section.params)
    return out


def host_name(i: int) -> str:
    return f"gpu-n{i + 1:05d}"


def location(i: int) -> str:
    rack = i // RACK_SIZE
    return f"hall h1 row {rack // 40 + 1:02d} rack r{rack + 1:04d} u {8 + 10 * (i % RACK_SIZE)}"


def node_rng(seed: int, i: int) -> random.Random:
    return random.Random(seed * 1_000_003 + i)


def node_plan(seed: int, i: int) -> dict[str, Any]:
    """What a node is like: everything random about it, drawn from its own seed."""
    rng = node_rng(seed, i)
    u = rng.random()
    if u < BROKEN:
        kind, factor = "broken", rng.uniform(0.01, 0.035)
    elif u < BROKEN + SLOW:
        kind, factor = "slow", rng.uniform(0.45, 0.85)
    else:
        kind, factor = "healthy", math.exp(rng.gauss(0.0, NODE_SIGMA))
    return {
        "rng": rng,
        "kind": kind,
        "factor": factor,
        "unreachable": rng.random() < UNREACHABLE,
        "no_dmi": rng.random() < NO_DMI,
        "override": rng.random() < OVERRIDE,
    }


# a lower floor (80 x 0.5 = 40 MB/s) than the demo profile's: a loosening, so it gives its
# basis (rackgate.thresholds: an override that loosens a threshold without one is refused)
OVERRIDES = {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
    "ref": 80, "basis": "bench: a synthetic node class with a slower scratch disk"}}}}}


def write_unreachable(store: EvidenceStore, host: str, check: str,
                      argv: tuple[str, ...]) -> None:
    """``check``'s record on a node Ansible could not reach, in Ansible's words."""
    store.write(host, check, "", argv=argv, outcome="unreachable", rc=None, started=None,
                ended=None, duration_s=None, stderr="",
                message=f"Failed to connect to the host via ssh: ssh: connect to host {host} "
                        "port 22: No route to host")


class Generator:
    def __init__(self, run_dir: Path, checks: list[str], seed: int, profile_raw: dict[str, Any]):
        self.run_dir = run_dir
        self.checks = checks
        self.seed = seed
        profile = profile_from_document(profile_raw, "bench")
        self.params = check_params(profile, checks)
        self.healthy = FioVariant(fixture("fio/seq-read-healthy.json"))
        note_text = fixture("fio/seq-read-note-before-json.txt")
        self.note = note_text[:note_text.index("\n{") + 1]  # fio's note line(s)
        self.enoent = fixture("fio/seq-read-open-failed-enoent.json")
        self.enoent_stderr = header_line("fio/seq-read-open-failed-enoent.json",
                                         "# scenario:").split("stderr was:")[-1].strip()
        self.write_only = fixture("fio/write-only-no-read-data.json")
        self.identity = fixture("identity/server-with-dmi.txt")
        self.vm_identity = fixture("identity/vm-without-dmi.txt")

    def identity_text(self, i: int, plan: dict[str, Any]) -> str:
        rng = plan["rng"]
        if plan["no_dmi"]:
            text = self.vm_identity
        else:
            serial = f"{1_700_000_000_000 + i * 7919 + rng.randrange(7919)}"
            text = self.identity
            text = re.sub(r"^product_serial=.*$", f"product_serial={serial}", text, flags=re.M)
            text = re.sub(r"^chassis_serial=.*$", f"chassis_serial={serial}", text, flags=re.M)
            text = re.sub(r"^board_serial=.*$", f"board_serial=PQ{rng.randrange(10**10):010d}",
                          text, flags=re.M)
            if rng.random() < 0.03:
                text = re.sub(r"^bios_version=.*$", "bios_version=0.9.8", text, flags=re.M)
        return re.sub(r"^machine_id=.*$", f"machine_id={rng.getrandbits(128):032x}", text,
                      flags=re.M)

    def node(self, i: int) -> Counter[str]:
        host = host_name(i)
        plan = node_plan(self.seed, i)
        rng = plan["rng"]
        store = EvidenceStore(self.run_dir, sync=False)
        stats: Counter[str] = Counter()
        stats[f"node_{plan['kind']}"] += 1
        when = T0 + timedelta(seconds=i * 0.05)
        for name in self.checks:
            check = REGISTRY[name]
            params = self.params[name]
            argv = wrapped(Task(host, name, tuple(check.command(params, {})),
                                check.timeout_s(params)))
            fields: dict[str, Any] = {"argv": argv, "outcome": "completed", "rc": 0,
                                      "stderr": "", "message": ""}
            duration = 0.2 if name == "node.identity" else params.runtime_s + rng.uniform(0.8, 1.3)
            if plan["unreachable"]:
                stats["unreachable"] += 1
                write_unreachable(store, host, name, argv)
                continue
            if name == "node.identity":
                stdout = self.identity_text(i, plan)
                stats["identity_no_dmi" if plan["no_dmi"] else "identity"] += 1
            else:
                u = rng.random()
                f = plan["factor"] * math.exp(rng.gauss(0.0, MEASUREMENT_SIGMA))
                cut = 0.0
                if u < MISSING:
                    stats["missing"] += 1
                    when += timedelta(seconds=duration)
                    continue
                u -= MISSING
                if u < ENOENT:
                    stats["enoent"] += 1
                    stdout = self.enoent
                    fields.update(rc=1, stderr=self.enoent_stderr)
                elif u - ENOENT < TRUNCATED:
                    stats["truncated"] += 1
                    full = self.healthy.render(f, when)
                    cut = rng.uniform(0.4, 0.95)
                    stdout = full[:int(len(full) * cut)]
                elif u - ENOENT - TRUNCATED < TIMEOUT:
                    stats["timeout"] += 1
                    rc = TIMEOUT_RC if rng.random() < 0.8 else KILLED_RC
                    duration = float(params.timeout_s)
                    stdout = ""
                    fields.update(outcome="timeout", rc=rc,
                                  message=f"killed after {params.timeout_s} s (timeout rc {rc})")
                elif u - ENOENT - TRUNCATED - TIMEOUT < WRITE_ONLY:
                    stats["write_only"] += 1
                    stdout = self.write_only
                else:
                    stats["fio_ok"] += 1
                    stdout = self.healthy.render(f, when)
                    if rng.random() < NOTE:
                        stats["fio_note"] += 1
                        stdout = self.note + stdout
            ended = when + timedelta(seconds=duration)
            fmt = "%Y-%m-%d %H:%M:%S.%f"
            store.write(host, name, stdout, started=when.strftime(fmt),
                        ended=ended.strftime(fmt), duration_s=round(duration, 3), **fields)
            when = ended
        return stats


# The writer processes' generator (bench/make_mixed_run.py writes through these too):
# anything whose node(i) writes node i's evidence and returns its scenario counts.
_GEN: Any = None


def _init(factory: Callable[..., Any], args: tuple[Any, ...]) -> None:
    global _GEN
    _GEN = factory(*args)


def _chunk(bounds: tuple[int, int]) -> Counter[str]:
    assert _GEN is not None
    total: Counter[str] = Counter()
    for i in range(*bounds):
        total += _GEN.node(i)
    return total


def write_nodes(factory: Callable[..., Any], args: tuple[Any, ...], nodes: int,
                jobs: int) -> tuple[int, Counter[str]]:
    """Every node's evidence, written by ``factory(*args).node(i)`` in ``jobs`` forked
    processes (at most one per node), eight chunks of nodes each: (the processes used,
    the scenarios' counts)."""
    jobs = max(1, min(jobs, nodes))
    step = max(1, math.ceil(nodes / (jobs * 8)))
    chunks = [(a, min(a + step, nodes)) for a in range(0, nodes, step)]
    stats: Counter[str] = Counter()
    if jobs == 1:
        _init(factory, args)
        for c in chunks:
            stats += _chunk(c)
    else:
        with multiprocessing.get_context("fork").Pool(jobs, _init, (factory, args)) as pool:
            for s in pool.imap_unordered(_chunk, chunks):
                stats += s
    return jobs, stats


def synthetic_manifest(run_dir: Path, hosts: list[dict[str, Any]], checks: list[str],
                       profile: Profile, writer: str) -> dict[str, Any]:
    """The manifest of a synthetic run that ``writer`` (a bench script) wrote: the keys
    ``run.validate`` writes today, with no inventory behind it (no place in a rack, no
    launch host), checked by rackgate's own manifest model."""
    started = T0.replace(tzinfo=UTC)
    doc = {
        "schema": MANIFEST_SCHEMA,
        "run_id": run_dir.name,
        "started": started.isoformat(timespec="seconds"),
        "finished": (started + timedelta(hours=2)).isoformat(timespec="seconds"),
        "resumed": [],
        "inventory": [f"{REPO}/inventory/bench-{len(hosts)} (synthetic: {writer} "
                      "writes no inventory)"],
        "group": "compute",
        "limit": None,
        "checks": checks,
        "profile": {"name": profile.name, "source": profile.source, "sha256": profile.sha256,
                    "document": dict(profile.raw)},
        "run_dir": str(run_dir.resolve()),
        "hosts": [{"place": None, **h} for h in hosts],
        "launch_host": None,
        "no_launch_reason": None,
        "launched": {},
        "revisions": [{"revision": 1, "kind": "validate",
                       "at": started.isoformat(timespec="seconds"), "via": "ansible"}],
        **versions(),
        "ansible_runner_status": "successful",
    }
    return Manifest.from_doc(doc, writer).to_doc()


def summarised(run_dir: Path, summary: dict[str, Any]) -> int:
    """Write the generation's ``summary`` beside the run (bench-generation.json) and print
    it; 0, the script's exit status."""
    write_json(run_dir / "bench-generation.json", summary, sync=False)
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


def evidence_sizes(run_dir: Path) -> tuple[int, int, int]:
    """The run's evidence: (files, bytes of stdout files, bytes of record files)."""
    out_bytes = meta_bytes = files = 0
    for entry in os.scandir(run_dir / "evidence"):
        for f in os.scandir(entry.path):
            files += 1
            if f.name.endswith(".out"):
                out_bytes += f.stat().st_size
            else:
                meta_bytes += f.stat().st_size
    return files, out_bytes, meta_bytes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="output run directory (must not exist)")
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--checks", type=int, default=20,
                    help="checks per node: node.identity, fio.seq_read, then stand-ins")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="writer processes (default: one per CPU)")
    args = ap.parse_args(argv)

    run_dir: Path = args.run_dir
    if run_dir.exists():
        ap.error(f"{run_dir} exists; remove it or choose another directory")
    t0 = time.perf_counter()
    checks = standin_checks.check_names(args.checks)
    standin_checks.register(checks)
    demo = load_profile("demo")
    raw = standin_checks.profile_document(demo.raw, checks)
    raw["name"] = "demo-bench"
    profile = profile_from_document(raw, "bench/make_run.py: the demo profile + stand-ins")

    (run_dir / "evidence").mkdir(parents=True)
    hosts = []
    for i in range(args.nodes):
        plan = node_plan(args.seed, i)
        hosts.append({"name": host_name(i), "location": location(i),
                      "profile_overrides": OVERRIDES if plan["override"] else {}})
    manifest = synthetic_manifest(run_dir, hosts, checks, profile, "bench/make_run.py")
    write_json(run_dir / "manifest.json", manifest, sync=False)

    jobs, stats = write_nodes(Generator, (run_dir, checks, args.seed, dict(profile.raw)),
                              args.nodes, args.jobs)
    elapsed = time.perf_counter() - t0
    files, out_bytes, meta_bytes = evidence_sizes(run_dir)
    summary = {
        "run_dir": str(run_dir),
        "nodes": args.nodes,
        "checks": len(checks),
        "seed": args.seed,
        "jobs": jobs,
        "generation_s": round(elapsed, 1),
        "evidence_files": files,
        "stdout_bytes": out_bytes,
        "meta_bytes": meta_bytes,
        "bytes_per_node": round((out_bytes + meta_bytes) / args.nodes),
        "stdout_bytes_per_node": round(out_bytes / args.nodes),
        "manifest_bytes": (run_dir / "manifest.json").stat().st_size,
        "overridden_hosts": sum(1 for h in hosts if h["profile_overrides"]),
        "scenarios": dict(sorted(stats.items())),
    }
    return summarised(run_dir, summary)


if __name__ == "__main__":
    sys.exit(main())
