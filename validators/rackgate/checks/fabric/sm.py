"""``fabric.sm``: exactly one master subnet manager, on a planned host, at the planned
priority.

The fabric host reads its own port (``smpquery -D portinfo 0``), asks its port's SM for
its SMInfo (``sminfo``), lists the ports the SA knows run an SM (``saquery -s``) and asks
each of them, and the master, for its SMInfo and its node description
(``parsers.sminfo``). The plan's ``subnet_manager`` names the hosts an SM may run on and
the master's priority. Findings bear on every node (the SM serves the whole fabric):

* no SM answers: a ``fail``, "no subnet manager is master" (the port is still in
  Initialize with SM LID 0, or no SM answers at the SM LID it was given), with the tool's
  words; but a fabric host whose own port is not LinkUp, or whose tools fail otherwise,
  cannot query the fabric: an ``error``;
* two SMs reporting MASTER, a master at another priority than planned, a master on a node
  that is no HCA of the plan or on a host the plan does not list, the port's SM not in
  state MASTER: each a ``fail``;
* a standby SM on a host the plan does not list fails too (it takes over when the master
  goes); a standby in state NOTACT or DISCOVER, or with a priority above the master's
  (IBTA: the master hands over to it), warns;
* an SM that does not answer when asked at its LID, or whose node cannot be named, is an
  ``error``; so is a plan without a ``subnet_manager`` section: there is nothing to judge
  the SM against.

>>> fabric_sm_command(FabricQueryParams(), {})[3:]
['rackgate-fabric-sm', '', '']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from rackgate.checks.fabric.query import FabricQueryParams, query_needs
from rackgate.checks.shared.base import FabricCheck, HostNeeds, Scope
from rackgate.fabric.findings import FabricFinding, FabricVerdict
from rackgate.fabric.plan import FabricPlan, SubnetManager
from rackgate.model import Status
from rackgate.parsers.sminfo import (
    MASTER,
    LocalPort,
    SmInfo,
    SmPort,
    SmReport,
    ToolFailure,
    parse_sminfo,
)
from rackgate.profile import Threshold

NO_MASTER = "no subnet manager is master"

# Fixed text: the CA and its port come in as $1 and $2, never spliced into it. The LIDs it
# queries come from the tools' own output, digits only (sed), as arguments.
SM_SCRIPT = r"""ca=${1-} port=${2-}
m() { echo "### rackgate-fabric-sm $*"; }
q() { t=$1; shift; "$t" ${ca:+-C "$ca"} ${port:+-P "$port"} "$@"; }
m local; q smpquery -D portinfo 0 2>&1; m "rc=$?"
m master; out=$(q sminfo 2>&1); rc=$?; printf '%s\n' "$out"; m "rc=$rc"
lids=$(printf '%s\n' "$out" | sed -n 's/^sminfo: sm lid \([0-9][0-9]*\) .*/\1/p')
m sm-ports; out=$(q saquery -s 2>&1); rc=$?; printf '%s\n' "$out"; m "rc=$rc"
lids="$lids $(printf '%s\n' "$out" | sed -n -e '/^IsSMdisabled ports/q' \
  -e 's/^[[:space:]]*base_lid\.*\([0-9][0-9]*\)$/\1/p')"
for lid in $(printf '%s\n' $lids | sort -un | head -n 64); do
  m "sm lid=$lid"; q sminfo "$lid" 2>&1; m "rc=$?"
  m "nodedesc lid=$lid"; q smpquery nodedesc "$lid" 2>&1; m "rc=$?"
