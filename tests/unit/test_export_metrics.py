"""`rackgate export-metrics`: a judged run's report.json as Prometheus text for
node_exporter's textfile collector. Runs are stored (tests/unit/stored_runs.py) and judged
offline; the text is read back with prometheus_client's parser (the series, exactly) and
checked by `promtool check metrics` (Debian's prometheus package: a failure, not a skip,
when it is missing, since nothing else checks the format as Prometheus reads it)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from checks.fabric.test_pairwise import NODES as PAIR_NODES
from checks.fabric.test_pairwise import outputs, run_output
from checks.fabric.test_pairwise import stored_run as pairwise_run
from prometheus_client.parser import text_string_to_metric_families
from stored_runs import write_run

from conftest import promtool
from rackgate.checks import load_profile
from rackgate.cli.main import main
from rackgate.model import Result, Status, node_verdict, rack_verdict
from rackgate.reports import report_document
from rackgate.reports.metrics import (
    DEFAULT_FILE,
    LABEL_NAME,
    METRIC_NAME,
    METRICS,
    MetricsError,
    exposition,
)
from rackgate.run import judge_run
from rackgate.store import evidence as evidence_module

FIO = "fio.seq_read"
RUN = "20261202T081500Z-demo"
STRICT = {"checks": {FIO: {"thresholds": {"read_bw": {"ref": 1e9}}}}}  # 1,209 MB/s fails


Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parsed(text: str) -> Series:
    """Every sample of ``text`` as Prometheus' client library reads it: (name, labels) ->
    value; a series listed twice fails the test."""
    out: Series = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"series {key} listed twice"
            out[key] = s.value
    return out


def of(series: Series, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in series.items() if n == name}


def lbl(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    return promtool("check", "metrics", stdin=text, timeout=60)


def judged_fio_run(tmp_path: Path, fixture_text: Any) -> Path:
    """n1 passes (rack r1 U1), n2 fails on a stricter bound (r1 U2), n3 has no evidence
    and no place: the run is REJECTed."""
    healthy = fixture_text("fio/seq-read-healthy.json")
    run_dir = write_run(tmp_path / "runs" / RUN, load_profile("demo"), [FIO],
                        [("n1", "rack r1 u 1", {}), ("n2", "rack r1 u 2", STRICT), "n3"],
                        evidence={("n1", FIO): healthy, ("n2", FIO): healthy}, argv=("fio",))
    judge_run(run_dir)
    return run_dir


def report(run_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((run_dir / "report.json").read_text())
    return doc


def test_a_judged_run_is_exactly_its_verdicts_statuses_and_figures(tmp_path, fixture_text):
    doc = report(judged_fio_run(tmp_path, fixture_text))
    series = parsed(exposition(doc, "report.json").text())
    assert of(series, "rackgate_run_verdict") == {lbl(run=RUN): 0}
    assert of(series, "rackgate_node_verdict") == {
        lbl(run=RUN, rack="r1", node="n1"): 1, lbl(run=RUN, rack="r1", node="n2"): 0,
        lbl(run=RUN, rack="", node="n3"): 0}  # no place: rack=""
    assert of(series, "rackgate_check_status") == {
        lbl(run=RUN, node="n1", check=FIO): 0, lbl(run=RUN, node="n2", check=FIO): 2,
        lbl(run=RUN, node="n3", check=FIO): 3}  # no evidence: error, never pass
    assert of(series, "rackgate_check_value") == {  # n3 has no figure: no series
        lbl(run=RUN, node="n1", check=FIO, unit="MB/s"): 1209.0,
        lbl(run=RUN, node="n2", check=FIO, unit="MB/s"): 1209.0}
    (stamp,) = of(series, "rackgate_run_timestamp_seconds").items()
    assert stamp[0] == lbl(run=RUN) and stamp[1] > 1.7e9  # write_run's "t1": when judged
    assert not of(series, "rackgate_pair_status") and not of(series, "rackgate_pair_value")


def test_the_run_timestamp_is_when_the_run_finished() -> None:
    doc = status_doc()
    doc["run"]["finished"] = "2026-12-02T06:15:31+00:00"
    series = parsed(exposition(doc, "report.json").text())
    assert of(series, "rackgate_run_timestamp_seconds") == {lbl(run="run-s"): 1796192131}


def status_doc() -> dict[str, Any]:
    """One node per status, from report_document over hand-made results."""
    results = {f"n-{s.label}": [Result(f"n-{s.label}", FIO, s, f"it is {s.label}", 10.0,
                                       "MB/s")] for s in Status}
    verdict = rack_verdict(node_verdict(n, rs) for n, rs in results.items())
    manifest = {"run_id": "run-s", "finished": None}
    doc = report_document(verdict, manifest, load_profile("demo"), {}, {})
    parsed_doc: dict[str, Any] = json.loads(json.dumps(doc))  # as report.json holds it
    return parsed_doc


def test_status_codes_are_0_pass_1_warn_2_fail_3_error_4_skip() -> None:
    series = parsed(exposition(status_doc(), "report.json").text())
    assert of(series, "rackgate_check_status") == {
        lbl(run="run-s", node=f"n-{label}", check=FIO): code
        for label, code in (("pass", 0), ("warn", 1), ("fail", 2), ("error", 3),
                            ("skip", 4))}
    verdicts = {dict(k)["node"]: v for k, v in of(series, "rackgate_node_verdict").items()}
    # fail and error block ACCEPT; a node whose only result is a skip proved nothing
    assert verdicts == {"n-pass": 1, "n-warn": 1, "n-fail": 0, "n-error": 0, "n-skip": 0}


def test_label_values_are_escaped_and_read_back_unchanged(tmp_path, fixture_text):
    doc = report(judged_fio_run(tmp_path, fixture_text))
    evil_node, evil_check, evil_unit = 'n"1\\x\ny', 'fio.\\"seq"', "MB/s\n\\"
    doc["nodes"][0]["name"] = evil_node
    doc["nodes"][0]["results"][0]["check"] = evil_check
    doc["nodes"][0]["results"][0]["unit"] = evil_unit
    doc["nodes"][0]["place"]["rack"] = 'r"1'
    text = exposition(doc, "report.json").text()
    assert 'node="n\\"1\\\\x\\ny"' in text and "\ny\"" not in text
    assert all(line.startswith(("#", "rackgate_")) for line in text.splitlines())
    series = parsed(text)
    assert series[("rackgate_check_value", lbl(run=RUN, node=evil_node, check=evil_check,
                                               unit=evil_unit))] == 1209.0
    assert series[("rackgate_node_verdict", lbl(run=RUN, rack='r"1', node=evil_node))] == 1
    run = promtool_check(text)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), True, "12",
                                 None])
def test_a_figure_that_is_not_a_finite_number_has_no_value_series(bad) -> None:
    doc = status_doc()
    for n in doc["nodes"]:
        n["results"][0]["measured"] = bad
    series = parsed(exposition(doc, "report.json").text())
    assert of(series, "rackgate_check_value") == {}
    assert len(of(series, "rackgate_check_status")) == 5  # the statuses stay


def test_a_pairwise_matrix_is_one_status_and_one_figure_per_measured_pair(tmp_path):
    run_dir = pairwise_run(tmp_path, run_output(PAIR_NODES, outputs(bad="gpu03")))
    judge_run(run_dir)
    doc = report(run_dir)
    doc["pairwise"][0]["pairs"][0]["measured_gbps"] = None  # a pair without a figure
    doc["pairwise"][0]["pairs"][0]["status"] = "error"
    text = exposition(doc, "report.json").text()
    series = parsed(text)
    pairs = doc["pairwise"][0]["pairs"]
    assert len(pairs) == 6
    code = {"pass": 0, "warn": 1, "fail": 2, "error": 3, "skip": 4}
    assert of(series, "rackgate_pair_status") == {
        lbl(run="pairs-run", check="fabric.pairwise_bw", node_a=p["a"], node_b=p["b"]):
            code[p["status"]] for p in pairs}
    assert of(series, "rackgate_pair_value") == {
        lbl(run="pairs-run", check="fabric.pairwise_bw", node_a=p["a"], node_b=p["b"],
            unit="Gb/s"): p["measured_gbps"] for p in pairs[1:]}
    assert any(p["status"] == "fail" and "gpu03" in (p["a"], p["b"]) for p in pairs)
    # the check that ran once across the rack is every node's own series, no rack label
    assert of(series, "rackgate_check_status") == {
        lbl(run="pairs-run", node=n, check="fabric.pairwise_bw"): 2 if n == "gpu03" else 1
        for n in PAIR_NODES}
    assert of(series, "rackgate_node_verdict")[lbl(run="pairs-run", rack="",
                                                    node="gpu03")] == 0
    run = promtool_check(text)
    assert run.returncode == 0, run.stdout + run.stderr


def test_promtool_reads_a_judged_run_without_a_lint_finding(tmp_path, fixture_text):
    run_dir = judged_fio_run(tmp_path, fixture_text)
    assert main(["export-metrics", str(run_dir)]) == 0
    text = (run_dir / DEFAULT_FILE).read_text()
    run = promtool_check(text)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "" and run.stderr.strip() == ""
    for name, (_help, labels) in METRICS.items():
        assert METRIC_NAME.match(name) and all(LABEL_NAME.match(x) for x in labels)
        if name not in ("rackgate_pair_status", "rackgate_pair_value"):
            assert f"# HELP {name} " in text and f"# TYPE {name} gauge\n" in text


@pytest.mark.parametrize(("field", "value", "says"), [
    ("status", "passed", "nodes[0].results[0] (n1).status is 'passed', not one of pass,"),
    ("check", "", "nodes[0].results[0] (n1).check is '', not a non-empty string"),
])
def test_a_result_that_judge_never_writes_is_refused_naming_it(tmp_path, fixture_text, field,
                                                               value, says):
    doc = report(judged_fio_run(tmp_path, fixture_text))
    doc["nodes"][0]["results"][0][field] = value
    with pytest.raises(MetricsError, match="^" + re.escape(f"report.json: {says}")):
        exposition(doc, "report.json")


def test_a_node_listed_twice_is_refused(tmp_path, fixture_text):
    doc = report(judged_fio_run(tmp_path, fixture_text))
    doc["nodes"].append(doc["nodes"][0])
    with pytest.raises(MetricsError, match=r"nodes\[3\] \(n1\): a second rackgate_node_verdict"):
        exposition(doc, "report.json")


def test_a_run_without_report_json_is_an_error_naming_the_run(tmp_path, capsys):
    run_dir = write_run(tmp_path / "runs" / RUN, load_profile("demo"), [FIO], ["n1"])
    assert main(["export-metrics", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rackgate export-metrics: run {run_dir}: ")
    assert "has no report.json: judge the run first" in err
    assert main(["export-metrics", str(tmp_path / "no-such-run")]) == 2
    assert f"run {tmp_path / 'no-such-run'}: no such run directory" in capsys.readouterr().err


def test_stdout_a_directory_or_a_file_and_one_summary_line(tmp_path, fixture_text, capsys):
    run_dir = judged_fio_run(tmp_path, fixture_text)
    assert main(["export-metrics", str(run_dir), "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert parsed(out) and err == (f"export-metrics: run {RUN}: 3 node(s), 10 series -> "
                                   f"stdout\n")
    textfile_dir = tmp_path / "node-exporter"
    textfile_dir.mkdir()
    assert main(["export-metrics", str(run_dir / "report.json"), "-o", str(textfile_dir)]) == 0
    written = textfile_dir / DEFAULT_FILE
    assert written.read_text() == out
    assert stat.S_IMODE(written.stat().st_mode) == 0o644  # node_exporter's user reads it
    assert os.listdir(textfile_dir) == [DEFAULT_FILE]  # no temporary file left
    assert capsys.readouterr().err.endswith(f"-> {written}\n")
    assert main(["export-metrics", str(run_dir), "-o", str(tmp_path / "x" / "a.prom")]) == 2
    assert "no directory" in capsys.readouterr().err


def test_an_interrupted_write_leaves_the_previous_file_whole(tmp_path, fixture_text,
                                                              monkeypatch):
    run_dir = judged_fio_run(tmp_path, fixture_text)
    target = tmp_path / "acceptance.prom"
    target.write_text("# the previous run's file\n")

    def no_rename(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    # the write goes through rackgate.store.evidence.atomic_write
    monkeypatch.setattr(evidence_module.os, "replace", no_rename)
    assert main(["export-metrics", str(run_dir), "-o", str(target)]) == 2
    assert target.read_text() == "# the previous run's file\n"
    assert sorted(os.listdir(tmp_path)) == ["acceptance.prom", "runs"]
