"""Benchmark: judge and report a stored run directory with ``rackgate.run.judge_run``.

    python bench/judge_10k.py /var/tmp/rackgate-bench/run-10k            # plain timing
    python bench/judge_10k.py /var/tmp/rackgate-bench/run-10k --phases   # + phase breakdown
    python bench/judge_10k.py RUN_DIR --cprofile 30                      # + cProfile top 30
    python bench/judge_10k.py RUN_DIR --floor --results-sha              # issue 19's figures

``--floor`` first measures, in this process, the floor of issue 19: reading and sha256-hashing
every evidence file of the run (``.out`` and ``.json``, one process, the order of the
directory), then judges, and prints the judge's wall time over the floor's. The peak RSS of
the whole process tree (this process and the judge's forked workers, from /proc every
50 ms by bench/tree_rss.py's sampler, in a thread) is printed with every run.
``--results-sha`` prints a sha256 of every report the judge wrote, byte for byte but for what
differs from one judgement to the next (report.json's ``generated``, timestamps), so
two versions of the code can be compared on the same run; ``--keep-reports DIR`` copies the
normalised reports there for a diff.

Prints wall time (time.perf_counter), CPU time (time.process_time), peak RSS
(getrusage(RUSAGE_SELF).ru_maxrss, KiB on Linux), the sizes of report.json and
report.html, and the verdict counts. ``judge_run`` writes both reports into the run
directory, as ``rackgate judge`` would.

``--phases`` wraps, in this process only, the functions judge_run calls (in rackgate.run,
rackgate.judge.stored, rackgate.reports.write: reading the manifest, the per-node loop, the
rack-level judgements, node and rack verdicts, report_document, write_json, the renderers),
EvidenceStore.read and each check's parse/judge with
timers: nothing under validators/ is edited. The wrappers cost well under a microsecond
per call (about 1 M calls at 10,000 x 20), so the plain run is the figure to quote.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import functools
import gc
import hashlib
import io
import json
import os
import pstats
import resource
import subprocess
import sys
import time
import types
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import standin_checks
import tree_rss

import rackgate
import rackgate.judge.stored
import rackgate.reports.charts
import rackgate.reports.elevation
import rackgate.reports.heatmap
import rackgate.reports.html
import rackgate.reports.sections
import rackgate.reports.write
import rackgate.run
import rackgate.store.evidence
import rackgate.store.manifest
from rackgate.checks import REGISTRY
from rackgate.checks.shared.base import AcrossCheck, ControlCheck, NodeCheck

REPO = Path(__file__).resolve().parent.parent
LOAD_BEFORE = [round(x, 2) for x in os.getloadavg()]


def peak_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def current_rss_kib() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


class TreeSampler:
    """The peak RSS of this process and its descendants, sampled every 50 ms in a thread."""

    def __init__(self) -> None:
        import threading

        self.peak_kib = 0
        self.peak_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        pid = os.getpid()
        while not self._stop.is_set():
            total, count = tree_rss.tree_rss_kib(pid)
            if total > self.peak_kib:
                self.peak_kib, self.peak_procs = total, count
            self._stop.wait(0.05)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def floor(run_dir: Path) -> dict[str, Any]:
    """Read and sha256 every evidence file (.out and .json) of the run: the floor."""
    files = size = 0
    sha = hashlib.sha256
    cpu0, t0 = time.process_time(), time.perf_counter()
    for host in os.scandir(run_dir / "evidence"):
        for entry in os.scandir(host.path):
            with open(entry.path, "rb") as fh:
                data = fh.read()
            sha(data).hexdigest()
            files += 1
            size += len(data)
    return {"floor_wall_s": round(time.perf_counter() - t0, 2),
            "floor_cpu_s": round(time.process_time() - cpu0, 2),
            "floor_files": files, "floor_bytes": size}


def normalised_reports(run_dir: Path) -> dict[str, bytes]:
    """Each report the judge wrote, without what changes between two judgements."""
    import re

    out: dict[str, bytes] = {}
    # byte for byte, but for when it was generated (the only time that is not the run's)
    out["report.json"] = re.sub(rb'"generated": "[^"]*"', b'"generated": ""',
                                (run_dir / "report.json").read_bytes(), count=1)
    for name in ("report.html", "report.xml", "summary.md"):
        data = (run_dir / name).read_bytes()
        data = re.sub(rb'timestamp="[^"]*"', b'timestamp=""', data)
        data = re.sub(rb"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?",
                      b"<time>", data)
        out[name] = data
    return out


def source_fingerprint() -> dict[str, Any]:
    """Which validators code was measured (other engineers edit it concurrently)."""
    root = Path(rackgate.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()
                       and p.suffix in (".py", ".j2", ".yaml", ".yml")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True,
                                  text=True, check=False).stdout.strip()
        except OSError:
            return "?"

    dirty = git("status", "--porcelain", "--", "validators").splitlines()
    return {"git_head": git("rev-parse", "--short", "HEAD"),
            "validators_dirty_files": len(dirty),
            "validators_sha256": digest.hexdigest()[:16]}


def evict(run_dir: Path) -> int:
    """Drop the run directory's files from the page cache (a cold judge, days later)."""
    n = 0
    for root, _dirs, files in os.walk(run_dir):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            n += 1
    return n


