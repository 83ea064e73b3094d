"""``rackgate verify REPORT``: does a report say what its run's evidence says
(``rackgate.verify``)?

One ``MISMATCH`` line per problem on stdout (no console wrapping: a line is a problem; the
first :data:`SHOWN`, then how many more), then the count. Exit 0 when the report is
verified, 1 when anything differs (or no evidence file was checked), 2 when it could not
run (the report or the run's manifest unreadable: one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rackgate import __version__
from rackgate.overrides import load_profile_or_fail
from rackgate.verify import verify

EXIT_VERIFIED, EXIT_MISMATCH = 0, 1
SHOWN = 200  # problems printed one per line; the rest are counted


def cmd_verify(args: argparse.Namespace) -> int:
    profile = load_profile_or_fail(args.profile) if args.profile else None
    v = verify(Path(args.report), profile, args.overrides or ())
    lines = [f"MISMATCH {' '.join(p.split())}" for p in v.problems[:SHOWN]]
    if len(v.problems) > SHOWN:
        lines.append(f"... and {len(v.problems) - SHOWN} more")
    lines.append(f"{v.evidence_files} evidence file(s) checked, {v.results} result(s) "
                 f"re-judged from {v.run_dir} by rackgate {__version__}, "
                 f"{len(v.problems)} problem(s)")
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_VERIFIED if v.verified else EXIT_MISMATCH


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate verify`` to the top-level parser."""
    vr = sub.add_parser("verify", help="check a report.json against its run: the sha256 of "
                                       "its evidence files, and the run judged again from "
                                       "its evidence")
    vr.add_argument("report")
    vr.add_argument("--profile", help="the profile the report was judged with, when not the "
                                      "run's own (as given to rackgate judge)")
    vr.add_argument("--overrides", action="append", type=Path, metavar="FILE",
                    help="the overrides the report was judged with (as given to rackgate "
                         "judge); repeat in the same order")
    vr.set_defaults(func=cmd_verify)
