"""Issue 30, items 2 and 9: the retest loop closes by itself, and ``drain`` says when its run
is stale and drains ``error`` only when asked.

Everything runs end to end through the CLI and the real collector (Ansible, local
connection): the scheduler is the stand-in slurmctld of tests/unit/fake_schedulers.py
(sinfo, scontrol, and srun printing what rackgate's MPI all-reduce probe prints), the BMCs
a stand-in ipmitool that prints the sdr listing of tests/fixtures/redundancy (less its
header) each node's BMC is set to, so a test reads what SLURM holds and what the reports
say after each step.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_schedulers import FakeSlurm
from stored_runs import write_run

from rackgate.checks import load_profile
from rackgate.cli.main import main
from rackgate.store.history import default_history_path, open_history, record_report

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "redundancy"
HEALTHY = FIXTURES / "ipmi-elist-healthy-2psu-redundant.txt"
PSU2_FAILED = FIXTURES / "ipmi-elist-psu2-failure-detected.txt"
NODES = ("n1", "n2")
CHECKS = "redundancy.psu_ipmi,mpi.allreduce"
IPMITOOL = r'''
import json, sys
args = sys.argv[2:]
bmcs = json.loads(open(sys.argv[1]).read())
listing = open(bmcs[args[args.index("-H") + 1]]).read().splitlines(keepends=True)
sys.stdout.write("".join(x for x in listing if not x.startswith("#")))  # the fixture's header
'''


class Rack:
    """Two nodes and a SLURM controller, all this host (local connection), their BMCs a
    stand-in ipmitool, SLURM a stand-in slurmctld; every tool first on PATH."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.slurm = FakeSlurm(tmp_path / "slurm", {n: ("idle", "") for n in NODES})
        self.bmcs = tmp_path / "bmcs.json"
        self.bmc({n: HEALTHY for n in NODES})
        body = tmp_path / "fake_ipmitool.py"
        body.write_text(IPMITOOL)
        tool = self.slurm.bin / "ipmitool"
        tool.write_text(f"#!{sys.executable}\nimport runpy, sys\n"
                        f"sys.argv = [{str(body)!r}, {str(self.bmcs)!r}, *sys.argv[1:]]\n"
                        f"runpy.run_path({str(body)!r}, run_name='__main__')\n")
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{self.slurm.bin}{os.pathsep}{Path(sys.executable).parent}"
                                   f"{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
        local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        hosts = {n: {**local, "rackgate_bmc_host": f"bmc-{n}", "rackgate_bmc_user": "admin",
                     "rackgate_bmc_password": "not-a-secret",
                     "rackgate_node_lock_file": str(tmp_path / "node.lock")} for n in NODES}
        self.inventory = tmp_path / "hosts.yml"
        self.inventory.write_text(yaml.safe_dump({"all": {"children": {
            "compute": {"hosts": hosts},
            "slurm_controller": {"hosts": {"head": {
                **local, "rackgate_node_lock_file": str(tmp_path / "head.lock")}}}}}}))
        self.runs = tmp_path / "runs"

    def bmc(self, fixtures: dict[str, Path]) -> None:
        current = json.loads(self.bmcs.read_text()) if self.bmcs.is_file() else {}
        self.bmcs.write_text(json.dumps({**current, **{f"bmc-{n}": str(f)
                                                       for n, f in fixtures.items()}}))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def report(run_dir: Path, name: str = "report.json") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((run_dir / name).read_text())
    return doc


def verdicts(doc: dict[str, Any]) -> dict[str, str]:
    return {n["name"]: n["verdict"] for n in doc["nodes"]}


