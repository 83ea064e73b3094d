"""Issue 30 (a rack day as a person walks it), items 10 to 13: the plan shows the plan, the
diff reads an improvement as one, history lists runs with their verdicts, verify takes a
run directory, and every help page has a description, examples and exit codes. Through the
CLI (``rackgate.cli.main.main``) and stored runs as validate writes them."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from stored_runs import write_run

from rackgate.checks import RACK_REGISTRY, REGISTRY, load_profile
from rackgate.cli.main import build_parser, main
from rackgate.model import Result, Status, node_verdict, rack_verdict
from rackgate.programs import healthcheck as cli_healthcheck
from rackgate.reports import report_document
from rackgate.run import judge_run

DEMO = load_profile("demo")
FIO = "fio.seq_read"


def unreachable_inventory(tmp_path: Path, hosts: tuple[str, ...] = ("n1", "n2")) -> Path:
    """Compute hosts that nothing can reach (ssh to port 1 of loopback): a command that
    should never start fails at once if it does."""
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": {
        h: {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_connection": "ssh",
            "rackgate_location": f"rack r1 u {i}"} for i, h in enumerate(hosts, 1)}}}}}))
    return inv


# 10. --plan shows the plan ----------------------------------------------------------------

def test_rackday_10_plan_prints_the_nodes_the_checks_that_run_and_the_skips(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the probes get no answer (nothing is reached): the plan itself is what is shown here
    monkeypatch.setattr("rackgate.collect.preflight.run", lambda pre, sources, **kw: {})
    code = main(["validate", "-i", str(unreachable_inventory(tmp_path)), "--profile", "demo",
                 "--checks", f"node.identity,{FIO},gpu.health", "--plan"])
    out = capsys.readouterr().out
    assert code == 2  # no probe answered: an error each
    assert "2 node(s) (n1, n2); launch host none" in out, out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "on the node" in rows["node.identity"] and "all 2" in rows["node.identity"]
    assert "all 2" in rows[FIO]
    skipped = out.split("Skipped (1 check(s)), by reason:")[1].splitlines()[1]
    assert skipped.startswith("  not applicable to profile demo") and "gpu.health" in skipped
    assert "gpu.health" not in out.split("Skipped")[0]  # not among the checks that run
    assert re.search(r"^Plan: \d+ error\(s\)", out, re.M)  # the problems still follow


class NoCollection:
    """Collection that collects nothing (the judge then finds no evidence: errors)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.launched: dict[str, Any] = {}

    def run(self) -> list[str]:
        return ["successful"]


def test_rackday_10_validating_names_only_the_checks_that_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rackgate.run.Collection", NoCollection)
    main(["validate", "-i", str(unreachable_inventory(tmp_path)), "--profile", "demo",
          "--checks", "node.identity,gpu.health", "--no-plan", "--runs-dir",
          str(tmp_path / "runs")])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("Validating"))
    assert "node.identity on 2 node(s)" in line, line
    assert "gpu.health on" not in line
    assert "; 1 check(s) skipped (1: not applicable to profile demo: " in line


# 11. diff: better and worse ----------------------------------------------------------------

def fio(node: str, mbps: float, status: Status = Status.PASS) -> Result:
    verb = "misses" if status is Status.FAIL else "meets"
    return Result(node, FIO, status, f"read {mbps} MB/s {verb} >= 50 MB/s", mbps, "MB/s",
                  ">= 50 MB/s", evidence=f"evidence/{node}/{FIO}.out")


def report(tmp_path: Path, name: str, n2_mbps: float, status: Status) -> str:
    """A report.json of two nodes in run directory ``name``; n2 read ``n2_mbps``."""
    nodes = {"n1": [fio("n1", 612.0)], "n2": [fio("n2", n2_mbps, status)]}
    verdict = rack_verdict(node_verdict(n, rs) for n, rs in nodes.items())
    manifest = {"run_id": name, "inventory": ["inv"], "group": "compute", "limit": None,
                "checks": [FIO]}
    doc = report_document(verdict, manifest, DEMO, {}, {(n, FIO): "ab" * 32 for n in nodes})
    (tmp_path / name).mkdir()
    (tmp_path / name / "report.json").write_text(json.dumps(doc))
    return str(tmp_path / name)


