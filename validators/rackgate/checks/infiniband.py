"""InfiniBand / RoCE checks: port state of the compute fabric, and RoCE lossless settings.

``fabric.ports`` runs ``ibstat`` and judges the ports of the profile's NICs of role
``compute`` (``hardware.nics``): exactly ``count`` ports with the NIC's ``link_layer`` must
be State Active, Physical state LinkUp, at ``rate_gbps`` (ibstat's Rate is in Gb/s: 400 for
NDR 4x, 200 for HDR 4x). Empty ibstat output (no RDMA device: PROBES.md) fails as "no HCA
found"; ibstat's ibpanic/ibwarn lines fail it too. Firmware versions go into the details.

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

``fabric.roce_lossless`` reads PFC and DSCP trust with iproute2's inbox ``dcb`` (dcb-pfc(8),
dcb-app(8), JSON), not the vendor ``mlnx_qos``: for each interface in
``params.interfaces`` exactly one ``pfc`` and one ``app`` section (a missing, repeated or
foreign one is an error), PFC on for exactly ``pfc_priority`` and, with ``trust: dscp``,
the DSCP-to-priority table must map some DSCP value to that priority (mlx5 trusts DSCP
when the table has entries). The interface names are passed to a fixed ``sh -c`` script as
positional arguments, never spliced into the script text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from rackgate.checks.base import Check, CommandError, HostNeeds, Params, Scope
from rackgate.checks.findings import Finding
from rackgate.figures import figure, with_unit
from rackgate.model import Judgement, Status
from rackgate.parsers.dcb import DcbPort, parse_dcb_sections
from rackgate.parsers.infiniband import IbPort, IbStat, parse_ibstat
from rackgate.profile import Hardware, NicSpec, Threshold

_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,63}$"
_IFNAME = r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,14}$"  # IFNAMSIZ 16; never starts with '-'


class PortsParams(Params):
    ignore_cas: list[str] = Field(default_factory=list, description="devices never judged")
    compute_cas: list[str] = Field(default_factory=list,
                                   description="when set, exactly these devices are compute")
    other_roles: list[Literal["storage", "management"]] = Field(
        default_factory=list, description="roles also judged, as warn only")
    timeout_s: int = Field(default=30, ge=5)

    def model_post_init(self, __context: Any) -> None:
        import re
        for name in [*self.ignore_cas, *self.compute_cas]:
            if not re.match(_NAME, name):
                raise ValueError(f"device name {name!r} does not match {_NAME}")


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


def _device_findings(st: IbStat, compute: list[NicSpec]) -> list[Finding]:
    findings: list[Finding] = [(Status.FAIL, f"ibstat reported an error: {err}")
                               for err in st.errors]
    if not st.cas:
        want = ", ".join(f"{n.count} x {_spec(n)}" for n in compute) or "RDMA ports"
        findings.insert(0, (Status.FAIL, f"no HCA found: ibstat listed no RDMA device "
                                         f"(the profile expects {want})"))
    return findings


def _port_findings(a: PortAssignment, nics: Sequence[NicSpec],
                   severity: Mapping[int, Status]) -> list[Finding]:
    """One finding per port that is not up at its class's rate, in ibstat's order."""
    findings: list[Finding] = []
    for ap in a.ports:
        if ap.nic is None or ap.fate == "up":
            continue
        p, n, status = ap.port, nics[ap.nic], severity.get(ap.nic, Status.PASS)
        if ap.fate == "link_layer":
            findings.append((status, f"{ap.name}: link layer {p.link_layer}, expected "
                                     f"{n.link_layer}"))
        elif ap.fate == "rate_unknown":
            findings.append((Status.WARN, f"{ap.name}: rate not reported by the tool, "
                                          f"cannot confirm {with_unit(n.rate_gbps, 'Gb/s')}"))
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
    details: dict[str, float | str] = {f"fw.{ca.name}": ca.firmware_version for ca in st.cas}
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
                hardware: Hardware | None = None) -> Judgement:
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
    findings = _device_findings(st, [nics[i] for i in compute])
    findings += _port_findings(a, nics, severity)
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


# --------------------------------------------------------------------------- RoCE lossless

PROBE = (
    'for i do for w in pfc app; do out=$(dcb -j "$w" show dev "$i" 2>&1); rc=$?; '
    "printf '### rackgate-dcb dev=%s what=%s rc=%d\\n%s\\n' \"$i\" \"$w\" \"$rc\" \"$out\"; "
    "done; done"
)


class LosslessParams(Params):
    interfaces: list[str] = Field(default_factory=list,
                                  description="RoCE netdevs (per host: rackgate_profile_"
                                              "overrides)")
    pfc_priority: int = Field(default=3, ge=0, le=7, description="the lossless priority")
    trust: Literal["dscp", "pcp"] = "dscp"
    timeout_s: int = Field(default=30, ge=5)

    def model_post_init(self, __context: Any) -> None:
        import re
        for name in self.interfaces:
            if not re.match(_IFNAME, name):
                raise ValueError(f"interface name {name!r} does not match {_IFNAME}")


def lossless_command(params: LosslessParams, hostvars: Mapping[str, Any]) -> list[str]:
    """The probe's argv: interface names ride as positional arguments.

    >>> lossless_command(LosslessParams(interfaces=["eth2"]), {})[-2:]
    ['rackgate-roce', 'eth2']
    """
    if not params.interfaces:
        raise CommandError("fabric.roce_lossless needs params.interfaces (the RoCE netdevs)")
    return ["sh", "-c", PROBE, "rackgate-roce", *params.interfaces]


def applies_lossless(hw: Hardware) -> str | None:
    if any(n.role == "compute" and n.link_layer == "Ethernet" for n in hw.nics):
        return None
    return "the profile has no Ethernet compute NIC: no RoCE fabric to make lossless"


def judge_lossless(ports: tuple[DcbPort, ...], params: LosslessParams,
                   thresholds: Mapping[str, Threshold], hardware: Hardware | None = None,
                   ) -> Judgement:
    """Expected: for every interface of ``params.interfaces``, exactly one ``pfc`` and one
    ``app`` section (the probe asks for both), and nothing for any other interface. A
    missing, repeated or foreign section is an error naming it; then PFC on exactly the
    lossless priority and the trust mode."""
    by_if = {p.interface: p for p in ports}
    findings: list[tuple[Status, str]] = []
    prio = params.pfc_priority
    details: dict[str, float | str] = {}
    if not params.interfaces:
        findings.append((Status.ERROR, "params.interfaces names no RoCE interface: nothing "
                                       "to judge"))
    for other in ports:
        if other.interface not in params.interfaces:
            findings.append((Status.ERROR, f"{other.interface}: dcb output for an interface "
                                           "not in params.interfaces "
                                           f"({', '.join(params.interfaces)}): not this "
                                           "probe's evidence"))
    for name in params.interfaces:
        p = by_if.get(name)
        if p is None:
            findings.append((Status.ERROR, f"{name}: no dcb output for this interface"))
            continue
        for what in ("pfc", "app"):
            n = p.sections.count(what)
            if n != 1:
                findings.append((Status.ERROR, f"{name}: {n} 'dcb {what}' sections, expected "
                                               "exactly 1" + (" (duplicated output?)" if n
                                                              else "")))
        if any(p.sections.count(w) != 1 for w in ("pfc", "app")):
            continue
        for err in p.errors:
            findings.append((Status.FAIL, f"{name}: {err}"))
        if p.pfc_priorities is not None:
            details[f"pfc.{name}"] = ",".join(map(str, p.pfc_priorities)) or "none"
            if p.pfc_priorities != (prio,):
                findings.append((Status.FAIL, f"{name}: PFC on priorities "
                                              f"{list(p.pfc_priorities)}, expected exactly "
                                              f"[{prio}]"))
        if p.dscp_prio is not None:
            details[f"dscp_entries.{name}"] = float(len(p.dscp_prio))
            to_prio = sorted(d for d, q in p.dscp_prio if q == prio)
            if params.trust == "dscp" and not p.dscp_prio:
                findings.append((Status.FAIL, f"{name}: no DSCP-to-priority table: the port "
                                              "trusts PCP, expected DSCP trust"))
            elif params.trust == "dscp" and not to_prio:
                findings.append((Status.FAIL, f"{name}: no DSCP value maps to lossless "
                                              f"priority {prio}"))
            elif params.trust == "pcp" and p.dscp_prio:
                findings.append((Status.FAIL, f"{name}: {len(p.dscp_prio)} DSCP-to-priority "
                                              "entries: the port trusts DSCP, expected PCP"))
    status = Status.worst(s for s, _ in findings)
    if findings:
        message = "; ".join(m for _, m in findings)
    else:
        message = (f"PFC on priority {prio} only and {params.trust.upper()} trust on "
                   f"{', '.join(params.interfaces)}")
    return Judgement(status, message, expected=f"PFC on [{prio}] only, trust {params.trust}",
                     details=details)


CHECKS = (
    Check(
        name="fabric.ports",
        scope=Scope.NODE,
        tags=frozenset({"fabric", "infiniband", "roce"}),
        description="Compute fabric ports (InfiniBand or RoCE) Active/LinkUp at the "
                    "profiled rate and link layer (ibstat)",
        params_model=PortsParams,
        metrics=frozenset(),
        command=lambda params, hostvars: ["ibstat"],
        needs=lambda p, hv: HostNeeds(rdma_devices=tuple(p.compute_cas)),
        parse=parse_ibstat,
        judge=judge_ports,
        applies=applies_ports,
    ),
    Check(
        name="fabric.roce_lossless",
        scope=Scope.NODE,
        tags=frozenset({"fabric", "roce"}),
        description="RoCE lossless settings: PFC on exactly the lossless priority and DSCP "
                    "trust (iproute2 dcb)",
        params_model=LosslessParams,
        metrics=frozenset(),
        command=lossless_command,
        needs=lambda p, hv: HostNeeds(tools=("dcb",), net_devices=tuple(p.interfaces)),
        parse=parse_dcb_sections,
        judge=judge_lossless,
        applies=applies_lossless,
    ),
)

__all__ = ["CHECKS", "LosslessParams", "PortsParams", "applies_lossless", "applies_ports",
           "judge_lossless", "judge_ports", "lossless_command"]
