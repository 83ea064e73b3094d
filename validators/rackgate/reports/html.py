"""The HTML report: one self-contained file (inline CSS, SVG and a few lines of JS, no
CDN, no external fonts), verdict first (with the overrides files it was judged with, when
any), then a table of contents of the checks, the rack
elevations, the node-pair heatmaps, and one section per check (failures first), the
thresholds every override changed (old and new, what it loosens, its basis), and the
thresholds with their basis. Every value is escaped by Jinja2's autoescape.

The banner says the verdict (an ACCEPT with how many warnings), then its reasons each once
(rackgate.reports.reasons: a rack component's fault or a node that did not answer is one
line naming the nodes and checks), and for an ACCEPT the warnings, grouped the same way.
Every evidence path is a link to the file, relative to the report (``evidence_base``: the
run directory from where the report is written). A check judging several metrics shows
each in its rows (the failing one first) and in a chart of its own.

Each part is built from the report document alone by its own module: the rack view by
rackgate.reports.elevation, the heatmaps by rackgate.reports.heatmap, the checks' sections
(with their charts, rackgate.reports.charts) by rackgate.reports.sections, their ids by
rackgate.reports.anchors; this module links each node of the rack view to its worst
result and renders ``templates/report.html.j2``.

A fleet-sized run stays readable and small: past ``FULL_TABLE_RESULTS`` results the tables
list only what is not ``pass`` (at most ``MAX_ROWS`` per check), past ``MAX_BARS`` nodes a
check's chart becomes a histogram, past ``MAX_RACKS`` racks only the racks with a rejected
node are drawn (at most ``MAX_RACKS``), and past ``MAX_TILES`` nodes without a place the
strip shows the rejected ones only. Each cut says what it left out; report.json always has
everything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import jinja2

from rackgate.figures import with_unit
from rackgate.reports import changed_thresholds, named, overrides_files, shown_metrics
from rackgate.reports.anchors import check_id, row_id
from rackgate.reports.diff_render import FILTERS
from rackgate.reports.elevation import MAX_RACKS, elevations
from rackgate.reports.heatmap import heatmaps
from rackgate.reports.reasons import of_doc
from rackgate.reports.sections import ROW_ORDER, sections

_TEMPLATES = Path(__file__).parent / "templates"


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


def evidence_href(base: str) -> Callable[[str], str]:
    """An evidence file's link from the report: its path (relative to the run directory)
    under ``base`` (the run directory relative to the report's), every character a URL
    could take for a scheme or query escaped; "" for a path that is not a plain relative
    one inside the run directory (it is then shown, not linked).

    >>> href = evidence_href("../runs/r1")
    >>> href("evidence/n1/fio.seq_read.out"), href("evidence/n 1/a:b#c?.out")
    ('../runs/r1/evidence/n1/fio.seq_read.out', '../runs/r1/evidence/n%201/a%3Ab%23c%3F.out')
    >>> evidence_href("")("javascript:alert(1)"), href("/etc/passwd"), href("../x")
    ('javascript%3Aalert%281%29', '', '')
    """
    def href(path: str) -> str:
        p = PurePosixPath(path)
        if p.is_absolute() or ".." in p.parts or "\\" in path or not p.parts:
            return ""
        return quote(f"{base.rstrip('/')}/{p}" if base else str(p))
    return href


def render_html(doc: Mapping[str, Any], evidence_base: str = "") -> str:
    """The HTML report of ``doc``; its evidence links lead to ``evidence_base`` (the run
    directory, relative to where the report is written: "" when it is written there)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["row_id"] = row_id
    env.globals["figure"] = with_unit
    env.globals["named"] = named
    env.globals["metrics"] = shown_metrics
    env.globals["evidence_href"] = evidence_href(evidence_base)
    env.filters.update(FILTERS)  # the diff section's (a report judged with --compare)
    secs = sections(doc)
    return env.get_template("report.html.j2").render(
        doc=doc, sections=secs, max_racks=MAX_RACKS,
        rack=elevations(doc, _node_links(doc, secs)), heatmaps=heatmaps(doc),
        diff=doc.get("diff"), changed=changed_thresholds(doc), reasons=banner_reasons(doc),
        warned=doc["summary"]["results"].get("warn", 0), overrides=overrides_files(doc),
        warnings=[r.text for r in of_doc(doc, ("warn",), rejected=False)[0]])


def banner_reasons(doc: Mapping[str, Any]) -> list[str]:
    """The verdict's reasons as the banner lists them: each once (``rack_reasons``), or as
    a report written before they were grouped has them."""
    grouped = doc.get("rack_reasons")
    return [r["text"] for r in grouped] if grouped is not None else list(doc["reasons"])
