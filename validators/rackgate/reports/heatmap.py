"""The HTML report's node-pair heatmaps: each matrix of report.json ``pairwise[]`` (e.g.
ib_write_bw between every two nodes) as an N x N map coloured by % of line rate: greens at
or above the pass ratio, reds below it (darker the lower), purple where a pair has no
measurement, amber above line rate. Each cell's title gives the figure, and the weak links
are listed under the map (at most ``MAX_ROWS``) with the node that stands out in them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rackgate.reports.sections import MAX_ROWS

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
