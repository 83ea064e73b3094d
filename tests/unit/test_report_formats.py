"""JUnit XML and Markdown reports, rendered from report documents built from hand-made
results, and read back by real consumers: junitparser (as CI tools read JUnit) and
xml.etree for the XML, markdown-it-py (CommonMark + GFM tables) for the Markdown."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from junitparser import JUnitXml
from markdown_it import MarkdownIt

from rackgate.checks import load_profile
from rackgate.model import Result, Status, node_verdict, rack_verdict
from rackgate.reports import report_document
from rackgate.reports.junit import render_junit
from rackgate.reports.markdown import render_markdown

FIO, PSU = "fio.seq_read", "redundancy.psu"
SHA = "ab" * 32
HOSTILE = 'n<1>&"q"]]>\x01|a\nb'
HOSTILE_LOC = 'rack "r1" <u2> & ]]> \x01 | x\ny'
HOSTILE_MSG = '<b>bold</b> & "quoted" ]]> \x01 | pipe\nsecond line'


def res(node, check, status, message="ok", measured=None, evidence="default", **kw):
    ev = f"evidence/{node}/{check}.out" if evidence == "default" else evidence
    return Result(node, check, status, message, measured, "MB/s" if measured else "",
                  kw.pop("expected", ">= 50 MB/s (0.5 x 100 MB/s)"), evidence=ev, **kw)


def make_doc(nodes, locations=None, run_id="run-1", durations=None):
    """nodes: {name: [Result, ...]} in inventory order; durations: {(node, check): s}."""
    profile = load_profile("demo")
    rack = rack_verdict(node_verdict(name, rs) for name, rs in nodes.items())
    manifest = {"run_id": run_id, "inventory": ["/srv/inventory/rack07"], "group": "compute",
                "limit": None, "checks": [FIO, PSU]}
    locations = locations or {name: f"rack r7 u {i}" for i, name in enumerate(nodes, 1)}
    digests = {(r.node, r.check): SHA for rs in nodes.values() for r in rs if r.evidence}
    doc = report_document(rack, manifest, profile, locations, digests, durations=durations)
    return json.loads(json.dumps(doc))  # what report.json holds


def read_junit(tmp_path, doc):
    """Write the XML as a CI job would, then read it as junitparser and xml.etree do."""
    text = render_junit(doc)
    path = tmp_path / "junit.xml"
    path.write_text(text, encoding="utf-8")  # strict: a lone surrogate would raise here
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    ET.parse(path)  # well-formed for the standard library too
    return JUnitXml.fromfile(str(path)), ET.parse(path).getroot()


def statuses(xml):
    """(suite, classname, case) -> status, as the consumer reads them."""
    out = {}
    for suite in xml:
        for case in suite:
            status = ("fail" if case.is_failure else "error" if case.is_error
                      else "skip" if case.is_skipped
                      else "warn" if (case.system_out or "").startswith("WARN") else "pass")
            out[suite.name, case.classname, case.name] = status
    return out


def assert_counts(xml, root):
    """Declared counts on every suite and the root equal what the consumer counts itself."""
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite, el in zip(xml, root.findall("testsuite"), strict=True):
        cases = list(suite)
        counted = {"tests": len(cases),
                   "failures": sum(c.is_failure for c in cases),
                   "errors": sum(c.is_error for c in cases),
                   "skipped": sum(c.is_skipped for c in cases)}
        assert {k: getattr(suite, k) for k in counted} == counted, suite.name
        assert {k: int(el.get(k)) for k in counted} == counted
        total = {k: total[k] + counted[k] for k in total}
    assert {k: getattr(xml, k) for k in total} == total
    return total


def tables(markdown):
    """The rows of each table as the GFM renderer sees them (HTML), and that HTML."""
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    return [[re.findall(r"<td>(.*?)</td>", row, re.S)
             for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]
            for body in re.findall(r"<tbody>(.*?)</tbody>", html, re.S)], html


def table(markdown):
    """Rows of the first (blocking) table, and the HTML."""
    found, html = tables(markdown)
    return (found[0] if found else []), html


def unescape_cell(cell):
    return re.sub(r"\\(.)", r"\1", cell.replace("<br>", "\n"))


def test_healthy_rack(tmp_path):
    doc = make_doc({"n1": [res("n1", FIO, Status.PASS, measured=612.3),
                           res("n1", PSU, Status.PASS)],
                    "n2": [res("n2", FIO, Status.PASS, measured=598.0),
                           res("n2", PSU, Status.PASS)]})
    xml, root = read_junit(tmp_path, doc)
    assert xml.name == "rackgate demo run-1"
    assert [s.name for s in xml] == [FIO, PSU]
    assert set(statuses(xml).values()) == {"pass"} and len(statuses(xml)) == 4
    assert assert_counts(xml, root) == {"tests": 4, "failures": 0, "errors": 0, "skipped": 0}
    case = next(iter(next(iter(xml))))
    assert case.classname == f"rackgate.{FIO}" and case.name == "n1" and case.time == 0
    assert "location: rack r7 u 1" in case.system_out and "612.3 MB/s" in case.system_out
    props = {p.name: p.value for p in next(iter(xml)).properties()}
    assert props["profile"] == "demo" and props["run_id"] == "run-1"
    assert props["profile_sha256"] == doc["profile"]["sha256"] and props["rack_verdict"] == "ACCEPT"

    md = render_markdown(doc)
    lines = md.splitlines()
    assert lines[0] == "**ACCEPT** rack rack07: 2 of 2 nodes accepted, profile demo, run run-1"
    assert table(md)[0] == [] and "No blocking results." in lines
    assert f"- {FIO}: 2 pass" in lines and f"- {PSU}: 2 pass" in lines
    assert lines[-1] == f"Profile demo, sha256 {doc['profile']['sha256']}"


def mixed_doc():
    return make_doc({
        "n1": [res("n1", FIO, Status.PASS, measured=612.3), res("n1", PSU, Status.PASS)],
        "n2": [res("n2", FIO, Status.FAIL, "sequential read 42 MB/s misses >= 50 MB/s",
                   measured=42.0, percent_of_limit=42.0),
               res("n2", PSU, Status.WARN, "PSU 2 of 2 reports a fan warning")],
        "n3": [res("n3", FIO, Status.ERROR, "host unreachable, nothing collected",
                   evidence=None),
               res("n3", PSU, Status.SKIP, "no BMC in inventory", evidence=None)],
    })


def test_fail_error_warn_skip_junit(tmp_path):
    xml, root = read_junit(tmp_path, mixed_doc())
    assert statuses(xml) == {
        (FIO, f"rackgate.{FIO}", "n1"): "pass", (FIO, f"rackgate.{FIO}", "n2"): "fail",
        (FIO, f"rackgate.{FIO}", "n3"): "error", (PSU, f"rackgate.{PSU}", "n1"): "pass",
        (PSU, f"rackgate.{PSU}", "n2"): "warn", (PSU, f"rackgate.{PSU}", "n3"): "skip"}
    assert assert_counts(xml, root) == {"tests": 6, "failures": 1, "errors": 1, "skipped": 1}
    cases = {(c.classname, c.name): c for s in xml for c in s}
    [failure] = cases[f"rackgate.{FIO}", "n2"].result
    assert failure.type == "threshold" and failure.message.startswith("sequential read 42")
    for text in ("measured: 42 MB/s (42% of the physical limit)",
                 "expected: >= 50 MB/s (0.5 x 100 MB/s)",
                 f"evidence: evidence/n2/{FIO}.out (sha256 {SHA})", "location: rack r7 u 2"):
        assert text in failure.text
    [error] = cases[f"rackgate.{FIO}", "n3"].result
    assert error.type == "evidence" and error.message == "host unreachable, nothing collected"
    assert "measured: none" in error.text and "evidence: none" in error.text
    [skipped] = cases[f"rackgate.{PSU}", "n3"].result
    assert skipped.message == "no BMC in inventory"
    warn = cases[f"rackgate.{PSU}", "n2"]
    assert warn.is_passed and warn.system_out.startswith("WARN: PSU 2 of 2 reports a fan "
                                                         "warning\n")


def test_a_warning_is_a_passing_case_with_a_status_property(tmp_path):
    _, root = read_junit(tmp_path, mixed_doc())
    props = {(c.get("classname"), c.get("name")): [
        (p.get("name"), p.get("value")) for p in c.findall("properties/property")]
        for c in root.iter("testcase")}
    assert props.pop((f"rackgate.{PSU}", "n2")) == [("rackgate.status", "warn")]
    assert all(found == [] for found in props.values())  # JUnit's own elements say the rest
    [warn] = [c for c in root.iter("testcase") if c.find("properties") is not None]
    assert [child.tag for child in warn] == ["properties", "system-out"]  # no failure


def test_case_time_is_the_evidence_duration_and_suites_add_them_up(tmp_path):
    doc = make_doc({"n1": [res("n1", FIO, Status.PASS, measured=612.3),
                           res("n1", PSU, Status.PASS)],
                    "n2": [res("n2", FIO, Status.FAIL, "slow", measured=42.0),
                           res("n2", PSU, Status.ERROR, "unreachable", evidence=None)]},
                   durations={("n1", FIO): 61.25, ("n2", FIO): 60.5, ("n1", PSU): 2.0})
    assert doc["nodes"][1]["results"][1]["duration_s"] is None
    xml, root = read_junit(tmp_path, doc)
    times = {(s.name, c.name): c.time for s in xml for c in s}
    assert times == {(FIO, "n1"): 61.25, (FIO, "n2"): 60.5, (PSU, "n1"): 2.0, (PSU, "n2"): 0}
    assert [s.time for s in xml] == [121.75, 2.0] and xml.time == 123.75
    assert [el.get("time") for el in root.iter("testcase")] == ["61.250", "60.500", "2.000",
                                                                 "0.000"]
    assert root.get("time") == "123.750"


def test_figures_are_written_with_separators_never_in_scientific_notation(tmp_path):
    doc = make_doc({"n1": [res("n1", FIO, Status.FAIL, "slow", measured=19810.4,
                               details={"iops": 1.5e7, "jobs": 4})]})
    xml, _ = read_junit(tmp_path, doc)
    [case] = [c for s in xml for c in s]
    assert "measured: 19,810 MB/s" in case.system_out
    assert "details: iops=15,000,000; jobs=4" in case.system_out
    rows, _ = table(render_markdown(doc))
    assert rows[0][4] == "19,810 MB/s"


def test_fail_error_warn_skip_markdown():
    md = render_markdown(mixed_doc())
    lines = md.splitlines()
    assert lines[0] == "**REJECT** rack rack07: 1 of 3 nodes accepted, profile demo, run run-1"
    rows, _ = table(md)
    assert [(r[0], r[2], r[3]) for r in rows] == [("n2", FIO, "fail"), ("n3", FIO, "error")]
    assert rows[0] == ["n2", "rack r7 u 2", FIO, "fail", "42 MB/s (42% of limit)",
                       "&gt;= 50 MB/s (0.5 x 100 MB/s)",
                       "sequential read 42 MB/s misses &gt;= 50 MB/s", f"evidence/n2/{FIO}.out"]
    assert rows[1][4] == "—" and rows[1][7] == "—"  # no measurement, no evidence file
    assert f"- {FIO}: 1 pass, 1 fail, 1 error" in lines
    assert f"- {PSU}: 1 pass, 1 skip, 1 warn" in lines


def test_summary_lists_the_warnings_after_the_blocking_results():
    md = render_markdown(mixed_doc())
    lines = md.splitlines()
    (blocking, warnings), _ = tables(md)
    assert [(r[0], r[2], r[3]) for r in blocking] == [("n2", FIO, "fail"), ("n3", FIO, "error")]
    assert warnings == [["n2", "rack r7 u 2", PSU, "warn", "—", "&gt;= 50 MB/s (0.5 x 100 MB/s)",
                         "PSU 2 of 2 reports a fan warning", f"evidence/n2/{PSU}.out"]]
    heading = lines.index("**Warnings** (they do not block acceptance):")
    last_blocking = max(i for i, line in enumerate(lines) if f"| {FIO} | error |" in line)
    assert last_blocking < heading
    assert heading < lines.index(f"- {FIO}: 1 pass, 1 fail, 1 error")


def test_summary_without_warnings_has_no_warnings_section():
    doc = make_doc({"n1": [res("n1", FIO, Status.FAIL, "slow", measured=1.0)]})
    assert "Warnings" not in render_markdown(doc)


def test_the_warnings_table_is_capped_like_the_blocking_one():
    # each node's own message: the same words on several nodes would be one row
    nodes = {f"gpu{i:03}": [res(f"gpu{i:03}", FIO, Status.WARN, f"a peer outlier ({i})",
                                measured=500.0),
                            res(f"gpu{i:03}", PSU, Status.FAIL, f"PSU2 failed ({i})")]
             for i in range(64)}
    md = render_markdown(make_doc(nodes), max_rows=10)
    (blocking, warnings), html = tables(md)
    assert len(blocking) == len(warnings) == 10 and warnings[-1][0] == "gpu009"
    assert "<p>… and 54 more blocking results in report.json</p>" in html
    assert "<p>… and 54 more warnings in report.json</p>" in html
    assert html.index("more blocking results") < html.index("<strong>Warnings</strong>") \
        < html.index("more warnings")
    assert html.count("<li>") == 2  # the per-check lines are still a list after the note


def hostile_doc():
    return make_doc({HOSTILE: [res(HOSTILE, FIO, Status.FAIL, HOSTILE_MSG, measured=1.0,
                                   expected='< "50" & ]]>')],
                     "n2": [res("n2", FIO, Status.WARN, HOSTILE_MSG)]},
                    locations={HOSTILE: HOSTILE_LOC, "n2": HOSTILE_LOC})


def visible(text):
    return text.replace("\x01", "\\x01")


def test_hostile_strings_junit(tmp_path):
    xml, root = read_junit(tmp_path, hostile_doc())
    assert "]]>" not in render_junit(hostile_doc())
    assert assert_counts(xml, root) == {"tests": 2, "failures": 1, "errors": 0, "skipped": 0}
    case, warn = list(next(iter(xml)))
    assert case.name == visible(HOSTILE)  # every other character survives as it was
    [failure] = case.result
    assert failure.message == visible(HOSTILE_MSG)
    assert f"location: {visible(HOSTILE_LOC)}" in failure.text
    assert 'expected: < "50" & ]]>' in case.system_out
    assert warn.system_out.startswith(f"WARN: {visible(HOSTILE_MSG)}")
    assert root.find("testsuite/testcase").get("name") == visible(HOSTILE)


@pytest.mark.parametrize("bad", ["\x00", "\x0b", "\x1f", "\ufffe", "\ud800"])
def test_characters_xml_forbids_never_reach_the_file(tmp_path, bad):
    doc = make_doc({f"n{bad}": [res(f"n{bad}", FIO, Status.ERROR, f"m{bad}")]},
                   locations={f"n{bad}": f"l{bad}"})
    xml, _ = read_junit(tmp_path, doc)
    [case] = [c for s in xml for c in s]
    assert case.name.startswith("n\\") and case.is_error


def test_hostile_strings_markdown():
    md = render_markdown(hostile_doc())
    rows, html = table(md)
    assert len(rows) == 1 and len(rows[0]) == 8  # the warn is not blocking; no cell split
    (_, warnings), _ = tables(md)
    assert len(warnings) == 1 and len(warnings[0]) == 8 and warnings[0][3] == "warn"
    assert "<b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html and "\x01" not in md
    raw = md.splitlines()[4]
    cells = re.split(r"(?<!\\)\|", raw)[1:-1]
    assert [unescape_cell(c.strip()) for c in cells] == [
        visible(HOSTILE), visible(HOSTILE_LOC), FIO, "fail", "1 MB/s", '< "50" & ]]>',
        visible(HOSTILE_MSG), f"evidence/{HOSTILE}/{FIO}.out".replace("\x01", "\\x01")]


def test_big_rack_markdown_is_capped(tmp_path):
    nodes = {f"gpu{i:03}": [res(f"gpu{i:03}", FIO, Status.FAIL, f"slow ({i})", measured=1.0),
                            res(f"gpu{i:03}", PSU, Status.PASS)] for i in range(64)}
    doc = make_doc(nodes)
    md = render_markdown(doc)
    rows, html = table(md)
    assert len(rows) == 50 and rows[-1][0] == "gpu049"
    assert "<p>… and 14 more blocking results in report.json</p>" in html
    assert html.count("<li>") == 2  # one line per check, still a list after the note
    assert len(md.splitlines()) == 60  # 50 rows, 8 lines of frame, one line per check
    xml, root = read_junit(tmp_path, doc)
    assert assert_counts(xml, root) == {"tests": 128, "failures": 64, "errors": 0, "skipped": 0}


def test_node_without_results_and_empty_rack_are_not_green(tmp_path):
    doc = make_doc({"n1": [res("n1", FIO, Status.PASS, measured=600.0)], "n9": []})
    xml, root = read_junit(tmp_path, doc)
    assert statuses(xml)["rackgate.verdict", "rackgate.verdict", "n9"] == "error"
    assert assert_counts(xml, root)["errors"] == 1
    [verdict_case] = list(list(xml)[-1])
    assert verdict_case.result[0].type == "verdict"
    assert verdict_case.result[0].message == "no check was judged"
    rows, _ = table(render_markdown(doc))
    assert [(r[0], r[3], r[6]) for r in rows] == [("n9", "error", "no check was judged")]

    empty = make_doc({})
    xml, root = read_junit(tmp_path, empty)
    assert assert_counts(xml, root)["errors"] == 1
    lines = render_markdown(empty).splitlines()
    assert lines[0].startswith("**REJECT** rack rack07: 0 of 0 nodes accepted")
    assert "no node was judged" in lines
