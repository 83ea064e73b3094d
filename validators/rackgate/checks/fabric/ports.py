"""fabric.ports: the port state of the compute fabric (InfiniBand or RoCE); RoCE lossless
settings (fabric.roce_lossless) are ``checks.fabric.roce_lossless``.

``fabric.ports`` reads the ports with the first of ``params.tools`` on the node's PATH
(default: ``ibstat``, then ``ibv_devinfo -v``, ``ibstatus``, ``rdma -j link show``: the
usual alternatives, and the only ones some images have). The choice is made on the node
by a fixed probe (``programs/probes/ib_ports.py``, sent as text: each tool's command an
argv of ``parsers.infiniband.ports.TOOL_ARGV``, no shell), which writes the tool it ran first;
evidence read with a tool ``params.tools`` does not allow is an ``error``, and so is
output that is not the named tool's (``parsers.infiniband.ports``). When none is installed the
probe exits 3 naming them, an ``error``.

It judges the ports of the profile's NICs of role ``compute`` (``hardware.nics``): exactly
``count`` ports with the NIC's ``link_layer`` must be State Active, Physical state LinkUp
(on each tool's allow-list: ibstat ``Active``/``LinkUp``, ibv_devinfo ``PORT_ACTIVE``/
``LINK_UP``, ibstatus ``4: ACTIVE``/``5: LinkUp``, rdma ``ACTIVE``/``LINK_UP``), at
``rate_gbps`` (Gb/s: 400 for NDR 4x, 200 for HDR 4x; ibstat's Rate, ibv_devinfo's lanes x
lane speed, ibstatus's sysfs rate). ``rdma link`` prints no rate (nor does ibstatus where
the kernel's rate file cannot be read): a port shown up without one cannot be confirmed at
the profiled rate, which is an ``error`` unless ``params.unconfirmed_rate`` is ``warn`` (a
site that accepts the state alone from such images). No RDMA device at all (empty ibstat
output, as on a kernel without RDMA) fails as "no HCA found"; ibstat's ibpanic/ibwarn
lines fail it too. The tool, where it was found and the tools not found go into the
details, and so do firmware versions where the tool prints them.

Which port belongs to which NIC class (the rule, in order):

1. ``params.ignore_cas``: these devices are never judged (listed in the details).
2. ``params.compute_cas``: when given, exactly these devices are compute ports, whatever
   their state; the others are classified by rule 3 among the non-compute classes.
3. otherwise by link layer and rate: a port up at the (link layer, rate) of a profiled
   class belongs to it (compute first). A port that is down or at another rate belongs to
   the one class with its link layer; when several classes share that link layer (RoCE
   compute and Ethernet storage) it is "unassigned", and named when a class is short.
   A port of no profiled class is recorded only. NICs of role ``management`` (BMC and
   1 GbE ports, not RDMA devices) take part only when ``other_roles`` names them.

Compute ports decide the status (``fail``). Ports of the roles in ``params.other_roles``
(e.g. ``[storage]``) are judged the same way but only ``warn``; other roles' ports, down on
purpose or not, never fail the check. Every finding is listed; the worst one wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field

from rackgate.checks.fabric.roce_lossless import CHECKS as LOSSLESS_CHECKS
from rackgate.checks.fabric.roce_lossless import (
    LosslessParams,
    applies_lossless,
    judge_lossless,
    lossless_command,
)
from rackgate.checks.shared.base import HostNeeds, NodeCheck, Params, Scope
from rackgate.checks.shared.findings import Finding
from rackgate.figures import figure, with_unit
from rackgate.model import Judgement, Status
from rackgate.parsers.infiniband import IbPort, IbStat
from rackgate.parsers.infiniband.ports import TOOL_ARGV, PortReading, parse_port_reading
from rackgate.profile import Hardware, NicSpec, Threshold
from rackgate.programs.probes import source

_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,63}$"
Tool = Literal["ibstat", "ibv_devinfo", "ibstatus", "rdma"]  # the keys of TOOL_ARGV
DEFAULT_TOOLS: tuple[Tool, ...] = ("ibstat", "ibv_devinfo", "ibstatus", "rdma")


class PortsParams(Params):
    ignore_cas: list[str] = Field(default_factory=list, description="devices never judged")
    compute_cas: list[str] = Field(default_factory=list,
                                   description="when set, exactly these devices are compute")
    other_roles: list[Literal["storage", "management"]] = Field(
        default_factory=list, description="roles also judged, as warn only")
    tools: list[Tool] = Field(
        default_factory=lambda: list(DEFAULT_TOOLS),
        description="the port readers allowed, in order of preference: the first on the "
                    "node's PATH is run (ibstat, ibv_devinfo -v, ibstatus, rdma -j link show)")
    unconfirmed_rate: Literal["error", "warn"] = Field(
        default="error", description="a compute port up whose rate the tool does not print "
                                     "(rdma link): error (nothing confirms the profiled rate) "
                                     "or warn (the site accepts the state alone)")
    timeout_s: int = Field(default=30, ge=5)

    def model_post_init(self, __context: Any) -> None:
        import re
        for name in [*self.ignore_cas, *self.compute_cas]:
            if not re.match(_NAME, name):
                raise ValueError(f"device name {name!r} does not match {_NAME}")
        if not self.tools or len(set(self.tools)) != len(self.tools):
            raise ValueError(f"tools {self.tools} must name at least one reader, each once")


def ports_command(params: PortsParams, hostvars: Mapping[str, Any]) -> list[str]:
    """The port probe's argv: one ``--`` group per allowed tool, its fixed command.

    >>> ports_command(PortsParams(tools=["ibstat", "rdma"]), {})[3:]
    ['--', 'ibstat', '--', 'rdma', '-j', 'link', 'show']
    """
    groups = [w for t in params.tools for w in ("--", *TOOL_ARGV[t])]
    return ["python3", "-c", source("ib_ports"), *groups]


def applies_ports(hw: Hardware) -> str | None:
    if any(n.link_layer == "InfiniBand" or n.role == "compute" for n in hw.nics):
        return None
    return ("the profile has no InfiniBand NIC and no Ethernet compute NIC (RoCE): no RDMA "
            "port to judge")


def _spec(n: NicSpec) -> str:
    return f"{n.role} {n.link_layer} {with_unit(n.rate_gbps, 'Gb/s')}"


def _state(p: IbPort) -> str:
    return f"{p.state}/{p.physical_state or '?'}"


# What a port is in the NIC class it was assigned to: "up" at the class's rate, up with
# no rate reported ("rate_unknown"), of another link layer than its compute_cas class,
# "down", up at another rate ("slow"); or of no class: "unassigned" (several classes share
# its link layer) or "unprofiled" (none has it).
PortFate = Literal["up", "rate_unknown", "link_layer", "down", "slow", "unassigned",
                   "unprofiled"]
_COUNTED: frozenset[PortFate] = frozenset({"up", "rate_unknown"})
_BAD: frozenset[PortFate] = frozenset({"link_layer", "down", "slow"})


@dataclass(frozen=True)
class AssignedPort:
    name: str  # "mlx5_0 port 1"
    port: IbPort
    nic: int | None  # its class: an index into hardware.nics; None when of no class
    fate: PortFate


@dataclass(frozen=True)
class PortAssignment:
    """Every judged port (in ibstat's order) with its NIC class, and the ignored devices."""

    ports: tuple[AssignedPort, ...]
    ignored: tuple[str, ...]

    def names(self, nic: int, fates: frozenset[PortFate]) -> list[str]:
        return [a.name for a in self.ports if a.nic == nic and a.fate in fates]


def assign_ports(st: IbStat, params: PortsParams, nics: Sequence[NicSpec]) -> PortAssignment:
    """Which NIC class each port belongs to, and what it is there (rule in the module doc).

    >>> from rackgate.parsers.infiniband import IbCa
    >>> up = IbPort(1, "Active", "LinkUp", 400.0, "InfiniBand")
    >>> ca = IbCa("mlx5_0", "CA", "MT4129", 1, "28.39", "", "", "", (up,))
    >>> nic = NicSpec(role="compute", count=1, rate_gbps=400, link_layer="InfiniBand",
    ...               source="DGX H100 user guide")
    >>> [(a.name, a.nic, a.fate) for a in assign_ports(IbStat((ca,)), PortsParams(), [nic]).ports]
    [('mlx5_0 port 1', 0, 'up')]
    """
    classes = [i for i, n in enumerate(nics)
               if n.role != "management" or n.role in params.other_roles]
    ports: list[AssignedPort] = []
    ignored: list[str] = []
    for ca in st.cas:
        if ca.name in params.ignore_cas:
            ignored.append(ca.name)
            continue
        ports += [_assign(ca.name, p, params, nics, classes) for p in ca.ports
                  if p.number != 0]  # port 0: a switch's management port
    return PortAssignment(tuple(ports), tuple(ignored))


def _assign(ca: str, p: IbPort, params: PortsParams, nics: Sequence[NicSpec],
            classes: list[int]) -> AssignedPort:
    name = f"{ca} port {p.number}"
    pool = classes
    if params.compute_cas:
        in_compute = ca in params.compute_cas
        pool = [i for i in classes if (nics[i].role == "compute") == in_compute]
        if in_compute and pool and not any(nics[i].link_layer == p.link_layer for i in pool):
            return AssignedPort(name, p, pool[0], "link_layer")
    same_ll = [i for i in pool if nics[i].link_layer == p.link_layer]
    exact = [i for i in same_ll if p.up and p.rate_gbps == nics[i].rate_gbps]
    if exact:
        return AssignedPort(name, p, exact[0], "up")
    if p.up and p.rate_gbps is None and same_ll:
        return AssignedPort(name, p, same_ll[0], "rate_unknown")
    if len(same_ll) == 1:
        return AssignedPort(name, p, same_ll[0], "slow" if p.up else "down")
    return AssignedPort(name, p, None, "unassigned" if same_ll else "unprofiled")


def _device_findings(st: IbStat, compute: list[NicSpec], tool: str) -> list[Finding]:
    findings: list[Finding] = [(Status.FAIL, f"{tool} reported an error: {err}")
                               for err in st.errors]
    if not st.cas:
        want = ", ".join(f"{n.count} x {_spec(n)}" for n in compute) or "RDMA ports"
        findings.insert(0, (Status.FAIL, f"no HCA found: {tool} listed no RDMA device "
                                         f"(the profile expects {want})"))
    return findings


def _port_findings(a: PortAssignment, nics: Sequence[NicSpec], severity: Mapping[int, Status],
                   unconfirmed: Status, tool: str) -> list[Finding]:
    """One finding per port that is not up at its class's rate, in the tool's order; one
    per class for its ports up at a rate the tool does not print (``unconfirmed``, at most
    the class's severity)."""
    findings: list[Finding] = []
    for i, n in enumerate(nics):
        unknown = a.names(i, frozenset({"rate_unknown"}))
        if unknown and severity.get(i, Status.PASS) > Status.PASS:
            status = unconfirmed if severity[i] >= Status.FAIL else min(unconfirmed,
                                                                        severity[i])
            findings.append((status, f"{_spec(n)}: {tool} reports no rate, so nothing confirms "
                                     f"{with_unit(n.rate_gbps, 'Gb/s')} for "
                                     f"{', '.join(unknown)} (params.unconfirmed_rate: "
                                     f"{'error' if unconfirmed is Status.ERROR else 'warn'})"))
    for ap in a.ports:
        if ap.nic is None or ap.fate in _COUNTED:
            continue
        p, n, status = ap.port, nics[ap.nic], severity.get(ap.nic, Status.PASS)
        if ap.fate == "link_layer":
            findings.append((status, f"{ap.name}: link layer {p.link_layer}, expected "
                                     f"{n.link_layer}"))
        else:
            why = (f"{_state(p)}, expected Active/LinkUp" if ap.fate == "down" else
                   f"rate {'?' if p.rate_gbps is None else figure(p.rate_gbps)} Gb/s, "
                   f"expected {with_unit(n.rate_gbps, 'Gb/s')}")
            findings.append((status, f"{ap.name} ({_spec(n)}): {why}"))
    return findings


def _unassigned(ap: AssignedPort) -> str:
    rate = "?" if ap.port.rate_gbps is None else figure(ap.port.rate_gbps)
    return f"{ap.name} {_state(ap.port)} rate {rate}"


def _class_findings(a: PortAssignment, nics: Sequence[NicSpec],
                    severity: Mapping[int, Status]) -> list[Finding]:
    """Per judged NIC class: a finding unless exactly ``count`` of its ports are up."""
    findings: list[Finding] = []
    unassigned = [ap for ap in a.ports if ap.fate == "unassigned"]
    for i, n in enumerate(nics):
        up = len(a.names(i, _COUNTED))
        if i not in severity or up == n.count:
            continue
        suspects = [_unassigned(ap) for ap in unassigned if ap.port.link_layer == n.link_layer]
        hint = f"; unassigned {n.link_layer} ports: {', '.join(suspects)}" \
            if suspects and up < n.count else ""
        findings.append((severity[i], f"{_spec(n)}: {up} of {n.count} ports Active/LinkUp at "
                                      f"{with_unit(n.rate_gbps, 'Gb/s')}{hint}"))
    return findings


def _port_details(st: IbStat, a: PortAssignment, nics: Sequence[NicSpec],
                  severity: Mapping[int, Status]) -> dict[str, float | str]:
    details: dict[str, float | str] = {f"fw.{ca.name}": ca.firmware_version for ca in st.cas
                                       if ca.firmware_version}
    unprofiled = [f"{ap.name} {ap.port.link_layer} {_state(ap.port)}" for ap in a.ports
                  if ap.fate == "unprofiled"]
    unassigned = [_unassigned(ap) for ap in a.ports if ap.fate == "unassigned"]
    not_judged = [name for i in range(len(nics)) if i not in severity
                  for name in a.names(i, _BAD)]
    for key, values, sep in (("ignored", a.ignored, ", "), ("not_profiled", unprofiled, "; "),
                             ("unassigned", unassigned, "; "),
                             ("not_judged_down", not_judged, ", ")):
        if values:
            details[key] = sep.join(values)
    return details


def judge_ports(st: IbStat, params: PortsParams, thresholds: Mapping[str, Threshold],
                hardware: Hardware | None = None, tool: str = "ibstat") -> Judgement:
    """Judge ibstat's ports against the profile's NIC classes (rule in the module doc).

    >>> from rackgate.profile import NicSpec
    >>> hw = Hardware(nics=[NicSpec(role="compute", count=8, rate_gbps=400,
    ...     link_layer="InfiniBand", source="DGX H100 user guide, Table 1")])
    >>> judge_ports(IbStat(cas=()), PortsParams(), {}, hw).message[:12]
    'no HCA found'
    """
    nics = (hardware or Hardware()).nics
    compute = [i for i, n in enumerate(nics) if n.role == "compute"]
    severity = {i: Status.FAIL for i in compute}  # the NIC classes judged, and how hard
    severity.update({i: Status.WARN for i, n in enumerate(nics) if n.role in params.other_roles})
    a = assign_ports(st, params, nics)
    findings = _device_findings(st, [nics[i] for i in compute], tool)
    unconfirmed = Status.ERROR if params.unconfirmed_rate == "error" else Status.WARN
    findings += _port_findings(a, nics, severity, unconfirmed, tool)
    if st.cas:  # without any device, "no HCA found" says it all
        findings += _class_findings(a, nics, severity)
    details = _port_details(st, a, nics, severity)
    up = sum(len(a.names(i, _COUNTED)) for i in compute)
    expected = " + ".join(f"{n.count} x {n.link_layer} {with_unit(n.rate_gbps, 'Gb/s')} "
                          "Active/LinkUp" for n in (nics[i] for i in compute))
    status = Status.worst(s for s, _ in findings)
    if findings and status > Status.PASS:
        message = "; ".join(m for s, m in sorted(findings, key=lambda f: -f[0]) if s > 0)
        details["findings"] = str(len([f for f in findings if f[0] > 0]))
    else:
        fws = ", ".join(sorted({ca.firmware_version for ca in st.cas if ca.firmware_version}))
        message = (f"{up} of {sum(nics[i].count for i in compute)} compute ports Active/LinkUp "
                   f"at the profiled rate (firmware {fws or 'not reported'})")
    return Judgement(status, message, float(up), "ports", expected, details=details)


def judge_port_reading(r: PortReading, params: PortsParams,
                       thresholds: Mapping[str, Threshold],
                       hardware: Hardware | None = None) -> Judgement:
    """The port probe's evidence: an ``error`` when the tool that answered is not one of
    ``params.tools``, else its ports judged by :func:`judge_ports`, with the tool named.

    >>> from rackgate.parsers.infiniband.ports import parse_port_reading
    >>> r = parse_port_reading('### rackgate-ib-ports {"argv": ["ibstatus"], "path": '
    ...     '"/usr/sbin/ibstatus", "not_found": ["ibstat"]}\\n')
    >>> judge_port_reading(r, PortsParams(tools=["ibstat"]), {}).message[:60]
    'the ports were read with ibstatus, which params.tools does n'
    """
    command = " ".join(TOOL_ARGV[r.tool])
    details: dict[str, float | str] = {"tool": command, "tool_path": r.path}
    if r.not_found:
        details["tools_not_found"] = ", ".join(r.not_found)
    if r.tool not in params.tools:
        return Judgement(Status.ERROR, f"the ports were read with {r.tool}, which "
                                       f"params.tools does not allow ({', '.join(params.tools)})",
                         details=details)
    j = judge_ports(r.ports, params, thresholds, hardware,
                    "rdma link" if r.tool == "rdma" else r.tool)
    why = f" (read with {command}: {', '.join(r.not_found)} not on PATH)" if r.not_found \
        else f" (read with {command})"
    return replace(j, message=j.message + why, details={**j.details, **details})


CHECKS = (
    NodeCheck(
        name="fabric.ports",
        scope=Scope.NODE,
        tags=frozenset({"fabric", "infiniband", "roce"}),
        description="Compute fabric ports (InfiniBand or RoCE) Active/LinkUp at the "
                    "profiled rate and link layer (ibstat, else ibv_devinfo -v, ibstatus "
                    "or rdma link)",
        params_model=PortsParams,
        metrics=frozenset(),
        command=ports_command,
        needs=lambda p, hv: HostNeeds(rdma_devices=tuple(p.compute_cas),
                                      any_tool=tuple(p.tools)),
        parse=parse_port_reading,
        judge=judge_port_reading,
        applies=applies_ports,
    ),
    *LOSSLESS_CHECKS,
)

__all__ = ["CHECKS", "LosslessParams", "PortsParams", "applies_lossless", "applies_ports",
           "judge_lossless", "judge_port_reading", "judge_ports", "lossless_command",
           "ports_command"]
