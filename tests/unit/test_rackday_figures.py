"""Issue 30, items 4, 8 and 14, through the report writers on stored runs judged offline:
the figure that failed is the figure shown (per metric in every table, one chart per
metric in its own unit and bound), a reason shared by several nodes or checks said once,
and the HTML report's evidence links, rack elevation and healthy banner."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from stored_runs import write_run
from test_cooling_exporter import DirFetcher

from rackgate.checks import load_profile
from rackgate.cli.main import main
from rackgate.inventory import parse_inventory_json
from rackgate.model import Result, Status, node_verdict, rack_verdict
from rackgate.programs import redfish as collector
from rackgate.reports import report_document
from rackgate.reports.html import render_html
from rackgate.run import judge_run
from rackgate.store.evidence import EvidenceStore

MOCKUPS = Path(__file__).parents[1] / "fixtures" / "redfish"
DEMO = load_profile("demo")
MANIFEST = {"run_id": "rackday-1", "inventory": ["inv"], "group": "compute", "started": "t0",
            "finished": "t1", "rackgate_version": "0", "ansible_core_version": "0"}


def cooling(scenario: str) -> str:
    """The cooling.cdu evidence the collector prints for a mockup (healthy, leak, flow-low)."""
    found = collector.walk_cooling(DirFetcher(MOCKUPS / scenario), "1")
    return json.dumps({"collector": "rackgate.redfish", "kind": "cooling", "resources": found})


def cdu_run(tmp_path: Path, scenario: str, nodes: tuple[str, ...] = ("n1", "n2")) -> Path:
    return write_run(tmp_path / "runs" / f"cdu-{scenario}", DEMO, ["cooling.cdu"],
                     [(n, f"rack r1 u {i + 1}", {}) for i, n in enumerate(nodes)],
                     evidence={(n, "cooling.cdu"): cooling(scenario) for n in nodes},
                     argv=("python3",))


def section(html: str, check: str) -> str:
    return html.split(f'<section class="check" id="check-{check}"')[1].split("</section>")[0]


def cells(row: str) -> list[str]:
    """A table row's cells as text (tags dropped, whitespace collapsed)."""
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", c)).split())
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


# ------------------------------------------------------------------- item 4


def test_rackday_4_the_failing_metric_is_the_figure_shown_in_every_report(tmp_path, capsys):
    """cooling.cdu on the flow-low mockup: the supply temperature passes (32 C <= 45 C),
    the flow fails (40 L/min, floor 120 L/min). Every table shows the flow first, with its
    own band and status; the JSON result carries each metric."""
    run = cdu_run(tmp_path, "flow-low")
    outcome = judge_run(run)
    doc = json.loads(outcome.report_json.read_text())
    (result,) = doc["nodes"][0]["results"]
    assert result["status"] == "fail"
    metrics = {m["metric"]: m for m in result["metrics"]}
    assert metrics["flow_lpm"] == {"metric": "flow_lpm", "status": "fail", "measured": 40.0,
                                   "unit": "L/min", "lower": 120.0, "upper": None,
                                   "expected": ">= 120 L/min (0.8 x 150 L/min)"}
    assert metrics["supply_temp_c"]["status"] == "pass"
    assert metrics["supply_temp_c"]["measured"] == 32.0 and metrics["supply_temp_c"]["upper"] == 45

    row = section(outcome.report_html.read_text(), "cooling.cdu").split("<tbody>")[1]
    measured, expected = cells(row.split("</tr>")[0])[3:5]
    assert measured.startswith("flow_lpm 40 L/min fail"), measured
    assert expected.startswith("flow_lpm >= 120 L/min"), expected

    summary = outcome.reports.summary.read_text()
    (line,) = [x for x in summary.splitlines() if x.startswith("| 2 nodes: n1, n2 |")]
    cols = [c.strip() for c in line.split(" | ")]
    assert cols[4].startswith("flow_lpm 40 L/min (fail); supply_temp_c 32 C"), cols
    assert cols[5].startswith("flow_lpm >= 120 L/min"), cols

    junit = outcome.reports.junit.read_text()
    assert "metric flow_lpm: FAIL 40 L/min, expected &gt;= 120 L/min" in junit

    assert main(["judge", str(run)]) == 1
    out = capsys.readouterr().out
    assert "flow_lpm 40 L/min (fail)" in out and "flow_lpm >= 120 L/min" in out


