"""The subnet managers as the fabric host sees them: the output of ``fabric.sm``'s script.

The script (``checks/fabric/sm.py``) prints sections, each after a marker line ``###
rackgate-fabric-sm <section>`` and closed by ``### rackgate-fabric-sm rc=N`` (the tool's
exit status; its stderr is in the section too), then ``### rackgate-fabric-sm done``:

* ``local``: ``smpquery -D portinfo 0``, the fabric host's own port (infiniband-diags
  ``smpquery.c``; libibmad ``dump.c``): ``<Field>:....<value>`` lines, of which ``Lid``,
  ``SMLid``, ``LinkState`` (Down, Initialize, Armed, Active) and ``PhysLinkState``
  (Sleep, Polling, Disabled, PortConfigurationTraining, LinkUp, LinkErrorRecovery, ...);
* ``master``: ``sminfo``, the SM at the port's SM LID (infiniband-diags ``sminfo.c``):
  ``sminfo: sm lid <lid> sm guid 0x<guid>, activity count <n> priority <p> state <s>
  <SMINFO_NOTACT|SMINFO_DISCOVER|SMINFO_STANDBY|SMINFO_MASTER>``; without an SM to answer
  it exits 255 with ``sminfo: iberror: failed: query`` (``IBEXIT("query")``);
* ``sm-ports``: ``saquery -s``, the PortInfoRecords the SA holds with IsSM set
  (``saquery.c``): ``IsSM ports`` then ``PortInfoRecord dump:`` blocks with
  ``base_lid.....<lid>``, then ``IsSMdisabled ports`` and theirs;
* for every LID of the master and of the IsSM ports: ``sm lid=<lid>`` (``sminfo <lid>``:
  that SM's own SMInfo) and ``nodedesc lid=<lid>`` (``smpquery nodedesc <lid>``: ``Node
  Description:....<text>``).

A tool that failed is kept as :class:`ToolFailure`, with its own words: the judge tells
"no SM answers" (a fail) from "the fabric host cannot query" (an error).

>>> r = parse_sminfo(EXAMPLE)
>>> r.master.state_name, r.master.priority, [(s.lid, s.node) for s in r.sms]
('SMINFO_MASTER', 7, [(1, 'gpu001 mlx5_0')])
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError, marked_sections

MARK = "### rackgate-fabric-sm "
STATES = ("SMINFO_NOTACT", "SMINFO_DISCOVER", "SMINFO_STANDBY", "SMINFO_MASTER")
MASTER = 3
MAX_LID = 0xBFFF  # the highest unicast LID (IBTA Vol. 1 LID ranges)

_SECTION = re.compile(r"(local|master|sm-ports|(sm|nodedesc) lid=([0-9]{1,5})|rc=([0-9]{1,3})"
                      r"|done)\Z")
_SMINFO = re.compile(r"sminfo: sm lid ([0-9]{1,5}) sm guid 0x([0-9a-f]{1,16}), activity count "
                     r"([0-9]{1,10}) priority ([0-9]{1,2}) state ([0-9]{1,2}) (\S+)\Z")
_FIELD = re.compile(r"([A-Za-z][A-Za-z0-9_]*):\.+(.*)\Z")
_NODEDESC = re.compile(r"Node Description:\.+(.*)\Z")
_BASE_LID = re.compile(r"base_lid\.+([0-9]{1,5})\Z")

EXAMPLE = """\
### rackgate-fabric-sm local
# Port info: DR path slid 65535; dlid 65535; 0 port 0
Lid:.............................1
SMLid:...........................1
LinkState:.......................Active
PhysLinkState:...................LinkUp
### rackgate-fabric-sm rc=0
### rackgate-fabric-sm master
sminfo: sm lid 1 sm guid 0x100001, activity count 353 priority 7 state 3 SMINFO_MASTER
### rackgate-fabric-sm rc=0
### rackgate-fabric-sm sm-ports
IsSM ports
PortInfoRecord dump:
		EndPortLid..............1
		base_lid................1
