"""A check's chart in the HTML report, as the SVG template draws it: its figures per node
as bars with the pass bound (the lowest ``ref * min_ratio`` of the check's thresholds) and
the peer median; past ``MAX_BARS`` nodes, a histogram of ``HIST_BINS`` columns with the
same two marks. A check without figures has no chart.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from rackgate.figures import with_unit

BAR_H, BAR_GAP, LABEL_W, PLOT_W = 22, 6, 170, 520
CHART_TOP = 20  # px above the bars or columns: the peer median's label
MAX_BARS = 60
HIST_BINS, HIST_H = 40, 160

Row = tuple[Mapping[str, Any], Mapping[str, Any]]  # (node, result)


def _bound(doc: Mapping[str, Any], check: str) -> float | None:
    thresholds = doc["profile"]["checks"].get(check, {}).get("thresholds", {})
    bounds = [t["ref"] * t["min_ratio"] for t in thresholds.values() if t.get("min_ratio")]
    return min(bounds) if bounds else None


def _bars(rows: list[Row], bound: float | None) -> dict[str, Any]:
    values = [float(r["measured"]) for _, r in rows]
    top = max(values + ([bound] if bound else [])) * 1.1 or 1.0
    unit = rows[0][1]["unit"]
    median = statistics.median(values)
    return {
        "kind": "bars",
        "height": CHART_TOP + len(rows) * (BAR_H + BAR_GAP) + 30,
        "width": LABEL_W + PLOT_W + 90,
        "top": CHART_TOP,
        "label_w": LABEL_W,
        "bar_h": BAR_H,
        "unit": unit,
        "bars": [{"node": n["name"], "value": v, "label": with_unit(v, unit),
                  "status": r["status"], "y": CHART_TOP + i * (BAR_H + BAR_GAP) + 4,
                  "w": max(1.0, PLOT_W * v / top)}
                 for i, ((n, r), v) in enumerate(zip(rows, values, strict=True))],
        "bound": bound,
        "bound_label": with_unit(bound, unit) if bound else "",
        "bound_x": LABEL_W + PLOT_W * bound / top if bound else None,
        "median": median,
        "median_label": with_unit(median, unit),
        "median_x": LABEL_W + PLOT_W * median / top,
    }


def _histogram(rows: list[Row], bound: float | None) -> dict[str, Any]:
    values = [float(r["measured"]) for _, r in rows]
    unit = rows[0][1]["unit"]
    lo = min(values + ([bound] if bound else []))
    hi = max(values + ([bound] if bound else []))
    width = (hi - lo) / HIST_BINS or 1.0
    counts = [0] * HIST_BINS
    for v in values:
        counts[min(HIST_BINS - 1, int((v - lo) / width))] += 1
    peak = max(counts)
    col_w = PLOT_W / HIST_BINS
    median = statistics.median(values)

    def x_of(v: float) -> float:
        return LABEL_W + PLOT_W * (v - lo) / (hi - lo) if hi > lo else LABEL_W + PLOT_W / 2

    return {
        "kind": "histogram",
        "height": CHART_TOP + HIST_H + 40,
        "width": LABEL_W + PLOT_W + 90,
        "unit": unit,
        "nodes": len(values),
        "lo_label": with_unit(lo, unit), "hi_label": with_unit(hi, unit),
        "x0": LABEL_W, "y0": CHART_TOP, "plot_w": PLOT_W, "plot_h": HIST_H,
        "cols": [{"x": LABEL_W + i * col_w, "w": col_w - 1, "count": c,
                  "h": HIST_H * c / peak,
                  "title": f"{c} node(s): {with_unit(lo + i * width, '')} to "
                           f"{with_unit(lo + (i + 1) * width, unit)}"}
                 for i, c in enumerate(counts) if c],
        "bound": bound,
        "bound_label": with_unit(bound, unit) if bound else "",
        "bound_x": x_of(bound) if bound and hi > lo else None,
        "median": median,
        "median_label": with_unit(median, unit),
        "median_x": x_of(median),
    }


def chart(doc: Mapping[str, Any], check: str, rows: list[Row]) -> dict[str, Any] | None:
    figures = [(n, r) for n, r in rows if isinstance(r["measured"], int | float)]
    if not figures:
        return None
    bound = _bound(doc, check)
    return _bars(figures, bound) if len(figures) <= MAX_BARS else _histogram(figures, bound)
