"""The control host's cost of collecting through Ansible: ``collect()`` over N hosts with
``ansible_connection: local``, each with C checks that each run ``sleep S``.

Every host's commands run one after the other, so a host's own command time is C x S and
the ideal wall time is C x S (all hosts at once, ``--forks`` = N). The figures printed:
wall time, its ratio to C x S (orchestration overhead), and the CPU seconds of this
process and its children (ansible-playbook, its forks, the modules, the commands), which
with local connections is all the control host's work.

Run it with the code to measure on PYTHONPATH (a ``git worktree`` of an older commit, to
compare): each round alternates the trees given, in one sitting.

    python bench/collect_local.py --hosts 20 50 --checks 5 --sleep 1 --rounds 3 \\
        --tree /tmp/rg-base19 --tree /work/main --json /tmp/collect-local.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ONE = r"""
import json, os, resource, sys, time, yaml
from pathlib import Path
hosts_n, checks_n, sleep_s = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
work = Path(sys.argv[4])
from rackgate.collect.ansible import collect
from rackgate.collect.task import Task
from rackgate.store.evidence import EvidenceStore
from rackgate.store.manifest import new_run_dir
hosts = {f"h{i:04d}": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
         for i in range(hosts_n)}
inv = work / "inv.yml"
inv.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": hosts}}}}))
tasks = [Task(h, f"bench.sleep_{c}", ("sleep", sleep_s), 60, lock_file=str(work / f"{h}.lock"))
         for h in hosts for c in range(checks_n)]
store = EvidenceStore(new_run_dir(work / "runs", "bench"))
t0, c0 = time.perf_counter(), time.process_time()
status = collect(tasks, [str(inv)], store, forks=hosts_n)
wall = time.perf_counter() - t0
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
done = sum(1 for t in tasks if store.read(t.host, t.check)[0].outcome == "completed")
print(json.dumps({"status": status, "wall_s": round(wall, 2), "completed": done,
                  "cpu_s": round(time.process_time() - c0 + kids.ru_utime + kids.ru_stime, 1)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[20])
    ap.add_argument("--checks", type=int, default=5)
    ap.add_argument("--sleep", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tree", action="append", required=True,
                    help="a source tree whose validators/ is measured (repeat to compare)")
    ap.add_argument("--json", type=Path, help="append one line per measurement")
    args = ap.parse_args()
    ideal = args.checks * args.sleep
    for rnd in range(1, args.rounds + 1):
        for n in args.hosts:
            for tree in args.tree:
                with tempfile.TemporaryDirectory(prefix="rg-collect-bench-") as work:
                    env = {**os.environ, "PYTHONPATH": f"{tree}/validators"}
                    load = os.getloadavg()[0]
                    proc = subprocess.run([sys.executable, "-c", ONE, str(n), str(args.checks),
                                           f"{args.sleep:g}", work], env=env, cwd=tree,
                                          capture_output=True, text=True, timeout=3600,
                                          check=False)
                    if proc.returncode != 0:
                        sys.exit(f"{tree} at {n} hosts failed:\n{proc.stderr[-3000:]}")
                    got = json.loads(proc.stdout.strip().splitlines()[-1])
                    row = {"round": rnd, "tree": tree, "hosts": n, "checks": args.checks,
                           "sleep_s": args.sleep, **got,
                           "overhead": round(got["wall_s"] / ideal, 2),
                           "load_before": round(load, 2)}
                    print(json.dumps(row), flush=True)
                    if args.json:
                        with args.json.open("a") as fh:
                            fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
