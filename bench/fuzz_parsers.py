"""Issue 28's fuzz property run at scale: every parser that feeds a judge, over mutants of
its family's healthy and faulty tool outputs (tests/unit/fuzz_subjects.py says which, and
the oracle; tests/unit/degrade_helpers.py the mutators: duplicate lines, odd numeric
notations, byte-order marks, carriage returns, 100,000-character lines).

    python bench/fuzz_parsers.py --mutants 300000 [--seed 28] [--only ipmi,bonding] [--skip x]

One process. Each mutant takes its subject round-robin, then its source and mutator from
a ``random.Random`` seeded per mutant (``--seed`` and its index), so a reported mutant is
rebuilt by ``--replay INDEX``. Prints, per subject: mutants, exceptions other than
ParseError, passes of degraded inputs (the oracle's problems), seconds, the slowest mutant;
then the totals, the load average before and after, and the command. Exit 1 on any
exception or pass. Needs PYTHONPATH=validators (and runs from the repository root).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

import fuzz_subjects
from degrade_helpers import MUTATORS, mutate


def mutant(index: int, seed: int, subjects: list[fuzz_subjects.Subject],
           ) -> tuple[fuzz_subjects.Subject, fuzz_subjects.Source, str, str]:
    """Mutant number ``index``: its subject, source, mutator and text."""
    subject = subjects[index % len(subjects)]
    rnd = random.Random(f"{seed}:{index}")
    source = rnd.choice(subject.sources)
    kind = rnd.choice(MUTATORS)
    return subject, source, kind, mutate(kind, source.text, source.lines, source.numbers, rnd,
                                         subject.long)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--only", default="", help="comma-separated subject names")
    ap.add_argument("--skip", default="", help="comma-separated subject names")
    ap.add_argument("--replay", type=int, default=None, help="rerun one mutant, show it")
    args = ap.parse_args(argv)
    only = {n for n in args.only.split(",") if n}
    skip = {n for n in args.skip.split(",") if n}
    subjects = [s for s in fuzz_subjects.SUBJECTS if s.sources and s.name not in skip
                and (not only or s.name in only)]
    if args.replay is not None:
        subject, source, kind, text = mutant(args.replay, args.seed, subjects)
        print(f"{subject.name} / {source.name} / {kind}: {text[:2000]!r}")
        print(fuzz_subjects.problem(subject, source, text))
        return 0
    load_before = os.getloadavg()
    count: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    passes: Counter[str] = Counter()
    seconds: dict[str, float] = defaultdict(float)
    slowest: dict[str, tuple[float, int]] = {}
    shown = 0
    start = time.perf_counter()
    for index in range(args.mutants):
        subject, source, kind, text = mutant(index, args.seed, subjects)
        t0 = time.perf_counter()
        try:
            wrong = fuzz_subjects.problem(subject, source, text)
        except Exception:  # counted and shown: the property is "ParseError or a record"
            errors[subject.name] += 1
            wrong = f"exception: {traceback.format_exc(limit=-2)}"
        dt = time.perf_counter() - t0
        if wrong is not None and not wrong.startswith("exception"):
            passes[subject.name] += 1
        if wrong is not None and shown < 20:
            shown += 1
            print(f"mutant {index} ({source.name}, {kind}): {wrong}", file=sys.stderr)
        count[subject.name] += 1
        seconds[subject.name] += dt
        if dt > slowest.get(subject.name, (0.0, 0))[0]:
            slowest[subject.name] = (dt, index)
    total = time.perf_counter() - start
    load_after = os.getloadavg()
    print(f"{'subject':<18} {'mutants':>8} {'exceptions':>10} {'passes':>7} {'s':>8} "
          f"{'slowest (ms, #)':>18}")
    for s in subjects:
        ms, at = slowest.get(s.name, (0.0, 0))
        print(f"{s.name:<18} {count[s.name]:>8,} {errors[s.name]:>10} {passes[s.name]:>7} "
              f"{seconds[s.name]:>8.1f} {ms * 1000:>10.0f} #{at}")
    print(f"{'total':<18} {sum(count.values()):>8,} {sum(errors.values()):>10} "
          f"{sum(passes.values()):>7} {total:>8.1f}")
    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}; "
          f"{os.cpu_count()} CPUs")
    print("command: python " + " ".join([sys.argv[0], *(argv or sys.argv[1:])]))
    return 1 if errors or passes else 0


if __name__ == "__main__":
    sys.exit(main())