class Timers:
    """Wall-clock timers that nest: a call made while another timed call runs is its child."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, ...]] = Counter()
        self.seconds: dict[tuple[str, ...], float] = defaultdict(float)
        self.order: dict[tuple[str, ...], None] = {}  # first-call order = a preorder walk
        self.stack: list[tuple[str, ...]] = []

    def wrap(self, name: str, fn: Callable[..., Any],
             key: Callable[..., str] | None = None) -> Callable[..., Any]:
        stack, order, clock = self.stack, self.order, time.perf_counter

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            label = key(*args, **kwargs) if key else name
            path = (*stack[-1], label) if stack else (label,)
            order.setdefault(path, None)
            stack.append(path)
            t = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[path] += clock() - t
                self.calls[path] += 1
                stack.pop()

        return timed

    def patch_module(self, module: Any, skip: Iterable[str] = ()) -> None:
        """Time every plain function the module's code calls through its globals."""
        prefix = module.__name__.rsplit(".", 1)[-1]
        for attr, value in list(vars(module).items()):
            if attr in skip or not isinstance(value, types.FunctionType):
                continue
            if not value.__module__.startswith("rackgate"):
                continue
            key = None
            if attr == "atomic_write":
                def key(path: Path, *a: Any, **k: Any) -> str:
                    return f"atomic_write {Path(path).name}"
            origin = value.__module__.removeprefix("rackgate.")
            name = attr if origin == module.__name__.removeprefix("rackgate.") \
                else f"{origin}.{attr}"
            setattr(module, attr, self.wrap(name if prefix == "run" else f"{prefix}.{attr}",
                                            value, key))

    def print_tree(self, wall: float) -> dict[str, float]:
        print("\nphase breakdown (wall seconds; children indented; 'self' = not in a "
              "timed child):")
        top = 0.0
        for path in self.order:
            s = self.seconds[path]
            children = sum(v for p, v in self.seconds.items()
                           if len(p) == len(path) + 1 and p[:-1] == path)
            depth = len(path) - 1
            if depth == 0:
                top += s
            self_s = f"  self {s - children:7.2f} s" if children else ""
            print(f"  {'  ' * depth}{path[-1]:<{52 - 2 * depth}} {s:8.2f} s "
                  f"{self.calls[path]:>8} calls{self_s}")
        print(f"  {'judge_run itself (its loops, outside any timed call)':<52} "
              f"{wall - top:8.2f} s")
        return {" > ".join(p): round(v, 3) for p, v in self.seconds.items()}


