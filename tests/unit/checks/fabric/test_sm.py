"""fabric.sm: one master subnet manager, on a planned host, at the planned priority
(tests/fixtures/fabric_counters: captures of the check's own script under ibsim with the
real opensm, retaken by tests/integration/test_fabric_ibsim_counters.py)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from rackgate.checks.fabric.query import FabricQueryParams
from rackgate.checks.fabric.sm import SM_SCRIPT, fabric_sm_command, judge_fabric_sm
from rackgate.fabric.findings import node_results
from rackgate.fabric.plan import FabricPlan, load_plan, plan_from_document
from rackgate.parsers import ParseError
from rackgate.parsers.sminfo import SmInfo, ToolFailure, parse_sminfo

HERE = Path(__file__).resolve().parents[3] / "fixtures" / "fabric_counters"
PLAN = load_plan(HERE / "plan.yml").plan
MASTER = '"gpu001 mlx5_0" (host gpu001, LID 1, GUID 0x100001)'
STANDBY = '"gpu002 mlx5_0" (host gpu002, LID 7, GUID 0x100005)'


def fixture(name: str) -> str:
    head, sep, body = (HERE / f"sm-{name}.txt").read_text(encoding="utf-8").partition(
        "\n# ---\n")
    assert sep and head.startswith("# source:"), f"sm-{name}.txt header"
    return body


def plan_with(**sm: object) -> FabricPlan:
    doc = yaml.safe_load((HERE / "plan.yml").read_text(encoding="utf-8"))
    if sm:
        doc["subnet_manager"] = {**doc["subnet_manager"], **sm}
    else:
        del doc["subnet_manager"]
    return plan_from_document(doc, "test plan")


def judge(text: str, plan: FabricPlan = PLAN) -> list[tuple[str, list[str], str]]:
    verdict = judge_fabric_sm(parse_sminfo(text), FabricQueryParams(), {}, plan)
    return [(f.status.label, sorted(f.hosts), f.message) for f in verdict.findings]


def test_the_planned_master_passes_every_node() -> None:
    rep = parse_sminfo(fixture("healthy"))
    assert isinstance(rep.master, SmInfo) and rep.sm_lids == (1,)
    verdict = judge_fabric_sm(rep, FabricQueryParams(), {}, PLAN)
    assert verdict.findings == ()
    assert verdict.summary == (f"one master SM, on {MASTER} at priority 7 (planned: priority 7 "
                               "on gpu001); no other SM")
    results = node_results(verdict, ["gpu001", "gpu002"], "fabric.sm", "ev")
    assert [r.status.label for r in results] == ["pass", "pass"]


def test_no_sm_ever_is_a_fail_for_every_node_with_the_tools_words() -> None:
    assert judge(fixture("no-sm")) == [(
        "fail", [], "no subnet manager is master: the fabric host's port is LinkUp but "
        "Initialize with LID 0 and SM LID 0, so no SM has brought the subnet up; sminfo (the "
        "port's master SM): ibwarn: mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0;"
        " 0) sminfo: iberror: failed: query")]
    verdict = judge_fabric_sm(parse_sminfo(fixture("no-sm")), FabricQueryParams(), {}, PLAN)
    assert [r.status.label for r in node_results(verdict, ["gpu001", "gpu002"], "fabric.sm",
                                                 "ev")] == ["fail", "fail"]


def test_an_sm_gone_after_bringing_the_subnet_up_is_a_fail() -> None:
    assert judge(fixture("sm-gone")) == [(
        "fail", [], "no subnet manager is master: no SM answers at SM LID 1, the master the "
        "fabric host's port was last given; sminfo (the port's master SM): ibwarn: mad_rpc: "
        "_do_madrpc failed; dport (Lid 1) sminfo: iberror: failed: query")]


def test_the_master_at_another_priority_fails() -> None:
    assert judge(fixture("wrong-priority")) == [(
        "fail", [], f"the master SM on {MASTER} runs at priority 3, the plan's "
        "subnet_manager.priority is 7")]


def test_the_master_on_a_host_the_plan_does_not_list_fails() -> None:
    assert judge(fixture("master-on-gpu002")) == [(
        "fail", [], 'the master SM runs on "gpu002 mlx5_1" (host gpu002, LID 1, GUID '
        "0x100007), not on a planned SM host (gpu001)")]
    foreign = fixture("master-on-gpu002").replace("Node Description:...................gpu002 "
                                                  "mlx5_1", "Node Description:....head9 mlx5_0")
    assert judge(foreign) == [(
        "fail", [], 'the master SM runs on "head9 mlx5_0" (LID 1, GUID 0x100007), which is no '
        "HCA of the fabric plan (planned SM hosts: gpu001)")]


def test_a_standby_passes_on_a_planned_host_and_fails_elsewhere() -> None:
    assert judge(fixture("standby-on-gpu002")) == [(
        "fail", [], f"a SMINFO_STANDBY SM runs on {STANDBY}, not a planned SM host (gpu001): "
        "it takes over if the master goes")]
    both = plan_with(hosts=["gpu001", "gpu002"])
    verdict = judge_fabric_sm(parse_sminfo(fixture("standby-on-gpu002")), FabricQueryParams(),
                              {}, both)
    assert verdict.findings == ()
    assert verdict.summary == (f"one master SM, on {MASTER} at priority 7 (planned: priority 7 "
                               f"on gpu001, gpu002); other SMs: {STANDBY} SMINFO_STANDBY at "
                               "priority 3")


def test_a_standby_above_the_masters_priority_or_not_standing_by_warns() -> None:
    both = plan_with(hosts=["gpu001", "gpu002"])
    text = fixture("standby-on-gpu002")
    higher = text.replace("priority 3 state 2 SMINFO_STANDBY", "priority 9 state 2 "
                                                               "SMINFO_STANDBY")
    assert judge(higher, both) == [(
        "warn", [], f"the SMINFO_STANDBY SM on {STANDBY} has priority 9, above the master's 7: "
        "the master should have handed over to it")]
    idle = text.replace("priority 3 state 2 SMINFO_STANDBY", "priority 3 state 0 SMINFO_NOTACT")
    assert judge(idle, both) == [(
        "warn", [], f"the SM on {STANDBY} is SMINFO_NOTACT, not SMINFO_STANDBY: it would not "
        "take over if the master went")]


def test_two_masters_fail() -> None:
    assert judge(fixture("two-masters"), plan_with(hosts=["gpu001", "gpu002"])) == [
        ("fail", [], f"2 subnet managers are master: {MASTER} at priority 7, {STANDBY} at "
                     "priority 3; exactly one may be"),
        ("fail", [], f"the master SM on {STANDBY} runs at priority 3, the plan's "
                     "subnet_manager.priority is 7")]


def test_the_fabric_hosts_port_down_cannot_show_the_subnet() -> None:
    assert judge(fixture("host-port-down")) == [(
        "error", [], "the fabric host's port is Polling (link Down): the subnet cannot be seen "
        "from it; an SM on the fabric host itself would still answer")]
    armed = fixture("healthy").replace("LinkState:.......................Active",
                                       "LinkState:.......................Armed")
    assert judge(armed) == [("error", [], "the fabric host's port is Armed, not Active, though "
                                          "an SM answers: the subnet is not up yet at the "
                                          "fabric host; run again")]


def test_a_plan_without_a_subnet_manager_is_an_error_not_a_pass() -> None:
    assert judge(fixture("healthy"), plan_with()) == [(
        "error", [], "fabric plan counters-2leaf-2spine names no subnet manager "
        "(subnet_manager: hosts, priority): there is nothing to judge the SM against")]


def test_an_sm_port_that_does_not_answer_or_changed_state_is_an_error() -> None:
    both = plan_with(hosts=["gpu001", "gpu002"])
    text = fixture("standby-on-gpu002")
    lost = text.replace("Node Description:...................gpu002 mlx5_0\n"
                        "### rackgate-fabric-sm rc=0",
                        "smpquery: iberror: failed: operation nodedesc: node info query failed"
                        "\n### rackgate-fabric-sm rc=255")
    assert judge(lost, both) == [(
        "error", [], "the SM port at LID 7 cannot be judged: smpquery nodedesc 7 failed (rc "
        "255): smpquery: iberror: failed: operation nodedesc: node info query failed")]
    rep = parse_sminfo(lost)
    assert isinstance(rep.sms[1].node, ToolFailure) and rep.sms[1].node.no_answer
    healthy = fixture("healthy")
    found = judge(healthy.replace(*_second_answer(healthy)))
    assert found == [("error", [], "the SM at LID 1 said SMINFO_MASTER, then SMINFO_STANDBY "
                                   "when asked again: it changed state during the check; run "
                                   "again")]


def _second_answer(text: str) -> tuple[str, str]:
    """The master's answer when asked at its LID, and the same as STANDBY."""
    line = next(x for x in text.split("### rackgate-fabric-sm sm lid=1\n")[1].splitlines()
                if x.startswith("sminfo: "))
    return line, line.replace("state 3 SMINFO_MASTER", "state 2 SMINFO_STANDBY")