done
m done
"""


def fabric_sm_command(params: FabricQueryParams, hostvars: Mapping[str, Any]) -> list[str]:
    """The fixed script with the query port as its arguments ("" unset)."""
    return ["sh", "-c", SM_SCRIPT, "rackgate-fabric-sm", params.ca or "",
            "" if params.port is None else str(params.port)]


def _needs(params: FabricQueryParams, hostvars: Mapping[str, Any]) -> HostNeeds:
    """The tools the script runs, the query HCA and root (``query_needs``)."""
    needs: HostNeeds = query_needs("sminfo")(params, hostvars)
    return replace(needs, tools=("smpquery", "sminfo", "saquery", "sed", "sort", "head"))


def _who(sm: SmPort, hosts: Mapping[str, str]) -> str:
    """'"gpu001 mlx5_0" (host gpu001, LID 1, GUID 0x100001)'."""
    name = sm.node if isinstance(sm.node, str) else "?"
    guid = f", GUID 0x{sm.info.guid}" if isinstance(sm.info, SmInfo) else ""
    host = f"host {hosts[name]}, " if name in hosts else ""
    return f'"{name}" ({host}LID {sm.lid}{guid})'


def _local_finding(rep: SmReport) -> FabricFinding | None:
    """An error when the fabric host's own port cannot show the subnet: unreadable, not
    LinkUp (an SM on the host itself still answers it), or LinkUp but not yet Active with
    an SM answering (the SM is still bringing it up)."""
    local, said = rep.local, _said(rep.master)
    if isinstance(local, ToolFailure):
        return FabricFinding(Status.ERROR, f"cannot read the fabric host's own port "
                             f"({local.tool}, rc {local.rc}: {local.said}){said}")
    if local.phys_state != "LinkUp":
        return FabricFinding(Status.ERROR, f"the fabric host's port is {local.phys_state} "
                             f"(link {local.link_state}): the subnet cannot be seen from it; "
                             f"an SM on the fabric host itself would still answer{said}")
    if isinstance(rep.master, SmInfo) and local.link_state != "Active":
        return FabricFinding(Status.ERROR, f"the fabric host's port is {local.link_state}, "
                             "not Active, though an SM answers: the subnet is not up yet at "
                             "the fabric host; run again")
    return None


def _said(master: SmInfo | ToolFailure) -> str:
    return f"; {master.tool}: {master.said}" if isinstance(master, ToolFailure) else ""


def _no_master(rep: SmReport, master: ToolFailure) -> FabricFinding:
    """Why no SM answered the fabric host (its port is LinkUp): a fail when its port shows
    that no SM brought it up or none answers at the SM LID it was given, else an error."""
    local, said = rep.local, _said(master)
    assert isinstance(local, LocalPort)
    if local.sm_lid == 0 or local.link_state == "Initialize":
        return FabricFinding(Status.FAIL, f"{NO_MASTER}: the fabric host's port is LinkUp but "
                             f"{local.link_state} with LID {local.lid} and SM LID "
                             f"{local.sm_lid}, so no SM has brought the subnet up{said}")
    if master.no_answer:
        return FabricFinding(Status.FAIL, f"{NO_MASTER}: no SM answers at SM LID "
                             f"{local.sm_lid}, the master the fabric host's port was last "
                             f"given{said}")
    return FabricFinding(Status.ERROR, f"cannot ask the fabric host's SM for its SMInfo "
                         f"(rc {master.rc}){said}")


def _sm_findings(rep: SmReport, sm: SubnetManager, hosts: Mapping[str, str]
                 ) -> tuple[list[FabricFinding], list[SmPort]]:
    """Findings on each queried SM, and the masters among them."""
    out, masters = [], []
    for s in rep.sms:
        if isinstance(s.info, ToolFailure) or isinstance(s.node, ToolFailure):
            bad = s.info if isinstance(s.info, ToolFailure) else s.node
            assert isinstance(bad, ToolFailure)
            out.append(FabricFinding(Status.ERROR, f"the SM port at LID {s.lid} cannot be "
                                     f"judged: {bad.tool} failed (rc {bad.rc}): {bad.said}"))
            continue
        if s.info.state == MASTER:
            masters.append(s)
        elif hosts.get(s.node) not in sm.hosts:
            planned = "not a planned SM host" if s.node in hosts else "no HCA of the plan"
            out.append(FabricFinding(Status.FAIL, f"a {s.info.state_name} SM runs on "
                                     f"{_who(s, hosts)}, {planned} ({', '.join(sm.hosts)}): it "
                                     "takes over if the master goes"))
        elif s.info.state_name != "SMINFO_STANDBY":
            out.append(FabricFinding(Status.WARN, f"the SM on {_who(s, hosts)} is "
                                     f"{s.info.state_name}, not SMINFO_STANDBY: it would not "
                                     "take over if the master went"))
    return out, masters


def _master_findings(m: SmPort, sm: SubnetManager, hosts: Mapping[str, str]) -> list[str]:
    assert isinstance(m.info, SmInfo) and isinstance(m.node, str)
    out = []
    if m.info.priority != sm.priority:
        out.append(f"the master SM on {_who(m, hosts)} runs at priority {m.info.priority}, "
                   f"the plan's subnet_manager.priority is {sm.priority}")
    if m.node not in hosts:
        out.append(f"the master SM runs on {_who(m, hosts)}, which is no HCA of the fabric "
                   f"plan (planned SM hosts: {', '.join(sm.hosts)})")
    elif hosts[m.node] not in sm.hosts:
        out.append(f"the master SM runs on {_who(m, hosts)}, not on a planned SM host "
                   f"({', '.join(sm.hosts)})")
    return out


def judge_fabric_sm(rep: SmReport, params: FabricQueryParams,
                    thresholds: Mapping[str, Threshold], plan: FabricPlan) -> FabricVerdict:
    sm = plan.subnet_manager
    if sm is None:
        return FabricVerdict((FabricFinding(
            Status.ERROR, f"fabric plan {plan.name} names no subnet manager (subnet_manager: "
            "hosts, priority): there is nothing to judge the SM against"),), "")
    bad = _local_finding(rep)
    if bad is not None:
        return FabricVerdict((bad,), "")
    if isinstance(rep.master, ToolFailure):
        return FabricVerdict((_no_master(rep, rep.master),), "")
    hosts = plan.hca_host
    findings, masters = _sm_findings(rep, sm, hosts)
    if isinstance(rep.sm_lids, ToolFailure):
        findings.append(FabricFinding(Status.ERROR, f"cannot list the subnet's SMs: "
                                      f"{rep.sm_lids.tool} failed (rc {rep.sm_lids.rc}): "
                                      f"{rep.sm_lids.said}"))
    told = rep.master
    if told.state != MASTER:
        findings.append(FabricFinding(Status.FAIL, f"the SM at LID {told.lid}, which the fabric "
                                      f"host's port names as its master, is {told.state_name} "
                                      f"(state {told.state}), not SMINFO_MASTER"))
    if len(masters) > 1:
        findings.append(FabricFinding(Status.FAIL, f"{len(masters)} subnet managers are master: "
                                      + ", ".join(f"{_who(m, hosts)} at priority "
                                                  f"{m.info.priority}" for m in masters
                                                  if isinstance(m.info, SmInfo))
                                      + "; exactly one may be"))
    for m in masters:
        findings += [FabricFinding(Status.FAIL, f) for f in _master_findings(m, sm, hosts)]
    asked = next((x.info for x in rep.sms if x.lid == told.lid), None)
    if told.state == MASTER and isinstance(asked, SmInfo) and asked.state != MASTER:
        findings.append(FabricFinding(Status.ERROR, f"the SM at LID {told.lid} said "
                                      f"SMINFO_MASTER, then {asked.state_name} when asked "
                                      "again: it changed state during the check; run again"))
    top = max((x.info.priority for x in masters if isinstance(x.info, SmInfo)), default=None)
    for x in rep.sms:
        if isinstance(x.info, SmInfo) and x.info.state != MASTER and top is not None \
                and x.info.priority > top:
            findings.append(FabricFinding(Status.WARN, f"the {x.info.state_name} SM on "
                                          f"{_who(x, hosts)} has priority {x.info.priority}, "
                                          f"above the master's {top}: the master should have "
                                          "handed over to it"))
    return FabricVerdict(tuple(findings), _summary(masters, rep, hosts, sm))


def _summary(masters: list[SmPort], rep: SmReport, hosts: Mapping[str, str],
             sm: SubnetManager) -> str:
    """What a node is told when nothing was found: the master and the other SMs."""
    if len(masters) != 1 or not isinstance(masters[0].info, SmInfo):
        return f"{len(masters)} master SMs"
    m, info = masters[0], masters[0].info
    others = [f"{_who(s, hosts)} {s.info.state_name} at priority {s.info.priority}"
              for s in rep.sms if s is not m and isinstance(s.info, SmInfo)]
    return (f"one master SM, on {_who(m, hosts)} at priority {info.priority} (planned: "
            f"priority {sm.priority} on {', '.join(sm.hosts)})"
            + (f"; other SMs: {'; '.join(others)}" if others else "; no other SM"))


CHECK = FabricCheck(
    name="fabric.sm",
    scope=Scope.RACK,
    tags=frozenset({"fabric", "infiniband"}),
    description="Exactly one master subnet manager, on a host the fabric plan lists, at "
                "the plan's priority; standby SMs only on planned hosts",
    params_model=FabricQueryParams,
    metrics=frozenset(),
    command=fabric_sm_command,
    parse=parse_sminfo,
    judge_plan=judge_fabric_sm,
    needs=_needs,
)
CHECKS = (CHECK,)

__all__ = ["CHECK", "CHECKS", "NO_MASTER", "SM_SCRIPT", "fabric_sm_command", "judge_fabric_sm"]