def install_phase_timers() -> Timers:
    t = Timers()
    t.patch_module(rackgate.run, skip={"judge_run", "validate", "resume",
                                       "_collect_and_judge"})
    for module in (rackgate.judge.stored, rackgate.reports.write, rackgate.reports.html,
                   rackgate.reports.sections, rackgate.reports.charts,
                   rackgate.reports.elevation, rackgate.reports.heatmap):
        t.patch_module(module, skip={"render_html"})
    store = rackgate.store.evidence.EvidenceStore
    store.read = t.wrap("EvidenceStore.read", store.read)  # type: ignore[method-assign]
    for name, check in list(REGISTRY.items()):
        timed = dataclasses.replace(check, parse=t.wrap("check.parse", check.parse))
        if isinstance(timed, NodeCheck | ControlCheck | AcrossCheck):  # those with a judge
            timed = dataclasses.replace(timed, judge=t.wrap("check.judge", timed.judge))
        REGISTRY[name] = timed
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--phases", action="store_true", help="time judge_run's phases")
    ap.add_argument("--cprofile", type=int, metavar="N", default=0,
                    help="run under cProfile and print the top N functions")
    ap.add_argument("--cprofile-out", type=Path, help="also save the cProfile stats here")
    ap.add_argument("--json", type=Path, help="append the figures as one JSON line here")
    ap.add_argument("--cold", action="store_true",
                    help="first evict the run directory's files from the page cache "
                         "(posix_fadvise DONTNEED on each file; nothing else is touched)")
    ap.add_argument("--gc", choices=("default", "off"), default="default",
                    help="experiment: 'off' disables Python's cyclic GC during judge_run, "
                         "to show what GC passes over the growing heap cost")
    ap.add_argument("--serial", action="store_true",
                    help="judge every node in this process (no forked workers), so that "
                         "--cprofile sees the per-node work too")
    ap.add_argument("--floor", action="store_true",
                    help="first read and sha256 every evidence file (the floor), then judge")
    ap.add_argument("--results-sha", action="store_true",
                    help="print a sha256 of each report, normalised (to compare versions)")
    ap.add_argument("--keep-reports", type=Path, metavar="DIR",
                    help="with --results-sha: also write the normalised reports into DIR")
    args = ap.parse_args(argv)

    if args.cold:
        t = time.perf_counter()
        print(f"evicted {evict(args.run_dir)} files from the page cache in "
              f"{time.perf_counter() - t:.1f} s")
    manifest = rackgate.store.manifest.read_manifest(args.run_dir)
    standin_checks.register_for_manifest(manifest)
    n_hosts, n_checks = len(manifest.hosts), len(manifest.checks)
    del manifest
    timers = install_phase_timers() if args.phases else None
    rss_before = current_rss_kib()

    floor_figures = floor(args.run_dir) if args.floor else {}
    if floor_figures:
        print(f"floor: read + sha256 of {floor_figures['floor_files']} evidence files "
              f"({floor_figures['floor_bytes'] / 1e9:.2f} GB): wall "
              f"{floor_figures['floor_wall_s']:.2f} s, CPU {floor_figures['floor_cpu_s']:.2f} s")
    prof = cProfile.Profile() if args.cprofile else None
    if args.serial:
        rackgate.judge.stored.PARALLEL_MIN_RESULTS = sys.maxsize
    if args.gc == "off":
        gc.disable()
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with TreeSampler() as sampler:
        cpu0, t0 = time.process_time(), time.perf_counter()
        if prof is not None:
            outcome = prof.runcall(rackgate.run.judge_run, args.run_dir)
        else:
            outcome = rackgate.run.judge_run(args.run_dir)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu = (children1.ru_utime + children1.ru_stime
                   - children0.ru_utime - children0.ru_stime)
    gc.enable()
    peak = peak_rss_kib()

    rack = outcome.rack
    statuses = Counter(r.status.label for n in rack.nodes for r in n.results)
    peer_warns = sum(1 for n in rack.nodes for r in n.results if "peer outlier" in r.message)
    figures: dict[str, Any] = {
        "run_dir": str(args.run_dir),
        "nodes": n_hosts,
        "checks": n_checks,
        "results": sum(statuses.values()),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "workers_cpu_s": round(workers_cpu, 2),
        "rss_before_judge_mib": round(rss_before / 1024, 1),
        "peak_rss_mib": round(peak / 1024, 1),
        "tree_peak_rss_mib": round(sampler.peak_kib / 1024, 1),
        "tree_peak_procs": sampler.peak_procs,
        **floor_figures,
        "judge_over_floor": (round(wall / floor_figures["floor_wall_s"], 2)
                             if floor_figures else None),
        "loadavg_before": LOAD_BEFORE,
        "report_json_bytes": outcome.report_json.stat().st_size,
        "report_html_bytes": outcome.report_html.stat().st_size,
        "rack_verdict": rack.verdict.value,
        "rack_reasons": len(rack.reasons),
        "nodes_accepted": sum(1 for n in rack.nodes if n.verdict.value == "ACCEPT"),
        "nodes_rejected": sum(1 for n in rack.nodes if n.verdict.value == "REJECT"),
        "results_by_status": dict(sorted(statuses.items())),
        "peer_outlier_warns": peer_warns,
        "gc": args.gc,
        "cold_cache": args.cold,
        "gc_collections": [g["collections"] for g in gc.get_stats()],
        "loadavg_after": os.getloadavg()[0],
        "python": sys.version.split()[0],
        "rackgate_from": str(Path(rackgate.__file__).parent),
        **source_fingerprint(),
    }
    print(f"judge_run({args.run_dir}): {n_hosts} nodes x {n_checks} checks = "
          f"{figures['results']} results")
    print(f"  wall {wall:.2f} s, CPU {cpu:.2f} s, peak RSS {peak / 1024:.0f} MiB "
          f"({peak / 2**20:.2f} GiB; {rss_before / 1024:.0f} MiB before judging)")
    print(f"  CPU of the forked workers {workers_cpu:.2f} s; peak RSS of the process tree "
          f"{sampler.peak_kib / 1024:.0f} MiB ({sampler.peak_procs} processes then); "
          f"load average before {LOAD_BEFORE}")
    if floor_figures:
        print(f"  judge / floor = {wall:.2f} / {floor_figures['floor_wall_s']:.2f} s = "
              f"{figures['judge_over_floor']:.2f}x")
    print(f"  report.json {figures['report_json_bytes'] / 1e6:.1f} MB, "
          f"report.html {figures['report_html_bytes'] / 1e6:.1f} MB")
    print(f"  rack {figures['rack_verdict']} ({figures['rack_reasons']} reasons); nodes "
          f"accepted {figures['nodes_accepted']}, rejected {figures['nodes_rejected']}; "
          f"results {figures['results_by_status']}; peer-outlier warns {peer_warns}")
    print(f"  gc {args.gc}: collections per generation {figures['gc_collections']}; "
          f"load average (1 min) after: {figures['loadavg_after']:.2f}")
    print(f"  code: HEAD {figures['git_head']}, {figures['validators_dirty_files']} "
          f"uncommitted files under validators/, sha256 {figures['validators_sha256']}")
    if timers is not None:
        figures["phases_s"] = timers.print_tree(wall)
    if prof is not None:
        for key in ("cumulative", "tottime"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(
                args.cprofile)
            print(f"\ncProfile, top {args.cprofile} by {key}:")
            print(buf.getvalue())
        if args.cprofile_out:
            prof.dump_stats(args.cprofile_out)
    if args.results_sha:
        del outcome, rack
        gc.collect()
        reports = normalised_reports(args.run_dir)
        figures["results_sha256"] = {k: hashlib.sha256(v).hexdigest()[:16]
                                     for k, v in reports.items()}
        print(f"  normalised reports' sha256: {figures['results_sha256']}")
        if args.keep_reports:
            args.keep_reports.mkdir(parents=True, exist_ok=True)
            for k, v in reports.items():
                (args.keep_reports / k).write_bytes(v)
    if args.json:
        with args.json.open("a") as fh:
            fh.write(json.dumps(figures) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
