"""``judge``/``validate --compare REPORT`` (and a retest, with the report it replaces): the
new report carries its diff against the other (report.json ``diff``) and shows it as a
section of report.html. Runs are stored with the fio fixture
(tests/fixtures/fio/seq-read-healthy.json: 1,209 MB/s), scaled per node."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from stored_runs import write_run

from rackgate.checks import load_profile
from rackgate.cli.main import main
from rackgate.reports.diff import compared
from rackgate.run import judge_run

SEQ_READ_BYTES, SEQ_READ_BW = "3628072960", "1208954668"


def stored(where: Path, fixture_text, factors: dict[str, float]) -> Path:
    """A judged run of fio.seq_read; each node's bandwidth is the fixture's times its factor
    (the demo profile passes at >= 50 MB/s)."""
    def scaled(f: float) -> str:
        return fixture_text("fio/seq-read-healthy.json").replace(
            SEQ_READ_BYTES, str(int(int(SEQ_READ_BYTES) * f))).replace(
            SEQ_READ_BW, str(int(int(SEQ_READ_BW) * f)))
    run = write_run(where, load_profile("demo"), ["fio.seq_read"], list(factors),
                    evidence={(n, "fio.seq_read"): scaled(f) for n, f in factors.items()},
                    argv=("fio",))
    judge_run(run)
    return run


def test_a_judgement_compared_with_an_earlier_report_carries_exactly_what_changed(
        tmp_path, fixture_text):
    before = stored(tmp_path / "runs" / "20261201T000000Z-demo", fixture_text,
                    {"n1": 1.0, "n2": 1.0})
    after = stored(tmp_path / "runs" / "20261202T000000Z-demo", fixture_text,
                   {"n1": 1.01, "n2": 0.02})  # n2 at 24 MB/s: below the 50 MB/s floor
    outcome = judge_run(after, compare=compared(before))
    doc = json.loads(outcome.report_json.read_text())
    changes = doc["diff"]["changes"]
    assert [(c["node_a"], c["check"], c["status_a"], c["status_b"]) for c in changes] == [
        ("n2", "fio.seq_read", "pass", "fail")]
    assert doc["diff"]["a"]["source"] == str(before / "report.json")
    html = outcome.report_html.read_text()
    assert '<section id="diff">' in html
    assert "Changes from run 20261201T000000Z-demo to run 20261202T000000Z-demo" in html


def test_without_compare_the_report_has_no_diff(tmp_path, fixture_text):
    run = stored(tmp_path / "r", fixture_text, {"n1": 1.0})
    doc = json.loads((run / "report.json").read_text())
    assert "diff" not in doc
    assert '<section id="diff">' not in (run / "report.html").read_text()


def test_the_cli_reads_the_report_to_compare_with_first_and_refuses_a_bad_one(
        tmp_path, fixture_text, capsys):
    before = stored(tmp_path / "a", fixture_text, {"n1": 1.0})
    after = stored(tmp_path / "b", fixture_text, {"n1": 1.0})
    shutil.copy(after / "report.json", tmp_path / "untouched.json")
    (tmp_path / "bad.json").write_text('{"schema": "rackgate.report/0"}')
    assert main(["judge", str(after), "--compare", str(tmp_path / "bad.json")]) == 2
    assert "bad.json: schema is 'rackgate.report/0'" in capsys.readouterr().err
    # refused before judging: the run's report is as it was
    assert (after / "report.json").read_text() == (tmp_path / "untouched.json").read_text()
    assert main(["judge", str(after), "--compare", str(before)]) == 0
    assert json.loads((after / "report.json").read_text())["diff"]["changes"] == []


def test_a_run_compared_with_its_own_earlier_judgement_names_the_revisions(tmp_path,
                                                                          fixture_text):
    run = stored(tmp_path / "20261201T000000Z-demo", fixture_text, {"n1": 1.0})
    outcome = judge_run(run, compare=compared(run))
    assert ("Changes in run 20261201T000000Z-demo from revision 1 to revision 1"
            in outcome.report_html.read_text())
