"""``redundancy.psu_ipmi``: the node's power supplies, read from its BMC with ipmitool.

``ipmitool sdr elist`` against the node's BMC, run from the control host: exactly
``hardware.psu.count`` PSU status sensors, each listed once and positively healthy by the
allow-lists below (present, nothing else asserted); every redundancy sensor Fully
Redundant when the profile expects redundancy; Power Unit sensors asserting nothing; PSU
input power plausible, under the BMC's critical threshold and under ``input_power`` when
the profile gives it. The states of every Power Supply sensor are judged whatever its
reading's unit: an HP iLO status sensor that also reads Watts (``0 Watts, Presence
detected, Failure detected``) is one supply, counted once, judged by its states and its
Watts. Health comes from the IPMI offsets of the asserted states (text, or the state
mask), never from a tool's status column or FreeIPMI's State (whose Warning or Critical
is a finding all the same). A state on no list is an error naming the sensor and the
text. Every sensor is one identity (its name and entity: Dell names both supplies
"Status"): a name listed twice on one entity, or one sensor number (or FreeIPMI record)
under two identities, is an error when a power-supply sensor is among them, and each
supply counts once. A line the parser could not read that could concern the supplies (a
table row, a line of a verbose block, a line naming a supply, power or redundancy) is an
error quoting it: a damaged line may be the supply that is missing or failed. ``sdr
elist`` rather than ``sdr type "Power Supply"``: Intel boards report PSU
redundancy on a Power Unit (09h) sensor that the type filter leaves out. The parser also
reads ``ipmitool sensor`` and FreeIPMI ``ipmi-sensors`` listings, which this judge holds to
the same rules (the check collects ``sdr elist``). IPMI v2.0 (Table 42-2, 42-3),
ipmitool's ``lib/ipmi_sdr.c`` and ``lib/ipmi_sensor.c``, FreeIPMI's ipmi-sensors(8): see
``parsers.ipmi``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from rackgate.checks.shared.base import (
    SECRET_FILE,
    CommandError,
    ControlCheck,
    Params,
    Scope,
    compare,
)
from rackgate.checks.shared.findings import Finding, message, verdict
from rackgate.figures import figure
from rackgate.model import Judgement, Status
from rackgate.parsers.ipmi import (
    IpmiSdr,
    IpmiSensor,
    PsuKind,
    parse_ipmi_sdr,
    psu_sensors,
    psu_unread,
)
from rackgate.parsers.ipmi.states import (
    POWER_UNIT_HEALTHY,
    POWER_UNIT_STATES,
    PSU_HEALTHY,
    PSU_STATES,
    REDUNDANCY_HEALTHY,
    REDUNDANCY_STATES,
    offset_of,
)
from rackgate.profile import Hardware, PsuSpec, Threshold

# Allow-lists of the discrete states (parsers.ipmi.states: offset -> the names ipmitool,
# the IPMI v2.0 specification and FreeIPMI give it; Table 42-3 for the Power Supply (08h)
# and Power Unit (09h) sensor types, Table 42-2 for the generic redundancy type 0Bh). A
# state is healthy only when its offset is in the healthy set: a PSU present with nothing
# else asserted, redundancy Fully Redundant, a power unit asserting nothing. A known state
# outside it is a finding; text on no list (a new firmware's wording, a garbled byte) and
# a mask bit the type lacks are errors, never a pass.
_CRITICAL = frozenset({"cr", "nr", "ucr", "unr", "lcr", "lnr"})
_NONCRITICAL = frozenset({"nc", "unc", "lnc"})
# No single PSU input reads above this: the largest 8-GPU nodes are specified at 14.3 kW
# max for the whole system, shared by six 3.3 kW supplies on 200-240 V / 16 A inputs
# (NVIDIA DGX B200 User Guide, "Power Specifications"); 20 kW per sensor is above what
# any one supply, or even the whole system, can draw.
# With hardware.psu.watts_each the bound is tighter: input = output / efficiency, and 80
# PLUS supplies are >= 80 % efficient at any load, so input <= 1.25 x rated output; 1.5 x
# leaves margin for the sensor's tolerance.
MAX_PSU_INPUT_W = 20_000.0
INPUT_OVER_RATING = 1.5


def max_input_watts(psu: PsuSpec) -> float:
    """The most one supply's input can plausibly read (the bounds above), for both BMC
    protocols' judges."""
    return MAX_PSU_INPUT_W if psu.watts_each is None else psu.watts_each * INPUT_OVER_RATING


