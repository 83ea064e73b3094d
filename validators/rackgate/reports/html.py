"""The HTML report: one self-contained file (inline CSS, SVG and a few lines of JS, no
CDN, no external fonts), verdict first, then a table of contents of the checks, the rack
elevations, the node-pair heatmaps, and one section per check (failures first), and the
thresholds with their basis. Every value is escaped by Jinja2's autoescape.

The rack view draws one elevation per rack from each node's ``place`` (``rackgate_location``
rack and U): U1 at the bottom, as tall as the highest U used (at least 42), each node a 1U
slot coloured by verdict (green ACCEPT, amber ACCEPT with warnings, red REJECT) and linked
to its worst result; two nodes claiming one U are both drawn and the clash is written out.
Nodes without a place are tiles in a "no rack position" strip.

Each check's section has an anchor (``check-<name>``), a chart of its figures per node with
the pass bound and the peer median, and its rows ordered fail, error, warn, skip, pass, the
passing ones folded in a closed ``<details>``.

A fleet-sized run stays readable and small: past ``FULL_TABLE_RESULTS`` results the tables
list only what is not ``pass`` (at most ``MAX_ROWS`` per check), past ``MAX_BARS`` nodes a
check's chart becomes a histogram, past ``MAX_RACKS`` racks only the racks with a rejected
node are drawn (at most ``MAX_RACKS``), and past ``MAX_TILES`` nodes without a place the
strip shows the rejected ones only. Each cut says what it left out; report.json always has
everything.

A node-pair matrix (report.json ``pairwise[]``, e.g. ib_write_bw between every two nodes)
is drawn as an N x N heatmap coloured by % of line rate: greens at or above the pass
ratio, reds below it (darker the lower), purple where a pair has no measurement, amber
above line rate; each cell's title gives the figure, and the weak links are listed under
the map with the node that stands out in them.
"""

from __future__ import annotations

import hashlib
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from rackgate.figures import with_unit
from rackgate.inventory import MAX_RACK_U
from rackgate.reports import checks_in

_TEMPLATES = Path(__file__).parent / "templates"

BAR_H, BAR_GAP, LABEL_W, PLOT_W = 22, 6, 170, 520
CHART_TOP = 20  # px above the bars or columns: the peer median's label
MAX_BARS = 60
HIST_BINS, HIST_H = 40, 160
FULL_TABLE_RESULTS = 2000
MAX_ROWS = 500
MAX_TILES = 300
MAX_RACKS = 16
RACK_MIN_U = 42  # the common rack height: a rack is drawn at least this tall

STATUSES = ("pass", "skip", "warn", "fail", "error")
ROW_ORDER = {"fail": 0, "error": 1, "warn": 2, "skip": 3, "pass": 4}

Row = tuple[Mapping[str, Any], Mapping[str, Any]]  # (node, result)
_PLAIN = re.compile(r"[A-Za-z0-9_.-]+")


def anchor(text: str) -> str:
    """An HTML id (and URL fragment) for ``text``: itself when it is plain (letters,
    digits, ``._-``), else its plain characters and a hash of the whole, so that two names
    never share an id and nothing needs quoting.

    >>> anchor("fio.seq_read"), anchor("gpu 01"), anchor("gpu_01")
    ('fio.seq_read', 'gpu_01-7c8a98bb', 'gpu_01')
    """
    if _PLAIN.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', text)[:40]}-{digest}"


def check_id(check: str) -> str:
    """The id of a check's section.

    >>> check_id("fio.seq_read")
    'check-fio.seq_read'
    """
    return f"check-{anchor(check)}"


def row_id(check: str, node: str) -> str:
    """The id of one node's row in a check's table.

    >>> row_id("fio.seq_read", "gpu01")
    'check-fio.seq_read:gpu01'
    """
    return f"{check_id(check)}:{anchor(node)}"


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


def _chart(doc: Mapping[str, Any], check: str, rows: list[Row]) -> dict[str, Any] | None:
    figures = [(n, r) for n, r in rows if isinstance(r["measured"], int | float)]
    if not figures:
        return None
    bound = _bound(doc, check)
    return _bars(figures, bound) if len(figures) <= MAX_BARS else _histogram(figures, bound)


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
    order): its counts per status, its chart, and its rows, ordered fail, error, warn,
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
                    "chart": _chart(doc, check, rows),
                    "problems": [nr for nr in listed if nr[1]["status"] != "pass"],
                    "passing": [nr for nr in listed if nr[1]["status"] == "pass"],
                    "hidden": len(rows) - len(listed),
                    "only_problems": only_problems})
    out.sort(key=lambda sec: check_rank(sec["counts"]))
    return out


def verdict_class(node: Mapping[str, Any]) -> str:
    """The rack view's colour of a node: ``accept``, ``warn`` (accepted with warnings) or
    ``reject``.

    >>> [verdict_class({"verdict": v, "status": s})
    ...  for v, s in (("ACCEPT", "skip"), ("ACCEPT", "warn"), ("REJECT", "error"))]
    ['accept', 'warn', 'reject']
    """
    if node["verdict"] != "ACCEPT":
        return "reject"
    return "warn" if node["status"] == "warn" else "accept"


