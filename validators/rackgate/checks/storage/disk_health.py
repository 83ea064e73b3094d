"""``disk.health``: the SMART / health state of the scratch and OS disks the profile names,
from ``smartctl -j`` (smartmontools) or ``nvme smart-log -o json`` (nvme-cli).

A failing scratch NVMe drive can still meet the fio floors; this check reads what the
drive says of itself. ``params.disks`` names each disk (``device``: a kernel name such as
``/dev/nvme0``, ``/dev/nvme0n1``, ``/dev/sda``, or a ``/dev/disk/by-id/`` link; ``role``:
scratch or os; ``tool``: smartctl, the default, or nvme for nvme-cli, NVMe disks only).
Disk names differ between builds: set them per host or group through
``rackgate_profile_overrides``. The names ride as positional arguments of a fixed
``sh -c`` script, never spliced into it; each is checked against a strict pattern first.

Every named disk must have exactly one run in the evidence, for the tool asked: a missing,
repeated or foreign disk is an ``error``, and so are two disks smartctl reports with one
serial number (one disk named twice, by kernel name and by-id link). What each run finds
(critical warning bits, media errors, spare, endurance used, smartctl's exit status bits
and ATA attributes) and the basis of each rule: ``checks.storage.disk_findings``. A tool that
exits non-zero without a report (not installed, nvme-cli's failures) is an ``error``
quoting its standard error. Per disk, the tool, role, exit status, model, serial and the
figures read go into the details.

>>> disk_command(DiskParams(disks=[{"device": "/dev/nvme0", "role": "scratch"}]), {})[3:]
['rackgate-disk-health', 'all', 'smartctl', '/dev/nvme0']
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rackgate.checks.shared.base import CommandError, HostNeeds, NodeCheck, Params, Scope
from rackgate.checks.shared.findings import Finding, message, verdict
from rackgate.checks.storage.disk_findings import (
    DEFAULT_PERCENTAGE_USED_LIMIT,
    SMARTCTL_ARGS,
    nvme_findings,
    smartctl_findings,
)
from rackgate.model import Judgement, Status
from rackgate.parsers.disk_health import DEVICE, MARK, NVME_DEVICE, DiskRun, parse_disk_health
from rackgate.parsers.nvme_smart import NvmeHealth
from rackgate.parsers.smartctl import SmartctlReport
from rackgate.profile import Hardware, Threshold

NAME = "disk.health"


class Disk(BaseModel):
    """One disk the check reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(pattern=rf"^(?:{DEVICE})$", description="kernel name or by-id link")
    role: Literal["scratch", "os"]
    tool: Literal["smartctl", "nvme"] = "smartctl"

    @model_validator(mode="after")
    def _names_a_disk_its_tool_reads(self) -> Disk:
        if not re.fullmatch(DEVICE, self.device):  # whatever the pattern engine's "$" does
            raise ValueError(f"device {self.device!r} is no disk name rackgate reads")
        if self.tool == "nvme" and not re.fullmatch(NVME_DEVICE, self.device):
            raise ValueError(f"tool nvme (nvme-cli) reads NVMe devices only, not "
                             f"{self.device} (use tool: smartctl)")
        return self


class Allowance(BaseModel):
    """A figure a site sets in place of the default, with the document that says so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: int = Field(ge=0, le=2**32)
    basis: str = Field(min_length=10, description="the document the figure comes from")


class DiskParams(Params):
    disks: list[Disk] = Field(default_factory=list, description="the disks to read (per "
                              "host: rackgate_profile_overrides)")
    smartctl_reads: Literal["all", "health"] = Field(
        default="all", description="all: smartctl -a (the error and self-test logs too: "
                                   "exit status bits 6 and 7); health: smartctl -i -H -A")
    percentage_used_limit: Allowance | None = Field(
        default=None, description="fail at or above this Percentage Used (default 100: the "
                                  "NVMe specification's rated endurance)")
    reallocated_sectors_allowed: Allowance | None = Field(
        default=None, description="ATA attribute 5 raw count a disk may have (default 0)")
    timeout_s: int = Field(default=120, ge=5)

    @model_validator(mode="after")
    def _each_disk_once(self) -> DiskParams:
        twice = sorted(d for d, n in Counter(x.device for x in self.disks).items() if n > 1)
        if twice:
            raise ValueError(f"disks names {', '.join(twice)} more than once")
        used = self.percentage_used_limit
        if used is not None and not 1 <= used.value <= 255:
            # Percentage Used is one byte, 255 standing for 255 or more: 0 would fail every
            # disk, and no reading reaches a limit above 255
            raise ValueError(f"percentage_used_limit.value {used.value} is outside 1 to 255")
        return self


def _script() -> str:
    """The fixed script: $1 is smartctl_reads, then TOOL DEVICE pairs. Each tool's output
    is printed with a newline after it (command substitution), so a marker always starts a
    line; its standard error goes to a private temporary file and follows in its own
    section."""
    return f"""t=$(mktemp) || exit 1
trap 'rm -f "$t"' EXIT
m() {{ printf '{MARK}%s\\n' "$*"; }}
reads=$1; shift
while [ "$#" -ge 2 ]; do
  tool=$1 dev=$2; shift 2
  m "$tool $dev"
  if [ "$tool" = nvme ]; then out=$(nvme smart-log -o json "$dev" 2>"$t")
  elif [ "$reads" = all ]; then out=$(smartctl {' '.join(SMARTCTL_ARGS['all'])} "$dev" 2>"$t")
  else out=$(smartctl {' '.join(SMARTCTL_ARGS['health'])} "$dev" 2>"$t"); fi
  rc=$?
  [ -n "$out" ] && printf '%s\\n' "$out"
  m "rc=$rc"
  m "stderr $tool $dev"; err=$(cat "$t"); rc=$?
  [ -n "$err" ] && printf '%s\\n' "$err"
  m "rc=$rc"
