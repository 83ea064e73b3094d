"""``redundancy.psu_redfish``'s params and judge (the check is declared in :mod:`.cooling`,
with the other Redfish check), and the DMTF status allow-lists both Redfish judges use.

Every supply must be on the allow-list below, exactly ``hardware.psu.count`` of them
present, and every redundancy group Enabled and OK. A supply is healthy when it is ``Enabled`` with
Health ``OK``, or a healthy spare: ``StandbySpare`` with Health ``OK``, in a profile with
redundancy, no more spares than the profile's redundancy has (N+1: 1, N+2: 2, N+N: half),
and a redundancy group the BMC reports. Resource.State's ``StandbySpare`` is "part of a
redundancy set and awaits a failover or other external action to activate it", and it
"may become available automatically as part of a failover": that is the ``+M`` of an N+M
set (the dgx-h100 profile's 4+2, "two stand in for failed ones"), as long as the other N
carry the load. ``StandbyOffline`` awaits an external action (no automatic failover) and
stays a fault.

A bay the BMC lists as ``Absent`` holds no supply: Resource.State's ``Absent`` is "not
currently present or detected", the resource "represents a capability or an available
location where a device can be installed". Supplies are counted over the present bays
only and the empty ones are named in the result (``details["empty_bays"]``); a bay empty
where the profile counts a supply leaves fewer present than ``hardware.psu.count``, a
failure. An empty bay has no supply whose health could be judged: its Health, OK or none,
is not; a Warning or Critical there is reported (a warning), never passed in silence.

A ``Status.State`` outside DMTF's enumeration (vendors print ``Standby``, which could be
either of the two) is parsed and reported as an unknown state, an error, never taken as
healthy; a profile may map it to a DMTF state with the document that says so
(``vendor_states``; the error says how), and the result then names the mapping.

A missing ``Status.State`` or ``Status.Health``: the Resource schema defines neither
property as required and gives no default, so an omitted value says nothing. Health
``Warning`` or ``Critical`` (or HealthRollup's: the health "of the resource and its
dependent resources") fails a supply whatever its State says, or lacks. Without Health,
HealthRollup stands in for it (OK there only when the supply itself is OK). Otherwise the
supply is an error, unless the profile says how its BMC publishes supplies, with the
document that says so: ``missing_state`` (some HPE Cray BMCs give Health but no State:
Health OK is read as Enabled) or ``missing_health`` (rectifiers that give State but no
Health: Enabled is read as Health OK). Neither rule reads anything else: a supply with
neither field, one whose State is not Enabled, and a spare (whose health shows it can take
over) stay as strict.

>>> PsuRedfishParams(vendor_states={"Standby": {"means": "StandbySpare",
...     "basis": "vendor BMC manual 2.1: hot spare"}}).vendor_states["Standby"].means
'StandbySpare'
>>> PsuRedfishParams(missing_state={"read_as": "Enabled",
...     "basis": "vendor BMC manual 4.2: supplies publish Health only"}).missing_state.read_as
'Enabled'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rackgate.checks.redundancy.psu import max_input_watts
from rackgate.checks.shared.base import Params
from rackgate.checks.shared.findings import Finding, message, verdict
from rackgate.figures import figure
from rackgate.model import Judgement, Status
from rackgate.parsers.redfish.power import PowerRecord, PowerSupplyState
from rackgate.profile import Hardware, Threshold

ID_PATTERN = r"^[A-Za-z0-9._-]+$"
DmtfState = Literal["Enabled", "Disabled", "StandbyOffline", "StandbySpare", "InTest",
                    "Starting", "Absent", "UnavailableOffline", "Deferring", "Quiesced",
                    "Updating", "Qualified", "Degraded"]


class VendorState(BaseModel):
    """What a vendor's ``Status.State`` value means, as a DMTF state, and where that is
    written (the BMC's manual, a vendor statement): a mapping with no basis is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    means: DmtfState
    basis: str = Field(min_length=10, description="the document that says what it means")


class AssumedState(BaseModel):
    """How a BMC that publishes no ``Status.State`` for its supplies is read: Health OK as
    ``Enabled``, with the document that says the BMC omits State for installed supplies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read_as: Literal["Enabled"]
    basis: str = Field(min_length=10, description="the document that says the BMC omits "
                       "Status.State for an installed, operating supply")


class AssumedHealth(BaseModel):
    """How a BMC that publishes no ``Status.Health`` (nor HealthRollup) for its supplies is
    read: an ``Enabled`` supply as Health OK, with the document that says so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read_as: Literal["OK"]
    basis: str = Field(min_length=10, description="the document that says the BMC omits "
                       "Status.Health and reports a failed supply by its State")


class PsuRedfishParams(Params):
    chassis: str = Field(default="1", pattern=ID_PATTERN,
                         description="Chassis Id (host var wins)")
    request_timeout_s: int = Field(default=10, ge=1, le=120)
    vendor_states: dict[str, VendorState] = Field(
        default_factory=dict, description="vendor Status.State values (not DMTF's) and the "
        "DMTF state each means, with its basis; other vendor values are errors")
    missing_state: AssumedState | None = Field(
        default=None, description="a supply with Health OK and no Status.State is read as "
        "Enabled (with its basis); unset: an error")
    missing_health: AssumedHealth | None = Field(
        default=None, description="an Enabled supply with no Status.Health nor HealthRollup "
        "is read as OK (with its basis); unset: an error")

    @model_validator(mode="after")
    def _vendor_values_only(self) -> PsuRedfishParams:
        dmtf = [k for k in self.vendor_states if k in get_args(DmtfState) or not k.strip()]
        if dmtf:
            raise ValueError(f"vendor_states may map only vendor values, not {dmtf} (DMTF "
                             "Resource.State values mean what the schema says)")
        return self


# DMTF Resource.State (Resource schema, DSP8010), decided for a power supply that should
# carry its share of the load. Only Enabled ("capable of operating") shows that; a healthy
# StandbySpare is a spare (judge_psu_redfish); each other documented state says why not.
# A state the schema does not define is an error.
SUPPLY_STATES: dict[str, str | None] = {
    "Enabled": None,
    "Absent": "absent (no supply in the bay)",
    "Disabled": "Disabled (unavailable)",
    "StandbyOffline": "StandbyOffline (awaits an external action to activate: carries no "
                      "load)",
    "StandbySpare": "StandbySpare (a spare awaiting failover: carries no load now)",
    "InTest": "InTest (under test or capturing debug data)",
    "Starting": "Starting (not yet Enabled)",
    "UnavailableOffline": "UnavailableOffline (present but cannot be used)",
    "Deferring": "Deferring (processes no commands)",
    "Quiesced": "Quiesced (only a restricted set of commands)",
    "Updating": "Updating (may be unavailable or degraded)",
    "Qualified": "Qualified (a quality statement, not that the supply operates)",
    "Degraded": "Degraded",
}
# DMTF Resource.Health: OK is the only healthy value; Warning and Critical need attention.
HEALTH_STATES: dict[str, str | None] = {"OK": None, "Warning": "Warning",
                                        "Critical": "Critical"}


def status_findings(what: str, state: str | None, health: str | None,
                    spare: bool = False) -> list[Finding]:
    """Why ``what`` is not Enabled and OK (none: healthy), from the allow-lists above;
    ``spare``: StandbySpare and OK is healthy too (judge_psu_redfish says when)."""
    if state is None and health in ("Warning", "Critical"):
        return [(Status.FAIL, f"{what} reports no Status.State, health {health}")]
    if state not in SUPPLY_STATES:
        shown = "no Status.State" if state is None else f"Status.State {state!r}"
        return [(Status.ERROR, f"{what} reports {shown}, not a Redfish Resource.State: its "
                               "health cannot be shown")]
    why = None if spare and state == "StandbySpare" else SUPPLY_STATES[state]
    if why is not None:
        return [(Status.FAIL, f"{what} is {why}" + (f", health {health}" if health else ""))]
    if health not in HEALTH_STATES:
        shown = "no Status.Health" if health is None else f"Status.Health {health!r}"
        return [(Status.ERROR, f"{what} is {state} but reports {shown}, not OK, Warning or "
                               "Critical: its health cannot be shown")]
    bad = HEALTH_STATES[health]
    return [(Status.FAIL, f"{what} is {state}, health {bad}")] if bad else []


def _spares_allowed(hardware: Hardware) -> int:
    """How many of the profile's supplies may stand by: the M of N+M (N+N: half)."""
    assert hardware.psu is not None
    mode = hardware.psu.redundancy
    return {"none": 0, "N+1": 1, "N+2": 2}.get(mode, hardware.psu.count // 2)


_MAP_EXAMPLE = ("map it in the profile: checks: {{redundancy.psu_redfish: {{params: "
                "{{vendor_states: {{{state}: {{means: StandbySpare, basis: \"<the BMC document "
                "that says so>\"}}}}}}}}}} (means: the DMTF state it is: Enabled if it carries "
                "load, StandbySpare if it takes over on its own when a supply fails, "
                "StandbyOffline if it needs an action to take over)")


def _health(s: PowerSupplyState, notes: list[str]) -> str | None:
    """Status.Health, or where the BMC gives none its HealthRollup: the health of the
    supply and its dependents (OK there is OK for the supply; Warning or Critical is
    taken as the supply's)."""
    if s.health is not None or s.health_rollup is None:
        return s.health
    notes.append(f"{s.name} gives no Status.Health: its HealthRollup {s.health_rollup} "
                 "(the supply and its dependents) is read")
    return s.health_rollup


def _empty_bay(what: str, health: str | None) -> list[Finding]:
    """An Absent bay holds no supply to judge: only a health that flags it is reported."""
    if health in (None, "OK"):
        return []
    if health in ("Warning", "Critical"):
        return [(Status.WARN, f"{what} is an empty bay, yet the BMC reports health {health} "
                              "for it")]
    return [(Status.ERROR, f"{what} is an empty bay with Status.Health {health!r}, not OK, "
                           "Warning or Critical: damaged evidence?")]


def _stateless(s: PowerSupplyState, health: str | None, params: PsuRedfishParams,
               notes: list[str]) -> tuple[str | None, list[Finding]]:
    """A supply that reports no Status.State: ``missing_state`` decides Health OK."""
    if health == "OK" and params.missing_state is not None:
        notes.append(f"{s.name} gives no Status.State: Health OK read as Enabled "
                     f"({params.missing_state.basis})")
        return "Enabled", []
    if health == "OK":
        return None, [(Status.ERROR, f"{s.name} reports Health OK but no Status.State: "
                                     "whether it is installed and operating is not shown; "
                                     "where the BMC's documentation says it omits State for "
                                     "an operating supply, set checks.redundancy.psu_redfish."
                                     "params.missing_state: {read_as: Enabled, basis: "
                                     "\"<that document>\"}")]
    return None, status_findings(s.name, None, health)


_FLAGS = ("Warning", "Critical")


def _supply(s: PowerSupplyState, params: PsuRedfishParams,
            notes: list[str]) -> tuple[str | None, list[Finding]]:
    """(the DMTF state ``s`` is judged as, its findings but for the spare rules): those of
    its Status, and a failure for a present supply whose Health or HealthRollup is Warning
    or Critical, whatever its State says."""
    state, findings = _status(s, params, notes)
    flagged = [f"{k} {v}" for k, v in (("Health", s.health), ("HealthRollup", s.health_rollup))
               if v in _FLAGS]
    if state != "Absent" and flagged and not any(st is Status.FAIL for st, _ in findings):
        findings.append((Status.FAIL, f"{s.name} reports {' and '.join(flagged)}: a supply "
                                      "in Warning or Critical health fails whatever its "
                                      "State"))
    return state, findings


def _status(s: PowerSupplyState, params: PsuRedfishParams,
            notes: list[str]) -> tuple[str | None, list[Finding]]:
    health = _health(s, notes)
    state = s.state
    if state is not None and state in params.vendor_states:
        rule = params.vendor_states[state]
        notes.append(f"{s.name}'s vendor state {state!r} read as {rule.means} "
                     f"({rule.basis})")
        state = rule.means
    elif state is not None and state not in SUPPLY_STATES:
        return state, [(Status.ERROR, f"{s.name} reports Status.State {state!r}, not a DMTF "
                                      "Resource.State (a vendor value?): whether it carries "
                                      "load or would take over on a failure is unknown; "
                                      + _MAP_EXAMPLE.format(state=json.dumps(state)))]
    if state is None:
        return _stateless(s, health, params, notes)
    if state == "Absent":
        worst = "Critical" if "Critical" in (health, s.health_rollup) else \
            "Warning" if "Warning" in (health, s.health_rollup) else health
        return state, _empty_bay(f"{s.name} ({s.id})", worst)
    if state == "Enabled" and health is None:
        if params.missing_health is None:
            return state, [(Status.ERROR, f"{s.name} is Enabled but reports no Status.Health "
                                          "(nor HealthRollup): its health is not shown; where "
                                          "the BMC's documentation says it omits Health and "
                                          "shows a failed supply by its State, set "
                                          "checks.redundancy.psu_redfish.params.missing_health: "
                                          "{read_as: OK, basis: \"<that document>\"}")]
        notes.append(f"{s.name} gives no Status.Health: Enabled read as Health OK "
                     f"({params.missing_health.basis})")
        health = "OK"
    return state, status_findings(s.name, state, health, spare=True)


def _spare_findings(spares: list[str], rec: PowerRecord, hardware: Hardware) -> list[Finding]:
    assert hardware.psu is not None
    allowed, mode, want = _spares_allowed(hardware), hardware.psu.redundancy, hardware.psu.count
    names = ", ".join(spares)
    if mode == "none":
        return [(Status.FAIL, f"{names}: StandbySpare (a spare awaiting failover carries no "
                              "load), but the profile's redundancy is none: every supply "
                              "must carry load")]
    if len(spares) > allowed:
        return [(Status.FAIL, f"{len(spares)} supplies are StandbySpare ({names}): {mode} "
                              f"allows {allowed} spare(s) of {want}, so {want - len(spares)} "
                              f"carry the load where {want - allowed} must")]
    if not rec.redundancy:
        return [(Status.ERROR, f"{names}: StandbySpare, but the BMC reports no redundancy "
                               "group: its failover cannot be shown")]
    return []


def _count_finding(present: int, empty: list[str], good: int, want: int,
                   failed: int) -> Finding | None:
    """The finding on how many supplies are present (Absent bays hold none) and healthy."""
    if present < want and empty:
        bays = f"{', '.join(empty)} {'is' if len(empty) == 1 else 'are'} absent (empty bay)"
        return Status.FAIL, (f"{good} of {want} supplies present and healthy: {present} "
                             f"present, {bays}")
    if present != want:
        return Status.FAIL, f"the BMC lists {present} supplies, the profile expects {want}"
    if good < want and failed:  # a shortfall of unknown states alone stays an error
        return Status.FAIL, f"{good} of {want} supplies present and healthy"
    return None


def judge_psu_redfish(rec: PowerRecord, params: PsuRedfishParams,
                      thresholds: Mapping[str, Threshold], hardware: Hardware | None = None,
                      ) -> Judgement:
    """Exactly ``hardware.psu.count`` supplies present (one the profile does not count is
    foreign hardware, a failure like a missing one; Absent bays are named, not counted),
    every one Enabled and OK or a healthy spare (module docstring); every redundancy group
    Enabled and OK. Other states and other health values are findings; values outside the
    DMTF enumerations are errors unless ``vendor_states`` maps them; a missing State or
    Health is an error unless the Health fails the supply or the profile's
    ``missing_state`` / ``missing_health`` says how the BMC is read; a supply listed twice
    is refused by the parser."""
    if hardware is None or hardware.psu is None:
        return Judgement(Status.SKIP, "the profile expects no power supplies")
    want, mode = hardware.psu.count, hardware.psu.redundancy
    findings: list[Finding] = []
    notes: list[str] = []
    spares: list[str] = []
    empty: list[str] = []
    good = failed = 0
    # the same physical bound as redundancy.psu_ipmi's (its basis is given there)
    max_w = max_input_watts(hardware.psu)
    for s in rec.supplies:
        state, f = _supply(s, params, notes)
        findings += f
        if state == "Absent":
            empty.append(f"{s.name} ({s.id})")
        else:
            good += not f
            failed += any(st is Status.FAIL for st, _ in f)
        if state == "StandbySpare" and not f:
            spares.append(s.name)
        for field, w in (("input", s.input_watts), ("output", s.output_watts)):
            if w is not None and not 0 <= w <= max_w:
                findings.append((Status.ERROR, f"{s.name}: {field} power {figure(w)} W is outside "
                                               f"0 to {figure(max_w)} W: implausible evidence"))
    if spares and (f := _spare_findings(spares, rec, hardware)):
        findings += f
        good -= len(spares)
        failed += any(st is Status.FAIL for st, _ in f)
    for g in rec.redundancy:
        for st, text in status_findings(f"redundancy group {g.name} ({g.mode or 'mode?'})",
                                        g.state, g.health):
            lost = f"redundancy lost: {text}" if st is Status.FAIL else text
            findings.append((Status.WARN if mode == "none" else st, lost))
    present = len(rec.supplies) - len(empty)
    expected = f"{want} present and healthy ({mode})"
    details: dict[str, float | str] = {"source": rec.source, "supplies": present,
                                       "spares": len(spares)}
    if empty:
        details["empty_bays"] = ", ".join(empty)
    watts = [s.input_watts for s in rec.supplies if s.input_watts is not None]
    if watts:
        details["input_watts"] = round(sum(watts), 1)
    if not rec.supplies and not any(st is Status.FAIL for st, _ in findings):
        return Judgement(Status.ERROR, f"the BMC reported no power supply ({rec.source})",
                         expected=expected, details=details)
    if (count := _count_finding(present, empty, good, want, failed)) is not None:
        findings.insert(0, count)
    if empty and not (count and present < want):  # else the count finding names them
        notes.insert(0, f"empty bay{'s' if len(empty) > 1 else ''}: {', '.join(empty)}")
    noted = "; " + "; ".join(notes) if notes else ""
    status = verdict(findings)
    if status > Status.WARN:
        return Judgement(status, message(findings) + noted, good, "PSUs", expected,
                         details=details, better="higher")
    if mode != "none" and not rec.redundancy:
        findings.append((Status.WARN, f"{good} supplies healthy, but the BMC reports no "
                                      f"redundancy group: {mode} cannot be confirmed"))
    spare_text = f" ({len(spares)} StandbySpare: {', '.join(spares)})" if spares else ""
    if findings:
        return Judgement(Status.WARN, "; ".join(m for _, m in findings) + noted, good, "PSUs",
                         expected, details=details, better="higher")
    return Judgement(Status.PASS, f"{good} of {want} supplies present and healthy{spare_text}, "
                     f"redundancy intact{noted}", good, "PSUs", expected, details=details,
                     better="higher")


__all__ = ["HEALTH_STATES", "SUPPLY_STATES", "AssumedHealth", "AssumedState",
           "PsuRedfishParams", "VendorState", "judge_psu_redfish", "status_findings"]
