"""The JSON and HTML reports, rendered from judged results (no cluster needed)."""

from __future__ import annotations

import json
import re

from stored_runs import write_run

from rackgate.checks import load_profile
from rackgate.reports.html import render_html
from rackgate.run import judge_run

EVIL = '<script>alert("x")</script>'


def stored_run(tmp_path, fixture_text, hosts):
    """A run directory at tmp_path/runs/test-run with fio evidence for ``hosts``."""
    return write_run(tmp_path / "runs" / "test-run", load_profile("demo"), ["fio.seq_read"],
                     [(h, loc, over) for h, loc, over, _ in hosts],
                     evidence={(h, "fio.seq_read"): stdout for h, _, _, stdout in hosts
                               if stdout is not None}, argv=("fio",))


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
    run = stored_run(tmp_path, fixture_text, [("n1", "", {}, healthy)])
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


def test_report_is_verified_against_its_evidence(tmp_path, fixture_text):
    from rackgate.reports.verify import verify_report

    healthy = fixture_text("fio/seq-read-healthy.json")
    run = stored_run(tmp_path, fixture_text, [("n1", "", {}, healthy), ("n2", "", {}, healthy)])
    report = judge_run(run).report_json
    assert verify_report(report) == (2, [])
    (run / "evidence/n2/fio.seq_read.out").write_text(healthy.replace("fio-3.33", "fio-3.34"))
    checked, problems = verify_report(report)
    assert checked == 2 and len(problems) == 1 and problems[0].startswith("n2 fio.seq_read")


def test_every_judgement_is_recorded_in_the_history(tmp_path, fixture_text):
    from rackgate.cli.main import main
    from rackgate.store.history import default_history_path, node_history, open_history

    healthy = fixture_text("fio/seq-read-healthy.json")
    run = stored_run(tmp_path, fixture_text, [("n1", "", {}, healthy)])
    judge_run(run)
    strict = load_profile("demo").with_overrides(
        {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {"ref": 1e9}}}}}, "test")
    judge_run(run, strict, tmp_path / "rejudged")
    for name in ("report.xml", "summary.md"):
        assert (run / name).stat().st_size > 0
    conn = open_history(default_history_path(tmp_path / "runs"))
    rows = node_history(conn, "n1")
    conn.close()
    assert sorted(r.status.label for r in rows) == ["fail", "pass"]
    assert main(["history", "n1", "--runs-dir", str(tmp_path / "runs")]) == 0
    assert main(["history", "nobody", "--runs-dir", str(tmp_path / "runs")]) == 1


def test_large_run_html_lists_problems_and_draws_a_histogram():
    from rackgate.model import Result, Status, node_verdict, rack_verdict
    from rackgate.reports import report_document

    profile = load_profile("demo")
    nodes = []
    for i in range(3000):
        bad = i % 1000 == 7
        r = Result(f"gpu{i:05d}", "fio.seq_read", Status.FAIL if bad else Status.PASS,
                   "slow" if bad else "ok", 10.0 if bad else 600.0 + i % 50, "MB/s",
                   evidence=f"evidence/gpu{i:05d}/fio.seq_read.out")
        nodes.append(node_verdict(r.node, [r]))
    doc = report_document(rack_verdict(nodes), {"run_id": "big", "inventory": ["x"],
                                                "group": "compute", "started": "t",
                                                "finished": "t", "rackgate_version": "0",
                                                "ansible_core_version": "0"},
                          profile, {}, {})
    html = render_html(json.loads(json.dumps(doc)))
    assert "histogram of 3000 nodes" in html
    assert html.count('data-status="fail"') == 3 and 'data-status="pass"' not in html
    assert "2997 accepted node(s) not drawn" in html
    assert len(html) < 200_000


def test_rejudging_with_other_benchmark_parameters_is_an_error(tmp_path, fixture_text):
    healthy = fixture_text("fio/seq-read-healthy.json")
    run = stored_run(tmp_path, fixture_text, [("n1", "", {}, healthy)])
    longer = load_profile("demo").with_overrides(
        {"checks": {"fio.seq_read": {"params": {"runtime_s": 60}}}}, "test")
    doc = json.loads(judge_run(run, longer, tmp_path / "out").report_json.read_text())
    (res,) = doc["nodes"][0]["results"]
    assert res["status"] == "error"
    assert "runtime_s 3 (wanted 60)" in res["message"]
    assert doc["verdict"] == "REJECT"


def test_parallel_judging_gives_the_same_results_as_serial(tmp_path, fixture_text, monkeypatch):
    import rackgate.judge.stored as runner

    healthy = fixture_text("fio/seq-read-healthy.json")
    hosts = [(f"n{i:02d}", f"rack r1 u {i}", {}, healthy if i % 3 else healthy[:100])
             for i in range(12)]
    run = stored_run(tmp_path, fixture_text, hosts)

    def results(doc):
        return [(n["name"], r["status"], r["measured"], r["message"]) for n in doc["nodes"]
                for r in n["results"]]

    monkeypatch.setattr(runner, "PARALLEL_MIN_RESULTS", 10**9)
    serial = json.loads(judge_run(run, out_dir=tmp_path / "serial").report_json.read_text())
    monkeypatch.setattr(runner, "PARALLEL_MIN_RESULTS", 1)
    forked = json.loads(judge_run(run, out_dir=tmp_path / "forked").report_json.read_text())
    assert results(forked) == results(serial)
    assert [r[1] for r in results(serial)].count("error") == 4  # the truncated outputs
    assert forked["verdict"] == serial["verdict"] == "REJECT"