done
m done
"""


DISK_SCRIPT = _script()


def disk_command(params: DiskParams, hostvars: Mapping[str, Any]) -> list[str]:
    """The fixed script with smartctl_reads and each disk's tool and device as arguments."""
    if not params.disks:
        raise CommandError(f"{NAME}: params.disks names no disk (set the scratch and OS "
                           "disks, per host through rackgate_profile_overrides)")
    pairs = [x for d in params.disks for x in (d.tool, d.device)]
    return ["sh", "-c", DISK_SCRIPT, "rackgate-disk-health", params.smartctl_reads, *pairs]


def disk_needs(params: DiskParams, hostvars: Mapping[str, Any]) -> HostNeeds:
    tools = sorted({"smartctl" if d.tool == "smartctl" else "nvme" for d in params.disks})
    return HostNeeds(tools=(*tools, "mktemp", "cat", "rm"),
                     root="SMART and NVMe log reads are admin commands sent through the "
                          "block device, which the kernel allows with CAP_SYS_ADMIN only")


def _details(d: Disk, run: DiskRun) -> dict[str, float | str]:
    key = f"{d.device}."
    out: dict[str, float | str] = {key + "role": d.role, key + "tool": d.tool,
                                   key + "exit_status": float(run.rc)}
    report = run.report
    log = report.nvme if isinstance(report, SmartctlReport) else report
    if isinstance(report, SmartctlReport):
        out.update({key + k: v for k, v in (("model", report.model),
                                            ("serial", report.serial),
                                            ("firmware", report.firmware)) if v})
    if isinstance(log, NvmeHealth):
        out.update({key + "critical_warning": float(log.critical_warning),
                    key + "percentage_used": float(log.percentage_used_pct),
                    key + "available_spare": float(log.available_spare_pct),
                    key + "media_errors": float(log.media_errors)})
        if log.temperature_c is not None:
            out[key + "temperature_c"] = float(log.temperature_c)
    return out


def _run_findings(d: Disk, run: DiskRun, p: DiskParams, limit: int) -> list[Finding]:
    who = f"{d.role} disk {d.device}"
    if run.tool != d.tool:
        return [(Status.ERROR, f"{who}: read with {run.tool}, but the profile asks for "
                               f"{d.tool}: not this check's evidence")]
    said = "; ".join(run.stderr)[:300] or run.stdout[:300] or "no output"
    if run.report is None:
        return [(Status.ERROR, f"{who}: {run.tool} exited with rc {run.rc} and printed "
                               f"nothing to read: {said}")]
    if isinstance(run.report, SmartctlReport):
        allowed = p.reallocated_sectors_allowed
        return smartctl_findings(who, run, run.report,
                                 ("smartctl", *SMARTCTL_ARGS[p.smartctl_reads], d.device),
                                 limit, allowed.value if allowed else 0)
    if run.rc != 0:
        return [(Status.ERROR, f"{who}: nvme smart-log exited with rc {run.rc}: {said}")]
    return nvme_findings(who, run.report, limit)


def judge_disk_health(runs: tuple[DiskRun, ...], params: DiskParams,
                      thresholds: Mapping[str, Threshold], hardware: Hardware | None = None,
                      ) -> Judgement:
    """Every named disk's findings, then one verdict (a fail wins over an error: both
    listed)."""
    findings: list[Finding] = []
    details: dict[str, float | str] = {}
    if not params.disks:
        findings.append((Status.ERROR, "params.disks names no disk: nothing to judge"))
    named = {d.device: d for d in params.disks}
    for dev, n in Counter(r.device for r in runs).items():
        if dev not in named:
            findings.append((Status.ERROR, f"{dev}: read, but the profile names no such disk:"
                                           " not this check's evidence"))
        elif n > 1:
            findings.append((Status.ERROR, f"{dev}: read {n} times (duplicated output?)"))
    used = params.percentage_used_limit
    limit = used.value if used else DEFAULT_PERCENTAGE_USED_LIMIT
    serials: dict[str, list[str]] = {}
    for d in params.disks:
        mine = [r for r in runs if r.device == d.device]
        if not mine:
            findings.append((Status.ERROR, f"{d.role} disk {d.device}: no {d.tool} run in the "
                                           "evidence"))
            continue
        if len(mine) == 1:
            findings += _run_findings(d, mine[0], params, limit)
            details.update(_details(d, mine[0]))
            report = mine[0].report
            if isinstance(report, SmartctlReport) and report.serial:
                serials.setdefault(report.serial, []).append(d.device)
    for serial, devices in serials.items():
        if len(devices) > 1:
            findings.append((Status.ERROR, f"{' and '.join(devices)} report one serial "
                                           f"number, {serial}: one disk named twice?"))
    status = verdict(findings)
    if status is Status.PASS:
        text = ", ".join(f"{d.role} {d.device} ({d.tool})" for d in params.disks)
        return Judgement(Status.PASS, f"{len(params.disks)} disk(s) healthy: {text}",
                         details=details)
    return Judgement(status, message(findings), details=details)


DISK_HEALTH = NodeCheck(
    name=NAME,
    scope=Scope.NODE,
    tags=frozenset({"storage", "disk", "health"}),
    description="SMART / NVMe health of the scratch and OS disks the profile names "
                "(smartctl -j or nvme smart-log -o json)",
    params_model=DiskParams,
    metrics=frozenset(),
    command=disk_command,
    parse=parse_disk_health,
    judge=judge_disk_health,
    needs=disk_needs,
)

CHECKS = (DISK_HEALTH,)
