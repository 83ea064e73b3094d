"""node.conformance: is the node configured as a GPU node must be, whatever it measures?

Kernel modules loaded (nvidia, nvidia_peermem, mlx5_core...), services active
(nvidia-persistenced, nvidia-fabricmanager on NVSwitch systems, munge/slurmd where
scheduled), the memlock limit systemd gives services (RDMA pins memory: it must be
``infinity``, see roles/common), the kernel command line (``iommu=pt`` for GPUDirect),
the CPU frequency governor, and PCIe ACS: with ACS source validation on, peer-to-peer
traffic between a GPU and a NIC under the same switch is forced up to the root complex,
which NVIDIA's GPUDirect RDMA documentation says to avoid. Version drift across the rack
is judged by ``rack.version_drift`` from the versions other checks record.

The probe is one fixed ``sh -c`` script; the service names from the profile are passed as
positional arguments (never pasted into the script). Every finding is listed, then the
worst decides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from rackgate.checks.shared.base import HostNeeds, NodeCheck, Params, Scope
from rackgate.model import Judgement, Status
from rackgate.parsers.conformance import Conformance, parse_conformance
from rackgate.profile import Hardware, Threshold

PROBE = (
    'printf "modules=%s\\n" "$(cut -d" " -f1 /proc/modules 2>/dev/null | paste -sd, -)"; '
    'for s in "$@"; do printf "service.%s=%s\\n" "$s" "$(systemctl is-active "$s" 2>/dev/null'
    ' || true)"; done; '
    'printf "default_memlock=%s\\n" "$(systemctl show -p DefaultLimitMEMLOCK --value 2>/dev/null'
    ')"; '
    'printf "cmdline=%s\\n" "$(cat /proc/cmdline)"; '
    'printf "governors=%s\\n" "$(cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor '
    '2>/dev/null | sort -u | paste -sd, -)"; '
    'if command -v lspci >/dev/null; then printf "acs_enabled_bridges=%s\\n" '
    '"$(lspci -vvv 2>/dev/null | grep -c "ACSCtl:.*SrcValid+")"; '
    'else echo acs_enabled_bridges=unknown; fi'
)
_UNIT = re.compile(r"^[A-Za-z0-9@._:-]+$")


class ConformanceParams(Params):
    modules: list[str] = Field(default_factory=list, description="must be loaded")
    services: list[str] = Field(default_factory=list, description="must be active")
    default_memlock: str | None = Field(default="infinity",
                                        description="systemd DefaultLimitMEMLOCK; null: "
                                                    "not checked")
    cmdline: list[str] = Field(default_factory=list, description="kernel arguments required")
    governor: Literal["performance", "powersave", "schedutil", "ondemand", "conservative",
                      "userspace"] | None = None
    acs_disabled: bool = Field(default=False, description="no bridge with ACS SrcValid+")

    @field_validator("services")
    @classmethod
    def _units(cls, v: list[str]) -> list[str]:
        bad = [u for u in v if not _UNIT.match(u) or u.startswith("-")]
        if bad:
            raise ValueError(f"not systemd unit names: {bad}")
        return v


def conformance_command(params: ConformanceParams, hostvars: Mapping[str, Any]) -> list[str]:
    return ["sh", "-c", PROBE, "rackgate-conformance", *params.services]


def conformance_needs(params: ConformanceParams, hostvars: Mapping[str, Any]) -> HostNeeds:
    """systemctl for the services and memlock; with ``acs_disabled``, lspci as root
    (``lspci -vvv`` shows a bridge's ACS capability to root only)."""
    if not params.acs_disabled:
        return HostNeeds(tools=("systemctl",))
    return HostNeeds(tools=("systemctl", "lspci"),
                     root="lspci -vvv shows the PCIe ACS capabilities to root only")


def judge_conformance(c: Conformance, params: ConformanceParams,
                      thresholds: Mapping[str, Threshold],
                      hardware: Hardware | None = None) -> Judgement:
    findings: list[tuple[Status, str]] = []
    missing = sorted(set(params.modules) - c.modules)
    if missing:
        findings.append((Status.FAIL, f"kernel module(s) not loaded: {', '.join(missing)}"))
    for unit in params.services:
        state = c.services.get(unit, "not reported")
        if state != "active":
            findings.append((Status.FAIL, f"service {unit} is {state or 'unknown'}"))
    if params.default_memlock is not None and c.default_memlock != params.default_memlock:
        findings.append((Status.FAIL, f"systemd DefaultLimitMEMLOCK is "
                                      f"{c.default_memlock or 'unset'}, expected "
                                      f"{params.default_memlock} (RDMA pins memory)"))
    absent = [a for a in params.cmdline if a not in c.cmdline]
    if absent:
        findings.append((Status.FAIL, f"kernel command line lacks {' '.join(absent)}"))
    if params.governor is not None:
        if not c.governors:
            findings.append((Status.WARN, "no cpufreq governor exposed (virtual machine?): "
                                          f"cannot confirm {params.governor}"))
        elif c.governors != {params.governor}:
            findings.append((Status.FAIL, f"CPU governor {', '.join(sorted(c.governors))}, "
                                          f"expected {params.governor}"))
    if params.acs_disabled:
        if c.acs_enabled_bridges is None:
            findings.append((Status.ERROR, "lspci is not installed: ACS cannot be checked"))
        elif c.acs_enabled_bridges:
            findings.append((Status.FAIL, f"{c.acs_enabled_bridges} PCIe bridge(s) with ACS "
                                          "source validation on: GPU-NIC peer-to-peer is "
                                          "routed through the root complex"))
    details: dict[str, float | str] = {
        "modules_checked": len(params.modules), "services": ", ".join(
            f"{u}={c.services.get(u, '?')}" for u in params.services),
        "default_memlock": c.default_memlock,
        "governors": ", ".join(sorted(c.governors)) or "none",
    }
    if not findings:
        return Judgement(Status.PASS, f"conforms: {len(params.modules)} module(s), "
                                      f"{len(params.services)} service(s), memlock "
                                      f"{c.default_memlock}", details=details)
    findings.sort(key=lambda f: -f[0])
    return Judgement(findings[0][0], "; ".join(t for _, t in findings), details=details)


CHECKS = (
    NodeCheck(
        name="node.conformance",
        scope=Scope.NODE,
        tags=frozenset({"conformance"}),
        description="Kernel modules, services, memlock, kernel command line, CPU governor, "
                    "PCIe ACS",
        params_model=ConformanceParams,
        metrics=frozenset(),
        command=conformance_command,
        needs=conformance_needs,
        parse=parse_conformance,
        judge=judge_conformance,
    ),
)
