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

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rackgate.checks.base import Check, CommandError, Scope
from rackgate.model import Judgement, Status
from rackgate.parsers.infiniband import DcbPort, IbPort, IbStat, parse_dcb_sections, parse_ibstat
from rackgate.profile import Hardware, NicSpec, Threshold

_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,63}$"
_IFNAME = r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,14}$"  # IFNAMSIZ 16; never starts with '-'


class PortsParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

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
    return f"{n.role} {n.link_layer} {n.rate_gbps:g} Gb/s"


def _port_id(ca: str, p: IbPort) -> str:
    return f"{ca} port {p.number}"


def _state(p: IbPort) -> str:
    return f"{p.state}/{p.physical_state or '?'}"


def judge_ports(st: IbStat, params: PortsParams, thresholds: Mapping[str, Threshold],
                hardware: Hardware | None = None) -> Judgement:
    """Judge ibstat's ports against the profile's NIC classes (rule in the module doc).

    >>> from rackgate.profile import NicSpec
    >>> hw = Hardware(nics=[NicSpec(role="compute", count=8, rate_gbps=400,
    ...     link_layer="InfiniBand", source="DGX H100 user guide, Table 1")])
    >>> judge_ports(IbStat(cas=()), PortsParams(), {}, hw).message[:12]
    'no HCA found'
    """
    hw = hardware or Hardware()
    compute = [n for n in hw.nics if n.role == "compute"]
    judged = {id(n): Status.FAIL for n in compute}
    judged.update({id(n): Status.WARN for n in hw.nics if n.role in params.other_roles})
    findings: list[tuple[Status, str]] = []
    details: dict[str, float | str] = {f"fw.{ca.name}": ca.firmware_version for ca in st.cas}
    for err in st.errors:
        findings.append((Status.FAIL, f"ibstat reported an error: {err}"))
    if not st.cas:
        want = ", ".join(f"{n.count} x {_spec(n)}" for n in compute) or "RDMA ports"
        findings.insert(0, (Status.FAIL, f"no HCA found: ibstat listed no RDMA device "
                                         f"(the profile expects {want})"))
    healthy: dict[int, list[str]] = {id(n): [] for n in hw.nics}
    bad: dict[int, list[str]] = {id(n): [] for n in hw.nics}
    unassigned: list[tuple[str, str]] = []  # (link layer, description)
    ignored, unprofiled = [], []
    candidates = [n for n in hw.nics if n.role != "management" or n.role in params.other_roles]
    for ca in st.cas:
        if ca.name in params.ignore_cas:
            ignored.append(ca.name)
            continue
        for p in ca.ports:
            if p.number == 0:
                continue  # a switch's management port 0
            pid = _port_id(ca.name, p)
            pool = list(candidates)
            if params.compute_cas:
                in_compute = ca.name in params.compute_cas
                pool = [n for n in candidates if (n.role == "compute") == in_compute]
                if in_compute and not any(n.link_layer == p.link_layer for n in pool) and pool:
                    bad[id(pool[0])].append(pid)
                    findings.append((judged.get(id(pool[0]), Status.PASS),
                                     f"{pid}: link layer {p.link_layer}, expected "
                                     f"{pool[0].link_layer}"))
                    continue
            same_ll = [n for n in pool if n.link_layer == p.link_layer]
            exact = [n for n in same_ll if p.up and p.rate_gbps == n.rate_gbps]
            if exact:
                healthy[id(exact[0])].append(pid)
                continue
            if p.up and p.rate_gbps is None and same_ll:
                healthy[id(same_ll[0])].append(pid)
                findings.append((Status.WARN, f"{pid}: rate not reported by the tool, "
                                              f"cannot confirm {same_ll[0].rate_gbps:g} Gb/s"))
                continue
            if len(same_ll) == 1:
                n = same_ll[0]
                bad[id(n)].append(pid)
                why = (f"{_state(p)}, expected Active/LinkUp" if not p.up else
                       f"rate {p.rate_gbps:g} Gb/s, expected {n.rate_gbps:g} Gb/s")
                findings.append((judged.get(id(n), Status.PASS), f"{pid} ({_spec(n)}): {why}"))
            elif same_ll:
                rate = "?" if p.rate_gbps is None else f"{p.rate_gbps:g}"
                unassigned.append((p.link_layer, f"{pid} {_state(p)} rate {rate}"))
            else:
                unprofiled.append(f"{pid} {p.link_layer} {_state(p)}")
    for n in hw.nics:
        status = judged.get(id(n))
        up = len(healthy[id(n)])
        if status is None or (up == 0 and not bad[id(n)] and not st.cas):
            continue
        if up != n.count:
            suspects = [d for ll, d in unassigned if ll == n.link_layer]
            hint = f"; unassigned {n.link_layer} ports: {', '.join(suspects)}" \
                if suspects and up < n.count else ""
            findings.append((status, f"{_spec(n)}: {up} of {n.count} ports Active/LinkUp at "
                                     f"{n.rate_gbps:g} Gb/s{hint}"))
    if ignored:
        details["ignored"] = ", ".join(ignored)
    if unprofiled:
        details["not_profiled"] = "; ".join(unprofiled)
    if unassigned:
        details["unassigned"] = "; ".join(d for _, d in unassigned)
    not_judged = [pid for n in hw.nics if id(n) not in judged for pid in bad[id(n)]]
    if not_judged:
        details["not_judged_down"] = ", ".join(not_judged)
    up_compute = sum(len(healthy[id(n)]) for n in compute)
    want_ports = sum(n.count for n in compute)
    expected = " + ".join(f"{n.count} x {n.link_layer} {n.rate_gbps:g} Gb/s Active/LinkUp"
                          for n in compute)
    status = Status.worst(s for s, _ in findings)
    if findings and status > Status.PASS:
        message = "; ".join(m for s, m in sorted(findings, key=lambda f: -f[0]) if s > 0)
        details["findings"] = str(len([f for f in findings if f[0] > 0]))
    else:
        fws = sorted({ca.firmware_version for ca in st.cas if ca.firmware_version})
        message = (f"{up_compute} of {want_ports} compute ports Active/LinkUp at the profiled rate"
                   f" (firmware {', '.join(fws) or 'not reported'})")
    return Judgement(status, message, float(up_compute), "ports", expected, details=details)


# --------------------------------------------------------------------------- RoCE lossless

PROBE = (
    'for i do for w in pfc app; do out=$(dcb -j "$w" show dev "$i" 2>&1); rc=$?; '
    "printf '### rackgate-dcb dev=%s what=%s rc=%d\\n%s\\n' \"$i\" \"$w\" \"$rc\" \"$out\"; "
    "done; done"
)


class LosslessParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

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
        timeout_s=lambda p: int(p.timeout_s),
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
        timeout_s=lambda p: int(p.timeout_s),
        parse=parse_dcb_sections,
        judge=judge_lossless,
        applies=applies_lossless,
    ),
)

__all__ = ["CHECKS", "LosslessParams", "PortsParams", "applies_lossless", "applies_ports",
           "judge_lossless", "judge_ports", "lossless_command"]