def test_rackday_4_each_metric_has_its_own_chart_with_its_unit_and_bound(tmp_path):
    html = judge_run(cdu_run(tmp_path, "flow-low")).report_html.read_text()
    sec = section(html, "cooling.cdu")
    titles = re.findall(r'<h4 class="chart-title">([^<]+)</h4>', sec)
    assert titles == ["supply_temp_c (C)", "flow_lpm (L/min)", "return_temp_c (C)"]
    charts = dict(zip(titles, sec.split('<h4 class="chart-title">')[1:], strict=True))
    flow, supply = charts["flow_lpm (L/min)"], charts["supply_temp_c (C)"]
    assert "pass at &ge; 120 L/min" in flow and ">40 L/min</text>" in flow
    assert "pass at &le; 45 C" in supply and ">32 C</text>" in supply
    assert "pass at &le; 60 C" in charts["return_temp_c (C)"]
    # never the flow floor labelled in degrees, as one chart over every metric drew it
    assert not re.search(r"pass at &ge; [\d,.]+ C<", html)


def test_rackday_4_a_check_of_one_figure_keeps_its_one_chart(tmp_path, fixture_text):
    """Control: fio.seq_read (one metric) has one untitled chart with its floor, and its
    rows show the result's own figure."""
    run = write_run(tmp_path / "runs" / "fio", DEMO, ["fio.seq_read"], ["n1", "n2"],
                    evidence={(n, "fio.seq_read"): fixture_text("fio/seq-read-healthy.json")
                              for n in ("n1", "n2")}, argv=("fio",))
    outcome = judge_run(run)
    sec = section(outcome.report_html.read_text(), "fio.seq_read")
    assert sec.count("<svg") == 1 and "chart-title" not in sec
    assert "pass at &ge; 50 MB/s" in sec
    assert "metrics" not in json.loads(outcome.report_json.read_text())["nodes"][0]["results"][0]


# ------------------------------------------------------------------- item 8


def test_rackday_8_a_cdu_leak_is_one_reason_naming_the_nodes_it_affects(tmp_path, capsys):
    nodes = ("n1", "n2", "n3")
    run = cdu_run(tmp_path, "leak", nodes)
    assert main(["judge", str(run)]) == 1
    out = capsys.readouterr().out
    reasons = [line for line in out.splitlines() if line.startswith("  - ")]
    assert len(reasons) == 1, reasons
    assert reasons[0].startswith("  - cooling.cdu: fail: LEAK: detector Drip Tray Leak Detector")
    assert reasons[0].endswith("(on 3 nodes: n1, n2, n3)")

    doc = json.loads((run / "report.json").read_text())
    (grouped,) = doc["rack_reasons"]
    assert grouped["checks"] == ["cooling.cdu"] and grouped["status"] == "fail"
    assert [n["name"] for n in grouped["nodes"]] == list(nodes)
    assert grouped["nodes"][0]["location"] == "rack r1 u 1"
    # the evidence per node is all still there
    assert len(doc["reasons"]) == 3
    assert [len(n["results"]) for n in doc["nodes"]] == [1, 1, 1]

    html = (run / "report.html").read_text()
    banner = html[: html.index("</header>")]
    assert banner.count("<li>") == 1 and "on 3 nodes: n1, n2, n3" in banner
    rows = [x for x in (run / "summary.md").read_text().splitlines()
            if x.startswith("| ") and "cooling.cdu" in x]
    assert len(rows) == 1 and rows[0].startswith("| 3 nodes: n1, n2, n3 |"), rows