@pytest.mark.parametrize(("edit", "match"), [
    (lambda t: t.replace("### rackgate-fabric-sm done\n", ""), "did not finish"),
    (lambda t: "stray\n" + t, "outside any section"),
    (lambda t: t.replace("### rackgate-fabric-sm nodedesc lid=1\n", "### rackgate-fabric-sm "
                         "nodedesc lid=2\n"), "not an 'sm lid=N' and 'nodedesc lid=N' pair"),
    (lambda t: t.replace("state 3 SMINFO_MASTER", "state 7 ???"), "implausible SMInfo"),
    (lambda t: t.replace("SMLid:...........................1\n", ""), "no Lid, SMLid"),
    (lambda t: t.replace("### rackgate-fabric-sm rc=0\n### rackgate-fabric-sm master",
                         "### rackgate-fabric-sm master"), "unexpected marker"),
])
def test_damaged_evidence_is_a_parse_error(edit, match) -> None:
    text = edit(fixture("healthy"))
    assert text != fixture("healthy")
    with pytest.raises(ParseError, match=match):
        parse_sminfo(text)


def test_every_sm_port_listed_must_have_been_asked() -> None:
    text = fixture("standby-on-gpu002")
    cut = text[:text.index("### rackgate-fabric-sm sm lid=7")] + "### rackgate-fabric-sm done\n"
    with pytest.raises(ParseError, match=r"queried at LIDs \[1\], but the master and the IsSM "
                                         r"ports are at \[1, 7\]"):
        parse_sminfo(cut)


