"""``rackgate validate`` with a fabric plan, end to end on this machine: the plan beside the
inventory, the fabric checks collected once through Ansible (local connection) on the
fabric host, whose ``rackgate_fabric_wrapper: [ibsim-run]`` runs the real infiniband-diags
under ibsim's preload, the plan recorded in the manifest, every node judged from that one
evidence file, and the run judged again offline against the recorded plan."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from fabric_sim import missing_tools, sim_fabric
from rackgate.checks import load_profile
from rackgate.fabric.design import design
from rackgate.fabric.netfile import netfile
from rackgate.fabric.plan import plan_document
from rackgate.model import Status, Verdict
from rackgate.run import judge_run, retest, validate

pytestmark = pytest.mark.skipif(bool(missing_tools()),
                                reason=f"needs {', '.join(missing_tools())}")
ROOT = Path(__file__).resolve().parents[2]
CHECKS = ["fabric.as_built", "fabric.links", "fabric.sm"]
PLAN = design(4, 2, 8, speed="HDR", sm_hosts=["gpu001"], sm_priority=12, name="fab4")
SM = "gpu001 mlx5_0"


def site(tmp_path: Path, plan_hosts: list[str]) -> Path:
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inv = tmp_path / "site"
    inv.mkdir()
    hosts = {h: {**local, "rackgate_node_lock_file": str(tmp_path / f"{h}.lock")}
             for h in plan_hosts}
    (inv / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {
        "compute": {"hosts": hosts},
        "subnet_managers": {"hosts": {"fabric-host": {
            **local, "rackgate_fabric_wrapper": ["ibsim-run"]}}}}}}))
    (inv / "fabric.yml").write_text(yaml.safe_dump(plan_document(PLAN), sort_keys=False))
    return inv


def profile(tmp_path: Path) -> Path:
    raw = dict(load_profile("demo").raw)
    raw["checks"] = {c: {} for c in CHECKS}
    path = tmp_path / "fabric-profile.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}"
                               f"{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    with sim_fabric(netfile(PLAN, SM), tmp_path, sm_host=SM, sm_priority=12) as fabric:
        # the local connection hands the controller's environment to the commands
        monkeypatch.setenv("IBSIM_SOCKNAME", fabric.sock)
        monkeypatch.setenv("SIM_HOST", SM)
        yield fabric


def test_the_fabric_checks_run_once_on_the_fabric_host_and_judge_every_node(env, tmp_path):
    inv = site(tmp_path, list(PLAN.hosts))
    out = validate([str(inv)], load_profile(str(profile(tmp_path))), checks=CHECKS,
                   runs_dir=tmp_path / "runs", plan_first=False)
    results = {(r.node, r.check): r for n in out.rack.nodes for r in n.results}
    assert out.rack.verdict is Verdict.ACCEPT, {k: r.message for k, r in results.items()}
    assert set(results) == {(h, c) for h in PLAN.hosts for c in CHECKS}
    evidence = out.run_dir / "evidence"
    assert sorted(p.name for p in (evidence / "fabric-host").glob("*.out")) == [
        f"{c}.out" for c in sorted(CHECKS)]
    assert not any((evidence / h).exists() for h in PLAN.hosts)  # nothing ran on the nodes
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    assert manifest["fabric_host"] == "fabric-host"
    assert manifest["fabric"]["document"]["name"] == "fab4"
    assert manifest["fabric"]["source"].endswith("site/fabric.yml")
    # judged again offline, from the plan the run recorded (the file may have changed)
    (inv / "fabric.yml").unlink()
    again = judge_run(out.run_dir)
    assert again.rack.verdict is Verdict.ACCEPT


def test_a_node_the_plan_does_not_know_is_rejected(env, tmp_path):
    inv = site(tmp_path, [*PLAN.hosts, "gpu099"])
    out = validate([str(inv)], load_profile(str(profile(tmp_path))), checks=CHECKS,
                   runs_dir=tmp_path / "runs", plan_first=False)
    verdicts = {n.node: n for n in out.rack.nodes}
    assert out.rack.verdict is Verdict.REJECT
    assert verdicts["gpu099"].verdict is Verdict.REJECT
    assert all(r.status is Status.ERROR and "no HCA port in fabric plan fab4" in r.message
               for r in verdicts["gpu099"].results)
    assert verdicts["gpu001"].verdict is Verdict.ACCEPT


def test_retest_after_the_sm_is_repaired_collects_the_failed_fabric_check_again(env, tmp_path):
    env.stop_sm()
    env.start_sm(SM, 5)  # the SM was configured at another priority than the plan's 12
    inv = site(tmp_path, list(PLAN.hosts))
    first = validate([str(inv)], load_profile(str(profile(tmp_path))), checks=CHECKS,
                     runs_dir=tmp_path / "runs", plan_first=False)
    assert first.rack.verdict is Verdict.REJECT
    sm = {r.node: r for n in first.rack.nodes for r in n.results if r.check == "fabric.sm"}
    assert all(r.status is Status.FAIL and "priority 5" in r.message for r in sm.values())
    env.stop_sm()
    env.start_sm(SM, 12)  # the repair: opensm at the planned priority
    second = retest(first.run_dir)
    assert second.rack.verdict is Verdict.ACCEPT and second.revision == 2
    host = first.run_dir / "evidence" / "fabric-host"
    assert (host / "fabric.sm~2.json").is_file()  # collected again, the failure kept
    assert not (host / "fabric.as_built~2.json").exists()  # it passed: not collected again
