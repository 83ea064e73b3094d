"""Issue 28, finding 3: ``rackgate drain --resume-passed`` resumes only what this run
drained, and the health check only its own drains.

``rackgate drain`` runs end to end here: the real collector (Ansible, local connection)
runs the scheduler's commands, which are stand-ins first on PATH with the state of a
slurmctld or a Kubernetes API server in a file (tests/unit/fake_schedulers.py), so each
test reads what the scheduler holds after each step: a rejecting run drains, the retest
(report.json rewritten as a retest leaves it: same run, the node now ACCEPT) resumes."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_schedulers import FakeKubernetes, FakeSlurm
from stored_runs import write_run
from test_healthcheck_cli import FakeNode, body

from rackgate.checks import load_profile
from rackgate.cli.main import main
from rackgate.programs import healthcheck as cli_healthcheck

ROOT = Path(__file__).resolve().parents[2]
A, B = "20261101T000000Z-demo", "20261202T031500Z-demo"
PERSON = "rackgate maint: PSU2 RMA ticket 4711, do not resume"
# what rackgate before this change wrote when run A rejected a node
A_LEGACY = f"rackgate {A}: fio.seq_read: sequential read 12 MB/s misses 1,000 MB/s"
PSU = {"check": "redundancy.psu_ipmi", "message": "PSU2 Status (02h): Failure detected"}


def _inventory(tmp_path: Path, nodes: list[str]) -> Path:
    path = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    path.write_text(yaml.safe_dump({"all": {"children": {
        "compute": {"hosts": {n: local for n in nodes}},
        "slurm_controller": {"hosts": {"head": local}}}}}))
    return path


def stored_run(tmp_path: Path, run_id: str, verdicts: dict[str, str]) -> Path:
    """A judged run ``run_id`` of ``verdicts`` ({node: ACCEPT|REJECT}: a PSU failure);
    the launch host is "head" (local)."""
    inventory = _inventory(tmp_path, [*verdicts])
    run_dir = write_run(tmp_path / "runs" / run_id, load_profile("demo"),
                        ["redundancy.psu_ipmi"], list(verdicts), launch_host="head")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["inventory"] = [str(inventory)]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    judged(run_dir, verdicts)
    return run_dir


def judged(run_dir: Path, verdicts: dict[str, str]) -> None:
    """report.json of the run with these verdicts (a retest rewrites it so)."""
    (run_dir / "report.json").write_text(json.dumps({
        "schema": "rackgate.report/1", "run": {"run_id": run_dir.name},
        "nodes": [{"name": n, "verdict": v, "reasons": [],
                   "results": [{**PSU, "status": "fail" if v == "REJECT" else "pass"}]}
                  for n, v in verdicts.items()]}))


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch):
    def put(bin_dir: Path) -> None:
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}"
                                   f"{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    return put


def drain(run_dir: Path, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    sys_stdout, sys.stdout = sys.stdout, out
    try:
        code = main(["drain", str(run_dir), *extra])
    finally:
        sys.stdout = sys_stdout
    return code, out.getvalue()


def test_sound2_3_resume_passed_resumes_only_the_drains_this_run_made(tmp_path, on_path):
    """n1: drained by run A's rejection for a check run B never ran; n2: a person's drain
    whose reason starts "rackgate <word>: "; n3: drained by run B itself (the control:
    B's retest passes it, and it is resumed)."""
    slurm = FakeSlurm(tmp_path, {"n1": ("drained", A_LEGACY), "n2": ("drained", PERSON),
                                 "n3": ("idle", "")})
    on_path(slurm.bin)
    run_b = stored_run(tmp_path, B, {"n1": "ACCEPT", "n2": "ACCEPT", "n3": "REJECT"})
    code, out = drain(run_b)
    assert code == 0, out
    assert slurm.nodes()["n3"][0] == "drained"
    judged(run_b, {"n1": "ACCEPT", "n2": "ACCEPT", "n3": "ACCEPT"})  # B's retest
    code, out = drain(run_b, "--resume-passed")
    assert code == 0, out
    assert slurm.nodes() == {"n1": ("drained", A_LEGACY), "n2": ("drained", PERSON),
                             "n3": ("idle", "")}, out


def test_sound2_3_a_node_two_runs_rejected_stays_drained_until_both_let_it_go(tmp_path,
                                                                             on_path):
    """Run A drains n1; run B rejects it too, for another check; B's retest passes it:
    n1 stays drained for A. A's retest passes it: n1 is resumed."""
    slurm = FakeSlurm(tmp_path, {"n1": ("idle", "")})
    on_path(slurm.bin)
    run_a = stored_run(tmp_path, A, {"n1": "REJECT"})
    run_b = stored_run(tmp_path, B, {"n1": "REJECT"})
    for run_dir in (run_a, run_b):
        code, out = drain(run_dir)
        assert code == 0, out
    judged(run_b, {"n1": "ACCEPT"})
    code, out = drain(run_b, "--resume-passed")
    assert code == 0, out
    state, reason = slurm.nodes()["n1"]
    assert state == "drained" and reason.startswith(f"rackgate/drain[{A}]: "), (reason, out)
    judged(run_a, {"n1": "ACCEPT"})
    code, out = drain(run_a, "--resume-passed")
    assert code == 0, out
    assert slurm.nodes()["n1"] == ("idle", ""), out


def test_sound2_3_kubernetes_removes_only_the_taint_this_run_set(tmp_path, on_path):
    """dgx02: tainted by run A (as rackgate before this change left it); dgx03: a person's
    taint under rackgate's key; dgx01: tainted by run B itself (the control)."""
    k8s = FakeKubernetes(tmp_path, ["dgx01", "dgx02", "dgx03"])
    k8s.set("dgx02", [{"key": "rackgate/rejected", "value": A, "effect": "NoSchedule"}],
            A_LEGACY)
    k8s.set("dgx03", [{"key": "rackgate/rejected", "value": "ops", "effect": "NoSchedule"}],
            PERSON)
    on_path(k8s.bin)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    args = ("--scheduler", "kubernetes", "--kubeconfig", str(kubeconfig))
    run_b = stored_run(tmp_path, B, {"dgx01": "REJECT", "dgx02": "ACCEPT", "dgx03": "ACCEPT"})
    code, out = drain(run_b, *args)
    assert code == 0, out
    assert [t["value"] for t in k8s.node("dgx01")["taints"]] == [B]
    judged(run_b, {"dgx01": "ACCEPT", "dgx02": "ACCEPT", "dgx03": "ACCEPT"})
    code, out = drain(run_b, *args, "--resume-passed")
    assert code == 0, out
    taints: dict[str, Any] = {n: [t["value"] for t in k8s.node(n)["taints"]]
                              for n in ("dgx01", "dgx02", "dgx03")}
    assert taints == {"dgx01": [], "dgx02": [A], "dgx03": ["ops"]}, out


def test_sound2_3_healthcheck_resumes_no_drain_a_person_wrote(tmp_path, monkeypatch, capsys):
    """A healthy node drained with a reason a person wrote in the health check's old
    words is left drained; the control: its own drain (marker and record) is resumed."""
    node = FakeNode(tmp_path)
    monkeypatch.setenv("PATH", f"{node.bin}{os.pathsep}{os.environ['PATH']}")

    def healthcheck() -> None:
        cli_healthcheck.main(["--config", str(node.config), "--root", str(node.root)])

    node.sinfo("drained", "rackgate healthcheck: keep out until the RMA, ticket 4711")
    healthcheck()
    assert node.calls("scontrol") == []
    node.files({"proc/self/mountinfo": body("mountinfo_lustre_missing.txt")})
    node.sinfo("idle", "none")
    healthcheck()  # unhealthy: drains with its own reason
    [call] = node.calls("scontrol")
    node.sinfo("drained", call.split("reason=", 1)[1])
    node.files({"proc/self/mountinfo": body("mountinfo_ok.txt")})
    healthcheck()
    assert node.calls("scontrol")[1:] == ["scontrol update nodename=gpu001 state=resume"]
