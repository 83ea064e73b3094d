"""Issue 28, findings 4 and 5: a report or a manifest edited after the run.

4. ``rackgate verify`` passed edited reports (figures, a result's evidence nulled, a node
   removed) and ``rackgate baseline`` trusted them: verify now judges the run again from its
   evidence with its recorded profile and compares, and baseline verifies first.
5. A manifest that no longer lists a failing check (or node) was judged ACCEPT, its
   evidence on disk ignored: judging now holds the evidence on disk against the manifest.

Runs are stored as validate writes them (stored_runs.write_run) and judged by the real
judge; fio evidence is the captured fixture with its figures scaled per node
(test_baseline.seq_read); each test then edits what the hostile review edited.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from stored_runs import write_run
from test_baseline import demo_with, seq_read

from rackgate.checks import load_profile
from rackgate.cli.main import main
from rackgate.profile import Profile
from rackgate.run import judge_run
from rackgate.store.evidence import EvidenceStore
from rackgate.store.manifest import read_manifest, write_manifest

RUN = "20261202T031500Z-demo"
STRAY_CHECK = "run.evidence"  # rackgate.judge.strays.STRAY_CHECK (not on main: no import)


def stored(tmp_path: Path, fixture_text: Any, factors: dict[str, float], *,
           profile: Profile | None = None, rand_read: bool = False,
           overrides: dict[str, Any] | None = None) -> Path:
    """A judged run of fio.seq_read on nodes named by ``factors`` (their bandwidth factor:
    1.0 is 1,209 MB/s, 0.01 fails the demo's 50 MB/s floor), and fio.rand_read (healthy)
    when ``rand_read``."""
    evidence = {(n, "fio.seq_read"): seq_read(fixture_text, f) for n, f in factors.items()}
    if rand_read:
        evidence |= {(n, "fio.rand_read"): fixture_text("fio/rand-read-4k-qd32-healthy.json")
                     for n in factors}
    run = write_run(tmp_path / "runs" / RUN, profile or load_profile("demo"),
                    ["fio.seq_read", *(["fio.rand_read"] if rand_read else [])],
                    [(n, "", (overrides or {}).get(n, {})) for n in factors],
                    evidence=evidence, argv=("fio",))
    judge_run(run)
    return run


def report(run: Path) -> dict[str, Any]:
    return json.loads((run / "report.json").read_text())


def rewrite(run: Path, doc: dict[str, Any]) -> None:
    (run / "report.json").write_text(json.dumps(doc))


def verify(capsys: Any, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["verify", *args])
    return code, capsys.readouterr().out


def result(doc: dict[str, Any], node: str, check: str = "fio.seq_read") -> dict[str, Any]:
    entry = next(n for n in doc["nodes"] if n["name"] == node)
    return next(r for r in entry["results"] if r["check"] == check)


# 4. verify passes edited reports, and baseline trusts them ----------------------------------

def test_sound2_4_verify_refuses_an_edited_figure(tmp_path, fixture_text, capsys):
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 1.0})
    doc = report(run)
    result(doc, "n2")["measured"] = 5000.0
    rewrite(run, doc)
    code, out = verify(capsys, str(run / "report.json"))
    assert code == 1, out
    assert "MISMATCH node n2 check fio.seq_read field measured: report.json has 5000.0, " \
           "re-judged from the evidence: 1209.0" in out, out
    assert "1 problem(s)" in out


def test_sound2_4_verify_refuses_a_result_whose_evidence_was_nulled(tmp_path, fixture_text,
                                                                    capsys):
    """The hostile edit: the failing node's evidence made to read healthy, and its result's
    ``evidence`` nulled so that verify did not hash the file; the report says pass."""
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.01})
    doc = report(run)
    assert result(doc, "n2")["status"] == "fail"
    result(doc, "n1")["evidence"] = None  # alone: the file is intact, the report not
    rewrite(run, doc)
    code, out = verify(capsys, str(run / "report.json"))
    assert code == 1, out
    assert "MISMATCH node n1 check fio.seq_read field evidence: report.json has null, " \
           "re-judged from the evidence: \"evidence/n1/fio.seq_read.out\"" in out, out
    doc = report(run)
    (run / "evidence/n2/fio.seq_read.out").write_text(seq_read(fixture_text, 1.0))
    forged = {**result(doc, "n1"), "evidence": None, "evidence_sha256": None, "attempt": None}
    doc["nodes"][1]["results"] = [forged]
    doc["nodes"][1].update(verdict="ACCEPT", status="pass", reasons=[])
    doc.update(verdict="ACCEPT", reasons=[])
    doc["summary"].update(accepted=2, rejected=0, results={**doc["summary"]["results"],
                                                           "pass": 2, "fail": 0})
    rewrite(run, doc)
    code, out = verify(capsys, str(run / "report.json"))
    assert code == 1, out
    assert "MISMATCH node n2 check fio.seq_read field status: report.json has \"pass\", " \
           "re-judged from the evidence: \"error\"" in out, out  # the .out no longer matches
    assert "MISMATCH field verdict: report.json has \"ACCEPT\", re-judged from the " \
           "evidence: \"REJECT\"" in out


def test_sound2_4_verify_refuses_a_report_without_a_rejected_node(tmp_path, fixture_text,
                                                                  capsys):
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.01})
    doc = report(run)
    doc["nodes"] = [n for n in doc["nodes"] if n["name"] != "n2"]
    doc.update(verdict="ACCEPT", reasons=[])
    rewrite(run, doc)
    code, out = verify(capsys, str(run / "report.json"))
    assert code == 1, out
    assert "MISMATCH node n2: judged REJECT from the run's evidence, missing from " \
           "report.json" in out, out


def test_sound2_4_baseline_refuses_an_edited_report(tmp_path, fixture_text, capsys):
    """The hostile review's baseline: figures edited to 1 MB/s became a 1 MB/s reference,
    and a 10 MB/s node then passed with it."""
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 1.0})
    doc = report(run)
    for node in ("n1", "n2"):
        result(doc, node)["measured"] = 1.0
    rewrite(run, doc)
    out = tmp_path / "overrides.yaml"
    assert main(["baseline", str(run), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert not out.exists()
    assert err.startswith(f"rackgate baseline: {run / 'report.json'} is not what run ")
    assert "(2 problem(s); the first: node n1 check fio.seq_read field measured: report.json " \
           "has 1.0, re-judged from the evidence: 1209.0)" in err, err


def test_sound2_4_verify_refuses_an_edited_verdict_and_an_added_result(tmp_path, fixture_text,
                                                                       capsys):
    run = stored(tmp_path, fixture_text, {"n1": 0.01})
    doc = report(run)
    doc["verdict"] = "ACCEPT"
    doc["nodes"][0]["results"].append({**result(doc, "n1"), "check": "fio.rand_read"})
    rewrite(run, doc)
    code, out = verify(capsys, str(run / "report.json"))
    assert code == 1
    assert "MISMATCH field verdict: report.json has \"ACCEPT\", re-judged from the evidence: " \
           "\"REJECT\"" in out
    assert "MISMATCH node n1 check \"fio.rand_read\": in report.json (\"fail\"), not a result " \
           "the run's evidence gives" in out, out


# verify's controls: honest reports still verify -------------------------------------------

def test_an_honest_report_verifies_with_its_recorded_profile_and_overrides(tmp_path,
                                                                          fixture_text, capsys):
    """A run recorded with a profile that differs from the shipped one (an old run, or
    validate --overrides) and a node with inventory overrides; a rejected node, a node
    whose host was unreachable: the report verifies, and baseline of the accepted nodes
    is written."""
    recorded = demo_with({"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "ref": 120}}}}})
    own = {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "ref": 90, "basis": "n2 has the older 90 MB/s disks (site inventory)"}}}}}
    run = write_run(tmp_path / "runs" / RUN, recorded, ["fio.seq_read"],
                    [("n1", "r1 u1", {}), ("n2", "", own), ("n3", "", {}), ("n4", "", {})],
                    evidence={(n, "fio.seq_read"): seq_read(fixture_text, f)
                              for n, f in (("n1", 1.0), ("n2", 0.9), ("n3", 0.01))},
                    argv=("fio",))
    EvidenceStore(run).write("n4", "fio.seq_read", "", argv=(), outcome="unreachable",
                             rc=None, started=None, ended=None, duration_s=None, stderr="",
                             message="ssh: connect to host n4: No route to host")
    judge_run(run)
    assert [n["verdict"] for n in report(run)["nodes"]] == ["ACCEPT", "ACCEPT", "REJECT",
                                                            "REJECT"]
    code, out = verify(capsys, str(run / "report.json"))
    assert (code, out.splitlines()[-1]) == (0, f"4 evidence file(s) checked, 4 result(s) "
                                               f"re-judged from {run} by rackgate "
                                               f"{__import__('rackgate').__version__}, "
                                               f"0 problem(s)"), out
    assert main(["baseline", str(run), "--nodes", "n1,n2", "--allow-small", "-o",
                 str(tmp_path / "o.yaml")]) == 0


def test_a_retested_run_verifies_and_its_superseded_report_does_not(tmp_path, fixture_text,
                                                                    capsys):
    """Revision 2 (a retest: the failed node's evidence collected again as attempt 2, the
    report compared with the one it replaces) verifies; the revision 1 report kept aside
    is superseded: the run is no longer judged from its evidence."""
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.01})
    old = tmp_path / "rev1"
    shutil.copytree(run, old / RUN)
    manifest = read_manifest(run)
    manifest.add_revision("retest", nodes=["n2"], checks=["fio.seq_read"], via="ansible")
    write_manifest(run, manifest)
    EvidenceStore(run).write("n2", "fio.seq_read", seq_read(fixture_text, 1.0), argv=("fio",),
                             outcome="completed", rc=0, started=None, ended=None,
                             duration_s=1.0, stderr="", message="")
    assert main(["judge", str(run), "--compare", str(old / RUN / "report.json")]) == 0
    assert result(report(run), "n2")["attempt"] == 2 and "diff" in report(run)
    assert verify(capsys, str(run / "report.json"))[0] == 0
    (old / RUN / "report.json").replace(tmp_path / "report-rev1.json")  # beside no evidence
    code, out = verify(capsys, str(tmp_path / "report-rev1.json"))
    assert code == 1
    assert "MISMATCH report.json is of revision 1, the run directory holds revision 2" in out


def test_a_report_judged_with_overrides_verifies_with_the_same_overrides(tmp_path,
                                                                        fixture_text, capsys):
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    overrides = tmp_path / "stricter.yaml"
    overrides.write_text("checks:\n  fio.seq_read:\n    thresholds:\n      read_bw: {unit: "
                         "MB/s, ref: 1100, min_ratio: 0.9, basis: a test figure}\n")
    assert main(["judge", str(run), "--overrides", str(overrides)]) == 0
    code, out = verify(capsys, str(run / "report.json"))
    assert code == 1 and "verify with the --profile and --overrides it was judged with" in out
    assert verify(capsys, str(run / "report.json"), "--overrides", str(overrides))[0] == 0


def test_an_archived_copy_verifies_against_its_own_evidence(tmp_path, fixture_text, capsys,
                                                            monkeypatch):
    """Judged through a relative path, verified as an archived copy and where it is: the
    profile's label names the directory it was judged in, and is no difference."""
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 1.0})
    monkeypatch.chdir(tmp_path)
    assert main(["judge", f"runs/{RUN}"]) == 0
    copy = tmp_path / "archive" / RUN
    shutil.copytree(run, copy)
    assert verify(capsys, str(copy / "report.json"))[0] == 0
    (copy / "evidence/n2/fio.seq_read.out").write_text(seq_read(fixture_text, 0.5))
    code, out = verify(capsys, str(copy / "report.json"))
    assert code == 1 and f"MISMATCH n2 fio.seq_read: {copy}/evidence/n2/fio.seq_read.out " \
                         "has sha256" in out, out
    assert verify(capsys, str(run / "report.json"))[0] == 0  # the original is intact