def _natural(text: str) -> list[Any]:
    """Sort key: r2 before r10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def place(node: Mapping[str, Any]) -> tuple[str, int] | None:
    """A node's (rack, U), or None when report.json gives none or a U outside 1-60.

    >>> place({"place": {"rack": "r1", "u": 38}}), place({"place": None}), place({})
    (('r1', 38), None, None)
    """
    p = node.get("place") or {}
    u = p.get("u")
    if not isinstance(u, int) or isinstance(u, bool) or not 1 <= u <= MAX_RACK_U:
        return None
    return str(p.get("rack", "")), u


def _tile(node: Mapping[str, Any], href: Callable[[Mapping[str, Any]], str]) -> dict[str, Any]:
    where = place(node)
    return {"name": node["name"], "verdict": node["verdict"], "colour": verdict_class(node),
            "href": href(node), "overridden": node.get("overridden", False),
            "location": node.get("location", ""),
            "title": "\n".join([f"{node['name']}: {node['verdict']}"
                                + (f" (rack {where[0]} U{where[1]})" if where else ""),
                                *node["reasons"]])}


def _rack(name: str, units: Sequence[tuple[int, Mapping[str, Any]]],
          href: Callable[[Mapping[str, Any]], str]) -> dict[str, Any]:
    by_u: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for u, n in units:
        by_u[u].append(n)
    height = max([RACK_MIN_U, *by_u])
    return {
        "name": name, "id": f"rack-{anchor(name)}", "height": height, "nodes": len(units),
        "rejected": sum(1 for _, n in units if n["verdict"] != "ACCEPT"),
        "units": [{"u": u, "slots": [_tile(n, href) for n in by_u.get(u, [])]}
                  for u in range(height, 0, -1)],
        "collisions": [{"u": u, "names": [n["name"] for n in ns]}
                       for u, ns in sorted(by_u.items()) if len(ns) > 1],
    }


def elevations(doc: Mapping[str, Any],
               href: Callable[[Mapping[str, Any]], str] = lambda n: "") -> dict[str, Any]:
    """The rack view: one elevation per rack (natural order of rack names), the nodes
    without a place as tiles, and what the fleet-size caps left out. ``href`` gives each
    node's link (its worst result)."""
    placed: dict[str, list[tuple[int, Mapping[str, Any]]]] = defaultdict(list)
    unplaced = []
    for n in doc["nodes"]:
        where = place(n)
        if where:
            placed[where[0]].append((where[1], n))
        else:
            unplaced.append(n)
    names = sorted(placed, key=_natural)
    accepted_racks = 0
    if len(names) > MAX_RACKS:
        rejecting = [r for r in names if any(n["verdict"] != "ACCEPT" for _, n in placed[r])]
        accepted_racks = len(names) - len(rejecting)
        names = rejecting
    tiles = unplaced if len(unplaced) <= MAX_TILES else \
        [n for n in unplaced if n["verdict"] != "ACCEPT"][:MAX_TILES]
    hidden = Counter(n["verdict"] for n in unplaced) - Counter(n["verdict"] for n in tiles)
    return {
        "racks": [_rack(r, placed[r], href) for r in names[:MAX_RACKS]],
        "racks_accepted_hidden": accepted_racks,
        "racks_rejecting_hidden": max(0, len(names) - MAX_RACKS),
        "unplaced": [_tile(n, href) for n in tiles],
        "unplaced_total": len(unplaced),
        "tiles_accepted_hidden": hidden["ACCEPT"],
        "tiles_rejected_hidden": hidden["REJECT"],
    }


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


def _node_links(doc: Mapping[str, Any], secs: Sequence[Mapping[str, Any]]
                ) -> Callable[[Mapping[str, Any]], str]:
    """A node's link: the row of its worst result (the first of its most severe status)
    where the table lists it, else that check's section ("" for a node without results)."""
    listed = {(sec["check"], n["name"]) for sec in secs
              for n, _ in [*sec["problems"], *sec["passing"]]}

    def href(node: Mapping[str, Any]) -> str:
        if not node["results"]:
            return ""
        worst = min(node["results"], key=lambda r: ROW_ORDER.get(r["status"], -1))["check"]
        if (worst, node["name"]) in listed:
            return "#" + row_id(worst, node["name"])
        return "#" + check_id(worst)
    return href


def render_html(doc: Mapping[str, Any]) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["row_id"] = row_id
    env.globals["figure"] = with_unit
    secs = sections(doc)
    return env.get_template("report.html.j2").render(
        doc=doc, sections=secs, max_racks=MAX_RACKS,
        rack=elevations(doc, _node_links(doc, secs)), heatmaps=heatmaps(doc))
