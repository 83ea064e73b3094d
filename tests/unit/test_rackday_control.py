"""Issue 30, items 1 and 3: a control-side failure is no verdict, and one node that does not
answer does not block the run.

1. The vault password missing or wrong (the demo's vaulted BMC password without
   ANSIBLE_VAULT_IDENTITY_LIST), or the same transport failure on every node: `rackgate
   validate` (with and without --plan) exits 2 with Ansible's own words (file and line),
   and writes no report, no history row, nothing `rackgate drain` could act on.
3. A node that does not answer (ssh to a closed loopback port) is that node's error, in
   one sentence in whole words (the evidence keeps Ansible's text); the plan lists it once
   and the run judges the other nodes on their merits.

Real reproductions: ansible-runner and ansible-playbook on tmp inventories of
``ansible_connection: local`` hosts, the demo's vaulted variable, and ssh to loopback
ports nothing listens on (refused at once; ANSIBLE_TIMEOUT bounds every connection).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import demo_profile_file
from rackgate.checks import REGISTRY, load_profile
from rackgate.cli.main import main
from rackgate.model import Status
from rackgate.placement.evidence import judge_evidence
from rackgate.store.evidence import Evidence

ROOT = Path(__file__).resolve().parents[2]
BIN = str(Path(sys.executable).parent)
VAULT = ROOT / "inventory" / "demo" / "group_vars" / "compute" / "vault.yml"
VAULT_PASSWORD = ROOT / "molecule" / "demo-bmc" / "vault-password.txt"
CHECKS = ["node.identity", "cooling.cdu"]  # one on the node, one reading the BMC password


@pytest.fixture(autouse=True)
def _ansible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    monkeypatch.setenv("ANSIBLE_TIMEOUT", "10")  # every connection attempt is bounded
    monkeypatch.setenv("COLUMNS", "400")  # the CLI's messages on one line each
    for var in list(os.environ):
        if var.startswith("ANSIBLE_VAULT"):
            monkeypatch.delenv(var)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: connecting is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def local(**more: Any) -> dict[str, Any]:
    return {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            **more}


def ssh_dead(port: int) -> dict[str, Any]:
    return {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": port,
            "ansible_python_interpreter": sys.executable,
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o BatchMode=yes"}


def inventory(tmp_path: Path, hosts: dict[str, dict[str, Any]], vault: bool = False) -> Path:
    """An inventory directory: ``hosts`` in group compute, each with its node lock and the
    CDU on a closed loopback port; with ``vault``, the demo's vaulted BMC password in
    group_vars/compute/vault.yml, as the demo keeps it."""
    inv = tmp_path / "inv"
    (inv / "group_vars" / "compute").mkdir(parents=True)
    for vars_ in hosts.values():
        vars_.setdefault("rackgate_node_lock_file", str(tmp_path / "node.lock"))
    (inv / "hosts.yml").write_text(yaml.safe_dump(
        {"all": {"children": {"compute": {"hosts": hosts}}}}))
    (inv / "group_vars" / "compute" / "bmc.yml").write_text(yaml.safe_dump(
        {"rackgate_bmc_user": "admin",
         "rackgate_cdu_url": f"http://127.0.0.1:{closed_port()}"}))
    if vault:
        shutil.copy(VAULT, inv / "group_vars" / "compute" / "vault.yml")
    return inv


def validate(tmp_path: Path, inv: Path, checks: list[str], *more: str) -> int:
    prof = demo_profile_file(tmp_path / "p.yaml", checks, "r30-control")
    return main(["validate", "-i", str(inv), "--profile", str(prof),
                 "--runs-dir", str(tmp_path / "runs"), *more])


def one_line(text: str) -> str:
    return " ".join(text.split())


def no_verdict(runs: Path) -> None:
    """No report (nothing drain, diff or export-metrics can read) and no history row."""
    if runs.exists():
        assert not list(runs.rglob("report.json"))
    assert not (runs / "history.sqlite").exists()


# ------------------------------------------------------------ 1. control side: no verdict

@pytest.mark.parametrize("plan", ["--no-plan", "--plan"])
def test_rackday_1_a_vault_without_its_password_is_no_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], plan: str) -> None:
    """Without the vault password: exit 2 with Ansible's words and the vaulted file's
    name and line, never `Rack verdict: REJECT`; no report, no history row."""
    inv = inventory(tmp_path, {"n1": local(), "n2": local()}, vault=True)
    code = validate(tmp_path, inv, CHECKS, plan)
    out, err = capsys.readouterr()
    said = one_line(err)
    assert code == 2, out + err
    assert "Rack verdict" not in out and "REJECT" not in out + err
    assert "no vault secrets" in said, said
    assert re.search(r"group_vars/compute/vault\.yml:\d+", said), said
    assert "ANSIBLE_VAULT_IDENTITY_LIST" in said, said
    no_verdict(tmp_path / "runs")


def test_rackday_1_a_wrong_vault_password_is_no_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = tmp_path / "wrong-password.txt"
    wrong.write_text("not the demo's password\n")
    monkeypatch.setenv("ANSIBLE_VAULT_IDENTITY_LIST", f"demo@{wrong}")
    inv = inventory(tmp_path, {"n1": local(), "n2": local()}, vault=True)
    code = validate(tmp_path, inv, CHECKS, "--no-plan")
    out, err = capsys.readouterr()
    said = one_line(err)
    assert code == 2, out + err
    assert re.search(r"[Dd]ecrypt", said) and re.search(r"vault\.yml:\d+", said), said
    no_verdict(tmp_path / "runs")


def test_rackday_1_with_its_vault_password_the_same_run_is_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: with the demo's vault password the same inventory is collected and
    judged (the CDU on a closed port is an error of the nodes' own: a verdict)."""
    monkeypatch.setenv("ANSIBLE_VAULT_IDENTITY_LIST", f"demo@{VAULT_PASSWORD}")
    inv = inventory(tmp_path, {"n1": local(), "n2": local()}, vault=True)
    code = validate(tmp_path, inv, CHECKS, "--no-plan")
    out, err = capsys.readouterr()
    assert code in (0, 1), out + err
    assert "Rack verdict" in out
    (report,) = (tmp_path / "runs").rglob("report.json")
    assert (tmp_path / "runs" / "history.sqlite").is_file()
    doc = json.loads(report.read_text())
    for node in doc["nodes"]:
        cdu = next(r for r in node["results"] if r["check"] == "cooling.cdu")
        assert "vault" not in cdu["message"], cdu