def test_rackday_2_drain_heal_retest_resume_closes_the_loop(tmp_path, monkeypatch, capsys):
    """PSU2 fails on n1: validate REJECTs it, drain drains it. A retest before the repair
    resumes it for the job across the nodes (so mpi.allreduce measures both nodes again)
    and drains it again from this revision's finding; after the repair the retest ACCEPTs
    it and leaves it in service, ``drain --resume-passed`` has nothing left to do. Every
    revision's report is kept and the last one tells the story since revision 1."""
    rack = Rack(tmp_path, monkeypatch)
    rack.bmc({"n1": PSU2_FAILED})
    code, out = cli(capsys, "validate", "-i", str(rack.inventory), "--profile", "demo",
                    "--checks", CHECKS, "--runs-dir", str(rack.runs), "--no-plan")
    assert code == 1, out
    [run_dir] = rack.runs.glob("*-demo")
    run_id = run_dir.name
    assert verdicts(report(run_dir)) == {"n1": "REJECT", "n2": "ACCEPT"}
    code, out = cli(capsys, "drain", str(run_dir))
    assert code == 0, out
    state, ours = rack.slurm.nodes()["n1"]
    assert state == "drained", out
    assert ours.startswith(f"rackgate/drain[{run_id}]: redundancy.psu_ipmi: PSU2"), ours

    code, out = cli(capsys, "validate", "--retest", str(run_dir))  # not repaired yet
    assert code == 1, out
    doc = report(run_dir)
    [job] = [r for n in doc["nodes"] if n["name"] == "n1" for r in n["results"]
             if r["check"] == "mpi.allreduce"]
    assert job["status"] == "pass", job  # the job ran on both nodes: n1 was resumed for it
    assert rack.slurm.nodes()["n1"] == ("drained", ours), out  # this revision's finding
    assert "drained again" in out, out

    rack.bmc({"n1": HEALTHY})  # the repair
    code, out = cli(capsys, "validate", "--retest", str(run_dir))
    assert code == 0, out
    assert rack.slurm.nodes()["n1"] == ("idle", ""), out
    assert "n1: passes the retest: stays in service" in out, out
    code, out = cli(capsys, "drain", str(run_dir), "--resume-passed")
    assert code == 0, out
    assert rack.slurm.nodes() == {"n1": ("idle", ""), "n2": ("idle", "")}, out

    final = report(run_dir)
    assert final["revision"] == 3 and verdicts(final) == {"n1": "ACCEPT", "n2": "ACCEPT"}
    for revision, expected in ((1, "REJECT"), (2, "REJECT"), (3, "ACCEPT")):
        kept = report(run_dir, f"report.rev{revision}.json")
        assert kept["revision"] == revision and verdicts(kept)["n1"] == expected
        assert (run_dir / f"report.rev{revision}.html").is_file()
        assert (run_dir / f"report.rev{revision}.xml").is_file()
    diff = final["diff"]  # the story since revision 1
    assert (diff["a"]["revision"], diff["b"]["revision"]) == (1, 3)
    assert [(c["node_a"], c["check"], c["status_a"], c["status_b"])
            for c in diff["changes"]] == [("n1", "redundancy.psu_ipmi", "fail", "pass")]
    assert f"Changes in run {run_id} from revision 1 to revision 3" in (
        run_dir / "report.html").read_text()


def stored_run(runs: Path, inventory: Path, run_id: str, nodes: dict[str, list[dict[str, Any]]],
               finished: str = "2026-11-01T01:00:00+00:00") -> Path:
    """A judged run ``run_id`` whose report gives ``nodes`` ({node: results}) and whose
    last collection ended at ``finished``; its launch host is "head" (local)."""
    run_dir = write_run(runs / run_id, load_profile("demo"), ["redundancy.psu_ipmi"],
                        list(nodes), launch_host="head")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update(inventory=[str(inventory)], started=finished, finished=finished)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    judged(run_dir, nodes, generated=finished)
    return run_dir


def judged(run_dir: Path, nodes: dict[str, list[dict[str, Any]]],
           generated: str = "2026-11-01T01:00:00+00:00") -> dict[str, Any]:
    bad = {n for n, rs in nodes.items() if any(r["status"] in ("fail", "error") for r in rs)}
    doc = {"schema": "rackgate.report/1", "generated": generated,
           "run": {"run_id": run_dir.name}, "profile": {"name": "demo", "sha256": "ab12"},
           "verdict": "REJECT" if bad else "ACCEPT",
           "summary": {"nodes": len(nodes), "accepted": len(nodes) - len(bad)},
           "nodes": [{"name": n, "verdict": "REJECT" if n in bad else "ACCEPT", "reasons": [],
                      "results": [{"measured": None, "unit": "", "expected": "",
                                   "evidence": None, "evidence_sha256": None, **r}
                                  for r in rs]} for n, rs in nodes.items()]}
    (run_dir / "report.json").write_text(json.dumps(doc))
    return doc


PSU_FAIL = {"check": "redundancy.psu_ipmi", "status": "fail",
            "message": "PSU2 Status (02h): Failure detected"}
PSU_PASS = {**PSU_FAIL, "status": "pass", "message": "2 of 2 PSUs healthy"}
BMC_ERROR = {**PSU_FAIL, "status": "error",
             "message": "ipmitool: Error: Unable to establish IPMI v2 / RMCP+ session"}


def local_inventory(tmp_path: Path) -> Path:
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {
        "compute": {"hosts": dict.fromkeys(NODES, local)},
        "slurm_controller": {"hosts": {"head": local}}}}}))
    return path