def test_verify_of_a_directory_that_is_not_a_run_is_exit_2(tmp_path, fixture_text, capsys):
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    (run / "manifest.json").unlink()
    assert main(["verify", str(run / "report.json")]) == 2
    assert "no manifest.json" in capsys.readouterr().err


# 5. a manifest that no longer lists a failing check -----------------------------------------

def test_sound2_5_a_check_dropped_from_the_manifest_is_an_error(tmp_path, fixture_text, capsys):
    run = stored(tmp_path, fixture_text, {"n1": 0.01, "n2": 1.0}, rand_read=True)
    assert report(run)["verdict"] == "REJECT"  # n1's fio.seq_read fails
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["checks"] = ["fio.rand_read"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["judge", str(run)]) == 1
    doc = report(run)
    assert doc["verdict"] == "REJECT"
    for node in ("n1", "n2"):
        stray = result(doc, node, STRAY_CHECK)
        assert stray["status"] == "error"
        assert f"evidence/{node}/fio.seq_read.json (manifest.json does not list check " \
               "fio.seq_read; its checks: fio.rand_read)" in stray["message"]
    assert result(doc, "n2", "fio.rand_read")["status"] == "pass"


def test_sound2_5_a_node_dropped_from_the_manifest_is_an_error(tmp_path, fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.01})
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["hosts"] = [h for h in manifest["hosts"] if h["name"] != "n2"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["judge", str(run)]) == 1
    stray = result(report(run), "n1", STRAY_CHECK)
    assert stray["status"] == "error" and "evidence/n2/fio.seq_read.json (manifest.json " \
        "lists no host n2: its hosts are n1, launch host none, fabric host none)" \
        in stray["message"]


