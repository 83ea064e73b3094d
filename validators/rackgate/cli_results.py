"""What ``rackgate validate`` and ``rackgate judge`` print once a run is judged.

A table of the problems (warn, fail and error results: skips are not problems; with
``--show all`` every result), worst first and then in inventory order, with figures as
:func:`rackgate.figures.with_unit` writes them; no table when there is nothing to list.
Then one line of counts per status, the rack verdict, one line per reason (``node
(location): check: status: message``) and where the reports are. Text from nodes and
evidence is printed as text, never read as console markup.
"""

from __future__ import annotations

import argparse
from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rackgate.figures import with_unit
from rackgate.model import RackVerdict, Result, Status, Verdict
from rackgate.run import RunOutcome

SHOW = ("problems", "all")  # --show: the rows of the results table
STATUS_STYLE = {"pass": "green", "skip": "dim", "warn": "yellow", "fail": "red bold",
                "error": "magenta bold"}


def add_show(p: argparse.ArgumentParser) -> None:
    p.add_argument("--show", choices=SHOW, default="problems",
                   help="which results the console table lists: problems (warn, fail, error; "
                        "the default) or all; in a log, also every progress line instead of "
                        "the unusual ones and one per check; the reports have everything")


def counts_line(rack: RackVerdict) -> str:
    """One line with the count of every status (zeros too), nodes and checks.

    >>> from rackgate.model import node_verdict, rack_verdict
    >>> rack = rack_verdict([node_verdict("n1", [Result("n1", "a", Status.PASS, "ok"),
    ...                                          Result("n1", "b", Status.WARN, "hot")])])
    >>> counts_line(rack)
    'Results: 1 pass, 0 skip, 1 warn, 0 fail, 0 error (1 node x 2 checks)'
    """
    counts = Counter(r.status for n in rack.nodes for r in n.results)
    checks = len({r.check for n in rack.nodes for r in n.results})
    nodes = len(rack.nodes)
    return (f"Results: {', '.join(f'{counts[s]} {s.label}' for s in Status)} "
            f"({nodes} node{'' if nodes == 1 else 's'} x {checks} "
            f"check{'' if checks == 1 else 's'})")


def shown_results(rack: RackVerdict, show: str) -> list[Result]:
    """The results the table lists: with ``show`` "problems" only warn, fail and error, with
    "all" every one; worst first, then in inventory order.

    >>> from rackgate.model import node_verdict, rack_verdict
    >>> rack = rack_verdict([node_verdict(n, [Result(n, "a", s, "")]) for n, s in
    ...                      (("n1", Status.WARN), ("n2", Status.PASS), ("n3", Status.FAIL))])
    >>> [r.node for r in shown_results(rack, "problems")], len(shown_results(rack, "all"))
    (['n3', 'n1'], 3)
    """
    least = Status.PASS if show == "all" else Status.WARN
    rows = [r for n in rack.nodes for r in n.results if r.status >= least]
    return sorted(rows, key=lambda r: -r.status)  # stable: inventory order within a status


def status_cell(status: Status) -> str:
    return f"[{STATUS_STYLE[status.label]}]{status.label}[/]"


def results_table(rows: list[Result], show: str) -> Table:
    title = "Results" if show == "all" else \
        "Problems (warn, fail, error; --show all lists every result)"
    table = Table(title=title, show_lines=False)
    for col in ("node", "check", "status", "measured", "expected", "message"):
        table.add_column(col, overflow="fold")
    for r in rows:
        measured = with_unit(r.measured, r.unit) if r.measured is not None else "-"
        table.add_row(Text(r.node), Text(r.check), status_cell(r.status), Text(measured),
                      Text(r.expected or "-"), Text(r.message))
    return table


def print_outcome(outcome: RunOutcome, show: str, out: Console, err: Console) -> None:
    """The results table (when it has rows), counts, verdict, reasons and report paths."""
    rows = shown_results(outcome.rack, show)
    if rows:
        out.print(results_table(rows, show))
    out.print(counts_line(outcome.rack), markup=False, highlight=False)
    verdict = outcome.rack.verdict
    colour = "green" if verdict is Verdict.ACCEPT else "red"
    accepted = sum(1 for n in outcome.rack.nodes if n.verdict is Verdict.ACCEPT)
    revision = f", revision {outcome.revision}" if outcome.revision > 1 else ""
    out.print(f"[bold {colour}]Rack verdict: {verdict.value}[/] "
              f"({accepted}/{len(outcome.rack.nodes)} nodes accepted{revision})")
    for reason in outcome.rack.reasons:
        out.print(f"  - {reason}", markup=False, highlight=False)
    reports = outcome.reports
    out.print(f"Report (HTML): {reports.html}", markup=False, highlight=False)
    out.print(f"Report (JSON): {reports.json}", markup=False, highlight=False)
    out.print(f"JUnit XML: {reports.junit}, ticket summary: {reports.summary}", markup=False,
              highlight=False)
    if outcome.history_error:
        err.print(f"rackgate: warning: reports written to {reports.json.parent}, but "
                  f"{outcome.history_error}", markup=False, highlight=False)
