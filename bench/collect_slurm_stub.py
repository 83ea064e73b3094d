#!/usr/bin/env python3
"""``--via slurm`` at 1,000 nodes x 20 checks on one machine (issue 28): the time of one
collection through the stand-ins for srun and sinfo of tests/unit/slurm_stub.py.

``collect.ansible.collect`` runs as ``rackgate validate --via slurm`` runs it: one
ansible-playbook run on the launch host ``head`` (``ansible_connection: local``), the
readiness guard asking the stand-in sinfo, the stand-in srun running the real node
collector once per node (at most ``--parallel`` at a time: every "node" is this machine)
with SLURM's task variables and ``--label``, the job's output written to a file in a
private directory, fetched by Ansible, decoded and bound task by task, and every record
written to the evidence store (fsync'd, as ``validate`` does; ``--no-sync`` to see the
disk's share). Each check is
``echo NODE CHECK`` without a node lock, so what is measured is the collection, not the
checks: 20,000 commands under ``timeout``, 1,000 collectors, and rackgate's own work.

Printed per run (one JSON line): wall time of the collection, the part of it spent in
the recorder once the files were fetched (``record_s``: decode, bind, write the evidence),
CPU seconds of this process and its children, the size of the job's output, how many
records came back completed, and the 1-minute load average before and after. The last
line gives the medians.

    python bench/collect_slurm_stub.py --nodes 1000 --checks 20 --runs 3 \\
        --json /var/tmp/rackgate-bench/slurm-stub.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validators"))
sys.path.insert(0, str(ROOT / "tests" / "unit"))

import yaml  # noqa: E402
from slurm_stub import install, on_path  # noqa: E402

from rackgate.collect import runner_events  # noqa: E402
from rackgate.collect.ansible import collect  # noqa: E402
from rackgate.commands.task import Task  # noqa: E402
from rackgate.store.evidence import EvidenceStore  # noqa: E402
from rackgate.store.manifest import new_run_dir  # noqa: E402


def cpu_s() -> float:
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def one_run(nodes: int, checks: int, parallel: int, sync: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="rg-slurm-stub-") as tmp:
        work = Path(tmp)
        os.environ["PATH"] = on_path(install(work / "slurm", parallel=parallel))
        inv = work / "inv.yml"
        inv.write_text(yaml.safe_dump({"all": {"hosts": {"head": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
        names = [f"n{i:05d}" for i in range(nodes)]
        tasks = [Task(n, f"c{k:02d}", ("echo", f"{n} c{k:02d}"), 60, lock_file=None)
                 for n in names for k in range(checks)]
        store = EvidenceStore(new_run_dir(work / "runs", "bench"), sync=sync)
        spent: list[float] = []
        sizes: list[int] = []
        fetched = runner_events.Recorder.fetched

        def timed(self: runner_events.Recorder, host: str, failed: dict[str, Any] | None = None
                  ) -> None:
            where = self.fetched_to.get(host)
            if where is not None and where.is_dir():
                sizes.extend(p.stat().st_size for p in where.iterdir())
            t0 = time.perf_counter()
            fetched(self, host, failed)
            spent.append(time.perf_counter() - t0)

        runner_events.Recorder.fetched = timed  # type: ignore[method-assign]
        load0, c0, t0 = os.getloadavg()[0], cpu_s(), time.perf_counter()
        try:
            status = collect(tasks, [str(inv)], store, forks=5, slurm_host="head")
        finally:
            runner_events.Recorder.fetched = fetched  # type: ignore[method-assign]
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
        done = sum(1 for t in tasks
                   if store.read(t.host, t.check)[0].outcome == "completed")
        return {"nodes": nodes, "checks": checks, "parallel": parallel, "sync": sync,
                "status": status,
                "wall_s": round(wall, 1), "record_s": round(sum(spent), 1),
                "cpu_s": round(cpu, 1), "output_mb": round(sum(sizes) / 1e6, 2),
                "completed": done, "records": len(tasks),
                "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--checks", type=int, default=20)
    ap.add_argument("--parallel", type=int, default=16, help="tasks the stand-in srun runs "
                    "at once (every node is this machine)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-sync", action="store_true", help="the evidence store without "
                    "fsync (what the disk costs, apart)")
    ap.add_argument("--json", type=Path, help="append one line per run")
    args = ap.parse_args()
    os.environ.setdefault("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    rows = []
    for _ in range(args.runs):
        row = one_run(args.nodes, args.checks, args.parallel, not args.no_sync)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with args.json.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
    print(json.dumps({"median_wall_s": statistics.median(r["wall_s"] for r in rows),
                      "median_record_s": statistics.median(r["record_s"] for r in rows),
                      "median_cpu_s": statistics.median(r["cpu_s"] for r in rows),
                      "all_complete": all(r["completed"] == r["records"] for r in rows)}))


if __name__ == "__main__":
    main()
