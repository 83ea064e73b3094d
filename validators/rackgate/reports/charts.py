"""A check's charts in the HTML report, as the SVG template draws them: one per metric,
each in its own unit with its own pass bounds (a floor ``pass at >=``, a ceiling ``pass at
<=``) and the peer median, its figures per node as bars; past ``MAX_BARS`` nodes, a
histogram of ``HIST_BINS`` columns with the same marks.

A check that judges several metrics (its results' ``metrics``: ``cooling.cdu``'s supply
and return temperature and flow) has one chart per metric, bounded by that metric's
threshold (the rack profile's, else the bounds its results carry). A check judged on one
figure has one chart of its results' ``measured``, bounded by the one threshold of the
check in that unit (none when it has several: no bound is drawn rather than another
metric's). A check without figures has no chart.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Any

from rackgate.figures import with_unit

BAR_H, BAR_GAP, LABEL_W, PLOT_W = 22, 6, 170, 520
CHART_TOP = 20  # px above the bars or columns: the peer median's label
MAX_BARS = 60
HIST_BINS, HIST_H = 40, 160

Row = tuple[Mapping[str, Any], Mapping[str, Any]]  # (node, result)
Figure = tuple[Mapping[str, Any], str, float]  # (node, status, value)
Bounds = tuple[float | None, float | None]  # (floor, ceiling)


def _band(t: Mapping[str, Any]) -> Bounds:
    lo, hi = t.get("min_ratio"), t.get("max_ratio")
    return (t["ref"] * lo if lo else None, t["ref"] * hi if hi else None)


def _check_bounds(doc: Mapping[str, Any], check: str, unit: str) -> Bounds:
    """The bounds of the check's one threshold in ``unit`` (none when several or none)."""
    thresholds = doc["profile"]["checks"].get(check, {}).get("thresholds", {})
    same = [t for t in thresholds.values() if t.get("unit") == unit]
    return _band(same[0]) if len(same) == 1 else (None, None)


def _metric_bounds(doc: Mapping[str, Any], check: str, metric: str,
                   first: Mapping[str, Any]) -> Bounds:
    t = doc["profile"]["checks"].get(check, {}).get("thresholds", {}).get(metric)
    return _band(t) if t else (first.get("lower"), first.get("upper"))


def _marks(bounds: Bounds, unit: str,
           x_of: Callable[[float], float]) -> list[dict[str, Any]]:
    """The dashed lines of the pass bounds: where, and what they say."""
    out = []
    for value, floor in zip(bounds, (True, False), strict=True):
        if value is not None:  # a floor: pass at >=; a ceiling: pass at <=
            out.append({"x": x_of(value), "value": value, "floor": floor,
                        "label": with_unit(value, unit)})
    return out


def _bars(figures: list[Figure], unit: str, bounds: Bounds) -> dict[str, Any]:
    values = [v for _, _, v in figures]
    top = max(values + [b for b in bounds if b is not None]) * 1.1 or 1.0
    median = statistics.median(values)

    def x_of(v: float) -> float:
        return LABEL_W + PLOT_W * v / top

    return {
        "kind": "bars",
        "height": CHART_TOP + len(figures) * (BAR_H + BAR_GAP) + 30,
        "width": LABEL_W + PLOT_W + 90,
        "top": CHART_TOP,
        "label_w": LABEL_W,
        "bar_h": BAR_H,
        "unit": unit,
        "bars": [{"node": n["name"], "value": v, "label": with_unit(v, unit),
                  "status": status, "y": CHART_TOP + i * (BAR_H + BAR_GAP) + 4,
                  "w": max(1.0, PLOT_W * v / top)}
                 for i, (n, status, v) in enumerate(figures)],
        "bounds": _marks(bounds, unit, x_of),
        "median": median,
        "median_label": with_unit(median, unit),
        "median_x": x_of(median),
    }


def _histogram(figures: list[Figure], unit: str, bounds: Bounds) -> dict[str, Any]:
    values = [v for _, _, v in figures]
    marks = [b for b in bounds if b is not None]
    lo, hi = min(values + marks), max(values + marks)
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
        "bounds": _marks(bounds, unit, x_of) if hi > lo else [],
        "median": median,
        "median_label": with_unit(median, unit),
        "median_x": x_of(median),
    }


def _chart(title: str, figures: list[Figure], unit: str, bounds: Bounds) -> dict[str, Any]:
    drawn = _bars(figures, unit, bounds) if len(figures) <= MAX_BARS \
        else _histogram(figures, unit, bounds)
    return {**drawn, "title": title}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def charts(doc: Mapping[str, Any], check: str, rows: list[Row]) -> list[dict[str, Any]]:
    """The check's charts: one per metric its results judged, else one of ``measured``
    (module docstring); each has a ``title`` (the metric, "" for ``measured``)."""
    metrics: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for n, r in rows:
        for m in r.get("metrics") or []:
            if _number(m.get("measured")):
                metrics.setdefault(m["metric"], []).append((n, m))
    if metrics:
        out = []
        for metric, figures in metrics.items():
            unit = figures[0][1]["unit"]
            same: list[Figure] = [(n, m["status"], float(m["measured"])) for n, m in figures
                                  if m["unit"] == unit]
            out.append(_chart(f"{metric} ({unit})" if unit else metric, same, unit,
                              _metric_bounds(doc, check, metric, figures[0][1])))
        return out
    measured = [(n, r) for n, r in rows if _number(r["measured"])]
    if not measured:
        return []
    unit = measured[0][1]["unit"]
    drawn: list[Figure] = [(n, r["status"], float(r["measured"])) for n, r in measured
                           if r["unit"] == unit]
    return [_chart("", drawn, unit, _check_bounds(doc, check, unit))]