class PsuIpmiParams(Params):
    cipher_suite: int = Field(default=3, ge=0, le=17, description="lanplus -C (3: "
                              "HMAC-SHA1/AES-128; without it lanplus probes for 10 s)")


def psu_ipmi_command(params: PsuIpmiParams, hostvars: Mapping[str, Any]) -> list[str]:
    """argv of ipmitool against the node's BMC, run on the control host.

    The password is never in argv or an environment (``ps`` shows argv to every user):
    ``-f`` makes ipmitool read it from a file, :data:`~rackgate.checks.SECRET_FILE` here,
    which the collector replaces with the private 0600 file holding
    ``rackgate_bmc_password``.

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
    return ["ipmitool", "-I", "lanplus", "-H", host, "-p", str(port), "-U", user,
            "-f", SECRET_FILE, "-C", str(params.cipher_suite), "sdr", "elist"]


_TABLES = {"psu": (PSU_STATES, PSU_HEALTHY, "Power Supply (08h)"),
           "power_unit": (POWER_UNIT_STATES, POWER_UNIT_HEALTHY, "Power Unit (09h)"),
           "redundancy": (REDUNDANCY_STATES, REDUNDANCY_HEALTHY, "redundancy (0Bh)")}


def _asserted(kind: PsuKind, s: IpmiSensor) -> tuple[set[int], list[str], list[Finding]]:
    """The offsets a discrete sensor asserts (from its state mask, else its state text, else
    its 0xNN bits), the names of those outside the healthy set (as printed, for text), and
    an error for each state or bit that is on no list."""
    table, healthy, what = _TABLES[kind]
    offsets: set[int] = set()
    bad: list[str] = []
    errors: list[Finding] = []
    bits, shown = (s.state_mask, f"state mask {s.mask_text}") if s.state_mask is not None \
        else (s.state_bits, f"reading 0x{s.state_bits or 0:02x}")
    if s.state_mask is None and s.states is not None:
        tool = "FreeIPMI" if s.record_id is not None else "ipmitool"
        for state in s.states:
            offset = offset_of(table, state)
            if offset is None:
                errors.append((Status.ERROR, f"{s.label}: state {state!r} is not one {tool} "
                                             f"prints for a {what} sensor: cannot be judged"))
                continue
            offsets.add(offset)
            if offset not in healthy and state not in bad:
                bad.append(state)
    elif bits is not None:
        for bit in range(16):
            if not bits >> bit & 1:
                continue
            if bit not in table:
                errors.append((Status.ERROR, f"{s.label}: {shown} asserts offset {bit}, which a "
                                             f"{what} sensor does not have"))
            else:
                offsets.add(bit)
                if bit not in healthy:
                    bad.append(table[bit][0])
    return offsets, bad, errors


def _where(s: IpmiSensor) -> str:
    if s.state_mask is not None:
        return f" (state mask {s.mask_text})"
    return f" (reading 0x{s.state_bits:02x})" if s.states is None and s.state_bits is not None \
        else ""


# The 3-column ``ipmitool sdr`` form prints Get Sensor Reading's response byte 2 as 0xNN
# (ipmi_sdr_print_sensor_fc), which IPMI v2.0 (35.14) says to ignore for a sensor without
# a numeric reading: a discrete sensor's asserted states are bytes 4-5, which ``sdr
# elist``, ``sdr -v`` and ``ipmitool sensor`` print. Some BMCs mirror the states in byte 2
# (ipmi_sim; the power bays of ipmitool issue 318), others always print 0x00 (IBM IMM, and
# issue 176's redundancy sensor reads 0x00 with Redundancy Lost asserted). A fault bit is
# taken as the BMC's word for a fault; no 0xNN reading is taken as evidence of health.
_THREE_COLUMN = ("the 3-column 'ipmitool sdr' reading is not the sensor's states (IPMI "
                 "leaves it unspecified for discrete sensors): collect 'sdr elist'")
_HIDDEN = ("'ipmitool sensor' prints only the analog reading of a discrete sensor that has "
           "one, not its states: collect 'sdr elist'")


def _sensor_findings(kind: PsuKind, s: IpmiSensor, want_redundancy: bool,
                     threshold: Threshold | None, max_w: float) -> list[Finding]:
    """Every finding on one PSU sensor; none means positively healthy."""
    if not s.readable:
        return [(Status.FAIL, f"{s.label}: not readable (status {s.status or '?'})")]
    out: list[Finding] = []
    if s.analysed in ("Critical", "Warning"):  # FreeIPMI's own reading: a fault, never health
        out.append((Status.FAIL if s.analysed == "Critical" else Status.WARN,
                    f"{s.label}: FreeIPMI state {s.analysed}"))
    if s.watts is not None:  # a Power Supply sensor with Watts (HP) is judged as both
        out += _power_findings(s, threshold, max_w)
    if kind == "power":
        return out
    if s.states is None and s.state_mask is None and s.state_bits is None:
        why = _HIDDEN if s.states_hidden else "neither a state list nor a 0xNN reading"
        return [*out, (Status.ERROR, f"{s.label}: no state shown ({why}): cannot be judged")]
    _, healthy, _ = _TABLES[kind]
    offsets, bad, errors = _asserted(kind, s)
    out += errors
    if bad:
        fault = Status.FAIL if kind != "redundancy" or want_redundancy else Status.WARN
        out.append((fault, f"{s.label}: {', '.join(bad)}{_where(s)}"))
    if s.states is None and s.state_mask is None:  # 0xNN: faults count, health is not shown
        if not bad and (kind != "redundancy" or want_redundancy):
            out.append((Status.ERROR, f"{s.label}: reading 0x{s.state_bits or 0:02x}: "
                                      f"{_THREE_COLUMN}"))
        return out
    if kind == "redundancy" and want_redundancy and not bad and not offsets & healthy \
            and not errors:
        out.append((Status.ERROR, f"{s.label}: asserts no redundancy state: Fully Redundant "
                                  "not shown"))
    if kind == "psu" and not offsets & healthy:
        out.append((Status.FAIL, f"{s.label}: presence not asserted (states: "
                                 f"{', '.join(s.states or ()) or 'none'}{_where(s)})"))
    return out


def _power_findings(s: IpmiSensor, threshold: Threshold | None, max_w: float) -> list[Finding]:
    assert s.watts is not None
    if not 0 <= s.watts <= max_w:
        return [(Status.ERROR, f"{s.label}: {figure(s.watts)} W is implausible for one power "
                               f"supply's input (0 to {figure(max_w)} W): unusable evidence")]
    out: list[Finding] = []
    if s.status in _CRITICAL:
        out.append((Status.FAIL, f"{s.label}: {figure(s.watts)} W is beyond the BMC's critical "
                                 f"threshold (status {s.status})"))
    elif s.status in _NONCRITICAL:
        out.append((Status.WARN, f"{s.label}: {figure(s.watts)} W is beyond the BMC's non-critical "
                                 f"threshold (status {s.status})"))
    elif s.status not in ("ok", ""):
        out.append((Status.ERROR, f"{s.label}: status {s.status!r} for a reading of "
                                  f"{figure(s.watts)} W: cannot be judged"))
    if threshold is not None:
        j = compare(s.watts, threshold, f"{s.label} input power")
        if j.status is not Status.PASS:
            out.append((j.status, j.message))
    return out


def _named(s: IpmiSensor) -> str:
    return f"{s.name} (entity {s.entity})" if s.entity else repr(s.name)


def _identity_findings(sdr: IpmiSdr) -> list[Finding]:
    """An error for each identity listed more than once, and for each sensor number or
    FreeIPMI record ID under more than one identity, when a PSU sensor is among them."""
    kinds = {id(s): k for k, s in psu_sensors(sdr)}
    out: list[Finding] = []
    same: dict[object, list[IpmiSensor]] = {}
    for s in sdr.sensors:
        same.setdefault(s.identity, []).append(s)
    for group in same.values():
        if len(group) > 1 and any(id(s) in kinds for s in group):
            labels = list(dict.fromkeys(s.label for s in group))
            also = f" (as {', '.join(labels)})" if len(labels) > 1 else ""
            hint = "" if group[0].entity else (": this listing shows no entity to tell "
                                               "same-named sensors apart, collect 'sdr elist'")
            out.append((Status.ERROR, f"{group[0].label} is listed {len(group)} times{also}: "
                                      f"duplicated output, the PSUs cannot be counted{hint}"))
    for what, key in (("sensor number", "sensor_number"), ("record ID", "record_id")):
        found: dict[int, list[IpmiSensor]] = {}
        for s in sdr.sensors:
            if (n := getattr(s, key)) is not None:
                found.setdefault(n, []).append(s)
        for n, group in found.items():
            names = list(dict.fromkeys(_named(s) for s in group))
            if len({s.identity for s in group}) > 1 and any(id(s) in kinds for s in group):
                shown = f"{n:02X}h" if key == "sensor_number" else str(n)
                out.append((Status.ERROR, f"{what} {shown} is listed for {' and '.join(names)}: "
                                          "one sensor under two names, the PSUs cannot be told "
                                          "apart"))
    return out


def judge_psu_ipmi(sdr: IpmiSdr, params: PsuIpmiParams, thresholds: Mapping[str, Threshold],
                   hardware: Hardware) -> Judgement:
    """Exactly ``hardware.psu.count`` PSU status sensors, each listed once and every one
    positively healthy (allow-lists above): a supply the profile does not count is foreign
    hardware, a failure like a missing one. Redundancy, Power Unit and input power sensors
    without findings; no unread line that could concern them. The worst finding decides;
    all of them are listed."""
    assert hardware.psu is not None  # applies() skips profiles without PSUs
    want = hardware.psu.count
    want_redundancy = hardware.psu.redundancy != "none"
    max_w = max_input_watts(hardware.psu)
    sensors = psu_sensors(sdr)
    findings: list[Finding] = [
        (Status.ERROR, f"line {u.number} of the listing cannot be read "
                       f"({u.text.strip()[:160]!r}): "
                       f"{'in a sensor table or block' if u.owned else 'it names power'}, it "
                       "may be a power supply's: the PSUs cannot be judged")
        for u in psu_unread(sdr)]
    findings += _identity_findings(sdr)
    healthy = []
    for kind, s in sensors:
        f = _sensor_findings(kind, s, want_redundancy, thresholds.get("input_power"), max_w)
        findings += f
        if kind == "psu" and not any(st >= Status.FAIL for st, _ in f):
            healthy.append(s.identity)
    first: dict[tuple[str, str | None], str] = {}  # each supply once, by its identity
    for k, s in sensors:
        if k == "psu":
            first.setdefault(s.identity, s.label)
    status_sensors = list(first.values())
    if len(status_sensors) != want:
        names = ", ".join(status_sensors) or "none"
        findings.insert(0, (Status.FAIL, f"{len(status_sensors)} PSU status sensor(s) "
                                         f"({names}), the profile expects {want}"))
    watts = [s.watts for k, s in sensors if k in ("power", "psu") and s.watts is not None]
    details: dict[str, float | str] = {
        "psu_sensors": ", ".join(status_sensors),
        "redundancy_sensors": ", ".join(s.label for k, s in sensors if k == "redundancy"),
    }
    if watts:
        details["input_power_max_w"] = max(watts)
    expected = f"{want} PSUs present without fault, redundancy {hardware.psu.redundancy}"
    measured = float(len(dict.fromkeys(healthy)))
    status = verdict(findings)
    if status > Status.PASS:
        return Judgement(status, message(findings), measured, "PSUs", expected,
                         details=details)
    return Judgement(Status.PASS, f"{len(status_sensors)} PSU(s) present without fault "
                     f"({details['psu_sensors']})", measured, "PSUs", expected,
                     details=details)


def _psu_applies(hw: Hardware) -> str | None:
    return None if hw.psu is not None else "the profile expects no PSUs (hardware.psu unset)"


CHECK = ControlCheck(
    name="redundancy.psu_ipmi",
    scope=Scope.NODE,
    tags=frozenset({"redundancy", "psu", "ipmi"}),
    description="PSUs present and healthy, PSU redundancy intact (BMC SDR via ipmitool)",
    params_model=PsuIpmiParams,
    metrics=frozenset(),
    optional_metrics=frozenset({"input_power"}),
    better={"input_power": "lower"},
    command=psu_ipmi_command,
    parse=parse_ipmi_sdr,
    judge=judge_psu_ipmi,
    applies=_psu_applies,
    secret_var="rackgate_bmc_password",
)

__all__ = ["CHECK", "INPUT_OVER_RATING", "MAX_PSU_INPUT_W", "PsuIpmiParams", "judge_psu_ipmi",
           "max_input_watts", "psu_ipmi_command"]
