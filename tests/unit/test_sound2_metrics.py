"""Issue 28, findings 9 (export-metrics on a lone surrogate) and 10 (textfiles that are
always valid): a label value the text format cannot carry is refused naming its field,
and the file it would have replaced stays; a report that contradicts itself is refused;
the health check's textfile is checked before it replaces the old one. Every file that
is written passes `promtool check metrics` (Debian's prometheus package, tests/conftest.py).

A carriage return in a label value: the exposition format escapes only backslash, double
quote and line feed (promtool refuses ``\\r`` as an invalid escape), and a raw CR splits
the sample for every reader that takes CR as a line end; see rackgate.exposition."""

from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_export_metrics import judged_fio_run, promtool_check, report, status_doc
from test_healthcheck_cli import FakeNode

from rackgate.cli.main import main
from rackgate.programs import healthcheck as cli_healthcheck

PREVIOUS = "# the previous run's file\n"


def export(doc: dict[str, Any] | str, tmp_path: Path, capsys: Any) -> tuple[int, str, Path]:
    """export-metrics of ``doc`` (a report, or report.json's text) over a textfile that
    holds PREVIOUS: the exit code, stderr and the textfile."""
    source = tmp_path / "report.json"
    source.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    target = tmp_path / "acceptance.prom"
    target.write_text(PREVIOUS)
    capsys.readouterr()
    code = main(["export-metrics", str(source), "-o", str(target)])
    return code, capsys.readouterr().err, target


def test_a_healthy_report_is_still_written_and_promtool_reads_it(tmp_path, fixture_text,
                                                                 capsys):
    """The control: a judged run still exports, and the file is valid."""
    code, err, target = export(report(judged_fio_run(tmp_path, fixture_text)), tmp_path,
                               capsys)
    assert code == 0, err
    run = promtool_check(target.read_text())
    assert run.returncode == 0, run.stdout + run.stderr


def _set(doc: dict[str, Any], field: str, value: str) -> None:
    node, result = doc["nodes"][0], doc["nodes"][0]["results"][0]
    {"node": lambda: node.__setitem__("name", value),
     "check": lambda: result.__setitem__("check", value),
     "unit": lambda: result.__setitem__("unit", value),
     "run": lambda: doc["run"].__setitem__("run_id", value),
     "rack": lambda: node["place"].__setitem__("rack", value)}[field]()


@pytest.mark.parametrize(("field", "names"), [
    ("node", "nodes[0].name"), ("check", "nodes[0].results[0] (n1).check"),
    ("unit", "nodes[0].results[0] (n1).unit"), ("run", "run.run_id"),
    ("rack", "nodes[0].place.rack")])
@pytest.mark.parametrize("char", ["\r", "\x00", "\x85", "\u2028"])
def test_sound2_10_a_control_character_in_a_label_is_refused_and_the_old_file_stays(
        tmp_path, fixture_text, capsys, field, names, char):
    doc = report(judged_fio_run(tmp_path, fixture_text))
    _set(doc, field, f"x{char}y")
    code, err, target = export(doc, tmp_path, capsys)
    assert code == 2, err
    assert names in err and f"U+{ord(char):04X}" in err, err
    assert err.startswith("rackgate export-metrics: run ") and "Traceback" not in err
    assert target.read_text() == PREVIOUS
    assert main(["export-metrics", str(tmp_path / "report.json"), "-o", "-"]) == 2
    assert capsys.readouterr().out == ""


def test_sound2_9_export_metrics_lone_surrogate(tmp_path, fixture_text, capsys):
    """report.json is JSON text, where ``\\ud800`` is a valid escape that Python reads as a
    lone surrogate, which UTF-8 cannot encode: an error naming the field, not a traceback."""
    doc = report(judged_fio_run(tmp_path, fixture_text))
    doc["nodes"][0]["name"] = "n1\ud800"
    text = json.dumps(doc)  # ensure_ascii: the surrogate as the escape \ud800
    assert "n1\\ud800" in text
    code, err, target = export(text, tmp_path, capsys)
    assert code == 2, err
    assert "nodes[0].name" in err and "lone surrogate" in err, err
    assert target.read_text() == PREVIOUS


