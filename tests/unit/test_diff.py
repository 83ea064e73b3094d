"""`rackgate diff`: what changed between two reports. The reports are real report documents
(rackgate.reports.report_document over hand-made results, written to JSON and read back as
report.json is), built here from the model; nothing is copied from a real run."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import pytest

from rackgate.checks import load_profile
from rackgate.cli.main import main
from rackgate.model import Result, Status, node_verdict, rack_verdict
from rackgate.reports import report_document
from rackgate.reports.diff import diff_reports
from rackgate.reports.diff_input import DiffError
from rackgate.reports.diff_render import FILTERS, render_html, render_text

FIO, PSU, IDENT, GPU, PORTS = ("fio.seq_read", "redundancy.psu", "node.identity",
                               "gpu.health", "fabric.ports")
DEMO = load_profile("demo")
EXPECTED = ">= 50 MB/s (0.5 x 100 MB/s)"


def fio(node, mbps, status=Status.PASS, unit="MB/s", expected=EXPECTED):
    verb = "misses" if status is Status.FAIL else "meets"
    return Result(node, FIO, status, f"sequential read {mbps} MB/s {verb} >= 50 MB/s", mbps,
                  unit, expected, evidence=f"evidence/{node}/{FIO}.out")


def psu(node, status=Status.PASS, message="2 of 2 PSUs healthy"):
    return Result(node, PSU, status, message, 2.0, "PSUs", ">= 2 PSUs",
                  evidence=f"evidence/{node}/{PSU}.out")


def ident(node, serial, bios="2.1.4", **more):
    details = {"sys_vendor": "Supermicro", "product_serial": serial, "bios_version": bios,
               "kernel": "6.1.0-21-amd64", "machine_id": f"{serial}00ff", **more}
    return Result(node, IDENT, Status.PASS, f"identified: serial {serial}, BIOS {bios}",
                  details=details, evidence=f"evidence/{node}/{IDENT}.out")


def make_doc(nodes, *, rack="r7", places=None, profile=DEMO, node_profiles=None,
             run_id="run-1"):
    """nodes: {name: [Result, ...]} in inventory order, at rack ``rack`` U 1, 2, ... unless
    ``places`` ({name: {rack, u} or None}) says otherwise."""
    places = places if places is not None else \
        {n: {"rack": rack, "u": i} for i, n in enumerate(nodes, 1)}
    locations = {n: f"rack {p['rack']} u {p['u']}" for n, p in places.items() if p}
    verdict = rack_verdict(node_verdict(n, rs) for n, rs in nodes.items())
    manifest = {"run_id": run_id, "inventory": ["/srv/inventory/rack07"], "group": "compute",
                "limit": None, "checks": [FIO, PSU, IDENT]}
    digests = {(r.node, r.check): "ab" * 32 for rs in nodes.values() for r in rs}
    doc = report_document(verdict, manifest, profile, locations, digests,
                          node_profiles=node_profiles, places=places)
    return json.loads(json.dumps(doc))  # what report.json holds


def rack_doc(fio_n1=612.3, fio_n2=598.0, status_n2=Status.PASS, run_id="run-1", **kw):
    return make_doc({
        "n1": [ident("n1", "S1"), fio("n1", fio_n1), psu("n1")],
        "n2": [ident("n2", "S2"), fio("n2", fio_n2, status_n2), psu("n2")],
        "n3": [ident("n3", "S3"), fio("n3", 605.0), psu("n3")],
    }, run_id=run_id, **kw)


def named(diff):
    return [(c["node_a"], c["node_b"], c["check"], c["changed"]) for c in diff["changes"]]


def test_one_rack_over_time_lists_the_status_change_and_the_figure_change():
    a = rack_doc()
    b = rack_doc(fio_n1=700.0, fio_n2=42.0, status_n2=Status.FAIL, run_id="run-2")
    diff = diff_reports(a, b)
    assert diff["matching"] == {"by": "name", "key": "name", "pairs": 3, "only_in_a": [],
                                "only_in_b": [], "unmatched": []}
    assert named(diff) == [("n1", "n1", FIO, ["figure"]),
                           ("n2", "n2", FIO, ["status", "figure", "message"])]
    n1, n2 = diff["changes"]
    assert (n1["measured_a"], n1["measured_b"], n1["percent_change"]) == (612.3, 700.0, 14.32)
    assert (n2["status_a"], n2["status_b"], n2["percent_change"]) == ("pass", "fail", -92.98)
    assert n2["message_b"] == "sequential read 42.0 MB/s misses >= 50 MB/s"
    assert diff["a"]["verdict"] == "ACCEPT" and diff["b"]["verdict"] == "REJECT"
    assert [(n["a"], n["verdict_a"], n["verdict_b"], n["changes"]) for n in diff["nodes"]] == [
        ("n1", "ACCEPT", "ACCEPT", 1), ("n2", "ACCEPT", "REJECT", 1),
        ("n3", "ACCEPT", "ACCEPT", 0)]
    assert diff["counts"] == {
        "changes": 2, "status": 1, "figure": 2, "unit": 0, "node_verdicts": 1,
        "identity": 0, "node_profile_sha256": 0, "not_paired": 0, "better": 0, "worse": 1}
    assert diff["changed"] is True


def test_changes_name_exactly_the_results_whose_status_changed():
    """Two reports of one rack that differ in one status, with every figure a little off
    (within 5 %) and the messages changed with them: only that result is named."""
    a = rack_doc()
    b = make_doc({
        "n1": [ident("n1", "S1"), fio("n1", 640.0), psu("n1")],
        "n2": [ident("n2", "S2"), fio("n2", 590.1),
               psu("n2", Status.FAIL, "1 of 2 PSUs healthy: PSU2 input lost")],
        "n3": [ident("n3", "S3"), fio("n3", 579.9), psu("n3")],
    }, run_id="run-2")
    diff = diff_reports(a, b)
    assert named(diff) == [("n2", "n2", PSU, ["status", "message"])]
    assert diff["counts"]["changes"] == 1 and diff["changed"] is True


def test_the_same_rack_again_with_figures_within_the_threshold_is_no_change(tmp_path, capsys):
    a, b = rack_doc(), rack_doc(fio_n1=620.0, fio_n2=590.0, run_id="run-2")
    diff = diff_reports(a, b)
    assert diff["changes"] == [] and diff["changed"] is False
    paths = write(tmp_path, a, b)
    assert main(["diff", *paths]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "0 changed result(s) (0 status: 0 better, 0 worse; 0 figure; figure threshold 5%), "
        "0 node verdict(s), 0 identity field(s), 0 node(s) not paired",
        "overall: same: no verdict or status changed"]


def test_all_lists_every_figure_and_message_change():
    a, b = rack_doc(), rack_doc(fio_n1=620.0, run_id="run-2")
    assert diff_reports(a, b, figure_threshold_pct=1.0)["changes"][0]["percent_change"] == 1.258
    assert diff_reports(a, b, figure_threshold_pct=1.3)["changes"] == []
    [change] = diff_reports(a, b, show_all=True)["changes"]
    assert (change["node_a"], change["check"], change["changed"]) == ("n1", FIO,
                                                                      ["figure", "message"])


def test_a_change_of_unit_or_expected_band_is_listed_with_the_figure():
    a = make_doc({"n1": [fio("n1", 612.3)]})
    b = make_doc({"n1": [fio("n1", 612.3, unit="MiB/s")]}, run_id="run-2")
    assert named(diff_reports(a, b)) == [("n1", "n1", FIO, ["unit"])]
    c = make_doc({"n1": [fio("n1", 400.0, expected=">= 60 MB/s (0.6 x 100 MB/s)")]})
    assert named(diff_reports(a, c)) == [("n1", "n1", FIO, ["figure", "expected"])]
    d = make_doc({"n1": [fio("n1", 612.3, expected=">= 60 MB/s (0.6 x 100 MB/s)")]})
    assert diff_reports(a, d)["changes"] == []  # the profile's change says it, not each result
    assert named(diff_reports(a, d, show_all=True)) == [("n1", "n1", FIO, ["expected"])]


def test_a_check_added_or_removed_is_a_status_change():
    a = make_doc({"n1": [fio("n1", 612.3), psu("n1")]})
    b = make_doc({"n1": [psu("n1"), ident("n1", "S1")]}, run_id="run-2")
    diff = diff_reports(a, b)
    assert [(c["check"], c["kind"], c["status_a"], c["status_b"]) for c in diff["changes"]] == [
        (FIO, "removed", "pass", None), (IDENT, "added", None, "pass")]
    assert diff["changed"] is True
    lines = render_text(diff).splitlines()
    # absent counts as a skip: a pass removed is worse, a pass added better
    assert f"n1 {FIO}: removed (pass, 612.3 MB/s) (worse): sequential read 612.3 MB/s meets " \
           ">= 50 MB/s" in lines
    assert f"n1 {IDENT}: added (pass, none) (better): identified: serial S1, BIOS 2.1.4" in lines
    assert diff["direction"] == "mixed"


def two_racks():
    """Rack r1 (gpu001-gpu003 at U 10, 12, 14) and rack r2 of the same SKU (gpu101-gpu103
    at the same units, listed in another order), one node failing its PSU check."""
    a = make_doc({n: [ident(n, f"A{n}"), fio(n, 600.0), psu(n)]
                  for n in ("gpu001", "gpu002", "gpu003")},
                 places={"gpu001": {"rack": "r1", "u": 10}, "gpu002": {"rack": "r1", "u": 12},
                         "gpu003": {"rack": "r1", "u": 14}})
    b = make_doc({"gpu103": [ident("gpu103", "Bgpu103"), fio("gpu103", 601.0), psu("gpu103")],
                  "gpu101": [ident("gpu101", "Bgpu101"), fio("gpu101", 598.0),
                             psu("gpu101", Status.FAIL, "1 of 2 PSUs healthy")],
                  "gpu102": [ident("gpu102", "Bgpu102"), fio("gpu102", 603.0),
                             psu("gpu102")]},
                 places={"gpu101": {"rack": "r2", "u": 10}, "gpu102": {"rack": "r2", "u": 12},
                         "gpu103": {"rack": "r2", "u": 14}}, run_id="r2-run")
    return a, b


def test_two_racks_of_one_sku_are_paired_by_rack_position():
    a, b = two_racks()
    diff = diff_reports(a, b)
    assert (diff["matching"]["by"], diff["matching"]["key"]) == ("position", "U")
    assert [(n["a"], n["b"]) for n in diff["nodes"]] == [
        ("gpu001", "gpu101"), ("gpu002", "gpu102"), ("gpu003", "gpu103")]
    assert named(diff) == [("gpu001", "gpu101", PSU, ["status", "message"])]
    ids = diff["nodes"][0]["identity"]
    assert [(i["field"], i["a"], i["b"]) for i in ids] == [
        ("product_serial", "Agpu001", "Bgpu101"), ("machine_id", "Agpu00100ff", "Bgpu10100ff")]
    assert f"gpu001/gpu101 {PSU}: status pass -> fail (worse); message \"2 of 2 PSUs " \
           "healthy\" -> \"1 of 2 PSUs healthy\"" \
           in render_text(diff).splitlines()
    assert diff_reports(a, b, match="name")["matching"]["pairs"] == 0


def test_one_rack_with_renamed_nodes_is_paired_by_rack_and_u():
    a = make_doc({"n1": [psu("n1")], "n2": [psu("n2")]})
    b = make_doc({"m2": [psu("m2")], "m1": [psu("m1")]},
                 places={"m1": {"rack": "r7", "u": 1}, "m2": {"rack": "r7", "u": 2}})
    diff = diff_reports(a, b)
    assert diff["matching"]["key"] == "rack and U"
    assert [(n["a"], n["b"]) for n in diff["nodes"]] == [("n1", "m1"), ("n2", "m2")]
    assert diff["changed"] is False


def test_every_node_that_cannot_be_paired_is_listed_with_the_reason():
    a = make_doc({n: [psu(n)] for n in ("a1", "a2", "a3", "a4", "a5")},
                 places={"a1": {"rack": "r1", "u": 1}, "a2": {"rack": "r1", "u": 2},
                         "a3": None, "a4": {"rack": "r1", "u": 4}, "a5": None})
    del a["nodes"][4]["place"]  # as in a report from before places were recorded
    b = make_doc({n: [psu(n)] for n in ("b1", "b2", "b2x", "b5")},
                 places={"b1": {"rack": "r2", "u": 1}, "b2": {"rack": "r2", "u": 2},
                         "b2x": {"rack": "r2", "u": 2}, "b5": {"rack": "r2", "u": 5}})
    diff = diff_reports(a, b)
    m = diff["matching"]
    assert [(n["a"], n["b"]) for n in diff["nodes"]] == [("a1", "b1")]
    assert m["only_in_a"] == [{"name": "a2", "place": {"rack": "r1", "u": 2}},
                              {"name": "a4", "place": {"rack": "r1", "u": 4}}]
    assert m["only_in_b"] == [{"name": "b5", "place": {"rack": "r2", "u": 5}}]
    assert [(n["report"], n["name"], n["reason"]) for n in m["unmatched"]] == [
        ("A", "a3", "no rack position (place) in the report"),
        ("A", "a5", "no rack position (place) in the report"),
        ("B", "b2", "shares U 2 with b2x"), ("B", "b2x", "shares U 2 with b2")]
    assert diff["counts"]["not_paired"] == 7 and diff["changed"] is True
    lines = render_text(diff).splitlines()
    assert "only in A: a2 (rack r1 u 2)" in lines and "only in B: b5 (rack r2 u 5)" in lines
    assert "not matched in A: a3 (no place): no rack position (place) in the report" in lines
    assert "not matched in B: b2x (rack r2 u 2): shares U 2 with b2" in lines


def test_nodes_in_one_report_only_are_listed_when_paired_by_name():
    a = rack_doc()
    b = make_doc({"n1": [psu("n1")], "n2": [psu("n2")], "n4": [psu("n4")]})
    m = diff_reports(a, b)["matching"]
    assert m["by"] == "name" and m["pairs"] == 2
    assert [n["name"] for n in m["only_in_a"]] == ["n3"]
    assert [n["name"] for n in m["only_in_b"]] == ["n4"]


def test_identity_changes_bios_driver_vbios_and_hca_firmware_without_a_status_change():
    def node(bios, driver, vbios, fw):
        gpu = Result("n1", GPU, Status.PASS, "8 x H100: healthy", details={
            "gpu_count": 8, "driver_version": driver, "cuda_version": "12.4",
            "vbios_versions": vbios, "gpu0": f"0000:1b:00.0 serial 165 VBIOS {vbios}",
            "gpu0_temp_c": 31.0})
        ports = Result("n1", PORTS, Status.PASS, "8 of 8 ports up", 8.0, "ports",
                       details={"fw.mlx5_0": fw, "fw.mlx5_1": "28.39.1002"})
        return make_doc({"n1": [ident("n1", "S1", bios=bios), gpu, ports]})

    diff = diff_reports(node("2.1.4", "550.54.15", "96.00.89", "28.39.1002"),
                        node("2.2.0", "550.90.07", "96.00.99", "28.40.1000"))
    assert [(i["source"], i["field"], i["a"], i["b"]) for i in diff["nodes"][0]["identity"]] \
        == [(IDENT, "bios_version", "2.1.4", "2.2.0"),
            (GPU, "driver_version", "550.54.15", "550.90.07"),
            (GPU, "vbios_versions", "96.00.89", "96.00.99"),
            (GPU, "gpu0", "0000:1b:00.0 serial 165 VBIOS 96.00.89",
             "0000:1b:00.0 serial 165 VBIOS 96.00.99"),
            (PORTS, "fw.mlx5_0", "28.39.1002", "28.40.1000")]
    assert diff["changes"] == [] and diff["changed"] is False
    assert "n1: identity node.identity bios_version: 2.1.4 -> 2.2.0" in render_text(diff)


def test_identity_is_not_compared_where_one_report_did_not_record_it():
    a = make_doc({"n1": [ident("n1", "S1"), psu("n1")]})
    b = make_doc({"n1": [Result("n1", IDENT, Status.ERROR, "host unreachable"), psu("n1")]})
    diff = diff_reports(a, b)
    assert diff["nodes"][0]["identity"] == []
    assert named(diff) == [("n1", "n1", IDENT, ["status", "message"])]


def test_profile_sha256_and_threshold_changes():
    stricter = DEMO.with_overrides({"checks": {FIO: {"thresholds": {"read_bw": {
        "min_ratio": 0.6, "basis": "a stricter floor for this test, written here"}}}}}, "test")
    a = rack_doc()
    b = rack_doc(profile=stricter, node_profiles={"n2": DEMO}, run_id="run-2")
    diff = diff_reports(a, b)
    assert diff["a"]["profile"]["sha256"] == DEMO.sha256
    assert diff["b"]["profile"]["sha256"] == stricter.sha256 != DEMO.sha256
    assert diff["profile_changes"] == [{"section": "checks", "name": FIO,
                                        "field": "thresholds.read_bw.min_ratio",
                                        "a": 0.5, "b": 0.6}]
    assert [p["field"] for p in diff_reports(a, b, show_all=True)["profile_changes"]] == [
        "thresholds.read_bw.min_ratio", "thresholds.read_bw.basis"]
    assert [(n["a"], n["profile_sha256_a"] != n["profile_sha256_b"]) for n in diff["nodes"]] \
        == [("n1", True), ("n2", False), ("n3", True)]
    assert diff["changes"] == [] and diff["changed"] is False
    lines = render_text(diff).splitlines()
    assert f"profile sha256: {DEMO.sha256} -> {stricter.sha256}" in lines
    assert f"profile checks {FIO} thresholds.read_bw.min_ratio: 0.5 -> 0.6" in lines
    assert f"n1: profile sha256 {DEMO.sha256[:12]} -> {stricter.sha256[:12]}" in lines


def test_a_check_dropped_from_the_profile_is_one_change():
    a, b = rack_doc(), rack_doc()
    del b["profile"]["checks"][FIO]
    [change] = diff_reports(a, b)["profile_changes"]
    assert (change["name"], change["field"], change["b"]) == (FIO, "", None)
    assert change["a"]["thresholds"]["read_bw"]["min_ratio"] == 0.5
    assert f"profile checks {FIO}: removed" in render_text(diff_reports(a, b))


def _break(path, value):
    def apply(doc):
        *parents, last = path
        target = doc
        for key in parents:
            target = target[key]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value
    return apply


@pytest.mark.parametrize(("breakage", "said"), [
    (_break(["schema"], "rackgate.report/2"),
     "schema is 'rackgate.report/2', expected rackgate.report/1"),
    (_break(["nodes"], KeyError), "nodes is missing"),
    (_break(["profile", "sha256"], None), "profile.sha256 is None, expected str"),
    (_break(["summary", "accepted"], True), "summary.accepted is True, expected an integer"),
    (_break(["nodes", 1, "verdict"], "MAYBE"),
     "nodes[1] (n2).verdict is 'MAYBE', expected one of ACCEPT, REJECT"),
    (_break(["nodes", 0, "results", 1, "status"], "ok"),
     "nodes[0] (n1).results[1] (fio.seq_read).status is 'ok', expected one of pass, skip, "
     "warn, fail, error"),
    (_break(["nodes", 0, "results", 1, "measured"], "612"),
     "nodes[0] (n1).results[1] (fio.seq_read).measured is '612', expected a finite number"),
    (_break(["nodes", 0, "results", 1, "unit"], KeyError),
     "nodes[0] (n1).results[1] (fio.seq_read).unit is missing"),
    (_break(["nodes", 2, "place"], {"rack": "r7"}),
     "nodes[2] (n3).place is {'rack': 'r7'}, expected {rack, u} or null"),
    (_break(["nodes", 2, "name"], "n1"), "nodes[2].name 'n1' appears twice"),
    (_break(["nodes", 0, "results", 2, "check"], FIO),
     "nodes[0] (n1).results[2].check 'fio.seq_read' appears twice"),
])
def test_a_malformed_report_is_refused_naming_the_field(breakage, said):
    b = rack_doc()
    breakage(b)
    with pytest.raises(DiffError) as exc:
        diff_reports(rack_doc(), b, b_source="runs/x/report.json")
    assert str(exc.value).startswith(f"B runs/x/report.json: {said}")


def write(tmp_path, a, b):
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "a" / "report.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    return str(tmp_path / "a"), str(tmp_path / "b.json")


def test_the_cli_refuses_with_one_line_and_exit_2(tmp_path, capsys):
    a, b = write(tmp_path, rack_doc(), rack_doc())
    (tmp_path / "bad.json").write_text('{"schema": "rackgate.report/1", "nodes": [')
    assert main(["diff", a, str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rackgate diff: {tmp_path / 'bad.json'}: not JSON: ")
    assert err.count("\n") == 1
    assert main(["diff", a, str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err == (f"rackgate diff: {tmp_path / 'missing'}: cannot read "
                                       "it: No such file or directory\n")
    (tmp_path / "old.json").write_text(json.dumps({"schema": "rackgate.report/0"}))
    assert main(["diff", str(tmp_path / "old.json"), b]) == 2
    assert capsys.readouterr().err == (f"rackgate diff: A {tmp_path / 'old.json'}: schema is "
                                       "'rackgate.report/0', expected rackgate.report/1\n")
    with pytest.raises(SystemExit):
        main(["diff", a, b, "--figure-threshold", "-1"])


def test_the_cli_prints_one_line_per_change_and_exits_1(tmp_path, capsys):
    a, b = write(tmp_path, rack_doc(), rack_doc(fio_n1=700.0, fio_n2=42.0,
                                                status_n2=Status.FAIL, run_id="run-2"))
    assert main(["diff", a, b]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"A: {tmp_path / 'a' / 'report.json'}: run run-1 revision 1, "
                               "judged ")
    assert lines[0].endswith(f"profile demo (sha256 {DEMO.sha256[:12]}), ACCEPT, 3 of 3 "
                             "nodes accepted")
    assert lines[2:] == [
        "rack verdict: ACCEPT -> REJECT (worse)",
        "nodes paired by name: 3 pair(s), 0 only in A, 0 only in B, 0 not matched",
        f"n1 {FIO}: measured 612.3 MB/s -> 700 MB/s (+14.32%)",
        "n2: verdict ACCEPT -> REJECT (worse)",
        f"n2 {FIO}: status pass -> fail (worse); measured 598 MB/s -> 42 MB/s (-92.98%); "
        'message "sequential read 598.0 MB/s meets >= 50 MB/s" -> "sequential read 42.0 MB/s '
        'misses >= 50 MB/s"',
        "2 changed result(s) (1 status: 0 better, 1 worse; 2 figure; figure threshold 5%), "
        "1 node verdict(s), 0 identity field(s), 0 node(s) not paired",
        "overall: worse: a verdict or status got worse"]
    assert main(["diff", a, b, "--figure-threshold", "20"]) == 1
    assert f"n1 {FIO}: measured" not in capsys.readouterr().out


def test_the_cli_writes_the_json_document(tmp_path, capsys):
    a_doc, b_doc = rack_doc(), rack_doc(fio_n2=42.0, status_n2=Status.FAIL, run_id="run-2")
    a, b = write(tmp_path, a_doc, b_doc)
    out = tmp_path / "diff.json"
    assert main(["diff", a, b, "--json", str(out)]) == 1
    written = json.loads(out.read_text())
    assert written == json.loads(json.dumps(diff_reports(
        a_doc, b_doc, a_source=str(tmp_path / "a" / "report.json"), b_source=b)))
    assert written["schema"] == "rackgate.diff/1"
    assert capsys.readouterr().err == f"wrote {out}\n"
    assert main(["diff", a, b, "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out) == written


class Page(HTMLParser):
    """A strict reading of the page: every element closed in order; text per id."""

    VOID = frozenset({"meta", "br", "input"})

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.stack, self.tags, self.text = [], set(), {}
        self.feed(html)
        self.close()
        assert self.stack == [], self.stack

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        if tag not in self.VOID:
            self.stack.append((tag, dict(attrs).get("id")))

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1][0] == tag, (tag, self.stack[-3:])
        self.stack.pop()

    def handle_data(self, data):
        for _, id_ in self.stack:
            if id_:
                self.text[id_] = self.text.get(id_, "") + data


HOSTILE = '<script>alert("x")</script> & </td>'


def hostile_diff():
    a = make_doc({"n1": [ident("n1", "S1"), fio("n1", 612.3), psu("n1")]})
    b = make_doc({"n1": [ident("n1", "S1", bios=HOSTILE), fio("n1", 612.3),
                         psu("n1", Status.FAIL, HOSTILE)]}, run_id="run-<2>")
    return diff_reports(a, b, b_source="runs/<b>/report.json")


def test_the_html_page_parses_and_escapes_every_value(tmp_path):
    html = render_html(hostile_diff())
    page = Page(html)
    assert "script" not in page.tags and "td" in page.tags
    assert HOSTILE in page.text["diff-changes"]
    assert f"node.identity bios_version: 2.1.4 → {HOSTILE}" in page.text["diff-nodes"]
    assert "runs/<b>/report.json: run run-<2>" in page.text["diff-runs"]
    assert page.text["verdict"] == "Worse: a verdict or status got worse"
    racks = Page(render_html(diff_reports(*two_racks()))).text["diff-nodes"]
    assert "gpu001/gpu101 rack r1 u 10 → rack r2 u 10 ACCEPT → REJECT" in " ".join(racks.split())
    path = tmp_path / "diff.html"
    a, b = write(tmp_path, rack_doc(), rack_doc(run_id="run-2"))
    assert main(["diff", a, b, "--html", str(path)]) == 0
    assert Page(path.read_text()).text["verdict"] == "No verdict or status changed"


def test_the_section_renders_in_the_reports_environment():
    """As report.html.j2 will include it: html.py's environment settings plus FILTERS."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(
        Path(__file__).resolve().parents[2] / "validators/rackgate/reports/templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True)
    env.filters.update(FILTERS)
    html = env.from_string('{% from "diff_section.html.j2" import diff_section %}'
                           "<main>{% if diff is defined and diff %}{{ diff_section(diff) }}"
                           "{% endif %}</main>").render(diff=hostile_diff())
    page = Page(html)
    assert html.startswith('<main><section id="diff">') and "script" not in page.tags
    assert " ".join(page.text["diff-changes"].split()) == (
        f"NodeCheckStatusMeasuredChangeExpectedMessage n1 {PSU} pass → fail worse 2 PSUs → "
        f"2 PSUs >= 2 PSUs A: 2 of 2 PSUs healthy B: {HOSTILE}")
    assert env.from_string('{% from "diff_section.html.j2" import diff_section %}'
                           "{% if diff is defined and diff %}x{% endif %}").render() == ""
