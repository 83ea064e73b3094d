"""CPU time of each check's parser on one node's evidence of a mixed run (issue 19).

    python bench/parse_per_family.py /var/tmp/rackgate-bench/mixed-10k [--node gpu-n00001]

One process, Python's cyclic GC off (as in the judge's workers), best of 5 rounds of 30
parses of each file, ``time.process_time``; then the sum per node, each family counted as
often as the node's checks use it. Run it with ``PYTHONPATH=/tmp/rg-base19/validators:bench``
for the code before.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import time
from collections import Counter
from pathlib import Path

import standin_checks

import rackgate
from rackgate.checks import REGISTRY
from rackgate.store.manifest import read_manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--node", default="gpu-n00001")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args(argv)
    checks = read_manifest(args.run_dir).checks
    standin_checks.register(checks)
    print(f"rackgate from {Path(rackgate.__file__).parent}")
    parser_of = {c: REGISTRY[c].parse for c in checks}
    uses = Counter(f"{p.__module__}.{p.__name__}" for p in parser_of.values())
    gc.disable()
    total = 0.0
    seen: set[str] = set()
    for check in checks:
        parse = parser_of[check]
        key = f"{parse.__module__}.{parse.__name__}"
        if key in seen:
            continue
        seen.add(key)
        text = (args.run_dir / "evidence" / args.node / f"{check}.out").read_text()
        best = float("inf")
        for _ in range(args.rounds):
            t0 = time.process_time()
            for _ in range(args.repeat):
                with contextlib.suppress(Exception):  # a fault still costs its time
                    parse(text)
            best = min(best, (time.process_time() - t0) / args.repeat)
        total += best * uses[key]
        print(f"  {check:28s} {len(text) / 1000:6.1f} KB {best * 1e6:8.0f} us x{uses[key]}")
    print(f"  per node: {total * 1e3:.2f} ms of parsing ({len(checks)} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
