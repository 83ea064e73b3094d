"""Run a command and report the peak memory of its whole process tree.

``getrusage`` and ``/usr/bin/time -v`` report the largest single process, but a judge of a large
run forks workers (judge.stored._judge_each_node), so the budget applies to the sum: this
samples the RSS of the command and all its descendants every 50 ms (from /proc) and prints the
largest sum seen, and the wall time. Sampling can miss a short peak; quote it as such.

Usage: python bench/tree_rss.py -- python bench/judge_10k.py /var/tmp/rackgate-bench/run-10k
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kib(root: int) -> tuple[int, int]:
    tree, todo, total, count = _children(), [root], 0, 0
    while todo:
        pid = todo.pop()
        total += _rss_kib(pid)
        count += 1
        todo.extend(tree.get(pid, []))
    return total, count


def main(argv: list[str]) -> int:
    cmd = argv[argv.index("--") + 1:] if "--" in argv else argv
    start = time.perf_counter()
    proc = subprocess.Popen(cmd)
    peak, peak_procs = 0, 0
    while proc.poll() is None:
        total, count = tree_rss_kib(proc.pid)
        if total > peak:
            peak, peak_procs = total, count
        time.sleep(0.05)
    wall = time.perf_counter() - start
    print(f"tree_rss: exit {proc.returncode}, wall {wall:.1f} s, peak RSS of the process tree "
          f"{peak / 1024:.0f} MiB ({peak_procs} processes at that moment)")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
