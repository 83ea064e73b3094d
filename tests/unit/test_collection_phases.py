"""Executing a plan so that a failure stays with the node that failed
(``collect.phases.Collection``): a node unreachable for its own checks is left out of the
jobs across the nodes, and a job that failed naming the node that broke it runs once more
without it. Ansible is replaced here by a recorder that answers each task as a scripted
host would (the demo rack's e2e test runs the real thing); planning, the evidence store
and the launch-failure parser are the real ones."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_plan import HOSTVARS, checks

from rackgate.checks import load_profile
from rackgate.collect import phases
from rackgate.collect.schedule import plan
from rackgate.collect.stop import Stop
from rackgate.commands.task import Task
from rackgate.inventory import Inventory
from rackgate.placement import RunView
from rackgate.store.evidence import EvidenceStore

DEMO = load_profile("demo")
NODES = ("n1", "n2", "n3")
HOSTS = {**HOSTVARS, "n3": HOSTVARS["n1"]}
Answer = Callable[[Task], tuple[str, dict[str, Any]]]


def job_nodes(task: Task) -> list[str]:
    (nodelist,) = {a.removeprefix("--nodelist=") for a in task.argv
                   if a.startswith("--nodelist=")}
    return nodelist.split(",")


def ok(stdout: str = "") -> tuple[str, dict[str, Any]]:
    return stdout, {"outcome": "completed", "rc": 0, "stderr": "", "message": ""}


def collect_as(answer: Answer, log: list[list[tuple[str, str]]]) -> Any:
    def fake(tasks: Sequence[Task], sources: Any, store: EvidenceStore, **kw: Any) -> str:
        log.append([(t.host, t.check) for t in tasks])
        for t in tasks:
            stdout, fields = answer(t)
            store.write(t.host, t.check, stdout, argv=t.argv, started=None, ended=None,
                        duration_s=1.0, **fields)
            kw["progress"](t.host, t.check, fields["outcome"])
        return "successful"
    return fake


def collection(tmp_path: Path, answer: Answer, monkeypatch: pytest.MonkeyPatch
               ) -> tuple[phases.Collection, list[list[tuple[str, str]]], EvidenceStore]:
    log: list[list[tuple[str, str]]] = []
    monkeypatch.setattr(phases, "collect", collect_as(answer, log))
    view = RunView(NODES, HOSTS, ("inv.yml",), {n: DEMO for n in NODES}, "head")
    selected = checks("fio.seq_read", "mpi.allreduce")
    the_plan = plan(view, selected, lambda h, c: False)
    store = EvidenceStore(tmp_path)
    inv = Inventory(("inv.yml",), HOSTS, {"compute": frozenset(NODES)})
    return (phases.Collection(the_plan, view, selected, inv, store, 5, lambda *a: None, Stop()),
            log, store)


def test_a_node_unreachable_for_its_own_checks_is_left_out_of_the_job(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(t: Task) -> tuple[str, dict[str, Any]]:
        if t.host == "n2":
            return "", {"outcome": "unreachable", "rc": None, "stderr": "",
                        "message": "Failed to connect to the host via ssh: No route to host"}
        return ok()

    run, log, store = collection(tmp_path, answer, monkeypatch)
    run.run()
    assert log[0] == [(n, "fio.seq_read") for n in NODES]
    (job,) = log[1]
    assert job == ("head", "mpi.allreduce")
    ev, _ = store.read("head", "mpi.allreduce")
    assert job_nodes(Task("head", "mpi.allreduce", ev.argv, 60)) == ["n1", "n3"]
    rec = run.launched["mpi.allreduce"]
    assert rec.nodes == ("n1", "n3") and set(rec.left_out) == {"n2"}
    assert rec.left_out["n2"] == "n2 did not answer: there is no route to it"


def test_a_job_broken_by_one_node_runs_once_more_without_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(t: Task) -> tuple[str, dict[str, Any]]:
        if t.check == "mpi.allreduce" and "n3" in job_nodes(t):
            return "", {"outcome": "completed", "rc": 1, "message": "",
                        "stderr": "srun: error: n3: task 2: Exited with exit code 1\n"
                                  "srun: error: n1: task 0: Killed\n"}
        return ok()

    run, log, store = collection(tmp_path, answer, monkeypatch)
    run.run()
    assert [len(batch) for batch in log] == [3, 1, 1]  # own checks, the job, the job again
    first, _ = store.read("head", "mpi.allreduce", attempt=1)
    again, _ = store.read("head", "mpi.allreduce")
    assert first.rc == 1 and again.rc == 0 and again.stdout_file.endswith("mpi.allreduce~2.out")
    rec = run.launched["mpi.allreduce"]
    assert rec.nodes == ("n1", "n2") and list(rec.left_out) == ["n3"]
    assert "n3 broke the mpi.allreduce job" in rec.left_out["n3"]
    assert "Exited with exit code 1" in rec.left_out["n3"]


def test_a_node_busy_with_another_runs_benchmark_is_named_busy_not_broken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(t: Task) -> tuple[str, dict[str, Any]]:
        if t.check == "mpi.allreduce" and "n2" in job_nodes(t):
            return "", {"outcome": "completed", "rc": 75, "message": "",
                        "stderr": "srun: error: n2: task 1: Exited with exit code 75\n"}
        return ok()

    run, log, _ = collection(tmp_path, answer, monkeypatch)
    run.run()
    assert [len(batch) for batch in log] == [3, 1, 1]
    why = run.launched["mpi.allreduce"].left_out["n2"]
    assert why.startswith("n2 was busy: another run holds its node lock") and "broke" not in why


def test_a_job_that_names_no_culprit_or_every_node_is_not_run_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = {"none": "srun: error: Unable to create step for job 7: Invalid node name\n",
             "all": "".join(f"srun: error: {n}: task 0: Exited with exit code 1\n"
                            for n in NODES)}
    for kind, stderr in lines.items():
        def answer(t: Task, stderr: str = stderr) -> tuple[str, dict[str, Any]]:
            if t.check == "mpi.allreduce":
                return "", {"outcome": "completed", "rc": 1, "message": "", "stderr": stderr}
            return ok()

        run, log, _ = collection(tmp_path / kind, answer, monkeypatch)
        run.run()
        assert [len(batch) for batch in log] == [3, 1], kind
        assert run.launched["mpi.allreduce"].left_out == {}


def test_with_one_node_left_nothing_is_launched_and_the_record_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(t: Task) -> tuple[str, dict[str, Any]]:
        if t.host in ("n2", "n3"):
            return "", {"outcome": "unreachable", "rc": None, "stderr": "", "message": "down"}
        return ok()

    run, log, _ = collection(tmp_path, answer, monkeypatch)
    run.run()
    assert len(log) == 1  # the nodes' own checks only
    rec = run.launched["mpi.allreduce"]
    assert rec.nodes == ("n1",) and sorted(rec.left_out) == ["n2", "n3"]


def test_evidence_is_never_overwritten_each_collection_is_an_attempt(tmp_path: Path) -> None:
    store = EvidenceStore(tmp_path)
    for rc in (1, 0):
        store.write("n1", "fio.seq_read", f"rc {rc}", argv=("fio",), outcome="completed", rc=rc,
                    started=None, ended=None, duration_s=1.0, stderr="", message="")
    assert store.attempt("n1", "fio.seq_read") == 2
    latest, out = store.read("n1", "fio.seq_read")
    assert latest.rc == 0 and out == "rc 0"
    first, out = store.read("n1", "fio.seq_read", attempt=1)
    assert first.rc == 1 and out == "rc 1" and first.stdout_file == "evidence/n1/fio.seq_read.out"
    assert store.has_usable("n1", "fio.seq_read")
    assert store.attempt("n1", "fio.sequential") == 0
