"""``redundancy.psu_redfish``'s params and judge (the check is declared in :mod:`.cooling`,
with the other Redfish check), and the DMTF status allow-lists both Redfish judges use.

Every supply must be on the allow-list below, exactly ``hardware.psu.count`` of them, and
every redundancy group Enabled and OK. A supply is healthy when it is ``Enabled`` with
Health ``OK``, or a healthy spare: ``StandbySpare`` with Health ``OK``, in a profile with
redundancy, no more spares than the profile's redundancy has (N+1: 1, N+2: 2, N+N: half),
and a redundancy group the BMC reports. Resource.State's ``StandbySpare`` is "part of a
redundancy set and awaits a failover or other external action to activate it", and it
"may become available automatically as part of a failover": that is the ``+M`` of an N+M
set (the dgx-h100 profile's 4+2, "two stand in for failed ones"), as long as the other N
carry the load. ``StandbyOffline`` awaits an external action (no automatic failover) and
stays a fault.

A ``Status.State`` outside DMTF's enumeration (vendors print ``Standby``, which could be
either of the two) is parsed and reported as an unknown state, an error, never taken as
healthy; a profile may map it to a DMTF state with the document that says so
(``vendor_states``), and the result then names the mapping.

>>> PsuRedfishParams(vendor_states={"Standby": {"means": "StandbySpare",
...     "basis": "vendor BMC manual 2.1: hot spare"}}).vendor_states["Standby"].means
'StandbySpare'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rackgate.checks.base import Params
from rackgate.checks.findings import Finding, message, verdict
from rackgate.checks.redundancy.psu import max_input_watts
from rackgate.figures import figure
from rackgate.model import Judgement, Status
from rackgate.parsers.redfish_power import PowerRecord, PowerSupplyState
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


class PsuRedfishParams(Params):
    chassis: str = Field(default="1", pattern=ID_PATTERN,
                         description="Chassis Id (host var wins)")
    request_timeout_s: int = Field(default=10, ge=1, le=120)
    vendor_states: dict[str, VendorState] = Field(
        default_factory=dict, description="vendor Status.State values (not DMTF's) and the "
        "DMTF state each means, with its basis; other vendor values are errors")

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


def _supply(s: PowerSupplyState, params: PsuRedfishParams,
            notes: list[str]) -> tuple[str | None, list[Finding]]:
    """(the DMTF state ``s`` is judged as, its findings but for the spare rules)."""
    what = f"{s.name} ({s.id})" if s.state == "Absent" else s.name
    state = s.state
    if state is not None and state in params.vendor_states:
        rule = params.vendor_states[state]
        notes.append(f"{s.name}'s vendor state {state!r} read as {rule.means} "
                     f"({rule.basis})")
        state = rule.means
    elif state is not None and state not in SUPPLY_STATES:
        return state, [(Status.ERROR, f"{what} reports Status.State {state!r}, not a DMTF "
                                      "Resource.State (a vendor value?): whether it carries "
                                      "load or would take over on a failure is unknown; "
                                      "map it in checks.redundancy.psu_redfish.params."
                                      "vendor_states, with its basis")]
    return state, status_findings(what, state, s.health, spare=True)


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


def judge_psu_redfish(rec: PowerRecord, params: PsuRedfishParams,
                      thresholds: Mapping[str, Threshold], hardware: Hardware | None = None,
                      ) -> Judgement:
    """Exactly ``hardware.psu.count`` supplies (one the profile does not count is foreign
    hardware, a failure like a missing one), every one Enabled and OK or a healthy spare
    (module docstring); every redundancy group Enabled and OK. Absent bays, other states
    and other health values are findings; values outside the DMTF enumerations are errors
    unless ``vendor_states`` maps them; a supply listed twice is refused by the parser."""
    if hardware is None or hardware.psu is None:
        return Judgement(Status.SKIP, "the profile expects no power supplies")
    want, mode = hardware.psu.count, hardware.psu.redundancy
    findings: list[Finding] = []
    notes: list[str] = []
    spares: list[str] = []
    good = failed = 0
    # the same physical bound as redundancy.psu_ipmi's (its basis is given there)
    max_w = max_input_watts(hardware.psu)
    for s in rec.supplies:
        state, f = _supply(s, params, notes)
        findings += f
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
    expected = f"{want} present and healthy ({mode})"
    details: dict[str, float | str] = {"source": rec.source, "supplies": len(rec.supplies),
                                       "spares": len(spares)}
    watts = [s.input_watts for s in rec.supplies if s.input_watts is not None]
    if watts:
        details["input_watts"] = round(sum(watts), 1)
    if not rec.supplies and not any(st is Status.FAIL for st, _ in findings):
        return Judgement(Status.ERROR, f"the BMC reported no power supply ({rec.source})",
                         expected=expected, details=details)
    if len(rec.supplies) != want:
        findings.insert(0, (Status.FAIL, f"the BMC lists {len(rec.supplies)} supplies, the "
                                         f"profile expects {want}"))
    elif good < want and failed:  # a shortfall of unknown states alone stays an error
        findings.insert(0, (Status.FAIL, f"{good} of {want} supplies present and healthy"))
    status = verdict(findings)
    if status > Status.WARN:
        return Judgement(status, message(findings), good, "PSUs", expected,
                         details=details, better="higher")
    if mode != "none" and not rec.redundancy:
        findings.append((Status.WARN, f"{good} supplies healthy, but the BMC reports no "
                                      f"redundancy group: {mode} cannot be confirmed"))
    spare_text = f" ({len(spares)} StandbySpare: {', '.join(spares)})" if spares else ""
    noted = "; " + "; ".join(notes) if notes else ""
    if findings:
        return Judgement(Status.WARN, "; ".join(m for _, m in findings) + noted, good, "PSUs",
                         expected, details=details, better="higher")
    return Judgement(Status.PASS, f"{good} of {want} supplies present and healthy{spare_text}, "
                     f"redundancy intact{noted}", good, "PSUs", expected, details=details,
                     better="higher")


__all__ = ["HEALTH_STATES", "SUPPLY_STATES", "PsuRedfishParams", "VendorState",
           "judge_psu_redfish", "status_findings"]
