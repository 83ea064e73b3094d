"""Redundancy checks: power supplies (through the BMC), storage multipath, bonded links.

``redundancy.psu_ipmi``: ``ipmitool sdr elist`` against the node's BMC, run from the control
host: at least ``hardware.psu.count`` PSU status sensors, each present and without
failure, AC loss or predictive failure; no redundancy sensor lost when the profile expects
redundancy; PSU input power under the BMC's critical threshold and under ``input_power``
when the profile gives it. ``sdr elist`` rather than ``sdr type "Power Supply"``: Intel
boards report PSU redundancy on a Power Unit (09h) sensor that the type filter leaves out.
``redundancy.multipath``: ``multipath -ll``; every map has ``multipath_paths_per_lun``
healthy paths and none failed. ``redundancy.bonding``: every ``/proc/net/bonding`` file;
each expected bond has its mode, all members up and, for 802.3ad, an LACP partner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rackgate.checks import Check, CommandError, Scope, compare
from rackgate.model import Judgement, Status
from rackgate.parsers.bonding import NO_PARTNER, Bond, BondingReport, parse_bonding
from rackgate.parsers.ipmi import IpmiSdr, IpmiSensor, PsuKind, parse_ipmi_sdr, psu_sensors
from rackgate.parsers.multipath import MultipathTopology, parse_multipath_ll
from rackgate.profile import Hardware, Threshold

# IPMI v2.0 table 42-3: sensor-specific offsets of Power Supply (08h) and Power Unit (09h),
# and the generic redundancy offsets (table 42-2, reading type 0Bh); bit n = offset n.
PSU_FAULT_BITS = {1: "Failure detected", 2: "Predictive failure", 3: "Power Supply AC lost",
                  4: "AC lost or out-of-range", 6: "Configuration error"}
PSU_WARN_BITS = {5: "AC out-of-range, but present"}
POWER_UNIT_FAULT_BITS = {4: "AC lost", 5: "Soft power control failure",
                         6: "Power unit failure detected", 7: "Predictive failure"}
REDUNDANCY_LOST_BITS = {1: "Redundancy Lost", 2: "Redundancy Degraded",
                        3: "Non-redundant: Sufficient Resources from Redundant",
                        4: "Non-redundant: Sufficient Resources from Insufficient Resources",
                        5: "Non-redundant: Insufficient Resources",
                        6: "Redundancy Degraded from Fully Redundant",
                        7: "Redundancy Degraded from Non-redundant"}
_FAULT_WORDS = ("failure", "ac lost", "out-of-range", "out of range", "configuration error",
                "power off", "power down", "interlock")
_LOST_WORDS = ("redundancy lost", "redundancy degraded", "non-redundant", "insufficient")
_CRITICAL = frozenset({"cr", "nr", "ucr", "unr", "lcr", "lnr"})
_NONCRITICAL = frozenset({"nc", "unc", "lnc"})


class PsuIpmiParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cipher_suite: int = Field(default=3, ge=0, le=17, description="lanplus -C (3: "
                              "HMAC-SHA1/AES-128; without it lanplus probes for 10 s)")
    timeout_s: int = Field(default=60, ge=5)


def psu_ipmi_command(params: PsuIpmiParams, hostvars: Mapping[str, Any]) -> list[str]:
    """argv of ipmitool against the node's BMC, run on the control host.

    The password is never in argv (``ps`` shows argv to every user): ``-E`` makes ipmitool
    read it from the ``IPMI_PASSWORD`` environment variable, which the runner must set.

    >>> psu_ipmi_command(PsuIpmiParams(), {"rackgate_bmc_host": "10.0.0.5",
    ...                                    "rackgate_bmc_user": "ops"})[1:9]
    ['-I', 'lanplus', '-H', '10.0.0.5', '-p', '623', '-U', 'ops']
    """
    host = hostvars.get("rackgate_bmc_host")
    port = hostvars.get("rackgate_bmc_port", 623)
    user = hostvars.get("rackgate_bmc_user", "admin")
    if not isinstance(host, str) or not host or host.startswith("-") or any(c.isspace()
                                                                             for c in host):
        raise CommandError(f"rackgate_bmc_host must be the BMC's address, got {host!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise CommandError(f"rackgate_bmc_port must be a TCP port 1-65535, got {port!r}")
    if not isinstance(user, str) or not user or user.startswith("-"):
        raise CommandError(f"rackgate_bmc_user must be a user name, got {user!r}")
    return ["ipmitool", "-I", "lanplus", "-H", host, "-p", str(port), "-U", user, "-E",
            "-C", str(params.cipher_suite), "sdr", "elist"]


def _bits(value: int, table: Mapping[int, str]) -> list[str]:
    return [name for bit, name in table.items() if value >> bit & 1]


def _sensor_findings(kind: PsuKind, s: IpmiSensor, want_redundancy: bool,
                     threshold: Threshold | None) -> tuple[list[str], list[str]]:
    """(failures, warnings) of one PSU sensor, from its states or state bits."""
    fails: list[str] = []
    warns: list[str] = []
    states = [x.lower() for x in s.states or ()]
    if not s.readable:
        return [f"{s.label}: not readable (status {s.status or '?'})"], []
    if kind == "redundancy":
        lost = [x for x in s.states or () if any(w in x.lower() for w in _LOST_WORDS)]
        if s.state_bits is not None:
            lost += _bits(s.state_bits, REDUNDANCY_LOST_BITS)
        if lost:
            (fails if want_redundancy else warns).append(f"{s.label}: {', '.join(lost)}")
    elif kind == "power":
        assert s.watts is not None
        if s.status in _CRITICAL:
            fails.append(f"{s.label}: {s.watts:g} W is beyond the BMC's critical threshold "
                         f"(status {s.status})")
        elif s.status in _NONCRITICAL:
            warns.append(f"{s.label}: {s.watts:g} W is beyond the BMC's non-critical "
                         f"threshold (status {s.status})")
        if threshold is not None:
            j = compare(s.watts, threshold, f"{s.label} input power")
            if j.status is not Status.PASS:
                fails.append(j.message)
    else:
        faults = [x for x in s.states or () if any(w in x.lower() for w in _FAULT_WORDS)]
        if s.state_bits is not None:
            table = PSU_FAULT_BITS if kind == "psu" else POWER_UNIT_FAULT_BITS
            faults += _bits(s.state_bits, table)
            if kind == "psu":
                warns += [f"{s.label}: {w} (reading 0x{s.state_bits:02x})"
                          for w in _bits(s.state_bits, PSU_WARN_BITS)]
        if faults:
            bits = f" (reading 0x{s.state_bits:02x})" if s.state_bits is not None else ""
            fails.append(f"{s.label}: {', '.join(dict.fromkeys(faults))}{bits}")
        # presence is judged where the BMC gives states as text; the 3-column 0x00 of a
        # healthy IBM IMM PSU asserts no offset at all, so 0x00 cannot mean "absent"
        if kind == "psu" and s.states is not None and "presence detected" not in states:
            fails.append(f"{s.label}: presence not asserted (states: "
                         f"{', '.join(s.states) or 'none'})")
    return fails, warns


def judge_psu_ipmi(sdr: IpmiSdr, params: PsuIpmiParams, thresholds: Mapping[str, Threshold],
                   hardware: Hardware) -> Judgement:
    assert hardware.psu is not None  # applies() skips profiles without PSUs
    want = hardware.psu.count
    want_redundancy = hardware.psu.redundancy != "none"
    sensors = psu_sensors(sdr)
    fails: list[str] = []
    warns: list[str] = []
    for kind, s in sensors:
        f, w = _sensor_findings(kind, s, want_redundancy, thresholds.get("input_power"))
        fails += f
        warns += w
    status_sensors = [s for k, s in sensors if k == "psu"]
    if len(status_sensors) < want:
        names = ", ".join(s.label for s in status_sensors) or "none"
        fails.insert(0, f"{len(status_sensors)} PSU status sensor(s) ({names}), expected "
                        f">= {want}")
    watts = [s.watts for k, s in sensors if k == "power" and s.watts is not None]
    details: dict[str, float | str] = {
        "psu_sensors": ", ".join(s.label for s in status_sensors),
        "redundancy_sensors": ", ".join(s.label for k, s in sensors if k == "redundancy"),
    }
    if watts:
        details["input_power_max_w"] = max(watts)
    expected = f">= {want} PSUs present without fault, redundancy {hardware.psu.redundancy}"
    measured = float(len(status_sensors))
    if fails:
        return Judgement(Status.FAIL, "; ".join(fails + warns), measured, "PSUs", expected,
                         details=details)
    if warns:
        return Judgement(Status.WARN, "; ".join(warns), measured, "PSUs", expected,
                         details=details)
    return Judgement(Status.PASS, f"{len(status_sensors)} PSU(s) present without fault "
                     f"({details['psu_sensors']})", measured, "PSUs", expected,
                     details=details)


def _psu_applies(hw: Hardware) -> str | None:
    return None if hw.psu is not None else "the profile expects no PSUs (hardware.psu unset)"


class MultipathParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: int = Field(default=60, ge=5)


def multipath_command(params: MultipathParams, hostvars: Mapping[str, Any]) -> list[str]:
    return ["multipath", "-ll"]


def judge_multipath(topo: MultipathTopology, params: MultipathParams,
                    thresholds: Mapping[str, Threshold], hardware: Hardware) -> Judgement:
    assert hardware.storage is not None and hardware.storage.multipath_paths_per_lun
    want = hardware.storage.multipath_paths_per_lun
    expected = f">= {want} active/ready paths per LUN, none failed"
    if not topo.maps:
        return Judgement(Status.FAIL, f"no multipath map, expected LUNs with {want} paths "
                         "each", 0.0, "paths", expected)
    fails: list[str] = []
    for m in topo.maps:
        good = [p for p in m.paths if p.healthy]
        bad = [f"{p.device} ({p.hctl}) {p.dm_state} {p.path_state} {p.online_state}".rstrip()
               for p in m.paths if not p.healthy]
        if len(good) < want or bad:
            fails.append(f"{m.name} ({m.wwid}): {len(good)}/{want} healthy paths"
                         + (f", not healthy: {', '.join(bad)}" if bad else ""))
    least = float(min(sum(p.healthy for p in m.paths) for m in topo.maps))
    details: dict[str, float | str] = {"maps": len(topo.maps)}
    if fails:
        return Judgement(Status.FAIL, "; ".join(fails), least, "paths", expected,
                         details=details)
    return Judgement(Status.PASS, f"{len(topo.maps)} map(s), each with >= {want} healthy "
                     "paths", least, "paths", expected, details=details)


def _multipath_applies(hw: Hardware) -> str | None:
    if hw.storage is None or hw.storage.multipath_paths_per_lun is None:
        return "the profile expects no multipath storage (storage.multipath_paths_per_lun unset)"
    return None


class ExpectedBond(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,15}$")
    mode: str = Field(pattern=r"^(balance-rr|active-backup|balance-xor|broadcast|802\.3ad|"
                              r"balance-tlb|balance-alb)$")
    members: list[str] = Field(min_length=1)


class BondingParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bonds: list[ExpectedBond] = Field(default_factory=list)
    timeout_s: int = Field(default=30, ge=5)


BONDING_SCRIPT = ('for f in /proc/net/bonding/*; do [ -e "$f" ] || continue; '
                  'echo "==> $f <=="; cat "$f"; done')


def bonding_command(params: BondingParams, hostvars: Mapping[str, Any]) -> list[str]:
    """A fixed script: every bond's /proc file, each after a ``==> path <==`` line."""
    return ["sh", "-c", BONDING_SCRIPT]


