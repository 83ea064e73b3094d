"""Issue 13: collection errors keep Ansible's own words, and ``--keep-artifacts``.

The reproductions are real: ansible-runner and ansible-playbook collecting from inventory
hosts with ``ansible_connection: local`` (a tmp inventory); the broken interpreter is a
script in tmp_path that fails as a pyenv shim does. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import demo_profile_file
from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.shared.base import SECRET_FILE
from rackgate.collect.ansible import collect
from rackgate.collect.runner_events import ansible_error
from rackgate.commands.task import Task, wrapped
from rackgate.model import Status
from rackgate.placement.evidence import judge_evidence
from rackgate.run import validate
from rackgate.store.evidence import Evidence, EvidenceStore
from rackgate.store.manifest import new_run_dir

ROOT = Path(__file__).resolve().parents[2]
BIN = str(Path(sys.executable).parent)
PYENV = "pyenv: python3.13: command not found"
SECRET = "Rg13-kA-9xQ2-pw7Z"  # unique: any occurrence anywhere is this test's credential


@pytest.fixture(autouse=True)
def _ansible_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))


def inventory(path: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    """Local hosts in group compute, each with its node lock beside ``path``."""
    for vars_ in hosts.values():
        vars_.setdefault("ansible_connection", "local")
        vars_.setdefault("ansible_python_interpreter", sys.executable)
        vars_.setdefault("rackgate_node_lock_file", str(path.parent / "node.lock"))
    path.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": hosts}}}}))
    return path


def pyenv_shim(tmp_path: Path) -> Path:
    """An interpreter that fails as pyenv's shim does when its version is not installed."""
    shim = tmp_path / "python3"
    shim.write_text(f"#!/bin/sh\necho '{PYENV}' >&2\nexit 127\n")
    shim.chmod(0o755)
    return shim


def profile_file(path: Path, checks: list[str]) -> Path:
    return demo_profile_file(path, checks, "i13-test")


# ---------------------------------------------------------------- Ansible's own words


def test_ansible_error_keeps_msg_and_the_modules_stderr() -> None:
    res = {"msg": "MODULE FAILURE\nSee stdout/stderr for the exact error", "rc": 127,
           "module_stdout": "", "module_stderr": f"\x1b[0;31m{PYENV}\x1b[0m\n"}
    assert ansible_error(res) == ("MODULE FAILURE\nSee stdout/stderr for the exact error\n"
                                  f"module stderr: {PYENV}")


def test_ansible_error_uses_the_modules_stdout_without_stderr_and_is_bounded() -> None:
    said = ansible_error({"msg": "\n".join(f"line {n} " + "x" * 400 for n in range(20)),
                          "module_stderr": "", "module_stdout": "y" * 5000 + " the end"})
    lines = said.splitlines()
    assert len(lines) == 6 and all(len(line) <= 300 for line in lines[:5])
    assert lines[-1].startswith("module stdout: ") and lines[-1].endswith(" the end")
    assert len(said) < 3500
    assert ansible_error({}, "host unreachable") == "host unreachable"
    assert ansible_error({"msg": "non-zero return code", "rc": 1}) == "non-zero return code"


# ---------------------------------------------------------------- judging them

CHECK = REGISTRY["fio.seq_read"]


def ev(**changes: Any) -> Evidence:
    base: dict[str, Any] = dict(
        host="n1", check="fio.seq_read", argv=wrapped(Task("n1", "fio.seq_read", ("fio",), 5)),
        outcome="completed", rc=0, started=None, ended=None, duration_s=None, stderr="",
        message="", stdout_file="evidence/n1/fio.seq_read.out", stdout_sha256="0" * 64,
        stdout_bytes=0)
    return Evidence(**{**base, **changes})


@pytest.mark.parametrize(("changes", "expected"), [
    (dict(rc=127, message="Module result deserialization failed: No start of json char "
                          f"found\nmodule stderr: {PYENV}"),
     f"Ansible could not run its module on the host (rc 127): {PYENV} "
     f"(check ansible_python_interpreter)"),
    (dict(rc=126, message="MODULE FAILURE\nmodule stderr: /usr/bin/python3: Permission "
                          "denied"),
     "Ansible could not run its module on the host (rc 126): /usr/bin/python3: Permission "
     "denied (check ansible_python_interpreter)"),
    (dict(rc=1, message="MODULE FAILURE\nSee stdout/stderr for the exact error"),
     "Ansible could not run its module on the host (rc 1): MODULE FAILURE"),
    (dict(outcome="not_run", rc=None, message=f"the task failed\nmodule stderr: {PYENV}"),
     f"Ansible could not run its module on the host: {PYENV}"),
])
def test_a_module_that_could_not_run_is_named(changes: dict[str, Any], expected: str) -> None:
    r = judge_evidence(CHECK, ev(**changes), "", load_profile("demo"))
    assert r.status is Status.ERROR
    assert r.message == expected


