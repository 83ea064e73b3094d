"""Issue 11 (sound verdicts), the core: verdict rules, figures, containment, stored runs and
options. One test per finding, named test_sound_<finding>_<what>; each failed on the code
before the fix (the closing note of issue 11 lists how) and passes now.

Stored runs are built here from the project's own fio fixture (tests/fixtures/fio), the way
the collector writes them (EvidenceStore), and judged offline with judge_run or the CLI.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from stored_runs import strict_json, write_run

from rackgate.checks import REGISTRY, load_profile, profile_from_document
from rackgate.checks.shared.base import compare
from rackgate.cli.main import main
from rackgate.model import Judgement, Result, Status, Verdict, node_verdict
from rackgate.profile import ProfileError, Threshold
from rackgate.reports.verify import verify_report
from rackgate.run import judge_run
from rackgate.store.evidence import EvidenceStore

HEALTHY = Path(__file__).parents[1] / "fixtures" / "fio" / "seq-read-healthy.json"


def stored_run(tmp_path: Path, checks: dict[str, str | None], hosts: tuple[str, ...] = ("n1",),
               profile: str = "demo") -> Path:
    """A run directory (tmp_path/runs/r) collected with ``profile``: evidence ``checks``
    (check -> stdout, None: not collected) on every host."""
    return write_run(tmp_path / "runs" / "r", load_profile(profile), list(checks), hosts,
                     evidence={(h, c): out for h in hosts for c, out in checks.items()
                               if out is not None}, argv=("fio",))


def demo_without(*checks: str, disable_all: bool = False) -> dict[str, Any]:
    doc = dict(load_profile("demo").raw)
    doc["checks"] = {k: v for k, v in doc["checks"].items() if k not in checks}
    if disable_all:
        doc["checks"] = {k: {**(v or {}), "enabled": False} for k, v in doc["checks"].items()}
    return doc


def write_profile(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def local_inventory(tmp_path: Path, hostvars: dict[str, Any] | None = None) -> Path:
    """One compute host that nothing can reach (ssh to port 1 of loopback): commands that
    should never start fail at once if they do."""
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": {"n1": {
        "ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_connection": "ssh",
        **(hostvars or {})}}}}}}))
    return inv


# 1. Zero checks run -> ACCEPT --------------------------------------------------------------

def test_sound_1_a_node_with_only_skips_is_rejected() -> None:
    skips = [Result("n1", c, Status.SKIP, "not applicable")
             for c in ("gpu.health", "nccl.all_reduce")]
    nv = node_verdict("n1", skips)
    assert nv.verdict is Verdict.REJECT and nv.status is Status.ERROR
    assert "nothing was run" in nv.reasons[0]
    assert node_verdict("n1", [*skips, Result("n1", "fio.seq_read", Status.WARN, "slow")]
                        ).verdict is Verdict.ACCEPT


def test_sound_1_a_run_of_checks_that_do_not_apply_is_rejected(tmp_path: Path) -> None:
    run = stored_run(tmp_path, {"gpu.health": None, "nccl.all_reduce": None})
    outcome = judge_run(run)
    assert outcome.rack.verdict is Verdict.REJECT
    assert [r.status for r in outcome.rack.nodes[0].results] == [Status.SKIP, Status.SKIP]


def test_sound_1_validate_with_nothing_applicable_refuses_to_run(tmp_path: Path,
                                                                 capsys: Any) -> None:
    runs = tmp_path / "runs"
    rc = main(["validate", "-i", str(local_inventory(tmp_path)), "--profile", "demo",
               "--checks", "gpu", "--runs-dir", str(runs)])
    assert rc == 2
    assert "nothing to run: every selected check is skipped on every node" in \
        capsys.readouterr().err
    assert not runs.exists() or not any(runs.iterdir())


def test_sound_1_a_profile_with_nothing_enabled_is_refused(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(ProfileError, match="no check is enabled"):
        profile_from_document(demo_without(disable_all=True), "all-disabled.yaml")
    run = stored_run(tmp_path, {"fio.seq_read": HEALTHY.read_text()})
    path = write_profile(tmp_path, demo_without(disable_all=True))
    assert main(["judge", str(run), "--profile", str(path)]) == 2
    assert "no check is enabled" in capsys.readouterr().err


def test_sound_1_a_host_override_disabling_everything_is_refused(tmp_path: Path,
                                                                capsys: Any) -> None:
    off = {"checks": {name: {"enabled": False} for name in load_profile("demo").model.checks}}
    inv = local_inventory(tmp_path, {"rackgate_profile_overrides": off})
    runs = tmp_path / "runs"
    assert main(["validate", "-i", str(inv), "--profile", "demo", "--runs-dir", str(runs)]) == 2
    assert "no check is enabled" in capsys.readouterr().err
    assert not runs.exists() or not any(runs.iterdir())


def test_sound_1_a_check_collected_but_absent_from_the_judging_profile_is_an_error(
        tmp_path: Path) -> None:
    run = stored_run(tmp_path, {"gpu.health": "<nvidia_smi_log/>",
                                "fio.seq_read": HEALTHY.read_text()})
    profile = profile_from_document(demo_without("gpu.health"), "without-gpu.yaml")
    outcome = judge_run(run, profile, tmp_path / "rejudged")
    by = {r.check: r for r in outcome.rack.nodes[0].results}
    assert by["gpu.health"].status is Status.ERROR
    assert "does not define it" in by["gpu.health"].message
    assert outcome.rack.verdict is Verdict.REJECT


# 4. Non-finite and impossible figures ------------------------------------------------------

NVLINK = Threshold(unit="GB/s", ref=450, min_ratio=0.75, limit=True, basis="18 x 25 GB/s")
NVLS = NVLINK.model_copy(update={"ceiling": 787.5})


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e30, -1.0])
def test_sound_4_non_finite_or_impossible_figures_are_errors(value: float) -> None:
    j = compare(value, NVLINK, "busbw")
    assert j.status is Status.ERROR, j.message
    assert j.measured is None and j.percent_of_limit is None


def test_sound_4_a_ceiling_admits_nvls_and_nothing_beyond() -> None:
    from rackgate.checks.shared.base import implausible

    # NVLink SHARP: 8-GPU all_reduce busbw ~480 GB/s is real on a 450 GB/s line rate
    assert compare(480.0, NVLS, "busbw").status is Status.PASS
    assert compare(480.0, NVLINK, "busbw").status is Status.ERROR
    assert implausible(830.0, NVLS, "busbw") is not None
    for name in ("dgx-h100", "hgx-h200"):
        busbw = load_profile(name).check("nccl.all_reduce")
        assert busbw is not None and busbw.thresholds["busbw"].plausible_max == 787.5
    with pytest.raises(ValueError, match="below ref"):
        NVLINK.model_validate({**NVLINK.model_dump(), "ceiling": 400})


def test_sound_4_a_judge_that_lets_nan_through_cannot_pass_and_report_json_stays_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check = REGISTRY["fio.seq_read"]

    def nan_judge(*_: Any) -> Judgement:
        return Judgement(Status.PASS, "fast", float("nan"), "MB/s", details={"iops": float("inf")})

    monkeypatch.setitem(REGISTRY, "fio.seq_read", dataclasses.replace(check, judge=nan_judge))
    outcome = judge_run(stored_run(tmp_path, {"fio.seq_read": HEALTHY.read_text()}))
    (res,) = outcome.rack.nodes[0].results
    assert res.status is Status.ERROR and "not a finite number" in res.message
    doc = strict_json(outcome.report_json.read_text())
    assert doc["verdict"] == "REJECT"
    from rackgate.placement.evidence import finite

    assert finite(Result("n", "c", Status.PASS, "ok", percent_of_limit=float("nan"))
                  ).status is Status.ERROR


# 9. One node's output can leave the rack with no report ------------------------------------

@pytest.mark.parametrize("where", ["parse", "judge"])
def test_sound_9_a_crashing_parser_or_judge_is_one_error_and_the_reports_are_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    check = REGISTRY["fio.seq_read"]

    def boom_parse(text: str) -> Any:
        if "BOOM" in text:
            raise OverflowError("cannot convert float NaN to integer")
        return check.parse(text)

    def boom_judge(record: Any, *rest: Any) -> Judgement:
        if record.jobs[0].read.io_bytes == 0:
            raise ZeroDivisionError("division by zero")
        return check.judge(record, *rest)

    patched = dataclasses.replace(check, parse=boom_parse) if where == "parse" else \
        dataclasses.replace(check, judge=boom_judge)
    monkeypatch.setitem(REGISTRY, "fio.seq_read", patched)
    healthy = HEALTHY.read_text()
    run = stored_run(tmp_path, {"fio.seq_read": healthy}, hosts=("n1", "n2"))
    bad = json.loads(healthy[healthy.index("{"):])  # after the fixture's '#' header
    bad["jobs"][0]["read"]["io_bytes"] = 0
    EvidenceStore(run).write("n2", "fio.seq_read",
                             healthy + "BOOM" if where == "parse" else json.dumps(bad),
                             argv=("fio",), outcome="completed", rc=0, started=None,
                             ended=None, duration_s=1.0, stderr="", message="")
    outcome = judge_run(run)
    by = {n.node: n for n in outcome.rack.nodes}
    assert by["n1"].verdict is Verdict.ACCEPT
    (res,) = by["n2"].results
    assert res.status is Status.ERROR
    who, exc = ("parser", "OverflowError") if where == "parse" else ("judge", "ZeroDivisionError")
    assert f"the fio.seq_read {who} failed" in res.message and exc in res.message
    for name in ("report.json", "report.html", "report.xml", "summary.md"):
        assert (run / name).is_file()


# 10. rackgate verify checks the original, not the copy -------------------------------------

def test_sound_10_verify_checks_the_copy_it_is_given(tmp_path: Path) -> None:
    run = stored_run(tmp_path, {"fio.seq_read": HEALTHY.read_text()}, hosts=("n1", "n2"))
    judge_run(run)
    copy = tmp_path / "archive" / "r"
    shutil.copytree(run, copy)
    assert verify_report(copy / "report.json") == (2, [])
    (copy / "evidence/n2/fio.seq_read.out").write_text("tampered")
    checked, problems = verify_report(copy / "report.json")
    assert checked == 2 and len(problems) == 1
    assert problems[0].startswith("n2 fio.seq_read") and str(copy) in problems[0]
    assert verify_report(run / "report.json") == (2, [])  # the original is intact


def test_sound_10_verify_refuses_evidence_paths_outside_the_run(tmp_path: Path) -> None:
    run = stored_run(tmp_path, {"fio.seq_read": HEALTHY.read_text()})
    report = judge_run(run).report_json
    doc = json.loads(report.read_text())
    doc["nodes"][0]["results"][0]["evidence"] = "../../../etc/hostname"
    report.write_text(json.dumps(doc))
    checked, problems = verify_report(report)
    assert checked == 1 and "leaves" in problems[0]


# 13. Tampered or odd stored runs give tracebacks, not exit 2 -------------------------------

MANIFEST_TAMPERINGS = {
    "a JSON list": lambda m: [m],
    "no hosts": lambda m: {k: v for k, v in m.items() if k != "hosts"},
    "no checks": lambda m: {k: v for k, v in m.items() if k != "checks"},
    "a host without location": lambda m: {**m, "hosts": [{"name": "n1",
                                                          "profile_overrides": {}}]},
    "no profile document": lambda m: {**m, "profile": {"name": "demo", "source": "x"}},
    "hosts: []": lambda m: {**m, "hosts": []},
    "a host listed twice": lambda m: {**m, "hosts": m["hosts"] * 2},
}


@pytest.mark.parametrize("tamper", MANIFEST_TAMPERINGS, ids=list(MANIFEST_TAMPERINGS))
def test_sound_13_a_tampered_manifest_is_exit_2_naming_the_field(tmp_path: Path, capsys: Any,
                                                                tamper: str) -> None:
    run = stored_run(tmp_path, {"fio.seq_read": HEALTHY.read_text()})
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(MANIFEST_TAMPERINGS[tamper](manifest)))
    assert main(["judge", str(run)]) == 2
    message = capsys.readouterr().err
    assert "manifest.json" in message
    assert "field" in message or "must be a JSON object" in message


RECORD_TAMPERINGS = {
    "message null": {"message": None},
    "stderr null": {"stderr": None},
    "outcome COMPLETED": {"outcome": "COMPLETED"},
    "rc false": {"rc": False},
    "rc 0.0": {"rc": 0.0},
    "another node's record": {"host": "n9"},
    "rc null but completed": {"rc": None},
}


@pytest.mark.parametrize("tamper", RECORD_TAMPERINGS, ids=list(RECORD_TAMPERINGS))
def test_sound_13_a_tampered_evidence_record_is_damaged_evidence(tmp_path: Path,
                                                                tamper: str) -> None:
    run = stored_run(tmp_path, {"fio.seq_read": HEALTHY.read_text()})
    path = run / "evidence/n1/fio.seq_read.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **RECORD_TAMPERINGS[tamper]}))
    (res,) = judge_run(run).rack.nodes[0].results
    assert res.status is Status.ERROR and "is damaged: " in res.message, res.message


def test_sound_13_unwritable_places_are_exit_2(tmp_path: Path, capsys: Any) -> None:
    run = stored_run(tmp_path, {"fio.seq_read": HEALTHY.read_text()})
    (run / "report.json").mkdir()
    assert main(["judge", str(run)]) == 2
    assert "report.json" in capsys.readouterr().err
    runs_file = tmp_path / "runs-is-a-file"
    runs_file.write_text("")
    assert main(["validate", "-i", str(local_inventory(tmp_path)), "--profile", "demo",
                 "--checks", "fio.seq_read", "--runs-dir", str(runs_file),
                 "--no-plan"]) == 2  # the plan would refuse first: fio is not installed here
    assert "runs-is-a-file" in capsys.readouterr().err


def test_sound_13_history_limit_must_be_positive(tmp_path: Path) -> None:
    judge_run(stored_run(tmp_path, {"fio.seq_read": HEALTHY.read_text()}))
    with pytest.raises(SystemExit) as exit_:
        main(["history", "n1", "--limit", "0", "--runs-dir", str(tmp_path / "runs")])
    assert exit_.value.code == 2


# 14. Counting and options ------------------------------------------------------------------

@pytest.mark.parametrize("option", [["--forks", "0"], ["--forks", "-5"], ["--limit", ""],
                                    ["--limit", " , "], ["--checks", ","]],
                         ids=["forks 0", "forks -5", "limit empty", "limit commas",
                              "checks comma"])
def test_sound_14_options_that_select_nothing_are_refused_before_anything_runs(
        tmp_path: Path, option: list[str]) -> None:
    runs = tmp_path / "runs"
    argv = ["validate", "-i", str(local_inventory(tmp_path)), "--profile", "demo",
            "--runs-dir", str(runs), *option]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse refuses a bad number with exit 2
        rc = int(exc.code or 0)
    assert rc == 2
    assert not runs.exists() or not any(runs.iterdir())
