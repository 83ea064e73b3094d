"""``rackgate history [NODE]``: the judged runs in ``runs/history.sqlite``, one line each
(newest first): when, the run and its revision, the inventory and racks, the profile, the
rack verdict and how many nodes were accepted; with NODE, only the runs that judged it, with
its own verdict and the checks that kept it out. ``--results`` (or ``--check``) lists the
node's results instead, one line per check and run (skips are counted, not listed).

Lines are plain text (no console wrapping: a line is a run or a result). Exit 0 when
something was listed, 1 when the history holds nothing for the question, 2 when there is
no history or it cannot be read.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rackgate.cli.common import aligned, command, names, positive_int
from rackgate.figures import with_unit
from rackgate.model import Status
from rackgate.refusal import Refusal
from rackgate.store.history import (
    HistoryRow,
    RunRow,
    default_history_path,
    node_history,
    open_history,
    run_history,
)

EXIT_LISTED, EXIT_NOTHING = 0, 1
DESCRIPTION = """\
The judged runs in RUNS_DIR/history.sqlite, newest first, one line each: when it was
judged, the run and its revision, the inventory and racks, the profile, the rack verdict
and how many nodes were accepted. With NODE, only the runs that judged it, with its own
verdict and the checks that kept it out. --results (or --check) lists NODE's results
instead, one line per check and run; skips are counted, not listed."""
DEFAULT_RUNS = 20
ROW_CAP = 100_000  # per-check rows read at most (a 10,000-node history stays bounded)


def _short(paths: str) -> str:
    """Inventory sources as given, relative to the working directory where they are under it.

    >>> _short(os.path.join(os.getcwd(), "inventory", "demo"))
    'inventory/demo'
    """
    out = []
    for p in paths.split(",") if paths else []:
        rel = os.path.relpath(p) if os.path.isabs(p) else p
        out.append(p if rel.startswith("..") else rel)
    return ",".join(out) or "-"


def run_lines(rows: list[RunRow], node: str | None) -> list[str]:
    """One aligned line per judgement, a header first."""
    head = ["judged (UTC)", "run", "rev", "inventory", "rack", "profile", "verdict",
            "accepted"]
    if node is not None:
        head += [node, "kept out by"]
    table = [head]
    for r in rows:
        line = [r.judged_at[:19].replace("T", " "), r.run_id, str(r.revision),
                _short(r.inventory), r.racks or "-", r.profile, r.verdict,
                f"{r.accepted}/{r.nodes}"]
        if node is not None:
            line += [r.node_verdict or "-", names(r.node_blocking, 4) or "-"]
        table.append(line)
    return aligned(table)


def result_lines(rows: list[HistoryRow]) -> list[str]:
    """One aligned line per result (skips left out), a header first."""
    table = [["judged (UTC)", "run", "rev", "check", "attempt", "status", "measured",
              "message"]]
    for r in rows:
        if r.status is Status.SKIP:
            continue
        measured = with_unit(r.measured, r.unit) if r.measured is not None else "-"
        table.append([r.judged_at[:19].replace("T", " "), r.run_id, str(r.revision), r.check,
                      str(r.attempt) if r.attempt else "-", r.status.label, measured,
                      " ".join(r.message.split())])
    return aligned(table)


def cmd_history(args: argparse.Namespace) -> int:
    path = default_history_path(Path(args.runs_dir))
    if not path.is_file():
        raise Refusal(f"no run history at {path} (validate and judge write it; "
                       f"--runs-dir names another runs directory)")
    if (args.results or args.check) and not args.node:
        raise Refusal("--results and --check list one node's results: name the node "
                       "(rackgate history NODE --results)")
    conn = open_history(path)
    try:
        if args.results or args.check:
            results = node_history(conn, args.node, args.check, ROW_CAP, runs=args.runs)
            lines = result_lines(results)
        else:
            results, lines = [], run_lines(run_history(conn, args.node, args.runs), args.node)
    finally:
        conn.close()
    skips = sum(r.status is Status.SKIP for r in results)
    if len(lines) < 2:
        what = (f"node {args.node!r}" + (f", check {args.check!r}" if args.check else "")
                if args.node else "any run")
        print(f"nothing recorded for {what} in {path}"
              + (f" but {skips} skipped result(s)" if skips else ""))
        return EXIT_NOTHING
    print("\n".join(lines))
    if skips:
        print(f"({skips} skipped result(s) not listed)")
    return EXIT_LISTED


class _Renamed(argparse.Action):
    """An option that was renamed: refuse it, naming the new one."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.error(f"{option_string} is now --runs N (the newest N runs; validate "
                     f"--limit is a host pattern)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate history`` to the top-level parser."""
    h = command(
        sub, "history", summary="the judged runs, one line each, or a node's results over "
                                "time (runs/history.sqlite)",
        description=DESCRIPTION,
        examples=["rackgate history                       # the newest 20 runs, one line each",
                  "rackgate history rg-node01             # the runs that judged rg-node01",
                  "rackgate history rg-node01 --results   # its results, one line per check",
                  "rackgate history rg-node01 --check fio.seq_read --runs 50"],
        exit_codes=[(0, "listed"), (1, "the history holds nothing for the question"),
                    (2, "no history in --runs-dir, or it cannot be read")])
    h.add_argument("node", nargs="?", metavar="NODE",
                   help="an inventory host: only the runs that judged it, with its own "
                        "verdict")
    h.add_argument("--results", action="store_true",
                   help="list NODE's results, one line per check and run, instead of one "
                        "line per run (skips are counted, not listed)")
    h.add_argument("--check", help="only this check's results of NODE (implies --results)")
    h.add_argument("--runs", type=positive_int, default=DEFAULT_RUNS, metavar="N",
                   help=f"the newest N runs (default: {DEFAULT_RUNS})")
    h.add_argument("--limit", action=_Renamed, help=argparse.SUPPRESS)
    h.add_argument("--runs-dir", default="runs", help="where run directories go and "
                                                      "history.sqlite is (default: runs)")
    h.set_defaults(func=cmd_history)

