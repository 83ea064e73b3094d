"""``rackgate verify REPORT``: does a report say what its run's evidence says
(``rackgate.verify``)? REPORT is a report.json or the run directory holding one.

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
from rackgate.cli.common import command
from rackgate.overrides import load_profile_or_fail
from rackgate.refusal import Refusal
from rackgate.verify import verify

EXIT_VERIFIED, EXIT_MISMATCH = 0, 1
SHOWN = 200  # problems printed one per line; the rest are counted


def report_path(arg: str) -> Path:
    """The report.json ``arg`` names: the file, or the one in the run directory ``arg``."""
    given = Path(arg)
    if not given.is_dir():
        return given
    if not (given / "report.json").is_file():
        raise Refusal(f"{given} has no report.json: judge the run first (rackgate judge "
                       f"{given})")
    return given / "report.json"


def cmd_verify(args: argparse.Namespace) -> int:
    profile = load_profile_or_fail(args.profile) if args.profile else None
    v = verify(report_path(args.report), profile, args.overrides or ())
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
    vr = command(
        sub, "verify", summary="check a report against its run: the sha256 of its evidence "
                               "files, and the run judged again from its evidence",
        description="Does a report say what its run's evidence says? Every evidence file the "
                    "report names must still hash to the sha256 it recorded, and the run, "
                    "judged again from its manifest and evidence (written nowhere), must give "
                    "the same report: every node, result, verdict, figure, evidence path, "
                    "digest and attempt. One MISMATCH line per difference, then the count.",
        examples=["rackgate verify runs/<run>",
                  "rackgate verify runs/<run>/report.json",
                  "rackgate verify archive/<run>/report.json --overrides site.yaml"],
        exit_codes=[(EXIT_VERIFIED, "verified"),
                    (EXIT_MISMATCH, "something differs (or no evidence file was checked)"),
                    (2, "the report or the run's manifest cannot be read")])
    vr.add_argument("report", metavar="REPORT", help="a report.json, or the run directory "
                                                     "holding one (runs/<run>)")
    vr.add_argument("--profile", help="the profile the report was judged with, when not the "
                                      "run's own (as given to rackgate judge)")
    vr.add_argument("--overrides", action="append", type=Path, metavar="FILE",
                    help="the overrides the report was judged with (as given to rackgate "
                         "judge); repeat in the same order")
    vr.set_defaults(func=cmd_verify)