@pytest.mark.parametrize("plan", ["--no-plan", "--plan"])
def test_rackday_1_the_same_transport_failure_on_every_node_is_no_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], plan: str) -> None:
    """Every node refuses ssh the same way (the control host's side: its network, its
    ssh settings, the demo rack stopped): exit 2 naming the cause, no report."""
    inv = inventory(tmp_path, {"n1": ssh_dead(closed_port()), "n2": ssh_dead(closed_port())})
    code = validate(tmp_path, inv, ["node.identity"], plan)
    out, err = capsys.readouterr()
    said = one_line(err)
    assert code == 2, out + err
    assert "no node answered" in said, said
    assert "the connection was refused" in said and "Connection refused" in said, said
    assert "Rack verdict" not in out
    no_verdict(tmp_path / "runs")


def test_rackday_1_a_run_that_failed_on_the_control_side_cannot_be_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its run directory says why it holds no verdict; `rackgate judge` refuses it rather
    than turning the missing evidence into a REJECT; once the vault password is given,
    `validate --resume` collects and judges it."""
    inv = inventory(tmp_path, {"n1": local()}, vault=True)
    assert validate(tmp_path, inv, CHECKS, "--no-plan") == 2
    (manifest,) = (tmp_path / "runs").glob("*/manifest.json")
    assert "no vault secrets" in json.loads(manifest.read_text())["control_failure"]["message"]
    capsys.readouterr()
    assert main(["judge", str(manifest.parent)]) == 2
    assert "--resume" in capsys.readouterr().err
    no_verdict(tmp_path / "runs")
    monkeypatch.setenv("ANSIBLE_VAULT_IDENTITY_LIST", f"demo@{VAULT_PASSWORD}")
    assert main(["validate", "--resume", str(manifest.parent)]) in (0, 1)
    assert (manifest.parent / "report.json").is_file()
    assert "control_failure" not in json.loads(manifest.read_text())


# ------------------------------------------------------------ 3. one node down: its error

def did_not_answer(host: str, message: str) -> str:
    """The result of a node's check whose evidence says Ansible could not reach it."""
    ev = Evidence(host=host, check="fio.seq_read", argv=("timeout", "fio"),
                  outcome="unreachable", rc=None, started=None, ended=None, duration_s=None,
                  stderr="", message=message, stdout_file=f"evidence/{host}/fio.seq_read.out",
                  stdout_sha256="0" * 64, stdout_bytes=0)
    r = judge_evidence(REGISTRY["fio.seq_read"], ev, "", load_profile("demo"))
    assert r.status is Status.ERROR
    assert r.message.startswith("nothing collected: "), r.message
    return r.message.removeprefix("nothing collected: ")