def test_rackday_11_an_improvement_exits_0_and_reads_as_better(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = report(tmp_path, "before", 42.0, Status.FAIL)
    after = report(tmp_path, "after", 598.0, Status.PASS)
    assert main(["diff", before, after]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "rack verdict: REJECT -> ACCEPT (better)" in lines
    assert "n2: verdict REJECT -> ACCEPT (better)" in lines
    change = next(x for x in lines if x.startswith(f"n2 {FIO}:"))
    assert change.startswith(f"n2 {FIO}: status fail -> pass (better); ")
    # both reports' messages
    assert 'message "read 42.0 MB/s misses >= 50 MB/s" -> "read 598.0 MB/s meets >= 50 MB/s"' \
        in change
    assert lines[-1] == "overall: better: nothing got worse"


def test_rackday_11_a_regression_exits_1_and_is_red_on_a_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = report(tmp_path, "before", 598.0, Status.PASS)
    after = report(tmp_path, "after", 42.0, Status.FAIL)
    assert main(["diff", before, after, "--colour", "always"]) == 1
    out = capsys.readouterr().out
    assert "\x1b[31mrack verdict: ACCEPT -> REJECT (worse)\x1b[0m" in out.splitlines()
    assert out.splitlines()[-1] == "\x1b[31moverall: worse: a verdict or status got worse\x1b[0m"
    assert main(["diff", after, before, "--colour", "always"]) == 0
    assert "\x1b[32mrack verdict: REJECT -> ACCEPT (better)\x1b[0m" in capsys.readouterr().out
    assert main(["diff", before, before, "--colour", "never"]) == 0  # the same: exit 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out and out.splitlines()[-1] == \
        "overall: same: no verdict or status changed"


def test_rackday_11_better_and_worse_at_once_exits_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def doc(name: str, n1: tuple[float, Status], n2: tuple[float, Status]) -> str:
        nodes = {"n1": [fio("n1", *n1)], "n2": [fio("n2", *n2)]}
        verdict = rack_verdict(node_verdict(n, rs) for n, rs in nodes.items())
        d = report_document(verdict, {"run_id": name, "inventory": [], "group": "compute",
                                      "limit": None, "checks": [FIO]}, DEMO, {}, {})
        (tmp_path / f"{name}.json").write_text(json.dumps(d))
        return str(tmp_path / f"{name}.json")

    a = doc("a", (612.0, Status.PASS), (42.0, Status.FAIL))
    b = doc("b", (41.0, Status.FAIL), (612.0, Status.PASS))
    assert main(["diff", a, b, "--format", "json"]) == 1
    diff = json.loads(capsys.readouterr().out)
    assert diff.get("direction") == "mixed"
    assert (diff["counts"].get("better"), diff["counts"].get("worse")) == (1, 1)


def test_rackday_11_the_html_page_colours_by_direction(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = report(tmp_path, "before", 42.0, Status.FAIL)
    after = report(tmp_path, "after", 598.0, Status.PASS)
    page = tmp_path / "diff.html"
    assert main(["diff", before, after, "--html", str(page)]) == 0
    html = page.read_text()
    assert '<header class="verdict better">' in html and "Better: nothing got worse" in html
    assert 'class="better"' in html  # the changed result's row
    assert "A: read 42.0 MB/s misses &gt;= 50 MB/s<br> B: read 598.0 MB/s meets" in html


def test_rackday_11_diff_help_documents_its_exit_codes(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Exit codes: 0 nothing got worse" in out and "REJECT -> ACCEPT" in out


# 12. history: one line per run; verify takes a run directory ------------------------------

def judged_runs(tmp_path: Path, fixture_text: Any) -> Path:
    """runs/run-1 (n1 and n2 pass) and runs/run-2 (n2 without evidence: error), judged."""
    healthy = fixture_text("fio/seq-read-healthy.json")
    hosts = [("n1", "rack r1 u 1", None), ("n2", "rack r1 u 2", None)]
    for name, with_n2 in (("run-1", True), ("run-2", False)):
        evidence = {("n1", FIO): healthy, **({("n2", FIO): healthy} if with_n2 else {})}
        judge_run(write_run(tmp_path / "runs" / name, DEMO, [FIO], hosts, evidence=evidence,
                            argv=("fio",)))
    return tmp_path / "runs"


def test_rackday_12_history_lists_one_line_per_run_with_its_verdict(
        tmp_path: Path, fixture_text: Any, capsys: pytest.CaptureFixture[str]) -> None:
    runs = judged_runs(tmp_path, fixture_text)
    assert main(["history", "--runs-dir", str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["judged", "(UTC)", "run", "rev", "inventory", "rack",
                                "profile", "verdict", "accepted"]
    assert [x.split()[2:] for x in lines[1:]] == [
        ["run-2", "1", "inv", "r1", "demo", "REJECT", "1/2"],
        ["run-1", "1", "inv", "r1", "demo", "ACCEPT", "2/2"]]
    assert main(["history", "--runs", "1", "--runs-dir", str(runs)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2  # the header and run-2


def test_rackday_12_a_nodes_history_has_its_verdict_and_its_results_on_request(
        tmp_path: Path, fixture_text: Any, capsys: pytest.CaptureFixture[str]) -> None:
    runs = judged_runs(tmp_path, fixture_text)
    assert main(["history", "n2", "--runs-dir", str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-5:] == ["accepted", "n2", "kept", "out", "by"]
    assert [x.split()[2] for x in lines[1:]] == ["run-2", "run-1"]
    assert lines[1].split()[-2:] == ["REJECT", FIO] and lines[2].split()[-2:] == ["ACCEPT", "-"]
    assert main(["history", "n2", "--results", "--runs-dir", str(runs)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:6] == ["judged", "(UTC)", "run", "rev", "check", "attempt"]
    assert [(r.split()[2], r.split()[4], r.split()[6]) for r in rows[1:]] == [
        ("run-2", FIO, "error"), ("run-1", FIO, "pass")]
    assert main(["history", "nobody", "--runs-dir", str(runs)]) == 1


def test_rackday_12_history_counts_runs_not_rows_and_says_so(
        tmp_path: Path, fixture_text: Any, capsys: pytest.CaptureFixture[str]) -> None:
    runs = judged_runs(tmp_path, fixture_text)
    with pytest.raises(SystemExit) as exit_:
        main(["history", "n1", "--limit", "5", "--runs-dir", str(runs)])
    assert exit_.value.code == 2
    assert "--limit is now --runs N" in capsys.readouterr().err
    assert main(["history", "n1", "--results", "--runs", "1", "--runs-dir", str(runs)]) == 0
    assert [r.split()[2] for r in capsys.readouterr().out.splitlines()[1:]] == ["run-2"]


def test_rackday_12_verify_takes_a_run_directory(
        tmp_path: Path, fixture_text: Any, capsys: pytest.CaptureFixture[str]) -> None:
    runs = judged_runs(tmp_path, fixture_text)
    assert main(["verify", str(runs / "run-1")]) == 0
    assert "0 problem(s)" in capsys.readouterr().out
    assert main(["verify", str(runs / "run-1" / "report.json")]) == 0  # as before
    (runs / "empty").mkdir()
    assert main(["verify", str(runs / "empty")]) == 2
    assert "has no report.json: judge the run first" in capsys.readouterr().err


# 13. help pages ------------------------------------------------------------------------

def parsers(parser: argparse.ArgumentParser, path: str = "rackgate"
            ) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every subcommand's parser, depth first, with its command line."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((f"{path} {name}", sub))
                out += parsers(sub, f"{path} {name}")
    return out


def test_rackday_13_every_help_page_has_a_description_examples_and_exit_codes() -> None:
    found = parsers(build_parser())
    assert len(found) >= 15 and "rackgate fabric topology" in dict(found)
    missing = []
    for command, parser in found:
        text = parser.format_help()
        if not parser.description:
            missing.append(f"{command}: no description")
        if "Examples:\n  rackgate" not in text:
            missing.append(f"{command}: no example")
        if not re.search(r"Exit codes:\n  0  ", text):
            missing.append(f"{command}: no exit codes")
        missing += [f"{command}: positional {a.dest} has no help" for a in parser._actions
                    if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
                    and not a.help]
    assert missing == []


def test_rackday_13_the_top_level_help_is_for_people(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "the only layer that prints" not in out
    assert "Exit codes:" in out and "rackgate validate" in out


def test_rackday_13_the_health_checks_help_shows_no_docstring_markup(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli_healthcheck.main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert ":func:" not in out and "``" not in out
    assert "Exit codes:" in out and "--no-slurm" in out


def test_rackday_13_list_checks_is_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "checks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    checks = [*REGISTRY.values(), *RACK_REGISTRY.values()]
    rows = {c.name: next((x for x in lines if x.startswith(c.name + " ")), "") for c in checks}
    at = {rows[c.name].find(c.description) for c in checks}
    assert len(at) == 1 and -1 not in at, at  # every description whole, in one column
    scopes = {rows[c.name].find(" " + c.scope.value + " ") for c in checks}
    assert len(scopes) == 1, scopes


def test_rackday_13_a_check_name_typo_gets_a_did_you_mean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-i", str(unreachable_inventory(tmp_path)), "--profile", "demo",
                 "--checks", "fio.seq_raed", "--plan"]) == 2
    err = capsys.readouterr().err
    assert "'fio.seq_raed': did you mean fio.seq_read?" in err, err
    assert "gpu.health" not in err  # not every name
