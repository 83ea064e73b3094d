"""The node-pair heatmap: report.json's optional ``pairwise[]`` and its HTML rendering."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from rackgate.checks import load_profile
from rackgate.checks.shared.pairs import (
    judge_pairwise,
    line_rate_threshold,
    node_results,
    round_robin,
)
from rackgate.model import Result, Status, node_verdict, rack_verdict
from rackgate.profile import Hardware, NicSpec
from rackgate.reports import report_document
from rackgate.reports.heatmap import heat_colour
from rackgate.reports.html import render_html

NDR = Hardware(nics=[NicSpec(role="compute", count=8, rate_gbps=400, link_layer="InfiniBand",
                             source="DGX H100/H200 User Guide, Table 1 (test copy)")])
EVIL = '<script>alert("x")</script>'


def matrix(nodes, bad=None, missing=()):
    measured: dict[tuple[str, str], float | None] = {}
    for rnd in round_robin(nodes):
        for a, b in rnd:
            measured[(a, b)] = 193.4 if bad in (a, b) else 391.0 - len(measured) % 5 * 0.7
    for pair in missing:
        measured.pop(pair, None)
    return judge_pairwise(nodes, measured, line_rate_threshold(NDR),
                          evidence={k: f"evidence/pairs/{k[0]}-{k[1]}.out" for k in measured})


def report(m, extra_nodes=()):
    results = node_results(m)
    by = {n: [r for r in results if r.node == n] for n in m.nodes}
    for n in extra_nodes:
        by[n] = [Result(n, "fio.seq_read", Status.PASS, "ok", 1.0, "MB/s")]
    rack = rack_verdict(node_verdict(n, rs) for n, rs in by.items())
    doc = report_document(rack, {"run_id": "pairs-1", "inventory": ["inv"], "group": "gpu",
                           "started": "t0", "finished": "t1", "rackgate_version": "0",
                           "ansible_core_version": "0"},
                          load_profile("demo"), {}, {}, pairwise=[m.to_doc()])
    return json.loads(json.dumps(doc))  # what report.json holds


class Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.titles: list[str] = []
        self.fills: list[str] = []
        self._in_rect = False

    def handle_starttag(self, tag, attrs):
        if tag == "rect" and self._heat:
            self.fills.append(dict(attrs)["fill"] or "")
            self._in_rect = True
        if tag == "svg":
            self._heat = "heatmap" in (dict(attrs).get("class") or "")

    def handle_endtag(self, tag):
        if tag == "rect":
            self._in_rect = False

    def handle_data(self, data):
        if self._in_rect:
            self.titles.append(data)

    _heat = False


def test_no_pairwise_section_without_a_matrix():
    m = matrix(["a", "b"])
    doc = report(m)
    del doc["pairwise"]
    assert "Node pairs" not in render_html(doc)
    rack = rack_verdict([node_verdict("a", node_results(m)[:1])])
    assert "pairwise" not in report_document(rack, {"run_id": "x"}, load_profile("demo"), {}, {})


def test_healthy_matrix_all_green_no_weak_link():
    nodes = [f"gpu{i:02d}" for i in range(8)]
    doc = report(matrix(nodes))
    assert doc["pairwise"][0]["status"] == "pass" and doc["verdict"] == "ACCEPT"
    html = render_html(doc)
    p = Cells()
    p.feed(html)
    assert len(p.titles) == 64 and len(p.fills) == 64  # N x N, diagonal included
    assert all(fill.startswith("#") for fill in p.fills)
    assert sum("itself" in t for t in p.titles) == 8
    assert "No weak link" in html and "Likely culprit" not in html
    assert any(t.startswith("gpu00 <-> gpu07: 39") and t.endswith("line rate (pass)")
               for t in p.titles)


def test_one_bad_node_named_under_the_heatmap():
    nodes = [f"gpu{i:02d}" for i in range(8)]
    m = matrix(nodes, bad="gpu05", missing=[("gpu00", "gpu01")])
    doc = report(m)
    pw = doc["pairwise"][0]
    assert pw["culprit"] == "gpu05" and len(pw["weak"]) == 7 and pw["status"] == "error"
    assert doc["verdict"] == "REJECT"
    html = render_html(doc)
    p = Cells()
    p.feed(html)
    bad = [t for t in p.titles if "gpu05" in t and "itself" not in t]
    assert len(bad) == 14 and all("193.4 Gb/s, 48.4% of 400 Gb/s line rate (fail)" in t
                                  for t in bad)
    assert sum("no measurement (error)" in t for t in p.titles) == 2  # both halves of the cell
    assert "Likely culprit: gpu05" in html
    weak_table = html.split('class="results weak-links"')[1].split("</table>")[0]
    rows = re.findall(r"<tr data-status=\"(\w+)\">\s*<td>([^<]+)</td>", weak_table)
    assert [s for s, _ in rows] == ["fail"] * 7 + ["error"]
    assert all("gpu05" in pair for _, pair in rows[:7])
    assert "193.4 Gb/s" in weak_table and "&ge; 360 Gb/s" in weak_table and "48.4%" in weak_table
    assert "evidence/pairs/" in weak_table
    red, green = heat_colour(48.4, 90, "fail"), heat_colour(97.8, 90, "pass")
    assert red in p.fills and green != red


def test_names_are_escaped_and_large_matrices_stay_drawable():
    nodes = [f"n{i}" for i in range(63)] + [EVIL]
    doc = report(matrix(nodes, bad=EVIL))
    html = render_html(doc)
    assert EVIL not in html and "&lt;script&gt;" in html
    p = Cells()
    p.feed(html)
    assert len(p.fills) == 64 * 64
    assert re.search(r'<svg class="heatmap" width="(\d+)"', html)
    width = int(re.search(r'<svg class="heatmap" width="(\d+)"', html).group(1))  # type: ignore[union-attr]
    assert width < 1000


def test_with_a_fabric_plan_the_matrix_is_tabled_by_hop_class():
    from rackgate.checks import REGISTRY
    from rackgate.fabric.design import design

    plan = design(8, 1, 8, host_format="gpu{:02d}")  # SUs gpu01-04 and gpu05-08
    m = matrix([f"gpu{i:02d}" for i in range(1, 9)], bad="gpu05")
    pairwise = REGISTRY["fabric.pairwise_bw"]
    assert pairwise.plan_section is not None
    section = pairwise.plan_section(m.to_doc(), pairwise.params_model(), plan)
    results = node_results(m)
    rack = rack_verdict(node_verdict(n, [r for r in results if r.node == n]) for n in m.nodes)
    doc = json.loads(json.dumps(report_document(
        rack, {"run_id": "pairs-2", "inventory": ["inv"], "group": "gpu", "started": "t0",
               "finished": "t1", "rackgate_version": "0", "ansible_core_version": "0"},
        load_profile("demo"), {}, {}, pairwise=[section])))
    classes = {c["hop_class"]: c for c in doc["pairwise"][0]["hop_classes"]}
    assert (classes["same leaf"]["pairs"], classes["across a spine"]["pairs"]) == (12, 16)
    assert classes["across a spine"]["min_gbps"] == 193.4
    html = render_html(doc)
    assert "By hop class on the fabric plan" in html
    assert re.search(r"<td>across a spine</td>\s*<td class=\"num\">16</td>", html)
