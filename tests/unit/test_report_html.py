"""The HTML report's rack elevations, per-check sections and charts, from report documents
built here with ``report_document`` (hand-made results; no run directory, no cluster)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from html.parser import HTMLParser
from typing import Any

import pytest

from rackgate.checks import load_profile
from rackgate.model import Result, Status, node_verdict, rack_verdict
from rackgate.reports import report_document
from rackgate.reports.anchors import anchor
from rackgate.reports.charts import LABEL_W, MAX_BARS, PLOT_W
from rackgate.reports.elevation import MAX_RACKS, elevations
from rackgate.reports.html import render_html
from rackgate.reports.sections import FULL_TABLE_RESULTS, MAX_ROWS

EVIL = '<script>alert("x")</script>'
MANIFEST = {"run_id": "html-1", "inventory": ["inv"], "group": "gpu", "started": "t0",
            "finished": "t1", "rackgate_version": "0", "ansible_core_version": "0"}
# (check, status, measured); fio.seq_read figures are MB/s, the demo profile's pass bound
# is 50 MB/s (ref 100 x min_ratio 0.5)
Spec = Sequence[tuple[str, Status, float | None]]


def document(nodes: Sequence[tuple[str, tuple[str, int] | None, Spec]]) -> dict[str, Any]:
    """report.json's dict for ``(name, (rack, u) or None, results)`` per node."""
    verdicts = [node_verdict(name, [Result(name, check, status, f"{check} {status.label}",
                                           measured, "MB/s" if measured is not None else "",
                                           evidence=f"evidence/{name}/{check}.out")
                                    for check, status, measured in spec])
                for name, _, spec in nodes]
    places = {name: {"rack": p[0], "u": p[1]} if p else None for name, p, _ in nodes}
    doc = report_document(rack_verdict(verdicts), MANIFEST, load_profile("demo"),
                          {name: f"rack {p[0]} u {p[1]}" if p else "" for name, p, _ in nodes},
                          {}, places=places)
    return json.loads(json.dumps(doc))  # what report.json holds


def ok(measured: float = 600.0) -> Spec:
    return [("fio.seq_read", Status.PASS, measured)]