def test_verdict_banner_lists_at_most_twenty_reasons(tmp_path, fixture_text):
    hosts = [(f"n{i:02d}", "", {}, "garbage") for i in range(25)]
    html = judge_run(stored_run(tmp_path, fixture_text, hosts)).report_html.read_text()
    banner = html[: html.index("</header>")]
    assert banner.count("<li>") == 21 and "and 5 more" in banner


def test_a_history_that_cannot_be_written_never_loses_the_reports(tmp_path, fixture_text,
                                                                   capsys):
    """The history is written after the reports; when it fails, the outcome says why, the
    CLI warns, and the exit code still follows the verdict."""
    from rackgate.cli.main import main
    from rackgate.store.history import default_history_path

    healthy = fixture_text("fio/seq-read-healthy.json")
    run = stored_run(tmp_path, fixture_text, [("n1", "", {}, healthy), ("n2", "", {}, healthy)])
    default_history_path(tmp_path / "runs").mkdir()  # a directory where the database goes
    outcome = judge_run(run)
    assert outcome.history_error and "history was not updated" in outcome.history_error
    for path in (outcome.reports.json, outcome.reports.html, outcome.reports.junit,
                 outcome.reports.summary):
        assert path.parent == run and path.stat().st_size > 0, path
    assert json.loads(outcome.report_json.read_text())["verdict"] == "ACCEPT"
    assert main(["judge", str(run)]) == 0
    err = capsys.readouterr().err
    assert "warning: reports written to" in err and "history was not updated" in err


def console_rows(stdout):
    """(node, check, status) of each row of the console's table (its first line)."""
    rows = []
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 6 and cells[0] and cells[0] != "node":
            rows.append(tuple(cells[:3]))
    return rows


def test_the_console_lists_only_the_problems_worst_first_with_counts(tmp_path, fixture_text,
                                                                    capsys):
    from rackgate.cli.main import main

    healthy = fixture_text("fio/seq-read-healthy.json")
    impossible = {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {"ref": 1e9}}}}}
    run = stored_run(tmp_path, fixture_text, [("n1", "rack r1 u 1", {}, healthy),
                                              ("n2", "rack r1 u 2", impossible, healthy),
                                              ("n3", "rack r1 u 3", {}, None)])
    assert main(["judge", str(run)]) == 1
    out = capsys.readouterr().out
    assert console_rows(out) == [("n3", "fio.seq_read", "error"), ("n2", "fio.seq_read", "fail")]
    lines = out.splitlines()
    counts = lines.index("Results: 1 pass, 0 skip, 0 warn, 1 fail, 1 error (3 nodes x 1 check)")
    assert lines[counts + 1] == "Rack verdict: REJECT (1/3 nodes accepted)"
    assert "  - n2 (rack r1 u 2): fio.seq_read: fail: sequential read 1,209 MB/s misses >= " \
           "500,000,000 MB/s" in out
    assert not re.search(r"\d[eE][+-]\d", out)

    assert main(["judge", str(run), "--show", "all"]) == 1
    out = capsys.readouterr().out
    assert console_rows(out) == [("n3", "fio.seq_read", "error"), ("n2", "fio.seq_read", "fail"),
                                 ("n1", "fio.seq_read", "pass")]
    assert re.search(r"│ n1 +│ fio\.seq_read +│ pass +│ 1,209 MB/s +│", out)


def test_a_healthy_rack_prints_its_counts_and_no_empty_table(tmp_path, fixture_text, capsys):
    from rackgate.cli.main import main

    healthy = fixture_text("fio/seq-read-healthy.json")
    run = stored_run(tmp_path, fixture_text, [("n1", "", {}, healthy), ("n2", "", {}, healthy)])
    assert main(["judge", str(run)]) == 0
    out = capsys.readouterr().out
    assert "│" not in out and console_rows(out) == []
    assert out.splitlines()[:2] == ["Results: 2 pass, 0 skip, 0 warn, 0 fail, 0 error "
                                    "(2 nodes x 1 check)",
                                    "Rack verdict: ACCEPT (2/2 nodes accepted)"]


def test_history_prints_figures_with_separators(tmp_path, fixture_text, capsys):
    from rackgate.cli.main import main

    run = stored_run(tmp_path, fixture_text,
                     [("n1", "", {}, fixture_text("fio/seq-read-healthy.json"))])
    judge_run(run)
    assert main(["history", "n1", "--results", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert re.search(r" pass +1,209 MB/s ", out) and "1208.95" not in out
