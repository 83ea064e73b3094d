"""``rackgate judge``: judge a stored run again, offline, and write its reports again."""

from __future__ import annotations

import argparse
from pathlib import Path

from rackgate.cli.common import EXIT_CANNOT_RUN, command
from rackgate.cli.results import ACCEPTED, COMPARE_HELP, REJECTED, add_show, summary_code
from rackgate.overrides import load_profile_or_fail
from rackgate.reports.diff import compared
from rackgate.run import judge_run


def cmd_judge(args: argparse.Namespace) -> int:
    profile = load_profile_or_fail(args.profile) if args.profile else None
    out_dir = Path(args.out) if args.out else None
    compare = compared(args.compare) if args.compare else None
    return summary_code(judge_run(Path(args.run_dir), profile, out_dir, args.overrides or (),
                              compare), args.show)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate judge`` to the top-level parser."""
    j = command(
        sub, "judge", summary="judge a stored run again, offline",
        description="Judge the evidence stored in a run directory again, without touching "
                    "the cluster: with the run's own profile, or another one (--profile), or "
                    "with overrides merged over it (--overrides, e.g. from rackgate "
                    "baseline). The reports are written again (into --out, or the run "
                    "directory) and the judgement is recorded in the run history.",
        examples=["rackgate judge runs/<run>",
                  "rackgate judge runs/<run> --overrides site-baseline.yaml --out /tmp/rejudged",
                  "rackgate judge runs/<run> --compare runs/<earlier>"],
        exit_codes=[ACCEPTED, REJECTED, (EXIT_CANNOT_RUN, "the run could not be judged (no "
                                                          "manifest, a bad profile or "
                                                          "overrides file)")])
    j.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (runs/<run>) holding "
                                                      "manifest.json and its evidence")
    j.add_argument("--profile", help="profile to judge with (default: the run's own)")
    j.add_argument("--overrides", action="append", type=Path, metavar="FILE",
                   help="profile overrides (YAML, e.g. from rackgate baseline) merged over the "
                        "profile; repeat to merge several, in order")
    j.add_argument("--compare", metavar="REPORT", help=COMPARE_HELP)
    j.add_argument("--out", help="where to write the reports (default: the run directory)")
    add_show(j)
    j.set_defaults(func=cmd_judge)

