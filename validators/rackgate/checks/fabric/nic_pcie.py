"""fabric.nic_pcie: every RDMA NIC's PCIe link is the one the profile states.

A 200 or 400 Gb/s port needs its card's full link: HDR 200 Gb/s is 25 GB/s of data,
more than a Gen4 x8 link carries (16 GT/s x 8 lanes x 128/130 / 8 = 15.8 GB/s each way),
so a card that trained to x8 or to a lower generation caps the port below line rate while
``ibstat`` still shows it Active at its full rate. Evidence: the PCI device of each
``/sys/class/infiniband/<device>`` (``current_link_width``, ``current_link_speed`` and
their ``max_`` twins; parsers/nic_pcie.py), read by a fixed probe.

Judged against the profile's NIC classes that state a ``pcie`` link (management ports,
the BMC's, are no host PCIe device). The RDMA devices are assigned to a class by port 1's
link layer (InfiniBand or Ethernet), the only thing that tells them apart in sysfs; the
profile's classes of one link layer state one link (rackgate.hardware). Per device: a
current width below the profile's is a down-trained link and fails, above it is not the
card the profile describes and fails; a maximum generation below the profile's (card and
slot cannot reach it) fails, as does a current one above it; a current generation below
it fails too, because a NIC keeps its trained link speed when idle (the GPUs' idle
downshift is a GPU driver feature; set ``require_gen: false`` for a NIC that does lower
it, to warn instead). The number of devices of each link layer must be the number of
ports the profile's classes of that layer add up to; a device of a link layer the profile
has no class for is foreign. A profile figure the kernel printed nothing for is an error.

>>> nic_pcie_command(NicPcieParams(), {})[:2]
['sh', '-c']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from rackgate.checks.shared.base import NodeCheck, Params, Scope
from rackgate.checks.shared.pcie import link_findings
from rackgate.hardware import NicSpec
from rackgate.model import Judgement, Status
from rackgate.parsers.nic_pcie import FILES, NicPcie, parse_nic_pcie
from rackgate.profile import Hardware, Threshold

PROBE = (
    'printf "devices="; for d in /sys/class/infiniband/*; do [ -e "$d" ] && '
    'printf "%s " "${d##*/}"; done; echo; '
    'for d in /sys/class/infiniband/*; do [ -e "$d" ] || continue; n=${d##*/}; '
    f'for f in {" ".join(FILES[:4])}; do '
    'printf "%s/%s=%s\\n" "$n" "$f" "$(cat "$d/device/$f" 2>/dev/null)"; done; '
    'printf "%s/link_layer=%s\\n" "$n" "$(cat "$d/ports/1/link_layer" 2>/dev/null)"; done; '
    "echo end="
)


class NicPcieParams(Params):
    require_gen: bool = Field(default=True, description="current PCIe generation below the "
                              "profile's: fail when true, warn when false")


def nic_pcie_command(params: NicPcieParams, hostvars: Mapping[str, Any]) -> list[str]:
    return ["sh", "-c", PROBE]


def _classes(hw: Hardware) -> list[NicSpec]:
    return [n for n in hw.nics if n.role != "management"]


def nic_pcie_applies(hw: Hardware) -> str | None:
    if not any(n.pcie is not None for n in _classes(hw)):
        return "the profile states no NIC PCIe link"
    return None


def judge_nic_pcie(r: NicPcie, params: NicPcieParams, thresholds: Mapping[str, Threshold],
                   hw: Hardware) -> Judgement:
    reason = nic_pcie_applies(hw)
    if reason is not None:
        return Judgement(Status.SKIP, reason)
    findings: list[tuple[Status, str]] = []
    judged = 0
    for layer in ("InfiniBand", "Ethernet"):
        classes = [n for n in _classes(hw) if n.link_layer == layer]
        found = [d for d in r.devices if d.link_layer == layer]
        want = sum(n.count for n in classes)
        if len(found) != want:
            findings.append((Status.FAIL, f"{len(found)} {layer} RDMA device(s) "
                                          f"({', '.join(d.device for d in found) or 'none'}), "
                                          f"the profile's NIC classes have {want} ports"))
        link = classes[0].pcie if classes else None
        if link is None:
            continue
        for d in found:
            judged += 1
            slow = Status.FAIL if params.require_gen else Status.WARN
            findings += [(st, f"{d.device}: {m}") for st, m in
                         link_findings(d.width_current, d.gen_current, d.gen_max, link, slow,
                                       "")]
    other = [d.device for d in r.devices if d.link_layer not in ("InfiniBand", "Ethernet")]
    if other:
        findings.append((Status.ERROR, f"no link layer readable for {', '.join(other)}: "
                                       "the device's class cannot be known"))
    findings.sort(key=lambda f: -f[0])
    status = Status.worst(s for s, _ in findings) if findings else Status.PASS
    message = "; ".join(m for _, m in findings) or \
        f"all {judged} RDMA devices' PCIe links are the profile's"
    return Judgement(status, message, float(judged), "devices",
                     "the profile's PCIe link on every RDMA device", None,
                     {d.device: f"x{d.width_current} gen {d.gen_current} (max x{d.width_max} "
                                f"gen {d.gen_max}), {d.link_layer}" for d in r.devices})


CHECKS = (
    NodeCheck(
        name="fabric.nic_pcie",
        scope=Scope.NODE,
        tags=frozenset({"fabric", "pcie"}),
        description="Every RDMA NIC's PCIe link has the profile's width and generation "
                    "(/sys/class/infiniband/*/device)",
        params_model=NicPcieParams,
        metrics=frozenset(),
        command=nic_pcie_command,
        parse=parse_nic_pcie,
        judge=judge_nic_pcie,
        applies=nic_pcie_applies,
    ),
)

__all__ = ["CHECKS", "NicPcieParams", "judge_nic_pcie", "nic_pcie_command"]
