"""A short Markdown summary for a ticket, rendered from the JSON report document.

Verdict first (an ACCEPT with how many warnings), then a table of only the blocking
results (what a replacement ticket needs: node, location, check, status, measured,
expected, message, evidence), then, when there are any, a "Warnings" table of the warn
results (same columns: they do not block acceptance but deserve a look). Each row is one
reason (rackgate.reports.reasons): a rack component's fault on every node, or a node that
did not answer on each of its checks, is one row naming the nodes or checks. A check that
judged several metrics has each in its measured and expected cells, the failing one first.
Then one line per check with its counts per status, then
the profile and its sha256 (and the overrides files it was judged with, when any:
their paths and sha256), then every threshold an override changed (old -> new, what
it loosens, its basis, who set it). At most ``max_rows`` rows (50) in each table: the rest are
counted and left to report.json. Figures are written by :func:`rackgate.figures.figure`.
Every value from nodes, inventory or checks is escaped, so it cannot break the table or
add links, code spans or HTML.

>>> doc = {"run": {"run_id": "r1", "inventory": ["/srv/inventory/rack07"]},
...        "profile": {"name": "demo", "sha256": "ab12"}, "verdict": "REJECT",
...        "summary": {"nodes": 1, "accepted": 0},
...        "nodes": [{"name": "n1", "location": "u1", "verdict": "REJECT", "results": [
...            {"check": "fio.seq_read", "status": "fail", "message": "slow | bad",
...             "measured": 42.0, "unit": "MB/s", "expected": ">= 50 MB/s",
...             "evidence": "n1/fio.out"},
...            {"check": "redundancy.psu", "status": "warn", "message": "PSU2 at 1910 W",
...             "measured": 1910.4, "unit": "W", "expected": "<= 2,000 W",
...             "evidence": "n1/psu.out"}]}]}
>>> print(render_markdown(doc))
**REJECT** rack rack07: 0 of 1 nodes accepted, profile demo, run r1
<BLANKLINE>
| node | location | check | status | measured | expected | message | evidence |
|---|---|---|---|---|---|---|---|
| n1 | u1 | fio.seq_read | fail | 42 MB/s | >= 50 MB/s | slow \\| bad | n1/fio.out |
<BLANKLINE>
**Warnings** (they do not block acceptance):
<BLANKLINE>
| node | location | check | status | measured | expected | message | evidence |
|---|---|---|---|---|---|---|---|
| n1 | u1 | redundancy.psu | warn | 1,910 W | \\<= 2,000 W | PSU2 at 1910 W | n1/psu.out |
<BLANKLINE>
- fio.seq_read: 1 fail
- redundancy.psu: 1 warn
<BLANKLINE>
Profile demo, sha256 ab12
<BLANKLINE>
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from rackgate.figures import with_unit
from rackgate.reports import (
    change_line,
    changed_thresholds,
    checks_in,
    overrides_line,
    shown_metrics,
)
from rackgate.reports.reasons import Reason, named, of_doc

Row = tuple[Mapping[str, Any], Mapping[str, Any]]  # (node, result)

STATUSES = ("pass", "skip", "warn", "fail", "error")
BLOCKING = ("fail", "error")
_CONTROL = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f]")
_MARKUP = re.compile(r"([\\`*\[\]<|])")  # what could end a cell, or start a link, code or HTML


def md(value: Any) -> str:
    """One line of inline Markdown showing ``value`` literally (also inside a table cell)."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", "" if value is None else str(value))
    return _MARKUP.sub(r"\\\1", text).replace("\r\n", "<br>").replace("\r", "<br>") \
        .replace("\n", "<br>")


def _rack(run: Mapping[str, Any]) -> str:
    """The inventory's name (its directory when a file is given), group and limit."""
    names = [p.parent.name if p.suffix else p.name
             for p in map(PurePath, run.get("inventory") or [])]
    text = "+".join(n for n in names if n) or "?"
    if run.get("limit"):
        text += f" (limit {run['limit']})"
    return text


_HEADER = ["| node | location | check | status | measured | expected | message | evidence |",
           "|---|---|---|---|---|---|---|---|"]