def test_sound2_5_verify_refuses_a_report_judged_before_the_manifest_was_edited(
        tmp_path, fixture_text, capsys):
    run = stored(tmp_path, fixture_text, {"n1": 0.01, "n2": 1.0}, rand_read=True)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["checks"] = ["fio.rand_read"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    code, out = verify(capsys, str(run / "report.json"))
    assert code == 1
    assert "MISMATCH field run.checks: report.json has [\"fio.seq_read\", \"fio.rand_read\"], " \
           "re-judged from the evidence: [\"fio.rand_read\"]" in out, out
    assert "MISMATCH node n2 field verdict: report.json has \"ACCEPT\", re-judged from the " \
           "evidence: \"REJECT\"" in out


# judging's controls: every stored (host, check) the manifest accounts for judges as before

def test_attempts_not_run_records_and_a_launch_host_are_the_runs_own(tmp_path, fixture_text):
    """A second attempt (resume, retest), a not_run record, an interrupted write's
    temporary file, and a job across the nodes stored on a launch host that is not a node
    under test: no stray evidence."""
    run = write_run(tmp_path / "runs" / "mpi", load_profile("demo"),
                    ["mpi.allreduce", "fio.seq_read"], ["rg-node01", "rg-node02"],
                    launch_host="rg-head", argv=("timeout", "srun"),
                    evidence={("rg-head", "mpi.allreduce"): fixture_text(
                        "mpi/allreduce-2nodes-srun-healthy.txt"),
                        ("rg-node01", "fio.seq_read"): seq_read(fixture_text, 0.01)})
    store = EvidenceStore(run)
    store.write("rg-node01", "fio.seq_read", seq_read(fixture_text, 1.0), argv=("fio",),
                outcome="completed", rc=0, started=None, ended=None, duration_s=1.0,
                stderr="", message="")
    store.write("rg-node02", "fio.seq_read", "", argv=(), outcome="not_run", rc=None,
                started=None, ended=None, duration_s=None, stderr="",
                message="inventory host rg-node02 is no longer in inv")
    (run / "evidence/rg-node02/.fio.seq_read.json.x1.tmp").write_text("{")
    doc = json.loads(judge_run(run).report_json.read_text())
    checks = {(n["name"], r["check"]): r["status"] for n in doc["nodes"] for r in n["results"]}
    assert checks == {("rg-node01", "mpi.allreduce"): "pass",
                      ("rg-node02", "mpi.allreduce"): "pass",
                      ("rg-node01", "fio.seq_read"): "pass",
                      ("rg-node02", "fio.seq_read"): "error"}
    assert result(doc, "rg-node01")["attempt"] == 2


def test_a_manifest_check_without_evidence_is_still_an_error(tmp_path, fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["checks"].append("fio.rand_read")
    (run / "manifest.json").write_text(json.dumps(manifest))
    doc = json.loads(judge_run(run).report_json.read_text())
    missing = result(doc, "n1", "fio.rand_read")
    assert doc["verdict"] == "REJECT" and missing["status"] == "error"
    assert missing["message"].startswith("no evidence collected (evidence/n1/fio.rand_read"
                                         ".json is missing)")


@pytest.mark.parametrize("what", ["a file where a host's directory belongs",
                                  "a check listed in the manifest on a host it does not know"])
def test_sound2_5_other_evidence_the_manifest_does_not_account_for(tmp_path, fixture_text, what):
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    if what.startswith("a file"):
        (run / "evidence" / "n9").write_text("")
        expected = "evidence/n9 is not a directory"
    else:
        shutil.copytree(run / "evidence" / "n1", run / "evidence" / "n9")
        expected = "evidence/n9/fio.seq_read.json (manifest.json lists no host n9"
    doc = json.loads(judge_run(run).report_json.read_text())
    assert doc["verdict"] == "REJECT" and expected in result(doc, "n1", STRAY_CHECK)["message"]