def judge_bonding(report: BondingReport, params: BondingParams,
                  thresholds: Mapping[str, Threshold], hardware: Hardware) -> Judgement:
    found = {b.name: b for b in report.bonds}
    if not params.bonds:
        extra = f" (found {', '.join(sorted(found))}, not judged)" if found else ""
        return Judgement(Status.PASS, f"no bonds expected{extra}")
    fails: list[str] = []
    for want in params.bonds:
        bond = found.get(want.name)
        if bond is None and len(report.bonds) == 1 and len(params.bonds) == 1 \
                and not report.bonds[0].name:
            bond = report.bonds[0]  # a single file read without its name
        if bond is None:
            fails.append(f"{want.name}: no such bond (found: {', '.join(sorted(found)) or 'none'})")
            continue
        if bond.mode != want.mode:
            fails.append(f"{want.name}: mode {bond.mode} ({bond.mode_text}), expected {want.mode}")
        slaves = {s.interface: s for s in bond.slaves}
        for member in want.members:
            s = slaves.get(member)
            if s is None:
                fails.append(f"{want.name}: member {member} is not enslaved "
                             f"(slaves: {', '.join(slaves) or 'none'})")
            elif not s.mii_up:
                fails.append(f"{want.name}: member {member} MII status {s.mii_status or '?'} "
                             f"(link failures {s.link_failure_count})")
        if want.mode == "802.3ad" and bond.mode == "802.3ad":
            fails += _lacp_findings(want, bond)
    if fails:
        return Judgement(Status.FAIL, "; ".join(fails), expected="bonds "
                         + ", ".join(f"{b.name} {b.mode} {'+'.join(b.members)}"
                                     for b in params.bonds))
    return Judgement(Status.PASS, f"{len(params.bonds)} bond(s) in mode with all members up: "
                     + ", ".join(b.name for b in params.bonds))