### rackgate-fabric-sm rc=0
### rackgate-fabric-sm sm lid=1
sminfo: sm lid 1 sm guid 0x100001, activity count 354 priority 7 state 3 SMINFO_MASTER
### rackgate-fabric-sm rc=0
### rackgate-fabric-sm nodedesc lid=1
Node Description:...................gpu001 mlx5_0
### rackgate-fabric-sm rc=0
### rackgate-fabric-sm done
"""


@dataclass(frozen=True)
class ToolFailure:
    """A tool that exited non-zero, or printed nothing it should: its words."""

    tool: str
    rc: int
    said: str  # its diagnostics (ibwarn/iberror lines), whitespace collapsed

    @property
    def no_answer(self) -> bool:
        """Whether the tool got no answer to its query (rather than failing to query):
        ``iberror: failed: query`` (sminfo) / ``node info query failed`` (smpquery)."""
        return bool(re.search(r"iberror: failed: (?:query|operation \w+: node info query "
                              r"failed)", self.said))


@dataclass(frozen=True)
class LocalPort:
    lid: int
    sm_lid: int
    link_state: str  # Down, Initialize, Armed, Active
    phys_state: str  # LinkUp, Polling, Disabled, ...


@dataclass(frozen=True)
class SmInfo:
    lid: int
    guid: str  # the SM's port GUID, 0x-less lower-case hex
    activity: int
    priority: int  # 0..15
    state: int  # 0..3: STATES
    state_name: str


@dataclass(frozen=True)
class SmPort:
    """One SM port: its own SMInfo and the node description of its node."""

    lid: int
    info: SmInfo | ToolFailure
    node: str | ToolFailure


@dataclass(frozen=True)
class SmReport:
    local: LocalPort | ToolFailure
    master: SmInfo | ToolFailure
    sm_lids: tuple[int, ...] | ToolFailure  # the IsSM ports' LIDs (saquery -s)
    sms: tuple[SmPort, ...]  # every SM port queried: the master's and the IsSM ports'


def _said(lines: list[str]) -> str:
    words = " ".join(re.sub(r"^(\w+): \[[0-9]+\] ", r"\1: ", x.strip()) for x in lines
                     if x.strip() and "sim_connect: attached" not in x)
    return words[-400:] or "nothing"


def _lid(text: str, what: str) -> int:
    if not re.fullmatch(r"[0-9]{1,5}", text, re.ASCII):  # isdigit() takes '²', int() not
        raise ParseError(f"{what}: LID {text[:20]!r} is not a decimal number")
    lid = int(text)
    if lid > MAX_LID:
        raise ParseError(f"{what}: LID {lid} is not a unicast LID (1..{MAX_LID:#x})")
    return lid


def _sminfo(lines: list[str], rc: int, tool: str) -> SmInfo | ToolFailure:
    found = [m for x in lines if (m := _SMINFO.match(x.strip())) is not None]
    if rc != 0 or len(found) != 1:
        return ToolFailure(tool, rc, _said(lines))
    m = found[0]
    state, priority = int(m.group(5)), int(m.group(4))
    if state >= len(STATES) or m.group(6) != STATES[state] or priority > 15:
        raise ParseError(f"{tool}: implausible SMInfo {m.group(0)!r} (state 0..3 named "
                         f"{', '.join(STATES)}; priority 0..15)")
    return SmInfo(_lid(m.group(1), tool), m.group(2), int(m.group(3)), priority, state,
                  m.group(6))


def _local(lines: list[str], rc: int) -> LocalPort | ToolFailure:
    tool = "smpquery -D portinfo 0 (the fabric host's port)"
    fields = {m.group(1): m.group(2).strip() for x in lines
              if (m := _FIELD.match(x.strip())) is not None}
    need = ("Lid", "SMLid", "LinkState", "PhysLinkState")
    if rc != 0:
        return ToolFailure(tool, rc, _said(lines))
    if any(k not in fields for k in need) or not fields["Lid"].isdigit() \
            or not fields["SMLid"].isdigit():
        raise ParseError(f"{tool}: no {', '.join(need)} fields with numeric LIDs in "
                         f"{_said(lines)[:200]!r}")
    return LocalPort(_lid(fields["Lid"], tool), _lid(fields["SMLid"], tool),
                     fields["LinkState"], fields["PhysLinkState"])


def _sm_lids(lines: list[str], rc: int) -> tuple[int, ...] | ToolFailure:
    tool = "saquery -s (the IsSM ports)"
    heads = [x.strip() for x in lines if x.strip() in ("IsSM ports", "IsSMdisabled ports")]
    if rc != 0 or not heads or heads[0] != "IsSM ports":
        return ToolFailure(tool, rc, _said(lines))
    lids: list[int] = []
    section = ""
    for x in lines:
        section = x.strip() if x.strip() in ("IsSM ports", "IsSMdisabled ports") else section
        if section == "IsSM ports" and (m := _BASE_LID.match(x.strip())) is not None:
            lids.append(_lid(m.group(1), tool))
    return tuple(lids)


def parse_sminfo(text: str) -> SmReport:
    """The sections of the fabric.sm script; ParseError for a broken sequence or damaged
    output (a tool that failed is a ToolFailure, not an error here)."""
    sections = list(marked_sections(text, MARK, _SECTION, "fabric.sm"))
    names = [s[0] for s in sections]
    if names[:3] != ["local", "master", "sm-ports"]:
        raise ParseError(f"fabric.sm output: sections {names[:3]}, expected local, master, "
                         "sm-ports first")
    local = _local(sections[0][1], sections[0][2])
    master = _sminfo(sections[1][1], sections[1][2], "sminfo (the port's master SM)")
    sm_lids = _sm_lids(sections[2][1], sections[2][2])
    rest = sections[3:]
    sms = []
    for i in range(0, len(rest), 2):
        pair = rest[i:i + 2]
        lids = {s[0].split("=", 1)[1] for s in pair}
        if [s[0].split(" ")[0] for s in pair] != ["sm", "nodedesc"] or len(lids) != 1:
            raise ParseError(f"fabric.sm output: sections {[s[0] for s in pair]} are not an "
                             "'sm lid=N' and 'nodedesc lid=N' pair")
        lid = _lid(lids.pop(), "fabric.sm output")
        (_, info_lines, info_rc), (_, desc_lines, desc_rc) = pair
        found = [m.group(1).strip() for x in desc_lines
                 if (m := _NODEDESC.match(x.strip())) is not None]
        node: str | ToolFailure = found[0] if desc_rc == 0 and len(found) == 1 else \
            ToolFailure(f"smpquery nodedesc {lid}", desc_rc, _said(desc_lines))
        sms.append(SmPort(lid, _sminfo(info_lines, info_rc, f"sminfo {lid}"), node))
    expect = set(() if isinstance(sm_lids, ToolFailure) else sm_lids)
    expect |= {master.lid} if isinstance(master, SmInfo) else set()
    queried = [s.lid for s in sms]
    if sorted(queried) != sorted(expect):
        raise ParseError(f"fabric.sm output: SMs queried at LIDs {sorted(queried)}, but the "
                         f"master and the IsSM ports are at {sorted(expect)}")
    return SmReport(local, master, sm_lids, tuple(sms))


__all__ = ["MASTER", "STATES", "LocalPort", "SmInfo", "SmPort", "SmReport", "ToolFailure",
           "parse_sminfo"]
