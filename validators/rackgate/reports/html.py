"""The HTML report: one self-contained file (inline CSS, SVG and a few lines of JS, no
CDN), verdict first, then the rack view, one table and one bar chart per check, and the
thresholds with their basis. Every value is escaped by Jinja2's autoescape.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from rackgate.reports import checks_in

_TEMPLATES = Path(__file__).parent / "templates"

BAR_H, BAR_GAP, LABEL_W, PLOT_W = 22, 6, 170, 520


def _chart(doc: Mapping[str, Any], check: str) -> dict[str, Any] | None:
    """Bar geometry for one check: one bar per node that has a measured figure."""
    rows = [(n["name"], r) for n in doc["nodes"] for r in n["results"]
            if r["check"] == check]
    bars = [(name, r) for name, r in rows if isinstance(r["measured"], int | float)]
    if not bars:
        return None
    thresholds = doc["profile"]["checks"].get(check, {}).get("thresholds", {})
    bounds = [t["ref"] * t["min_ratio"] for t in thresholds.values() if t.get("min_ratio")]
    bound = min(bounds) if bounds else None
    top = max([r["measured"] for _, r in bars] + ([bound] if bound else [])) * 1.1 or 1.0
    return {
        "height": len(bars) * (BAR_H + BAR_GAP) + 30,
        "width": LABEL_W + PLOT_W + 90,
        "label_w": LABEL_W,
        "bar_h": BAR_H,
        "unit": bars[0][1]["unit"],
        "bars": [{"node": name, "value": r["measured"], "status": r["status"],
                  "y": i * (BAR_H + BAR_GAP) + 4,
                  "w": max(1.0, PLOT_W * r["measured"] / top)} for i, (name, r) in
                 enumerate(bars)],
        "bound": bound,
        "bound_x": LABEL_W + PLOT_W * bound / top if bound else None,
    }


def render_html(doc: Mapping[str, Any]) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    checks = checks_in(doc)
    return env.get_template("report.html.j2").render(
        doc=doc,
        checks=checks,
        charts={c: _chart(doc, c) for c in checks},
    )
