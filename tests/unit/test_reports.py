"""The JSON and HTML reports, rendered from judged results (no cluster needed)."""

from __future__ import annotations

import json
import re

from rackgate.evidence import EvidenceStore, write_json
from rackgate.profile import load_profile
from rackgate.reports.html import render_html
from rackgate.runner import MANIFEST_SCHEMA, judge_run

EVIL = '<script>alert("x")</script>'


def stored_run(tmp_path, fixture_text, hosts):
    profile = load_profile("demo")
    manifest = {"schema": MANIFEST_SCHEMA, "run_id": "test-run", "started": "t0",
                "finished": "t1", "inventory": ["inv"], "group": "compute", "limit": None,
                "checks": ["fio.seq_read"],
                "profile": {"name": "demo", "source": profile.source,
                            "sha256": profile.sha256, "document": dict(profile.raw)},
                "hosts": [{"name": h, "location": loc, "profile_overrides": over}
                          for h, loc, over, _ in hosts],
                "rackgate_version": "0", "ansible_core_version": "0"}
    write_json(tmp_path / "manifest.json", manifest)
    store = EvidenceStore(tmp_path)
    for h, _, _, stdout in hosts:
        if stdout is not None:
            store.write(h, "fio.seq_read", stdout, argv=("fio",), outcome="completed", rc=0,
                        started=None, ended=None, duration_s=1.0, stderr="", message="")
    return tmp_path


def test_report_accepts_healthy_rack(tmp_path, fixture_text):
    healthy = fixture_text("fio/seq-read-healthy.json")
    run = stored_run(tmp_path, fixture_text, [("n1", "rack r1 u 1", {}, healthy),
                                              ("n2", "rack r1 u 2", {}, healthy)])
    outcome = judge_run(run)
    doc = json.loads(outcome.report_json.read_text())
    assert doc["schema"] == "rackgate.report/1"
    assert doc["verdict"] == "ACCEPT" and doc["summary"]["accepted"] == 2
    res = doc["nodes"][0]["results"][0]
    assert res["status"] == "pass" and res["measured"] > 0 and res["unit"] == "MB/s"
    assert re.fullmatch(r"[0-9a-f]{64}", res["evidence_sha256"])
    assert doc["profile"]["checks"]["fio.seq_read"]["thresholds"]["read_bw"]["basis"]
    html = outcome.report_html.read_text()
    assert "Rack verdict: ACCEPT" in html and "n1" in html and "MB/s" in html


def test_override_missing_evidence_and_escaping(tmp_path, fixture_text):
    healthy = fixture_text("fio/seq-read-healthy.json")
    impossible = {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {"ref": 1e9}}}}}
    run = stored_run(tmp_path, fixture_text, [
        ("n1", "rack r1 u 1", {}, healthy),
        ("n2", f"rack {EVIL}", impossible, healthy),
        ("n3", "rack r1 u 3", {}, None),  # nothing collected
    ])
    outcome = judge_run(run)
    doc = json.loads(outcome.report_json.read_text())
    by = {n["name"]: n for n in doc["nodes"]}
    assert doc["verdict"] == "REJECT"
    assert by["n1"]["verdict"] == "ACCEPT"
    assert by["n2"]["verdict"] == "REJECT" and by["n2"]["overridden"]
    assert by["n2"]["results"][0]["status"] == "fail"
    assert by["n3"]["results"][0]["status"] == "error"
    assert "no evidence collected" in by["n3"]["results"][0]["message"]
    html = outcome.report_html.read_text()
    assert EVIL not in html and "&lt;script&gt;" in html


def test_rejudge_with_stricter_profile_writes_elsewhere(tmp_path, fixture_text):
    healthy = fixture_text("fio/seq-read-healthy.json")
    run = stored_run(tmp_path / "run", fixture_text, [("n1", "", {}, healthy)])
    strict = load_profile("demo").with_overrides(
        {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {"ref": 1e9}}}}}, "test")
    out = tmp_path / "rejudged"
    outcome = judge_run(run, strict, out)
    assert outcome.report_json.parent == out
    assert json.loads(outcome.report_json.read_text())["verdict"] == "REJECT"
    assert not (run / "report.json").exists()


def test_html_has_no_external_resources(tmp_path, fixture_text):
    run = stored_run(tmp_path, fixture_text,
                     [("n1", "", {}, fixture_text("fio/seq-read-healthy.json"))])
    html = render_html(json.loads(judge_run(run).report_json.read_text()))
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