def _figures(r: Mapping[str, Any]) -> tuple[str, str]:
    """The measured and expected cells of a result: each metric it judged (the failing one
    first, its status named), else its figure."""
    if ms := shown_metrics(r):
        def one(m: Mapping[str, Any]) -> str:
            value = "none" if m.get("measured") is None else with_unit(m["measured"], m["unit"])
            return f"{m['metric']} {value}" + (f" ({m['status']})" if m["status"] != "pass"
                                                else "")
        return "; ".join(map(one, ms)), "; ".join(f"{m['metric']} {m['expected']}" for m in ms)
    measured = "" if r.get("measured") is None else with_unit(r["measured"], r.get("unit") or "")
    if r.get("percent_of_limit") is not None:
        measured += f" ({r['percent_of_limit']:.0f}% of limit)"
    return measured.strip(), r.get("expected") or ""


def _row(reason: Reason, rows: list[Row]) -> str:
    """One table row for one reason: its node (or nodes, and their locations) and check (or
    checks), the figures when every result it stands for has the same, the first evidence
    file and how many more."""
    members = [rows[i] for i in reason.members]
    node, r = members[0]
    one = len(reason.nodes) == 1
    figures = {_figures(x) for _, x in members}
    measured, expected = figures.pop() if len(figures) == 1 else ("varies: see report.json", "")
    more = len({x.get("evidence") for _, x in members if x.get("evidence")}) - 1
    evidence = (r.get("evidence") or "") + (f" and {more} more" if more > 0 else "")
    places = named([loc for _, loc in reason.nodes if loc])
    cells = [node["name"] if one else reason.nodes_text, node.get("location") if one else places,
             reason.checks_text, reason.status or node.get("status", "error"), measured,
             expected, reason.message, evidence]
    return "| " + " | ".join(md(c) or "—" for c in cells) + " |"


def _table(rows: list[str], max_rows: int, what: str) -> list[str]:
    """A table of at most ``max_rows`` rows, then how many more ``what`` report.json has."""
    lines = [*_HEADER, *rows[:max_rows], ""]
    if len(rows) > max_rows:  # a paragraph: a line right under a table would be a row
        lines.append(f"… and {len(rows) - max_rows} more {what} in report.json")
    return lines


def render_markdown(doc: Mapping[str, Any], max_rows: int = 50) -> str:
    run, summary = doc.get("run", {}), doc["summary"]
    warns = summary.get("results", {}).get("warn", 0) if doc["verdict"] == "ACCEPT" else 0
    lines = [f"**{doc['verdict']}** rack {md(_rack(run))}: {summary['accepted']} of "
             f"{summary['nodes']} nodes accepted"
             + (f", {warns} warning{'s' if warns != 1 else ''}" if warns else "")
             + f", profile {md(doc['profile']['name'])}, "
             f"run {md(run.get('run_id', '?'))}"
             + (f", revision {doc['revision']}" if doc.get("revision", 1) > 1 else ""), ""]
    reasons, results = of_doc(doc)
    rows = [_row(reason, results) for reason in reasons if reason.nodes]
    if rows:
        lines += _table(rows, max_rows, "blocking results")
    else:
        lines.append(md("; ".join(doc.get("reasons") or [])) or "No blocking results.")
    warned, results = of_doc(doc, ("warn",), rejected=False)
    if warnings := [_row(reason, results) for reason in warned]:
        lines += [*([""] if lines[-1] else []), "**Warnings** (they do not block acceptance):",
                  "", *_table(warnings, max_rows, "warnings")]
    found = Counter((r["check"], r["status"]) for n in doc["nodes"] for r in n["results"])
    for check in checks_in(doc):
        counts = ", ".join(f"{found[check, s]} {s}" for s in STATUSES if found[check, s])
        lines.append(f"- {md(check)}: {counts}")
    sha = doc["profile"].get("sha256") or "?"
    cap = doc["profile"].get("gpu_power_cap")
    capped = f", GPU power capped at {with_unit(cap['watts'], 'W')}" if cap else ""
    lines += ["", f"Profile {md(doc['profile']['name'])}, sha256 {md(sha)}{capped}"]
    if used := overrides_line(doc):
        lines[-1] += f", **{md(used)}**"
    if changed := changed_thresholds(doc):
        loosened = sum(1 for c in changed if c["loosens"])
        lines += ["", f"**Thresholds changed by overrides** ({len(changed)}, {loosened} "
                      "loosened):", "", *(f"- {md(change_line(c))}" for c in changed)]
    return "\n".join(lines) + "\n"

