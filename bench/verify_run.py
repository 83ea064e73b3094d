"""Benchmark: ``rackgate verify`` of a stored run against ``rackgate judge`` of the same run.

    python bench/make_run.py /var/tmp/rackgate-bench/run-300 --nodes 300 --checks 20
    python bench/verify_run.py /var/tmp/rackgate-bench/run-300 --rounds 3

Judges the run once with ``rackgate.run.judge_run`` (which writes report.json, as
``rackgate judge`` does), then, ``--rounds`` times each, alternately: the judgement again,
``rackgate.verify.verify`` of the report it wrote (the evidence digests, the run judged
again from its evidence, the comparison), and ``EvidenceStore.stored`` alone (the listing
of the evidence on disk that judging holds against the manifest). Prints each round's wall
time (time.perf_counter), the medians, the load average before and after, and the
verification's counts: a report just written must verify with 0 problems, else it exits 1.
The bench.fio_NN stand-ins are registered first (bench/standin_checks.py), as for
judge_10k.py: ``rackgate verify`` on the command line would not know them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import standin_checks  # noqa: F401  registers the bench.fio_NN stand-ins

from rackgate.run import judge_run
from rackgate.store.evidence import EvidenceStore
from rackgate.verify import verify


def timed(what: str, fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    took = time.perf_counter() - start
    print(f"  {what:<10} {took:8.2f} s", flush=True)
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    report = judge_run(args.run_dir).report_json
    v = verify(report)
    print(f"{v.evidence_files} evidence files, {v.results} results, "
          f"{len(v.problems)} problems")
    if v.problems:
        print("\n".join(v.problems[:20]))
        return 1
    store = EvidenceStore(args.run_dir)
    times: dict[str, list[float]] = {"judge": [], "verify": [], "listing": []}
    for i in range(args.rounds):
        print(f"round {i + 1}")
        times["judge"].append(timed("judge", lambda: judge_run(args.run_dir)))
        times["verify"].append(timed("verify", lambda: verify(report)))
        times["listing"].append(timed("listing", store.stored))
    print("medians: " + ", ".join(f"{k} {statistics.median(v):.2f} s"
                                  for k, v in times.items()))
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