def test_a_check_command_not_found_names_the_tool() -> None:
    r = judge_evidence(CHECK, ev(rc=127, message="non-zero return code",
                                 stderr="timeout: failed to run command 'fio': No such file "
                                        "or directory"), "", load_profile("demo"))
    assert r.status is Status.ERROR
    assert r.message.startswith("cannot execute fio on the host (rc 127): is it installed?")
    assert r.message.endswith("failed to run command 'fio': No such file or directory")


# ---------------------------------------------------------------- real reproductions


def test_broken_interpreter_evidence_and_result_carry_the_hosts_words(tmp_path: Path) -> None:
    """A node whose ansible_python_interpreter is a pyenv shim for a Python that is not
    installed: its stored evidence keeps Ansible's message and the shim's stderr, and the
    result says that Ansible could not run its module there, in the host's words."""
    inv = inventory(tmp_path / "inv.yml", {"n1": {
        "ansible_python_interpreter": str(pyenv_shim(tmp_path))}})
    prof = load_profile(str(profile_file(tmp_path / "p.yaml", ["node.identity"])))
    outcome = validate([str(inv)], prof, runs_dir=tmp_path / "runs")
    record = json.loads((outcome.run_dir / "evidence/n1/node.identity.json").read_text())
    assert record["rc"] == 127, record
    assert f"module stderr: {PYENV}" in record["message"], record["message"]
    (result,) = [r for n in outcome.rack.nodes for r in n.results if r.check == "node.identity"]
    assert result.status is Status.ERROR
    assert result.message == (f"Ansible could not run its module on the host (rc 127): "
                              f"{PYENV} (check ansible_python_interpreter)")
    assert not (outcome.run_dir / "ansible-artifacts").exists()  # off by default


def test_keep_artifacts_keeps_stdout_and_events_and_no_secret(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--keep-artifacts copies ansible-runner's stdout and job events into the run
    directory; the credential (written no_log into its private file, which the command
    proves non-empty) and rackgate's environment (which can hold one) are in none of them."""
    monkeypatch.setenv("RACKGATE_TEST_CREDENTIAL", SECRET)
    inv = inventory(tmp_path / "inv.yml", {"n1": {"rackgate_bmc_password": SECRET}})
    store = EvidenceStore(new_run_dir(tmp_path / "runs", "t"))
    task = Task("n1", "x.secret", ("test", "-s", SECRET_FILE), 30,
                secret_var="rackgate_bmc_password", lock_file=str(tmp_path / "node.lock"))
    assert collect([task], [str(inv)], store, keep_artifacts=True) == "successful"
    got, _ = store.read("n1", "x.secret")
    assert (got.outcome, got.rc) == ("completed", 0), got.message
    (kept,) = (store.run_dir / "ansible-artifacts").iterdir()
    assert {p.name for p in kept.iterdir()} <= {"stdout", "stderr", "rc", "status",
                                                "job_events"}
    assert "Run acceptance commands" in (kept / "stdout").read_text()
    events = list((kept / "job_events").glob("*.json"))
    assert any(json.loads(e.read_text()).get("event") == "runner_item_on_ok" for e in events)
    for f in store.run_dir.rglob("*"):
        assert not f.is_file() or SECRET.encode() not in f.read_bytes(), f


def test_keep_artifacts_reaches_collection_from_validate(tmp_path: Path) -> None:
    inv = inventory(tmp_path / "inv.yml", {"n1": {
        "ansible_python_interpreter": str(pyenv_shim(tmp_path))}})
    prof = load_profile(str(profile_file(tmp_path / "p.yaml", ["node.identity"])))
    outcome = validate([str(inv)], prof, runs_dir=tmp_path / "runs", keep_artifacts=True)
    (kept,) = (outcome.run_dir / "ansible-artifacts").iterdir()
    assert "Run acceptance commands" in (kept / "stdout").read_text()
    assert any(PYENV in e.read_text() for e in (kept / "job_events").glob("*.json"))
    assert not (kept / "command").exists()  # it records rackgate's whole environment


def test_one_collection_is_one_attempt_for_its_items_and_its_node_collector(
        tmp_path: Path) -> None:
    """A command that reads a credential runs as an Ansible item, the others through the
    node collector; both are wrapped in the node lock as the same RUN@ATTEMPT, or one would
    take the other for an older attempt of the run, and end it or give way to it."""
    inv = inventory(tmp_path / "inv.yml", {"n1": {"rackgate_bmc_password": SECRET}})
    store = EvidenceStore(new_run_dir(tmp_path / "runs", "t"))
    lock = str(tmp_path / "node.lock")
    tasks = [Task("n1", "x.secret", ("test", "-s", SECRET_FILE), 30,
                  secret_var="rackgate_bmc_password", lock_file=lock),
             Task("n1", "x.plain", ("true",), 30, lock_file=lock)]
    assert collect(tasks, [str(inv)], store) == "successful"
    attempts = set()
    for check in ("x.secret", "x.plain"):
        got, _ = store.read("n1", check)
        assert (got.outcome, got.rc) == ("completed", 0), got.message
        assert got.argv[3] == "rackgate-node-lock" and got.argv[4] == lock, got.argv
        attempts.add(got.argv[6])
    (attempt,) = attempts
    assert "@" in attempt, attempt
