"""Planning is a pure function: (run view, checks, what is already stored) -> a Plan. No
Ansible, no run directory: every case here is built from dicts and the shipped demo
profile."""

from __future__ import annotations

import sys

import pytest

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.shared.base import SECRET_FILE
from rackgate.collect.schedule import plan
from rackgate.commands.task import DEFAULT_LOCK_FILE, Task
from rackgate.placement import NotRun, RunView, Skipped

DEMO = load_profile("demo")
NODES = ("n1", "n2")
BMC = {"rackgate_bmc_host": "127.0.0.1", "rackgate_bmc_port": 9623,
       "rackgate_bmc_user": "admin", "rackgate_bmc_password": "vaulted"}
HOSTVARS = {"n1": {"rackgate_scratch_path": "/scratch", **BMC},
            "n2": {"rackgate_scratch_path": "/scratch", **BMC},
            "head": {}}


def view(**kw) -> RunView:
    args = dict(nodes=NODES, hostvars=HOSTVARS, sources=("inv.yml",),
                profiles={n: DEMO for n in NODES}, launch_host="head", python="/opt/rg/python")
    args.update(kw)
    return RunView(**args)


def nothing_stored(host: str, check: str) -> bool:
    return False


def checks(*names: str) -> list:
    return [REGISTRY[n] for n in names]


def test_node_checks_are_planned_node_by_node_under_the_node_lock():
    p = plan(view(), checks("node.identity", "fio.seq_read"), nothing_stored)
    assert [(t.host, t.check) for t in p.planned] == [
        ("n1", "node.identity"), ("n1", "fio.seq_read"),
        ("n2", "node.identity"), ("n2", "fio.seq_read")]
    assert all(isinstance(t, Task) and t.lock_file == DEFAULT_LOCK_FILE and not t.on_control
               for t in p.planned)
    assert p.pending(checks("node.identity", "fio.seq_read")) == {"node.identity": 2,
                                                                   "fio.seq_read": 2}


def test_stored_usable_evidence_is_not_collected_again():
    stored = {("n1", "fio.seq_read")}
    p = plan(view(), checks("fio.seq_read"), lambda h, c: (h, c) in stored)
    assert [(t.host, t.check) for t in p.planned] == [("n2", "fio.seq_read")]


def test_bmc_checks_run_on_the_control_host_with_rackgates_interpreter_and_no_lock():
    p = plan(view(), checks("redundancy.psu_ipmi", "cooling.cdu"), nothing_stored)
    ipmi = [t for t in p.planned if isinstance(t, Task) and t.check == "redundancy.psu_ipmi"]
    assert len(ipmi) == 2 and all(t.on_control and t.lock_file is None for t in ipmi)
    assert all(SECRET_FILE in t.argv and t.secret_var == "rackgate_bmc_password" for t in ipmi)
    assert "vaulted" not in str(p)  # the secret's value is never planned
    # the demo profile gives no CDU URL to these hosts: not run, naming the host
    cdu = [x for x in p.planned if x.check == "cooling.cdu"]
    assert all(isinstance(x, NotRun) and x.why.startswith(f"inventory host {x.host}: ")
               for x in cdu)


def test_a_redfish_check_runs_rackgates_own_program_with_its_interpreter():
    hv = {n: {**HOSTVARS[n], "rackgate_bmc_url": "http://127.0.0.1:9625"} for n in NODES}
    p = plan(view(hostvars={**HOSTVARS, **hv}), checks("redundancy.psu_redfish"),
             nothing_stored)
    argv = [t.argv for t in p.planned if isinstance(t, Task)]
    assert len(argv) == 2 and all(a[:3] == ("/opt/rg/python", "-m", "rackgate.programs.redfish")
                                  for a in argv)


def test_a_missing_secret_or_host_is_a_not_run_record_naming_it():
    no_password = {**HOSTVARS, "n2": {k: v for k, v in HOSTVARS["n2"].items()
                                      if k != "rackgate_bmc_password"}}
    del no_password["n1"]
    p = plan(view(hostvars=no_password), checks("redundancy.psu_ipmi"), nothing_stored)
    assert p.not_run == [
        NotRun("n1", "redundancy.psu_ipmi", "inventory host n1 is no longer in inv.yml"),
        NotRun("n2", "redundancy.psu_ipmi", "inventory host n2 has no rackgate_bmc_password "
                                            "(the BMC password; vault it)")]
    assert p.phases == []


def test_checks_that_do_not_apply_are_skips_not_tasks():
    p = plan(view(), checks("gpu.health", "node.identity"), nothing_stored)
    assert p.skipped == [Skipped("n1", "gpu.health"), Skipped("n2", "gpu.health")]
    assert [t.check for t in p.phases[0]] == ["node.identity", "node.identity"]


def test_a_job_across_the_nodes_is_one_task_on_the_launch_host_after_the_nodes_own():
    p = plan(view(), checks("mpi.allreduce", "node.identity"), nothing_stored)
    first, then = p.phases
    assert [(t.host, t.check) for t in first] == [("n1", "node.identity"),
                                                  ("n2", "node.identity")]
    assert [(t.host, t.check) for t in then] == [("head", "mpi.allreduce")]
    job = then[0]
    assert "--nodelist=n1,n2" in job.argv and DEFAULT_LOCK_FILE in job.argv  # the nodes' lock
    assert job.lock_file == DEFAULT_LOCK_FILE  # the launch host's own, for the launch


def test_a_launch_host_under_test_takes_no_exclusive_lock():
    p = plan(view(launch_host="n1"), checks("mpi.allreduce"), nothing_stored)
    (job,) = p.planned
    assert isinstance(job, Task) and job.host == "n1" and job.lock_file is None


@pytest.mark.parametrize("kw", [{"launch_host": None}, {"nodes": ("n1",)}])
def test_without_a_launch_host_or_a_second_node_nothing_is_launched(kw):
    if "nodes" in kw:
        kw["profiles"] = {"n1": DEMO}
    assert plan(view(**kw), checks("mpi.allreduce"), nothing_stored).planned == ()


def test_nodes_disagreeing_on_their_lock_file_cannot_share_a_job():
    hv = {**HOSTVARS, "n2": {**HOSTVARS["n2"], "rackgate_node_lock_file": "/run/other.lock"}}
    (nr,) = plan(view(hostvars=hv), checks("mpi.allreduce"), nothing_stored).planned
    assert isinstance(nr, NotRun) and nr.host == "head"
    assert "disagree on rackgate_node_lock_file" in nr.why


def test_planning_reads_nothing_but_its_arguments(monkeypatch):
    import builtins

    def refuse(*a, **k):
        raise AssertionError("planning opened a file")

    monkeypatch.setattr(builtins, "open", refuse)
    assert plan(view(python=sys.executable), checks("node.identity"), nothing_stored).phases
