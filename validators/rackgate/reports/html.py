"""The HTML report: one self-contained file (inline CSS, SVG and a few lines of JS, no
CDN), verdict first, then the rack view, one table and one chart per check, and the
thresholds with their basis. Every value is escaped by Jinja2's autoescape.

A fleet-sized run stays readable and small: past ``FULL_TABLE_RESULTS`` results the tables
list only what is not ``pass`` (at most ``MAX_ROWS`` per check), past ``MAX_BARS`` nodes a
check's chart becomes a histogram, and past ``MAX_TILES`` nodes the rack view shows the
rejected nodes only. report.json always has everything.

A node-pair matrix (report.json ``pairwise[]``, e.g. ib_write_bw between every two nodes)
is drawn as an N x N heatmap coloured by % of line rate: greens at or above the pass
ratio, reds below it (darker the lower), purple where a pair has no measurement, amber
above line rate; each cell's title gives the figure, and the weak links are listed under
the map with the node that stands out in them.
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


HEAT_PLOT = 560  # px: the matrix's side, whatever N (cells 8 to 36 px)
_GREEN_LO, _GREEN_HI = (172, 230, 180), (26, 127, 55)
_RED_LO, _RED_HI = (255, 160, 150), (120, 10, 20)
_MISSING, _OVER, _DIAGONAL = "#8250df", "#d4a72c", "#eaeef2"


def _mix(lo: tuple[int, int, int], hi: tuple[int, int, int], t: float) -> str:
    t = min(1.0, max(0.0, t))
    return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(lo, hi, strict=True))


def heat_colour(pct: float | None, pass_pct: float, status: str) -> str:
    """Cell colour: green from the pass bound (light) to line rate (dark), red below the
    bound (darker the lower), purple for no measurement, amber above line rate.

    >>> heat_colour(100, 90, "pass"), heat_colour(None, 90, "error")
    ('#1a7f37', '#8250df')
    """
    if pct is None:
        return _MISSING
    if status == "warn" and pct > 100:
        return _OVER
    if pct >= pass_pct:
        return _mix(_GREEN_LO, _GREEN_HI, (pct - pass_pct) / max(1e-9, 100 - pass_pct))
    return _mix(_RED_LO, _RED_HI, 1 - pct / pass_pct)


def _ink(fill: str) -> str:
    """Text colour readable on ``fill`` (relative luminance, WCAG's weights)."""
    r, g, b = (int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return "#1f2328" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "#ffffff"


def _heatmap(m: Mapping[str, Any]) -> dict[str, Any]:
    names = list(m["nodes"])
    n = max(1, len(names))
    cell = max(8, min(36, HEAT_PLOT // n))
    font = max(7, min(12, cell - 3))
    label_w = min(170, 12 + font * max([len(x) for x in names] + [1]) * 0.62)
    pass_pct = 100.0 * float(m["min_ratio"] or 0)
    index = {name: i for i, name in enumerate(names)}
    cells = []
    for i in range(len(names)):
        cells.append({"x": label_w + i * cell, "y": label_w + i * cell, "fill": _DIAGONAL,
                      "title": f"{names[i]}: itself", "text": "", "ink": _ink(_DIAGONAL)})
    for p in m["pairs"]:
        pct = p["percent_of_line_rate"]
        figure = ("no measurement" if p["measured_gbps"] is None else
                  f"{p['measured_gbps']:.1f} Gb/s, {pct:g}% of {m['line_rate_gbps']:g} Gb/s "
                  "line rate")
        title = f"{p['a']} <-> {p['b']}: {figure} ({p['status']})"
        text = "" if cell < 26 else ("?" if pct is None else f"{pct:.0f}")
        fill = heat_colour(pct, pass_pct, p["status"])
        i, j = index[p["a"]], index[p["b"]]
        for row, col in ((i, j), (j, i)):
            cells.append({"x": label_w + col * cell, "y": label_w + row * cell, "fill": fill,
                          "title": title, "text": text, "ink": _ink(fill)})
    problems = [p for p in m["pairs"] if p["status"] != "pass"]
    order = {"fail": 0, "error": 1, "warn": 2, "skip": 3}
    problems.sort(key=lambda p: (order.get(p["status"], 4), p["measured_gbps"] or 0.0))
    side = label_w + cell * len(names)
    return {
        "m": m, "cell": cell, "font": font, "label_w": label_w,
        "width": side + 10, "height": side + 10,
        "labels": [{"name": x, "pos": label_w + i * cell + cell / 2} for i, x in enumerate(names)],
        "cells": cells, "problems": problems[:MAX_ROWS],
        "problems_hidden": max(0, len(problems) - MAX_ROWS),
        "pass_pct": pass_pct,
        "legend": [{"label": label, "fill": fill} for label, fill in (
            (f"{pass_pct:g}-100%", _mix(_GREEN_LO, _GREEN_HI, 0.5)),
            (f"< {pass_pct:g}%", _mix(_RED_LO, _RED_HI, 0.3)),
            (f"< {pass_pct / 2:g}%", _mix(_RED_LO, _RED_HI, 0.8)),
            ("> 105%", _OVER), ("no measurement", _MISSING))],
    }


def heatmaps(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One heatmap per ``pairwise[]`` matrix of the report (none when it has none)."""
    return [_heatmap(m) for m in doc.get("pairwise", [])]


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
        doc=doc, sections=sections(doc), tiles=tiles, tiles_hidden=len(nodes) - len(tiles),
        heatmaps=heatmaps(doc))
