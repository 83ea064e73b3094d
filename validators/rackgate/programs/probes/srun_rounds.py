"""rackgate's job sequencer, sent to the launch host as text (``python3 -c``): runs rounds
of launcher jobs (srun argv lists), the jobs of a round in parallel, rounds one after the
other, and prints every job's output under a section line. Used where one check is many
jobs: per-rail nccl-tests (one round per rail) and the pairwise matrix (rounds of pairs).

Usage: python3 -c <this text> HEAD END ( --round | --job SECTION N ARG1 ... ARGN )...

All data arrives as separate arguments and each job runs with ``subprocess`` from its
argv list: no shell reads any of it, so no value can run as a command. Output (stdout):

    HEAD
    SECTION rc=<exit status>     (one per job, in the order given, after its round)
    <the job's stdout and stderr, as it printed them>
    END

A job whose program cannot be started gets rc 127 and the reason as its output. Only
Python's standard library is used.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
from typing import NoReturn

USAGE_RC = 2


def fail(message: str) -> NoReturn:
    print(f"rackgate-srun-rounds: {message}", file=sys.stderr, flush=True)
    sys.exit(USAGE_RC)


def parse(argv: list[str]) -> tuple[str, str, list[list[tuple[str, list[str]]]]]:
    """(head, end, rounds of (section line, argv)) from the command line."""
    if len(argv) < 2:
        fail("usage: srun_rounds HEAD END (--round | --job SECTION N ARG...)...")
    head, end, rest = argv[0], argv[1], argv[2:]
    rounds: list[list[tuple[str, list[str]]]] = []
    i = 0
    while i < len(rest):
        if rest[i] == "--round":
            rounds.append([])
            i += 1
        elif rest[i] == "--job" and rounds and i + 2 < len(rest) and rest[i + 2].isdigit():
            n = int(rest[i + 2])
            job = rest[i + 3:i + 3 + n]
            if n < 1 or len(job) != n:
                fail(f"job {rest[i + 1]!r} declares {n} argument(s), {len(job)} given")
            rounds[-1].append((rest[i + 1], job))
            i += 3 + n
        else:
            fail(f"argument {i + 3}: expected --round or --job SECTION N ARG..., got "
                 f"{rest[i]!r}")
    return head, end, rounds


def run_round(jobs: list[tuple[str, list[str]]]) -> None:
    """Start every job of the round, wait for all, then print their sections in order."""
    with contextlib.ExitStack() as files:
        running = []
        for section, argv in jobs:
            out = files.enter_context(tempfile.TemporaryFile())
            try:
                proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
            except OSError as exc:
                out.write(f"rackgate-srun-rounds: cannot start {argv[0]}: {exc}\n".encode())
                proc = None
            running.append((section, proc, out))
        for section, proc, out in running:
            rc = 127 if proc is None else proc.wait()
            out.seek(0)
            text = out.read().decode("utf-8", errors="replace")
            sys.stdout.write(f"{section} rc={rc}\n")
            sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")
            sys.stdout.flush()


def main(argv: list[str]) -> None:
    head, end, rounds = parse(argv)
    print(head, flush=True)
    for jobs in rounds:
        run_round(jobs)
    print(end, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
