"""The fabric placement: a fabric check is planned once, on the fabric host, and judged
against the fabric plan, every node under test told the findings that bear on it.

Pure: a stand-in check (its parser reads "down <cable>" lines, its judge fails the node
of each such cable) and an in-memory evidence reader; no Ansible, no run directory. The
real fabric checks and their tools are tested in test_fabric_*.py and against ibsim."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from rackgate import profile as _profile
from rackgate.checks import CATALOG, load_profile
from rackgate.checks.shared.base import FabricCheck, Params, Scope
from rackgate.collect.schedule import plan
from rackgate.commands.task import Task
from rackgate.fabric.findings import FabricFinding, FabricVerdict
from rackgate.fabric.plan import SCHEMA, FabricPlan, plan_from_document
from rackgate.model import Status
from rackgate.placement import (
    NO_FABRIC_HOST,
    NO_PLAN,
    ON_FABRIC,
    JudgeJob,
    NotRun,
    RunView,
    placement_of,
)
from rackgate.store.evidence import Evidence, EvidenceError

NODES = ("n1", "n2", "n3")
PLAN = plan_from_document({
    "schema": SCHEMA, "name": "t", "speed": "HDR",
    "switches": [{"name": "leaf-1", "role": "leaf", "ports": 8, "rail": 0},
                 {"name": "spine-1", "role": "spine", "ports": 8}],
    "nodes": [{"host": h, "hca": "mlx5_0", "rail": 0, "switch": "leaf-1", "switch_port": i,
               "cable": f"C{i}"} for i, h in enumerate(("n1", "n2", "sm1"), 1)],
    "links": [{"a": {"switch": "leaf-1", "port": 8}, "b": {"switch": "spine-1", "port": 1},
               "cable": "C9"}]}, "test plan")


def _parse(text: str) -> list[str]:
    return [line.split()[1] for line in text.splitlines() if line.startswith("down ")]


def _judge(down: list[str], params: Any, thresholds: Any, plan: FabricPlan) -> FabricVerdict:
    by_cable = {link.cable: link for link in plan.planned_links()}
    return FabricVerdict(tuple(FabricFinding(Status.FAIL, f"cable {c} is down",
                                             by_cable[c].hosts) for c in down),
                         f"{len(by_cable)} cables up")


CHECK = FabricCheck(name="fabric.as_built", scope=Scope.RACK, tags=frozenset({"fabric"}),
              description="stand-in", params_model=Params, metrics=frozenset(),
              command=lambda params, hostvars: ["ibnetdiscover", "-p"], parse=_parse,
 judge_plan=_judge)
PROFILE = _profile.profile_from_document(
    {**load_profile("demo").raw, "checks": {"fabric.as_built": {}}}, "test",
    {**CATALOG, "fabric.as_built": CHECK})


def view(**kw: Any) -> RunView:
    args: dict[str, Any] = dict(
        nodes=NODES, hostvars={h: {} for h in (*NODES, "sm1")}, sources=("inv.yml",),
        profiles={n: PROFILE for n in NODES}, fabric=PLAN, fabric_host="sm1")
    args.update(kw)
    return RunView(**args)


class Reader:
    def __init__(self, stdout: str | None, rc: int = 0) -> None:
        self.stdout, self.rc, self.reads = stdout, rc, []

    def read(self, host: str, check: str) -> tuple[Evidence, str]:
        self.reads.append((host, check))
        if self.stdout is None:
            raise EvidenceError(f"no evidence for {host} {check}")
        ev = Evidence(host=host, check=check, argv=("ibnetdiscover", "-p"),
                      outcome="completed", rc=self.rc, started=None, ended=None,
                      duration_s=1.0, stdout_file=f"evidence/{host}/{check}.out",
                      stdout_sha256="0" * 64, stderr="", message="",
                      stdout_bytes=len(self.stdout))
        return ev, self.stdout


def job(**kw: Any) -> JudgeJob:
    args: dict[str, Any] = dict(hosts=NODES, checks=(CHECK.name,),
                                profiles={n: PROFILE for n in NODES},
                                collected_with={n: PROFILE for n in NODES},
                                fabric=PLAN, fabric_host="sm1")
    args.update(kw)
    return JudgeJob(**args)


def by_node(judged: Any) -> dict[str, tuple[str, str]]:
    return {r.node: (r.status.label, r.message) for r in judged.results}


def test_a_fabric_check_is_planned_once_on_the_fabric_host_without_a_lock():
    assert placement_of(CHECK) is ON_FABRIC
    p = plan(view(), [CHECK], lambda h, c: False)
    assert p.planned == (Task("sm1", CHECK.name, ("ibnetdiscover", "-p"), 60,
                              lock_file=None),)


def test_the_wrapper_goes_in_front_and_must_be_plain_words():
    hv = {h: {} for h in (*NODES, "sm1")}
    p = plan(view(hostvars={**hv, "sm1": {"rackgate_fabric_wrapper": ["ibsim-run"]}}),
             [CHECK], lambda h, c: False)
    assert [t.argv for t in p.planned] == [("ibsim-run", "ibnetdiscover", "-p")]
    p = plan(view(hostvars={**hv, "sm1": {"rackgate_fabric_wrapper": "sudo; rm -rf /"}}),
             [CHECK], lambda h, c: False)
    assert isinstance(p.planned[0], NotRun) and "rackgate_fabric_wrapper" in p.planned[0].why


@pytest.mark.parametrize("kw", [{"fabric": None}, {"fabric_host": None}])
def test_without_a_plan_or_a_fabric_host_nothing_is_planned(kw):
    assert plan(view(**kw), [CHECK], lambda h, c: False).planned == ()


def test_findings_reach_the_nodes_they_bear_on_and_a_node_off_the_plan_is_an_error():
    judged = ON_FABRIC.judge(CHECK, job(), Reader("down C2\n"), NODES)
    assert by_node(judged) == {
        "n3": ("error", "n3 has no HCA port in fabric plan t: nothing says how it is cabled"),
        "n1": ("pass", "4 cables up"),
        "n2": ("fail", "cable C2 is down")}
    assert set(judged.digests) == {("n1", CHECK.name), ("n2", CHECK.name)}


def test_a_finding_of_the_whole_fabric_fails_every_node():
    judged = ON_FABRIC.judge(CHECK, job(hosts=("n1", "n2")), Reader("down C9\n"), ("n1", "n2"))
    # C9 is an inter-switch link: the stand-in judge names no host, so it bears on all
    assert {n: s for n, (s, _) in by_node(judged).items()} == {"n1": "fail", "n2": "fail"}


@pytest.mark.parametrize(("kw", "why"), [({"fabric": None}, NO_PLAN),
                                         ({"fabric_host": None}, NO_FABRIC_HOST)])
def test_no_plan_or_no_fabric_host_is_an_error_never_a_pass(kw, why):
    judged = ON_FABRIC.judge(CHECK, job(**kw), Reader(""), NODES)
    assert set(by_node(judged).values()) == {("error", why)}


def test_missing_or_failed_evidence_is_an_error_for_every_planned_node():
    hosts = ("n1", "n2")
    missing = ON_FABRIC.judge(CHECK, job(hosts=hosts), Reader(None), hosts)
    assert {s for s, _ in by_node(missing).values()} == {"error"}
    failed = ON_FABRIC.judge(CHECK, job(hosts=hosts), Reader("ibwarn: no port\n", rc=1),
                             hosts)
    assert {m for _, m in by_node(failed).values()} == {
        "command exited with rc 1: ibwarn: no port"}


def test_a_judge_that_raises_is_an_error_not_a_pass():
    broken = replace(CHECK, judge_plan=lambda *a: 1 / 0)
    judged = ON_FABRIC.judge(broken, job(hosts=("n1",)), Reader("down C1\n"), ("n1",))
    assert by_node(judged)["n1"][0] == "error"
    assert "judge failed" in by_node(judged)["n1"][1]
