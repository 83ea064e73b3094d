"""``rackgate diff A B``: what changed between two reports (report.json files, or run
directories holding one), node by node and check by check (rackgate.reports.diff).

Text goes to stdout, one line per change (no console wrapping: a line is a change), each
status and verdict change marked better or worse (green or red on a terminal, ``--colour``);
``--json FILE`` and ``--html FILE`` write the diff document and its page. Exit 0 when
nothing got worse (no verdict or status changed, or only for the better: REJECT -> ACCEPT)
and every node was paired, 1 when something got worse or a node was not paired, 2 when the
diff could not run: one line on stderr naming the file and field.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rackgate.cli.common import command
from rackgate.refusal import Refusal
from rackgate.reports import read_report
from rackgate.reports.diff import DEFAULT_FIGURE_THRESHOLD_PCT, diff_reports
from rackgate.reports.diff_pairing import MATCHES
from rackgate.reports.diff_render import render_html, render_text
from rackgate.store.evidence import atomic_write

EXIT_NOT_WORSE, EXIT_WORSE, EXIT_CANNOT_RUN = 0, 1, 2
EXIT_CODES = [(EXIT_NOT_WORSE, "nothing got worse: no verdict or status changed, or only for "
                               "the better (REJECT -> ACCEPT), and every node was paired"),
              (EXIT_WORSE, "a verdict or status got worse, or a node was not paired"),
              (EXIT_CANNOT_RUN, "a report could not be read or an output not written")]



def _write(path: str, text: str) -> None:
    try:
        atomic_write(Path(path), text.encode())
    except OSError as exc:
        raise Refusal(f"cannot write {path}: {exc.strerror or exc}") from None
    sys.stderr.write(f"wrote {path}\n")


def cmd_diff(args: argparse.Namespace) -> int:
    (doc_a, path_a), (doc_b, path_b) = read_report(args.report_a), read_report(args.report_b)
    diff = diff_reports(doc_a, doc_b, a_source=str(path_a), b_source=str(path_b),
                        match=args.match,
                        figure_threshold_pct=args.figure_threshold, show_all=args.all)
    as_json = json.dumps(diff, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if args.json:
        _write(args.json, as_json)
    if args.html:
        _write(args.html, render_html(diff))
    colour = args.colour == "always" or (args.colour == "auto" and sys.stdout.isatty()
                                         and not os.environ.get("NO_COLOR"))
    sys.stdout.write(as_json if args.format == "json" else render_text(diff, colour))
    return exit_code(diff)


def exit_code(diff: Mapping[str, Any]) -> int:
    """0 when nothing got worse and every node was paired, else 1."""
    worse = diff["direction"] in ("worse", "mixed") or diff["counts"]["not_paired"]
    return EXIT_WORSE if worse else EXIT_NOT_WORSE



def percent(text: str) -> float:
    """A threshold in percent: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage >= 0")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate diff`` to the top-level parser."""
    d = command(
        sub, "diff", summary="what changed between two reports: verdicts, statuses, figures, "
                             "thresholds, identity (exit 1: something got worse)",
        description="What changed between two reports (report.json, or the run directories "
                    "holding them), node by node and check by check: the rack and node "
                    "verdicts, each status change (a check added or removed counts), figures "
                    "that moved beyond --figure-threshold, the profile's sha256 and "
                    "thresholds, and each node's identity. Each status and verdict change is "
                    "marked better or worse (pass < skip < warn < fail < error; ACCEPT < "
                    "REJECT), in green or red on a terminal; a changed message is shown "
                    "from both reports. The last line sums the direction up.",
        examples=["rackgate diff runs/<before> runs/<after>",
                  "rackgate diff runs/<rack07> runs/<rack08> --match position",
                  "rackgate diff A/report.json B/report.json --html diff.html --json diff.json"],
        exit_codes=EXIT_CODES)
    d.add_argument("report_a", metavar="A", help="the earlier report: report.json or its run "
                                                 "directory")
    d.add_argument("report_b", metavar="B", help="the later report (or the other rack's)")
    d.add_argument("--match", choices=MATCHES, default="auto",
                   help="pair nodes by name or by rack position (place: rack and U, or U "
                        "alone across two racks); default auto: by name when most names "
                        "are shared")
    d.add_argument("--figure-threshold", type=percent, default=DEFAULT_FIGURE_THRESHOLD_PCT,
                   metavar="PCT", help="list a figure change without a status change only "
                                       "beyond this many percent (default: "
                                       f"{DEFAULT_FIGURE_THRESHOLD_PCT:g})")
    d.add_argument("--all", action="store_true",
                   help="list every difference: any figure change, expected and message "
                        "changes, threshold basis texts")
    d.add_argument("--format", choices=["text", "json"], default="text",
                   help="what goes to stdout (default: text, one line per change)")
    d.add_argument("--colour", "--color", choices=["auto", "always", "never"],
                   default="auto", help="colour the text: better green, worse red (default: "
                                        "auto, on a terminal unless NO_COLOR is set)")
    d.add_argument("--json", metavar="FILE", help="also write the diff document (JSON) here")
    d.add_argument("--html", metavar="FILE", help="also write the diff as an HTML page here")
    d.set_defaults(func=cmd_diff, one_line=True)