def unreachable_run(tmp_path: Path, fixture_text: Any) -> Path:
    """n1 healthy; n2 did not answer (the same Ansible message for each of its checks)."""
    checks = ["fio.seq_read", "fio.seq_write", "fio.rand_read"]
    fixtures = {"fio.seq_read": "fio/seq-read-healthy.json",
                "fio.seq_write": "fio/seq-write-healthy.json",
                "fio.rand_read": "fio/rand-read-4k-qd32-healthy.json"}
    run = write_run(tmp_path / "runs" / "down", DEMO, checks,
                    [("n1", "rack r1 u 1", {}), ("n2", "rack r1 u 2", {})],
                    evidence={("n1", c): fixture_text(f) for c, f in fixtures.items()},
                    argv=("fio",))
    store = EvidenceStore(run)
    for c in checks:
        store.write("n2", c, "", argv=("fio",), outcome="unreachable", rc=None, started=None,
                    ended=None, duration_s=None, stderr="",
                    message="Failed to connect to the host via ssh: ssh: connect to host n2 "
                            "port 22: Connection refused")
    return run


def test_rackday_8_an_unreachable_node_is_one_reason_not_one_per_check(tmp_path, fixture_text,
                                                                        capsys):
    run = unreachable_run(tmp_path, fixture_text)
    assert main(["judge", str(run)]) == 1
    out = capsys.readouterr().out
    reasons = [line for line in out.splitlines() if line.startswith("  - ")]
    assert reasons == ["  - n2 (rack r1 u 2): 3 checks (fio.seq_read, fio.seq_write, "
                       "fio.rand_read): error: nothing collected: n2 did not answer: the "
                       "connection was refused (ssh to n2 port 22)"], reasons
    rows = [x for x in (run / "summary.md").read_text().splitlines() if x.startswith("| n2 ")]
    assert len(rows) == 1 and "| 3 checks (fio.seq_read, fio.seq_write, fio.rand_read) |" \
        in rows[0], rows
    doc = json.loads((run / "report.json").read_text())
    assert len(doc["rack_reasons"]) == 1 and len(doc["reasons"]) == 3
    banner = (run / "report.html").read_text().split("</header>")[0]
    assert banner.count("<li>") == 1


def test_rackday_8_different_failures_stay_separate_reasons():
    """Control: two nodes failing the same check with their own figures are two reasons,
    each with its own node and figure (never one node's figure for another)."""
    verdicts = [node_verdict(n, [Result(n, "fio.seq_read", Status.FAIL,
                                        f"sequential read {v} MB/s misses >= 50 MB/s")])
                for n, v in (("n1", 10), ("n2", 12))]
    doc = json.loads(json.dumps(report_document(rack_verdict(verdicts), MANIFEST, DEMO, {},
                                                {})))
    banner = render_html(doc).split("</header>")[0]
    assert re.findall(r"<li>([^<]*)</li>", banner) == [
        "n1: fio.seq_read: fail: sequential read 10 MB/s misses &gt;= 50 MB/s",
        "n2: fio.seq_read: fail: sequential read 12 MB/s misses &gt;= 50 MB/s"]


# ------------------------------------------------------------------- item 14


def test_rackday_14_evidence_paths_are_links_to_the_files(tmp_path, fixture_text):
    run = cdu_run(tmp_path, "flow-low")
    for outcome in (judge_run(run), judge_run(run, out_dir=tmp_path / "elsewhere" / "strict")):
        html = outcome.report_html.read_text()
        hrefs = re.findall(r'<a class="evidence" href="([^"]+)"><code>([^<]+)</code></a>', html)
        assert len(hrefs) == 2, hrefs
        for href, shown in hrefs:
            target = (outcome.report_html.parent / unquote(href)).resolve()
            assert target == (run / shown).resolve() and target.is_file(), (href, shown)


def placed(nodes: list[tuple[str, dict[str, Any] | None, Status]]) -> str:
    verdicts = [node_verdict(n, [Result(n, "fio.seq_read", s, s.label, 600.0, "MB/s",
                                        evidence=f"evidence/{n}/fio.seq_read.out")])
                for n, _, s in nodes]
    doc = report_document(rack_verdict(verdicts), MANIFEST, DEMO, {}, {},
                          places={n: p for n, p, _ in nodes})
    return render_html(json.loads(json.dumps(doc)))


def units_drawn(html: str, rack: str) -> list[str]:
    fig = html.split(f'id="rack-{rack}"')[1].split("</figure>")[0]
    return re.findall(r'<span class="u">(\d+)</span>|<span class="gap-u">', fig)


