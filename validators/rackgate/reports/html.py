"""The HTML report: one self-contained file (inline CSS, SVG and a few lines of JS, no
CDN), verdict first, then the rack view, one table and one chart per check, and the
thresholds with their basis. Every value is escaped by Jinja2's autoescape.

A fleet-sized run stays readable and small: past ``FULL_TABLE_RESULTS`` results the tables
list only what is not ``pass`` (at most ``MAX_ROWS`` per check), past ``MAX_BARS`` nodes a
check's chart becomes a histogram, and past ``MAX_TILES`` nodes the rack view shows the
rejected nodes only. report.json always has everything.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from rackgate.reports import checks_in

_TEMPLATES = Path(__file__).parent / "templates"

BAR_H, BAR_GAP, LABEL_W, PLOT_W = 22, 6, 170, 520
MAX_BARS = 60
HIST_BINS, HIST_H = 40, 160
FULL_TABLE_RESULTS = 2000
MAX_ROWS = 500
MAX_TILES = 300

Row = tuple[Mapping[str, Any], Mapping[str, Any]]  # (node, result)


def _bound(doc: Mapping[str, Any], check: str) -> float | None:
    thresholds = doc["profile"]["checks"].get(check, {}).get("thresholds", {})
    bounds = [t["ref"] * t["min_ratio"] for t in thresholds.values() if t.get("min_ratio")]
    return min(bounds) if bounds else None


def _bars(rows: list[Row], bound: float | None) -> dict[str, Any]:
    top = max([r["measured"] for _, r in rows] + ([bound] if bound else [])) * 1.1 or 1.0
    return {
        "kind": "bars",
        "height": len(rows) * (BAR_H + BAR_GAP) + 30,
        "width": LABEL_W + PLOT_W + 90,
        "label_w": LABEL_W,
        "bar_h": BAR_H,
        "unit": rows[0][1]["unit"],
        "bars": [{"node": n["name"], "value": r["measured"], "status": r["status"],
                  "y": i * (BAR_H + BAR_GAP) + 4, "w": max(1.0, PLOT_W * r["measured"] / top)}
                 for i, (n, r) in enumerate(rows)],
        "bound": bound,
        "bound_x": LABEL_W + PLOT_W * bound / top if bound else None,
    }


def _histogram(rows: list[Row], bound: float | None) -> dict[str, Any]:
    values = [float(r["measured"]) for _, r in rows]
    lo = min(values + ([bound] if bound else []))
    hi = max(values + ([bound] if bound else []))
    width = (hi - lo) / HIST_BINS or 1.0
    counts = [0] * HIST_BINS
    for v in values:
        counts[min(HIST_BINS - 1, int((v - lo) / width))] += 1
    peak = max(counts)
    col_w = PLOT_W / HIST_BINS
    return {
        "kind": "histogram",
        "height": HIST_H + 40,
        "width": LABEL_W + PLOT_W + 90,
        "unit": rows[0][1]["unit"],
        "nodes": len(values),
        "lo": lo, "hi": hi,
        "x0": LABEL_W, "plot_w": PLOT_W, "plot_h": HIST_H,
        "cols": [{"x": LABEL_W + i * col_w, "w": col_w - 1, "count": c,
                  "h": HIST_H * c / peak, "from": lo + i * width, "to": lo + (i + 1) * width}
                 for i, c in enumerate(counts) if c],
        "bound": bound,
        "bound_x": LABEL_W + PLOT_W * (bound - lo) / (hi - lo) if bound and hi > lo else None,
    }


def _chart(doc: Mapping[str, Any], check: str, rows: list[Row]) -> dict[str, Any] | None:
    figures = [(n, r) for n, r in rows if isinstance(r["measured"], int | float)]
    if not figures:
        return None
    bound = _bound(doc, check)
    return _bars(figures, bound) if len(figures) <= MAX_BARS else _histogram(figures, bound)


def sections(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One section per check: its chart and the table rows to show."""
    rows_by_check: dict[str, list[Row]] = defaultdict(list)
    for n in doc["nodes"]:
        for r in n["results"]:
            rows_by_check[r["check"]].append((n, r))
    total = sum(len(v) for v in rows_by_check.values())
    out = []
    for check in checks_in(doc):
        rows = rows_by_check[check]
        shown = rows if total <= FULL_TABLE_RESULTS else \
            [(n, r) for n, r in rows if r["status"] != "pass"]
        out.append({"check": check, "chart": _chart(doc, check, rows),
                    "rows": shown[:MAX_ROWS], "hidden": len(rows) - min(len(shown), MAX_ROWS),
                    "only_problems": total > FULL_TABLE_RESULTS})
    return out


def render_html(doc: Mapping[str, Any]) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    nodes = doc["nodes"]
    tiles = nodes if len(nodes) <= MAX_TILES else \
        [n for n in nodes if n["verdict"] != "ACCEPT"][:MAX_TILES]
    return env.get_template("report.html.j2").render(
        doc=doc, sections=sections(doc), tiles=tiles, tiles_hidden=len(nodes) - len(tiles))
