"""fabric.roce_lossless: RoCE lossless settings read with iproute2's ``dcb``.

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

from pydantic import Field

from rackgate.checks.shared.base import CommandError, HostNeeds, NodeCheck, Params, Scope
from rackgate.model import Judgement, Status
from rackgate.parsers.dcb import DcbPort, parse_dcb_sections
from rackgate.profile import Hardware, Threshold

_IFNAME = r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,14}$"  # IFNAMSIZ 16; never starts with '-'

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
    NodeCheck(
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

__all__ = ["CHECKS", "LosslessParams", "applies_lossless", "judge_lossless", "lossless_command"]