class Page(HTMLParser):
    """The elements the tests look at: each rack's U labels and slots, the strip's tiles,
    the results rows (with whether they sit in a <details>), and the ids and links."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.racks: dict[str, list[tuple[int, list[dict[str, str]]]]] = {}
        self.tiles: list[dict[str, str]] = []
        self.rows: list[tuple[str, str, bool]] = []  # (section id, row id, folded)
        self.ids: list[str] = []
        self.toc: list[str] = []
        self.details_open: list[bool] = []
        self._stack: list[tuple[str, dict[str, str]]] = []
        self._rack = self._section = ""
        self._slot: dict[str, str] | None = None
        self._in_toc = False
        self.feed(html)

    def _inside(self, tag: str) -> bool:
        return any(t == tag for t, _ in self._stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "nav" and a.get("id") == "checks":
            self._in_toc = True
        if self._in_toc and tag == "a":
            self.toc.append(a["href"])
        if tag == "figure" and "elevation" in classes:
            self._rack = a["id"]
            self.racks[self._rack] = []
        if tag == "section" and "check" in classes:
            self._section = a["id"]
        if tag == "details":
            self.details_open.append("open" in a)
        if tag == "tr" and "data-status" in a:
            self.rows.append((self._section, a["id"], self._inside("details")))
        if "slot" in classes or "tile" in classes:
            self._slot = {"class": a["class"], "href": a.get("href", ""),
                          "title": a.get("title", ""), "text": ""}
            if "tile" in classes:
                self.tiles.append(self._slot)
            elif "v-empty" not in classes:
                self.racks[self._rack][-1][1].append(self._slot)
        if tag not in ("br", "input", "meta", "line", "rect"):
            self._stack.append((tag, a))

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            if self._stack.pop()[0] == tag:
                break
        if tag == "nav":
            self._in_toc = False
        if tag in ("a", "span", "div") and self._slot is not None and \
                not any("slot" in x.get("class", "").split()
                        or "tile" in x.get("class", "").split() for _, x in self._stack):
            self._slot = None

    def handle_data(self, data: str) -> None:
        if self._stack and self._stack[-1][1].get("class") == "u" and self._rack:
            self.racks[self._rack].append((int(data), []))
        elif self._slot is not None:
            self._slot["text"] += data


def test_each_rack_is_drawn_with_u1_at_the_bottom_and_nodes_at_their_units():
    doc = document([("n1", ("r10", 38), ok()), ("n2", ("r2", 1), ok()),
                    ("n3", ("r2", 20), ok()), ("n4", ("r10", 2), ok())])
    page = Page(render_html(doc))
    assert list(page.racks) == ["rack-r2", "rack-r10"]  # natural order, not r10 < r2
    # sized to the nodes present: the highest U used to the lowest, long gaps folded
    assert [u for u, _ in page.racks["rack-r10"]] == [38, 2]
    assert [u for u, _ in page.racks["rack-r2"]] == [20, 1]
    where = {s["text"]: (rack, u) for rack, units in page.racks.items()
             for u, slots in units for s in slots}
    assert where == {"n1": ("rack-r10", 38), "n2": ("rack-r2", 1), "n3": ("rack-r2", 20),
                     "n4": ("rack-r10", 2)}
    caption = render_html(doc).split('id="rack-r2"')[1].split("</figcaption>")[0]
    assert "2 nodes" in caption and "U1&ndash;U20 of a 42U rack" in caption


def test_a_rack_is_as_tall_as_its_highest_unit_above_42():
    (rack,) = elevations(document([("n1", ("r1", 48), ok()), ("n2", ("r1", 3), ok()),
                                   ("n3", ("r1", 5), ok())]))["racks"]
    assert rack["height"] == 48 and rack["basis"] == "its highest U used"
    assert [u.get("u") for u in rack["units"]] == [48, None, 5, 4, 3]
    assert rack["units"][1] == {"gap": True, "top": 47, "bottom": 6, "count": 42}


def test_two_nodes_on_one_unit_are_both_drawn_and_the_clash_is_written_out():
    doc = document([("n1", ("r1", 34), ok()), ("n2", ("r1", 34), ok()), ("n3", ("r1", 33), ok())])
    html = render_html(doc)
    units = dict(Page(html).racks["rack-r1"])
    assert [s["text"].strip() for s in units[34]] == ["\u26a0 n1", "\u26a0 n2"]
    assert [s["text"] for s in units[33]] == ["n3"]
    assert "U34 claimed by 2 nodes: n1, n2" in html
    assert html.count("claimed by") == 1
    assert re.search(r'<div class="unit clash"><span class="u">34</span>', html)


def test_nodes_without_a_place_are_tiles_in_the_no_rack_position_strip():
    doc = document([("n1", ("r1", 5), ok()), ("n2", None, [("fio.seq_read", Status.FAIL, 1.0)])])
    page = Page(render_html(doc))
    assert [s["text"] for _, slots in page.racks["rack-r1"] for s in slots] == ["n1"]
    assert len(page.tiles) == 1 and "n2" in page.tiles[0]["text"]
    assert "v-reject" in page.tiles[0]["class"] and "no-rack-position" in page.ids
    without_any = render_html(document([("n1", ("r1", 5), ok())]))
    assert "No rack position" not in without_any


def test_slots_are_coloured_by_verdict_and_the_legend_names_each_colour():
    doc = document([("good", ("r1", 1), ok()),
                    ("warned", ("r1", 2), [("fio.seq_read", Status.WARN, 60.0)]),
                    ("bad", ("r1", 3), [("fio.seq_read", Status.FAIL, 10.0)]),
                    ("broken", ("r1", 4), [("fio.seq_read", Status.ERROR, None)]),
                    ("skipped", ("r1", 5), [("fio.seq_read", Status.SKIP, None)])])
    html = render_html(doc)
    colour = {s["text"]: s["class"].split()[-1] for _, slots in Page(html).racks["rack-r1"]
              for s in slots}
    assert colour == {"good": "v-accept", "warned": "v-warn", "bad": "v-reject",
                      "broken": "v-reject", "skipped": "v-reject"}  # skips prove nothing
    legend = html.split('id="rack-legend"')[1].split("</p>")[0]
    keys = re.findall(r'<span class="swatch (v-\w+)[^"]*"></span>([^<]+)</span>', legend)
    assert keys == [("v-accept", "ACCEPT"), ("v-warn", "ACCEPT with warnings"),
                    ("v-reject", "REJECT"), ("v-empty", "empty U")]
    assert "two nodes claim one U" in legend
    css = html.split("<style>")[1].split("</style>")[0]
    for cls in ("v-accept", "v-warn", "v-reject", "v-empty"):
        assert re.search(rf"\.{cls} {{ background: ", css), cls


def test_a_slot_links_to_its_nodes_worst_result_and_its_title_gives_the_reasons():
    doc = document([("n1", ("r1", 7), [("fio.seq_read", Status.PASS, 600.0),
                                       ("fio.seq_write", Status.FAIL, 3.0)])])
    page = Page(render_html(doc))
    (slot,) = [s for _, slots in page.racks["rack-r1"] for s in slots]
    assert slot["href"] == "#check-fio.seq_write:n1"
    assert slot["href"][1:] in page.ids
    assert "n1: REJECT (rack r1 U7)" in slot["title"]
    assert "fio.seq_write: fail: fio.seq_write fail" in slot["title"]
    skipped = document([("n2", ("r1", 8), [("fio.seq_read", Status.SKIP, None),
                                           ("fio.seq_write", Status.SKIP, None)])])
    (slot,) = [s for _, slots in Page(render_html(skipped)).racks["rack-r1"] for s in slots]
    assert "v-reject" in slot["class"] and slot["href"] == "#check-fio.seq_read:n2"


def test_past_max_racks_only_racks_with_a_rejected_node_are_drawn_and_the_rest_counted():
    nodes = [(f"n{i:03d}", (f"r{i}", 1), ok() if i % 7 else [("fio.seq_read", Status.FAIL, 1.0)])
             for i in range(MAX_RACKS + 30)]
    rejecting = [n for n, _, spec in nodes if spec[0][1] is Status.FAIL]
    html = render_html(document(nodes))
    page = Page(html)
    assert len(page.racks) == len(rejecting) <= MAX_RACKS
    assert f"{len(nodes) - len(rejecting)} rack(s) with every node accepted not drawn" in html
    few = render_html(document(nodes[:MAX_RACKS]))
    assert len(Page(few).racks) == MAX_RACKS and "not drawn" not in few


def test_past_max_racks_rejecting_racks_beyond_the_cap_are_counted():
    nodes = [(f"n{i:03d}", (f"r{i}", 1), [("fio.seq_read", Status.FAIL, 1.0)])
             for i in range(MAX_RACKS + 5)]
    html = render_html(document(nodes))
    assert len(Page(html).racks) == MAX_RACKS
    assert "5 more rack(s) with a rejected node not drawn" in html


def median_line(html: str, check: str) -> tuple[float, str]:
    svg = html.split(f'id="check-{check}"')[1].split("</svg>")[0]
    line = re.search(r'<line class="median" x1="([\d.]+)"', svg)
    label = re.search(r'<text class="median"[^>]*>([^<]+)</text>', svg)
    assert line and label, svg[:500]
    return float(line.group(1)), label.group(1)


def test_the_peer_median_line_is_drawn_at_the_median_of_the_bars():
    figures = [100.0, 200.0, 300.0, 1000.0]  # median 250, whatever the order
    doc = document([(f"n{i}", None, ok(v)) for i, v in enumerate(reversed(figures))])
    x, label = median_line(render_html(doc), "fio.seq_read")
    assert label == "peer median 250 MB/s"
    assert x == pytest.approx(LABEL_W + PLOT_W * 250 / (1000 * 1.1), abs=0.05)


def test_the_histogram_of_a_large_check_has_the_peer_median_line_too():
    n = MAX_BARS * 2 + 1
    doc = document([(f"n{i:03d}", None, ok(1000.0 + 10 * i)) for i in range(n)])
    html = render_html(doc)
    assert f"histogram of {n} nodes" in html
    x, label = median_line(html, "fio.seq_read")
    lo, hi = 50.0, 1000.0 + 10 * (n - 1)  # the histogram's span includes the 50 MB/s bound
    assert label == "peer median 1,600 MB/s"  # the 61st of 121 figures
    assert x == pytest.approx(LABEL_W + PLOT_W * (1600 - lo) / (hi - lo), abs=0.05)


def test_chart_figures_are_written_with_separators_never_in_scientific_notation():
    doc = document([("n1", None, ok(19810.4)), ("n2", None, ok(19850.0))])
    html = render_html(doc)
    svg = html.split('id="check-fio.seq_read"')[1].split("</svg>")[0]
    assert ">19,810 MB/s</text>" in svg and ">19,850 MB/s</text>" in svg
    assert "pass at &ge; 50 MB/s" in svg and "peer median 19,830 MB/s" in svg
    assert "e+0" not in html


def test_every_check_has_an_anchor_and_the_table_of_contents_links_to_it_with_counts():
    doc = document([("n1", None, [("fio.seq_read", Status.PASS, 600.0),
                                  ("fio.seq_write", Status.FAIL, 3.0)]),
                    ("n2", None, [("fio.seq_read", Status.WARN, 60.0),
                                  ("fio.seq_write", Status.PASS, 600.0)])])
    html = render_html(doc)
    page = Page(html)
    assert page.toc == ["#check-fio.seq_write", "#check-fio.seq_read"]
    for href in page.toc:
        assert page.ids.count(href[1:]) == 1
    toc = html.split('<nav id="checks">')[1].split("</nav>")[0]
    row = toc.split('href="#check-fio.seq_read"')[1].split("</tr>")[0]
    cells = re.findall(r'<td class="num[^"]*">(.*?)</td>', row)
    assert [re.sub(r"<[^>]+>", "", c) for c in cells] == ["0", "0", "1", "0", "1"]
    assert re.findall(r'<th class="num">(\w+)</th>', toc) == ["fail", "error", "warn", "skip",
                                                            "pass"]


def test_sections_go_failures_first_then_warnings_then_passes_then_skips():
    doc = document([("n1", None, [("fio.seq_read", Status.SKIP, None),
                                  ("fio.seq_write", Status.PASS, 600.0),
                                  ("fio.rand_read", Status.WARN, 600.0),
                                  ("fio.checkpoint", Status.PASS, 600.0),
                                  ("mpi.allreduce", Status.ERROR, None)]),
                    ("n2", None, [("fio.seq_read", Status.SKIP, None),
                                  ("fio.seq_write", Status.PASS, 600.0),
                                  ("fio.rand_read", Status.PASS, 600.0),
                                  ("fio.checkpoint", Status.FAIL, 1.0),
                                  ("mpi.allreduce", Status.PASS, 1.0)])])
    sections = [i for i in Page(render_html(doc)).ids if re.fullmatch(r"check-[\w.]+", i)]
    assert sections == ["check-fio.checkpoint", "check-mpi.allreduce", "check-fio.rand_read",
                        "check-fio.seq_write", "check-fio.seq_read"]


def test_rows_go_fail_error_warn_skip_pass_and_the_passes_are_folded_closed():
    statuses = [Status.PASS, Status.WARN, Status.ERROR, Status.PASS, Status.SKIP, Status.FAIL,
                Status.PASS]
    doc = document([(f"n{i}", None, [("fio.seq_read", s, None)]) for i, s in enumerate(statuses)])
    html = render_html(doc)
    page = Page(html)
    rows = [(row, folded) for sec, row, folded in page.rows if sec == "check-fio.seq_read"]
    assert rows == [("check-fio.seq_read:n5", False), ("check-fio.seq_read:n2", False),
                    ("check-fio.seq_read:n1", False), ("check-fio.seq_read:n4", False),
                    ("check-fio.seq_read:n0", True), ("check-fio.seq_read:n3", True),
                    ("check-fio.seq_read:n6", True)]
    assert page.details_open == [False]
    assert "<summary>3 passing nodes</summary>" in html


def test_a_check_with_no_pass_has_no_fold():
    doc = document([("n1", None, [("fio.seq_read", Status.FAIL, 1.0)])])
    page = Page(render_html(doc))
    assert page.details_open == [] and page.rows == [("check-fio.seq_read",
                                                      "check-fio.seq_read:n1", False)]


def test_anchors_of_names_that_are_not_plain_are_plain_and_distinct():
    names = ["a b", "a_b", "a<b", EVIL, "gpu01"]
    ids = [anchor(n) for n in names]
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", i) for i in ids)
    assert len(set(ids)) == len(names) and ids[-1] == "gpu01"


def test_hostile_node_and_rack_names_are_escaped_everywhere():
    doc = document([(EVIL, (EVIL, 3), [("fio.seq_read", Status.FAIL, 1.0)]),
                    ("n2", None, ok())])
    doc["nodes"][1]["name"] = f'n2"{EVIL}'  # a value breaking out of an attribute, too
    html = render_html(doc)
    assert EVIL not in html and "<script>alert" not in html
    assert "&lt;script&gt;alert" in html
    page = Page(html)
    (rack,) = page.racks
    assert rack == f"rack-{anchor(EVIL)}"
    (slot,) = [s for _, slots in page.racks[rack] for s in slots]
    assert slot["text"] == EVIL and slot["href"] == f"#check-fio.seq_read:{anchor(EVIL)}"
    assert page.tiles[0]["text"].strip().startswith(f'n2"{EVIL}')


def rows_of(doc: Mapping[str, Any]) -> int:
    return sum(len(n["results"]) for n in doc["nodes"])


def test_a_large_placed_fleet_draws_the_racks_with_rejected_nodes_and_stays_small():
    nodes = []
    for i in range(3000):
        rack, u = f"r{i // 40:03d}", i % 40 + 1
        bad = i % 1000 == 7
        nodes.append((f"gpu{i:05d}", (rack, u), [("fio.seq_read", Status.FAIL if bad
                                                  else Status.PASS, 10.0 if bad else 600.0)]))
    doc = document(nodes)
    assert rows_of(doc) == 3000
    html = render_html(doc)
    page = Page(html)
    assert sorted(page.racks) == ["rack-r000", "rack-r025", "rack-r050"]
    assert "72 rack(s) with every node accepted not drawn" in html
    assert [r for _, r, _ in page.rows] == [f"check-fio.seq_read:gpu{i:05d}"
                                            for i in (7, 1007, 2007)]
    assert page.details_open == [] and len(html) < 300_000


def test_past_max_rows_the_problems_are_kept_and_the_cut_passes_counted():
    n = MAX_ROWS + 100
    doc = document([(f"n{i:04d}", None, [("fio.seq_read", Status.FAIL if i >= n - 3
                                          else Status.PASS, None)]) for i in range(n)])
    assert rows_of(doc) <= FULL_TABLE_RESULTS
    html = render_html(doc)
    rows = Page(html).rows
    assert len(rows) == MAX_ROWS
    assert [r for _, r, folded in rows[:3] if not folded] == [
        f"check-fio.seq_read:n{i:04d}" for i in range(n - 3, n)]
    assert all(folded for _, _, folded in rows[3:])
    assert f"<summary>{MAX_ROWS - 3} passing nodes</summary>" in html
    assert "100 more result(s) of fio.seq_read are in report.json" in html