def test_rackday_3_a_node_that_does_not_answer_is_one_sentence_in_whole_words() -> None:
    """The demo's stopped container, as Ansible reports it: the sentence names the cause
    (the command Ansible tried and the cut 'Failed command was: ( u' are gone)."""
    podman = ("Failed to create temporary directory. In some cases, you may have been able "
              "to authenticate and did not have permissions on the target directory. "
              "Consider changing the remote tmp path in ansible.cfg to a path rooted in "
              "\"/tmp\", for more error information use -vvv. Failed command was: ( umask 77 "
              "&& mkdir -p \"` echo ~/.ansible/tmp `\"&& mkdir \"` echo ~/.ansible/tmp/"
              "ansible-tmp-1764780000.1-1-1 `\" ), exited with result 125, stderr output: "
              "Error: can only create exec sessions on running containers: container state "
              "improper\n")
    assert did_not_answer("rg-node02", podman) == \
        "rg-node02 did not answer: the container is stopped"
    ssh = ("Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 2222: "
           "Connection refused")
    assert did_not_answer("n2", ssh) == \
        "n2 did not answer: the connection was refused (ssh to 127.0.0.1 port 2222)"
    assert did_not_answer("n2", "Failed to connect to the host via ssh: ssh: connect to host "
                                "10.0.0.2 port 22: No route to host") == \
        "n2 did not answer: there is no route to it (ssh to 10.0.0.2 port 22)"
    long = "Something nobody foresaw went wrong " + "with a very long explanation " * 20
    said = did_not_answer("n2", long)
    assert said.endswith("...") and len(said) < 260
    assert said.removesuffix("...").split()[-1] in long.split()  # a whole word, not cut


def test_rackday_3_one_node_down_is_its_own_error_in_the_plan_and_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """n2 refuses ssh: the plan lists it once, as a node that did not answer (exit 1: the
    run can go on), and validate runs: n1 is judged on its merits, n2 is an error in one
    sentence, its evidence keeps Ansible's text in full."""
    port = closed_port()
    inv = inventory(tmp_path, {"n1": local(), "n2": ssh_dead(port)})
    code = validate(tmp_path, inv, ["node.identity"], "--plan")
    out, err = capsys.readouterr()
    assert code == 1, out + err
    lines = [line for line in out.splitlines()  # the plan's heading names every node
             if "n2" in line and not line.startswith("Plan of group")]
    assert len(lines) == 1, out
    assert re.match(rf"UNREACHABLE +n2 +-: n2 did not answer: the connection was refused "
                    rf"\(ssh to 127\.0\.0\.1 port {port}\)", lines[0]), lines
    assert "ready to collect" in out, out

    code = validate(tmp_path, inv, ["node.identity"])  # the plan first, as by default
    out, err = capsys.readouterr()
    assert code == 1, out + err  # n2 could not be judged: REJECT, with a report
    (report,) = (tmp_path / "runs").rglob("report.json")
    by = {n["name"]: n for n in json.loads(report.read_text())["nodes"]}
    n2 = next(r for r in by["n2"]["results"] if r["check"] == "node.identity")
    assert n2["status"] == "error"
    assert n2["message"] == (f"nothing collected: n2 did not answer: the connection was "
                             f"refused (ssh to 127.0.0.1 port {port})")
    n1 = next(r for r in by["n1"]["results"] if r["check"] == "node.identity")
    assert "did not answer" not in n1["message"] and n1["status"] != "skip", n1
    record = json.loads((report.parent / "evidence" / "n2" / "node.identity.json").read_text())
    assert record["outcome"] == "unreachable"
    assert f"connect to host 127.0.0.1 port {port}: Connection refused" in record["message"]