def test_the_command_is_the_constant_script() -> None:
    assert fabric_sm_command(FabricQueryParams(), {}) == ["sh", "-c", SM_SCRIPT,
                                                          "rackgate-fabric-sm", "", ""]
    assert fabric_sm_command(FabricQueryParams(ca="mlx5_2", port=1), {})[3:] == [
        "rackgate-fabric-sm", "mlx5_2", "1"]


def _fake(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_script_asks_the_master_and_each_issm_port_once(tmp_path: Path) -> None:
    """The real script under sh, with stand-ins for the tools: the master's LID and the
    IsSM ports' (not the IsSMdisabled ones) are asked once each, as -C/-P words."""
    bindir, calls = tmp_path / "bin", tmp_path / "calls"
    bindir.mkdir()
    _fake(bindir, "smpquery", f'echo "smpquery $*" >> {calls}; echo "Lid:....1"')
    _fake(bindir, "sminfo", f'echo "sminfo $*" >> {calls}; '
          'echo "sminfo: sm lid 4 sm guid 0x1, activity count 1 priority 7 state 3 '
          'SMINFO_MASTER"')
    _fake(bindir, "saquery", f'echo "saquery $*" >> {calls}; printf "%s\\n" "IsSM ports" '
          '"PortInfoRecord dump:" "		base_lid................9" "PortInfoRecord dump:" '
          '"		base_lid................4" "" "IsSMdisabled ports" "PortInfoRecord dump:" '
          '"		base_lid................12"')
    argv = fabric_sm_command(FabricQueryParams(ca="mlx5_2", port=1), {})
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False,
                          env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == [
        "smpquery -C mlx5_2 -P 1 -D portinfo 0", "sminfo -C mlx5_2 -P 1",
        "saquery -C mlx5_2 -P 1 -s",
        "sminfo -C mlx5_2 -P 1 4", "smpquery -C mlx5_2 -P 1 nodedesc 4",
        "sminfo -C mlx5_2 -P 1 9", "smpquery -C mlx5_2 -P 1 nodedesc 9"]
    marks = [x[len("### rackgate-fabric-sm "):] for x in done.stdout.splitlines()
             if x.startswith("### ")]
    assert marks == ["local", "rc=0", "master", "rc=0", "sm-ports", "rc=0", "sm lid=4", "rc=0",
                     "nodedesc lid=4", "rc=0", "sm lid=9", "rc=0", "nodedesc lid=9", "rc=0",
                     "done"]
