"""What ``rackgate validate`` and ``rackgate judge`` print once a run is judged.

A table of the problems (warn, fail and error results: skips are not problems; with
``--show all`` every result), worst first and then in inventory order, with figures as
:func:`rackgate.figures.with_unit` writes them; no table when there is nothing to list.
A check that judged several metrics shows each on its own line, the failing one first.
Then one line of counts per status, the rack verdict (an ACCEPT with how many warnings),
one line per reason (``node (location): check: status: message``; a reason shared by
several nodes or checks, such as a rack component's fault or a node that did not answer,
once, naming them: rackgate.reports.reasons) and where the reports are. Text from nodes and
evidence is printed as text, never read as console markup.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rackgate.figures import with_unit
from rackgate.model import RackVerdict, Result, Status, Verdict, shown_metrics
from rackgate.reports.reasons import of_rack
from rackgate.run import RunOutcome

# Logs (CI, pipes) get a wide table instead of rich's 80-column default.
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160
out = Console(width=_WIDTH)
err = Console(stderr=True, width=_WIDTH)

COMPARE_HELP = ("an earlier report (report.json or its run directory) to compare with: what "
                "changed goes into report.json's diff and the HTML report (a retest compares "
                "with the report it replaces unless given)")
EXIT_ACCEPT, EXIT_REJECT = 0, 1  # validate and judge: the rack verdict
ACCEPTED = (EXIT_ACCEPT, "the rack is accepted (every node is)")
REJECTED = (EXIT_REJECT, "the rack is rejected: a node failed, or could not be measured")
NOT_MADE = ("the run could not be made or judged (bad inventory, profile or options, a plan "
            "error)")

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
        measured, expected = figures(r)
        table.add_row(Text(r.node), Text(r.check), status_cell(r.status), Text(measured),
                      Text(expected), Text(r.message))
    return table


def figures(r: Result) -> tuple[str, str]:
    """The measured and expected cells of a result: one line per metric it judged (the
    failing one first, its status named), else its figure and band.

    >>> from rackgate.model import Metric
    >>> figures(Result("n1", "cooling.cdu", Status.FAIL, "low flow", 32.0, "C", "<= 45 C",
    ...                metrics=(Metric("supply_temp_c", Status.PASS, 32.0, "C", "<= 45 C"),
    ...                         Metric("flow_lpm", Status.FAIL, 40.0, "L/min", ">= 96 L/min"))))
    ... # doctest: +NORMALIZE_WHITESPACE
    ('flow_lpm 40 L/min (fail)\\nsupply_temp_c 32 C',
     'flow_lpm >= 96 L/min\\nsupply_temp_c <= 45 C')
    """
    if r.metrics:
        ms = shown_metrics(r.metrics)
        return ("\n".join(f"{m.metric} "
                          f"{'-' if m.measured is None else with_unit(m.measured, m.unit)}"
                          + (f" ({m.status.label})" if m.status is not Status.PASS else "")
                          for m in ms),
                "\n".join(f"{m.metric} {m.expected or '-'}" for m in ms))
    return (with_unit(r.measured, r.unit) if r.measured is not None else "-",
            r.expected or "-")


def verdict_line(rack: RackVerdict, revision: int) -> str:
    """The verdict, how many nodes were accepted, and for an ACCEPT how many warnings.

    >>> from rackgate.model import node_verdict, rack_verdict
    >>> rack = rack_verdict([node_verdict("n1", [Result("n1", "a", Status.WARN, "hot"),
    ...                                          Result("n1", "b", Status.WARN, "hot")])])
    >>> verdict_line(rack, 1)
    'Rack verdict: ACCEPT (1/1 nodes accepted, 2 warnings)'
    """
    accepted = sum(1 for n in rack.nodes if n.verdict is Verdict.ACCEPT)
    warned = sum(1 for n in rack.nodes for r in n.results if r.status is Status.WARN)
    warnings = f", {warned} warning{'' if warned == 1 else 's'}" \
        if warned and rack.verdict is Verdict.ACCEPT else ""
    more = f", revision {revision}" if revision > 1 else ""
    return (f"Rack verdict: {rack.verdict.value} ({accepted}/{len(rack.nodes)} nodes "
            f"accepted{warnings}{more})")


def print_outcome(outcome: RunOutcome, show: str, out: Console, err: Console) -> None:
    """The results table (when it has rows), counts, verdict, reasons and report paths."""
    rows = shown_results(outcome.rack, show)
    if rows:
        out.print(results_table(rows, show))
    out.print(counts_line(outcome.rack), markup=False, highlight=False)
    colour = "green" if outcome.rack.verdict is Verdict.ACCEPT else "red"
    out.print(Text(verdict_line(outcome.rack, outcome.revision), style=f"bold {colour}"))
    for reason in of_rack(outcome.rack):  # each once, with the nodes it stands for
        out.print(f"  - {reason.text}", markup=False, highlight=False, soft_wrap=True)
    reports = outcome.reports
    out.print(f"Report (HTML): {reports.html}", markup=False, highlight=False)
    out.print(f"Report (JSON): {reports.json}", markup=False, highlight=False)
    out.print(f"JUnit XML: {reports.junit}, ticket summary: {reports.summary}", markup=False,
              highlight=False)
    if outcome.history_error:
        err.print(f"rackgate: warning: reports written to {reports.json.parent}, but "
                  f"{outcome.history_error}", markup=False, highlight=False)


def line(text: str) -> None:
    """One line of output, printed as text (never read as console markup)."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def summary_code(outcome: RunOutcome, show: str = "problems") -> int:
    """Print ``outcome`` (:func:`print_outcome`); its exit code: 0 ACCEPT, 1 REJECT."""
    print_outcome(outcome, show, out, err)
    return EXIT_ACCEPT if outcome.rack.verdict is Verdict.ACCEPT else EXIT_REJECT