def _lacp_findings(want: ExpectedBond, bond: Bond) -> list[str]:
    fails = []
    if bond.partner_mac == NO_PARTNER:
        fails.append(f"{want.name}: no LACP partner (active aggregator "
                     f"{bond.active_aggregator_id}, partner MAC {NO_PARTNER}): the switch "
                     "ports are not negotiating 802.3ad")
    members = [s for s in bond.slaves if s.interface in want.members]
    no_partner = [s.interface for s in members if s.partner_mac == NO_PARTNER and s.mii_up]
    if no_partner and bond.partner_mac != NO_PARTNER:
        fails.append(f"{want.name}: no LACP partner on {', '.join(no_partner)}")
    aggregators = {s.aggregator_id for s in members if s.aggregator_id is not None}
    active = bond.active_aggregator_id
    outside = [f"{s.interface} (aggregator {s.aggregator_id})" for s in members
               if s.aggregator_id is not None and
               (s.aggregator_id != active if active is not None else len(aggregators) > 1)]
    if outside:
        fails.append(f"{want.name}: members outside the active aggregator "
                     f"{active if active is not None else ''}: {', '.join(outside)}".replace(
                         "aggregator :", "aggregator:"))
    return fails


CHECKS = (
    Check(
        name="redundancy.psu_ipmi",
        scope=Scope.NODE,
        tags=frozenset({"redundancy", "psu", "ipmi"}),
        description="PSUs present and healthy, PSU redundancy intact (BMC SDR via ipmitool)",
        params_model=PsuIpmiParams,
        metrics=frozenset(),
        optional_metrics=frozenset({"input_power"}),
        command=psu_ipmi_command,
        timeout_s=lambda p: int(p.timeout_s),
        parse=parse_ipmi_sdr,
        judge=judge_psu_ipmi,
        applies=_psu_applies,
        runs_on="control",
        secret_env={"IPMI_PASSWORD": "rackgate_bmc_password"},
    ),
    Check(
        name="redundancy.multipath",
        scope=Scope.NODE,
        tags=frozenset({"redundancy", "storage", "multipath"}),
        description="Every multipath LUN has its expected healthy paths (multipath -ll)",
        params_model=MultipathParams,
        metrics=frozenset(),
        command=multipath_command,
        timeout_s=lambda p: int(p.timeout_s),
        parse=parse_multipath_ll,
        judge=judge_multipath,
        applies=_multipath_applies,
    ),
    Check(
        name="redundancy.bonding",
        scope=Scope.NODE,
        tags=frozenset({"redundancy", "network", "bonding"}),
        description="Bonds in their expected mode, every member up, LACP partner present",
        params_model=BondingParams,
        metrics=frozenset(),
        command=bonding_command,
        timeout_s=lambda p: int(p.timeout_s),
        parse=parse_bonding,
        judge=judge_bonding,
    ),
)

__all__ = ["CHECKS", "BondingParams", "MultipathParams", "PsuIpmiParams", "judge_bonding",
           "judge_multipath", "judge_psu_ipmi", "psu_ipmi_command"]