def test_rackday_14_the_elevation_is_sized_to_the_nodes_present_with_the_height_stated():
    """The demo rack: two nodes at U38 and U37 of a 42U rack draw two units, not 42."""
    html = placed([("rg-node01", {"rack": "demo-r1", "u": 38}, Status.PASS),
                   ("rg-node02", {"rack": "demo-r1", "u": 37}, Status.PASS)])
    assert units_drawn(html, "demo-r1") == ["38", "37"]
    caption = html.split('id="rack-demo-r1"')[1].split("</figcaption>")[0]
    assert "U37&ndash;U38 of a 42U rack" in caption
    # a long run of empty units is one row
    html = placed([("a", {"rack": "r2", "u": 40}, Status.PASS),
                   ("b", {"rack": "r2", "u": 2}, Status.PASS)])
    assert units_drawn(html, "r2") == ["40", "", "2"]
    assert "37 empty U" in html


def test_rackday_14_a_node_beyond_the_racks_height_is_flagged_not_unplaced():
    """rackgate_rack_height states the rack's height: U44 is above it, U0 below U1."""
    inv = parse_inventory_json({"_meta": {"hostvars": {
        "n1": {"rackgate_location": {"rack": "r1", "u": 30}, "rackgate_rack_height": 42},
        "n2": {"rackgate_location": {"rack": "r1", "u": 44}, "rackgate_rack_height": 42},
        "n3": {"rackgate_location": {"rack": "r1", "u": 0}}}},
        "all": {"hosts": ["n1", "n2", "n3"]}}, ["inv"])
    html = placed([(n, inv.place(n), Status.PASS) for n in ("n1", "n2", "n3")])
    assert "No rack position" not in html
    fig = html.split('id="rack-r1"')[1].split("</figure>")[0]
    assert "3 nodes" in fig and "of a 42U rack" in fig
    outside = [" ".join(unescape(re.sub(r"<[^>]+>", " ", p)).split())
               for p in re.findall(r'<p class="outside">(.*?)</p>', fig, re.S)]
    assert outside == [
        "\u26a0 n2 is outside the rack: U44 is above the rack's 42U (rackgate_location, "
        "rackgate_rack_height)",
        "\u26a0 n3 is outside the rack: U0 is not a unit: U1 is the bottom (rackgate_location, "
        "rackgate_rack_height)"]



def test_rackday_14_a_stored_runs_unit_beyond_any_rack_is_flagged(tmp_path, fixture_text):
    """A run that recorded its places as text (``rack r1 u 64``): U64 is above any rack."""
    run = write_run(tmp_path / "runs" / "u64", DEMO, ["fio.seq_read"], [("n9", "rack r1 u 64",
                                                                         {})],
                    evidence={("n9", "fio.seq_read"): fixture_text("fio/seq-read-healthy.json")},
                    argv=("fio",))
    outcome = judge_run(run)
    assert json.loads(outcome.report_json.read_text())["nodes"][0]["place"] == {"rack": "r1",
                                                                               "u": 64}
    html = outcome.report_html.read_text()
    assert "U64 is above the rack&#39;s 42U" in html and "No rack position" not in html


def test_rackday_14_the_healthy_banner_counts_its_warnings(tmp_path, fixture_text, capsys):
    verdicts = [node_verdict(n, [Result(n, "fio.seq_read", s, f"{n} {s.label}", 600.0, "MB/s")])
                for n, s in (("n1", Status.WARN), ("n2", Status.WARN), ("n3", Status.WARN),
                             ("n4", Status.PASS))]
    doc = json.loads(json.dumps(report_document(rack_verdict(verdicts), MANIFEST, DEMO, {},
                                                {})))
    html = render_html(doc)
    assert '<h1 id="verdict">Rack verdict: ACCEPT, 3 warnings</h1>' in html
    banner = html.split("</header>")[0]
    assert banner.count("<li>warning: ") == 3
    healthy = json.loads(json.dumps(report_document(rack_verdict(verdicts[3:]), MANIFEST,
                                                    DEMO, {}, {})))
    assert '<h1 id="verdict">Rack verdict: ACCEPT</h1>' in render_html(healthy)

    from rackgate.reports.markdown import render_markdown
    assert render_markdown(doc).startswith("**ACCEPT** rack inv: 4 of 4 nodes accepted, "
                                           "3 warnings, profile demo")
