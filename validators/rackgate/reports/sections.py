"""The HTML report's sections, one per check: failures first, each with an anchor
(``check-<name>``), its counts per status, its charts of the figures per node (one per
metric, each with its own unit and pass bound, and the peer median:
rackgate.reports.charts), and its rows ordered fail, error, warn, skip, pass, the passing
ones folded in a closed ``<details>``. Past ``FULL_TABLE_RESULTS`` results in the report
the tables list only what is not ``pass``, at most ``MAX_ROWS`` per check, and say how
many they left out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from rackgate.reports import checks_in
from rackgate.reports.anchors import check_id
from rackgate.reports.charts import Row, charts

FULL_TABLE_RESULTS = 2000
MAX_ROWS = 500

STATUSES = ("pass", "skip", "warn", "fail", "error")
ROW_ORDER = {"fail": 0, "error": 1, "warn": 2, "skip": 3, "pass": 4}


def check_rank(counts: Mapping[str, int]) -> int:
    """Where a check's section goes: 0 with a fail or error, 1 with a warning, 2 when
    something passed, 3 when everything was skipped.

    >>> check_rank({"pass": 3, "error": 1}), check_rank({"pass": 2, "skip": 1})
    (0, 2)
    >>> check_rank({"warn": 1}), check_rank({"skip": 4})
    (1, 3)
    """
    if counts.get("fail") or counts.get("error"):
        return 0
    if counts.get("warn"):
        return 1
    return 2 if counts.get("pass") else 3


def sections(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One section per check, failures first (:func:`check_rank`, then the document's
    order): its counts per status, its charts, and its rows, ordered fail, error, warn,
    skip, pass, split into the problems (shown) and the passes (folded)."""
    rows_by_check: dict[str, list[Row]] = defaultdict(list)
    for n in doc["nodes"]:
        for r in n["results"]:
            rows_by_check[r["check"]].append((n, r))
    total = sum(len(v) for v in rows_by_check.values())
    only_problems = total > FULL_TABLE_RESULTS
    out: list[dict[str, Any]] = []
    for check in checks_in(doc):
        rows = rows_by_check[check]
        counts = Counter(r["status"] for _, r in rows)
        ordered = sorted(rows, key=lambda nr: ROW_ORDER.get(nr[1]["status"], -1))
        listed = [nr for nr in ordered if nr[1]["status"] != "pass"] if only_problems \
            else ordered
        listed = listed[:MAX_ROWS]
        out.append({"check": check, "id": check_id(check),
                    "counts": {s: counts[s] for s in STATUSES if counts[s]},
                    "charts": charts(doc, check, rows),
                    "problems": [nr for nr in listed if nr[1]["status"] != "pass"],
                    "passing": [nr for nr in listed if nr[1]["status"] == "pass"],
                    "hidden": len(rows) - len(listed),
                    "only_problems": only_problems})
    out.sort(key=lambda sec: check_rank(sec["counts"]))
    return out