def _contradictions() -> list[tuple[str, Any]]:
    def run_accept_with_a_rejected_node(doc: dict[str, Any]) -> None:
        doc["verdict"] = "ACCEPT"

    def accept_with_a_failed_result(doc: dict[str, Any]) -> None:
        next(n for n in doc["nodes"] if n["name"] == "n-fail")["verdict"] = "ACCEPT"

    def accept_with_nothing_that_passed(doc: dict[str, Any]) -> None:
        next(n for n in doc["nodes"] if n["name"] == "n-skip")["verdict"] = "ACCEPT"

    def reject_with_only_passes(doc: dict[str, Any]) -> None:
        doc["nodes"] = [n for n in doc["nodes"] if n["name"] in ("n-pass", "n-warn")]
        doc["nodes"][0]["verdict"] = "REJECT"

    def run_reject_with_every_node_accepted(doc: dict[str, Any]) -> None:
        doc["nodes"] = [n for n in doc["nodes"] if n["name"] in ("n-pass", "n-warn")]

    def run_accept_without_nodes(doc: dict[str, Any]) -> None:
        doc["nodes"], doc["verdict"] = [], "ACCEPT"

    return [(f.__name__, f) for f in (
        run_accept_with_a_rejected_node, accept_with_a_failed_result,
        accept_with_nothing_that_passed, reject_with_only_passes,
        run_reject_with_every_node_accepted, run_accept_without_nodes)]


@pytest.mark.parametrize(("what", "edit"), _contradictions())
def test_sound2_10_a_report_that_contradicts_itself_is_refused(tmp_path, capsys, what, edit):
    doc = status_doc()  # one node per status, REJECT
    doc["run"]["finished"] = "2026-12-02T06:15:31+00:00"
    edit(doc)
    code, err, target = export(doc, tmp_path, capsys)
    assert code == 2, (what, err)
    assert "contradicts itself" in err, err
    assert target.read_text() == PREVIOUS


def test_the_unedited_status_report_is_not_a_contradiction(tmp_path, capsys):
    """The control of the test above: the same report as judge wrote it exports."""
    doc = status_doc()
    code, err, target = export(doc, tmp_path, capsys)
    assert code == 0, err
    assert "5 node(s)" in err
    run = promtool_check(target.read_text())
    assert run.returncode == 0, run.stdout + run.stderr


def _healthcheck(node: FakeNode, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """rackgate healthcheck --no-slurm in this process on FakeNode's root (its fake tools
    first on PATH): the textfile and what it printed."""
    monkeypatch.setenv("PATH", f"{node.bin}{os.pathsep}{os.environ['PATH']}")
    out = io.StringIO()
    args = argparse.Namespace(config=str(node.config), no_slurm=True, root=str(node.root))
    cli_healthcheck.healthcheck(args, out)
    return (node.root / "var/lib/prometheus/node-exporter/rackgate-healthcheck.prom",
            out.getvalue().splitlines())


def test_the_healthchecks_textfile_passes_promtool(tmp_path, monkeypatch):
    path, lines = _healthcheck(FakeNode(tmp_path), monkeypatch)
    run = promtool_check(path.read_text())
    assert run.returncode == 0, run.stdout + run.stderr + "\n".join(lines)


@pytest.mark.parametrize("bad", [
    'rackgate_healthcheck_item_ok{item="a\rb"} 1\n',  # a raw CR
    'rackgate_healthcheck_item_ok{item="a\\rb"} 1\n',  # an escape the format lacks
    'rackgate_healthcheck_item_ok{item="a"} 1\nrackgate_healthcheck_item_ok{item="a"} 0\n',
])
def test_sound2_10_the_healthchecks_textfile_is_checked_before_it_replaces_the_old_one(
        tmp_path, monkeypatch, bad):
    """Whatever the text the health check renders, an invalid one never replaces the file
    node_exporter reads: the old file stays and the run says why."""
    good = cli_healthcheck.textfile

    def broken(*args: Any, **kwargs: Any) -> str:
        text = good(*args, **kwargs)
        return text.replace("# TYPE rackgate_healthcheck_item_ok gauge\n",
                            "# TYPE rackgate_healthcheck_item_ok gauge\n" + bad, 1)

    node = FakeNode(tmp_path)
    (node.root / "var/lib/prometheus/node-exporter/rackgate-healthcheck.prom").write_text(
        PREVIOUS)
    monkeypatch.setattr(cli_healthcheck, "textfile", broken)
    path, lines = _healthcheck(node, monkeypatch)
    assert path.read_text() == PREVIOUS
    assert any("cannot write" in line and "line " in line for line in lines), lines