@pytest.fixture
def slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm(tmp_path / "slurm", {n: ("idle", "") for n in NODES})
    monkeypatch.setenv("PATH", f"{fake.bin}{os.pathsep}{Path(sys.executable).parent}"
                               f"{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    return fake


def test_rackday_2_a_drain_reason_never_quotes_an_earlier_drain(tmp_path, slurm, capsys):
    """A retest left n1 REJECTed with its PSU failure and an mpi.allreduce error whose
    message quotes n1's drain (the readiness guard names a drained node's reason): drain
    keeps the reason built from the finding, never one quoting the earlier drain."""
    inventory = local_inventory(tmp_path)
    run_dir = stored_run(tmp_path / "runs", inventory, "20261101T000000Z-demo",
                         {"n1": [PSU_FAIL], "n2": [PSU_PASS]})
    code, out = cli(capsys, "drain", str(run_dir))
    assert code == 0, out
    _, ours = slurm.nodes()["n1"]
    guard = {"check": "mpi.allreduce", "status": "error",
             "message": "n1 broke the mpi.allreduce job: rackgate-slurm-ready: SLURM nodes "
                        f"not ready, nothing was queued: n1 drained ({ours})"}
    judged(run_dir, {"n1": [guard, PSU_FAIL], "n2": [PSU_PASS]})  # as the retest left it
    code, out = cli(capsys, "drain", str(run_dir))
    assert code == 0, out
    state, reason = slurm.nodes()["n1"]
    assert state == "drained" and reason.startswith(ours), out  # the PSU, named first
    assert reason.count("rackgate/drain[") == 1, reason


def test_rackday_9_errors_are_drained_only_with_include_errors(tmp_path, slurm, capsys):
    """n1's BMC did not answer (error: nothing measured), n2's PSU2 failed (measured): drain
    drains n2 alone and lists n1 as not drained, naming --include-errors, which drains it."""
    inventory = local_inventory(tmp_path)
    run_dir = stored_run(tmp_path / "runs", inventory, "20261101T000000Z-demo",
                         {"n1": [BMC_ERROR], "n2": [PSU_FAIL]})
    code, out = cli(capsys, "drain", str(run_dir))
    assert code == 0, out
    nodes = slurm.nodes()
    assert nodes["n1"] == ("idle", "") and nodes["n2"][0] == "drained", out
    [line] = [x for x in out.splitlines() if x.startswith("n1 ")]
    assert "not drained" in line and "--include-errors" in line, out
    code, out = cli(capsys, "drain", str(run_dir), "--include-errors")
    assert code == 0, out
    state, reason = slurm.nodes()["n1"]
    assert state == "drained" and "Unable to establish IPMI" in reason, out


def test_rackday_9_drain_warns_on_a_run_a_later_run_superseded(tmp_path, slurm, capsys):
    """Run A (November) and run B (December) judged n1; drain A warns that B is newer and
    names B's drain; drain B (the control) warns of nothing."""
    inventory = local_inventory(tmp_path)
    runs = tmp_path / "runs"
    run_a = stored_run(runs, inventory, "20261101T000000Z-demo",
                       {"n1": [PSU_FAIL], "n2": [PSU_PASS]})
    run_b = stored_run(runs, inventory, "20261202T000000Z-demo",
                       {"n1": [PSU_PASS], "n2": [PSU_PASS]},
                       finished="2026-12-02T01:00:00+00:00")
    conn = open_history(default_history_path(runs))
    try:
        for run_dir in (run_a, run_b):
            record_report(conn, report(run_dir), run_dir)
    finally:
        conn.close()
    code, out = cli(capsys, "drain", str(run_a), "--dry-run")
    assert code == 0, out
    warnings = [x for x in out.splitlines() if x.startswith("WARNING")]
    assert len(warnings) == 1 and run_b.name in warnings[0], out
    assert f"rackgate drain {run_b}" in warnings[0]
    code, out = cli(capsys, "drain", str(run_b), "--dry-run")
    assert code == 0 and "WARNING" not in out, out


def test_rackday_9_drain_warns_when_slurm_changed_after_the_run(tmp_path, slurm, capsys):
    """After run A ended, a person drained n2, and resumed n1 that A had drained: drain A
    says both; the control: A's own drain, still in place, is no warning."""
    inventory = local_inventory(tmp_path)
    run_a = stored_run(tmp_path / "runs", inventory, "20261101T000000Z-demo",
                       {"n1": [PSU_FAIL], "n2": [PSU_PASS]})
    code, out = cli(capsys, "drain", str(run_a))
    assert code == 0 and "WARNING" not in out, out
    code, out = cli(capsys, "drain", str(run_a), "--dry-run")
    assert code == 0 and "WARNING" not in out, out  # its own drain is no news
    slurm.set("n1", "idle", "")
    slurm.set("n2", "drained", "ops: DIMM B3, ticket 4711", since=1796292000)
    code, out = cli(capsys, "drain", str(run_a), "--dry-run")
    assert code == 0, out
    warnings = [x for x in out.splitlines() if x.startswith("WARNING")]
    assert any(w.startswith("WARNING: n1: this run drained it") for w in warnings), out
    assert any(w.startswith("WARNING: n2: SLURM shows drained (ops: DIMM B3") for w in warnings)
