"""Redfish checks: power-supply redundancy and the liquid-cooling CDU, read from the BMC.

Both run ``python3 -m rackgate.redfish`` (the collector: basic auth, credentials from
``RACKGATE_BMC_USER`` / ``RACKGATE_BMC_PASSWORD``, one JSON document of raw resources).

``redundancy.psu_redfish``: the chassis' supplies (``rackgate_bmc_url``, chassis
``rackgate_bmc_chassis`` or the ``chassis`` param). Every supply must be present and
healthy, at least ``hardware.psu.count`` of them, and no redundancy group may be lost.

``cooling.cdu``: the rack's coolant distribution unit (``rackgate_cdu_url``, CDU ``cdu``
param). A leak detector in any state but OK fails the check, whatever else holds; so does
a CDU or connector whose health is not OK. Supply and return temperature (maximum over the
judged loop's connectors) and flow (minimum) are judged against the profile's thresholds;
a reading the CDU does not give is an error. Hardware profiles have no cooling field yet:
the check applies wherever the profile lists it, so list it for liquid-cooled racks only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rackgate.checks import Check, CommandError, Scope, compare
from rackgate.model import Judgement, Status
from rackgate.parsers.redfish import (
    CoolingRecord,
    PowerRecord,
    parse_redfish_cooling,
    parse_redfish_power,
)
from rackgate.profile import Hardware, Threshold

_ID = r"^[A-Za-z0-9._-]+$"


class PsuRedfishParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    chassis: str = Field(default="1", pattern=_ID, description="Chassis Id (host var wins)")
    request_timeout_s: int = Field(default=10, ge=1, le=120)
    timeout_s: int = Field(default=60, ge=5, description="kill the collector after this long")


class CduParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cdu: str = Field(default="1", pattern=_ID, description="ThermalEquipment/CDUs/<cdu>")
    loop: Literal["secondary", "primary", "all"] = Field(
        default="secondary", description="connectors judged: the rack side by default")
    request_timeout_s: int = Field(default=10, ge=1, le=120)
    timeout_s: int = Field(default=60, ge=5)


def _url(hostvars: Mapping[str, Any], var: str) -> str:
    url = hostvars.get(var)
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise CommandError(f"{var} must be the Redfish service's http(s) URL, got {url!r}")
    return url.rstrip("/")


def psu_command(params: PsuRedfishParams, hostvars: Mapping[str, Any]) -> list[str]:
    """argv of the power collector.

    >>> psu_command(PsuRedfishParams(), {"rackgate_bmc_url": "https://bmc1"})[3:6]
    ['--base-url', 'https://bmc1', '--chassis']
    """
    chassis = str(hostvars.get("rackgate_bmc_chassis", params.chassis))
    if not chassis or "/" in chassis:
        raise CommandError(f"rackgate_bmc_chassis must be a Chassis Id, got {chassis!r}")
    return ["python3", "-m", "rackgate.redfish", "--base-url", _url(hostvars, "rackgate_bmc_url"),
            "--chassis", chassis, "--timeout", str(params.request_timeout_s), "power"]


def cdu_command(params: CduParams, hostvars: Mapping[str, Any]) -> list[str]:
    return ["python3", "-m", "rackgate.redfish", "--base-url", _url(hostvars, "rackgate_cdu_url"),
            "--cdu", params.cdu, "--timeout", str(params.request_timeout_s), "cooling"]


def _healthy(state: str | None, health: str | None) -> bool:
    return state == "Enabled" and health == "OK"


def judge_psu_redfish(rec: PowerRecord, params: PsuRedfishParams,
                      thresholds: Mapping[str, Threshold], hardware: Hardware | None = None,
                      ) -> Judgement:
    """Count present, healthy supplies against the profile; any absent one fails."""
    if hardware is None or hardware.psu is None:
        return Judgement(Status.SKIP, "the profile expects no power supplies")
    want, mode = hardware.psu.count, hardware.psu.redundancy
    fails: list[str] = []
    for s in rec.supplies:
        if s.state == "Absent":
            fails.append(f"{s.name} ({s.id}) is absent")
        elif not _healthy(s.state, s.health):
            fails.append(f"{s.name} is {s.state or 'in no state'}, health {s.health or 'unknown'}")
    for g in rec.redundancy:
        if (g.state not in (None, "Enabled")) or (g.health not in (None, "OK")):
            fails.append(f"redundancy lost: {g.name} ({g.mode or 'mode?'}) is "
                         f"{g.state or '?'}, health {g.health or '?'}")
    good = sum(_healthy(s.state, s.health) for s in rec.supplies)
    expected = f">= {want} present and healthy ({mode})"
    details: dict[str, float | str] = {"source": rec.source, "supplies": len(rec.supplies)}
    watts = [s.input_watts for s in rec.supplies if s.input_watts is not None]
    if watts:
        details["input_watts"] = round(sum(watts), 1)
    if not rec.supplies and not fails:
        return Judgement(Status.ERROR, f"the BMC reported no power supply ({rec.source})",
                         expected=expected, details=details)
    if good < want:
        fails.insert(0, f"{good} of {want} supplies present and healthy")
    if fails:
        return Judgement(Status.FAIL, "; ".join(fails), good, "PSUs", expected,
                         details=details, better="higher")
    if mode != "none" and not rec.redundancy:
        return Judgement(Status.WARN, f"{good} supplies healthy, but the BMC reports no "
                         f"redundancy group: {mode} cannot be confirmed", good, "PSUs",
                         expected, details=details, better="higher")
    return Judgement(Status.PASS, f"{good} of {want} supplies present and healthy, redundancy "
                     "intact", good, "PSUs", expected, details=details, better="higher")


_METRICS = {  # metric -> (connector attribute, worst-case aggregate, wording)
    "supply_temp_c": ("supply_temp_c", max, "supply temperature"),
    "return_temp_c": ("return_temp_c", max, "return temperature"),
    "flow_lpm": ("flow_lpm", min, "coolant flow"),
}


def judge_cdu(rec: CoolingRecord, params: CduParams, thresholds: Mapping[str, Threshold],
              hardware: Hardware | None = None) -> Judgement:
    """A leak is a fail whatever else holds; then health; then readings vs thresholds."""
    fails: list[str] = []
    errors: list[str] = []
    for d in rec.leak_detectors:
        if d.state != "OK":
            fails.append(f"LEAK: detector {d.name} reports {d.state or 'no DetectorState'}")
    if not rec.leak_detectors:
        errors.append("no leak detector reported: a leak cannot be ruled out")
    for u in rec.cdus:
        bad = [h for h in (u.health, u.health_rollup) if h not in (None, "OK")]
        if bad or u.health is None:
            fails.append(f"CDU {u.name} is {u.state or '?'}, health {u.health or 'unknown'}"
                         + (f", rollup {u.health_rollup}" if u.health_rollup else ""))
    if not rec.cdus:
        errors.append("no CoolingUnit resource: CDU health unknown")
    loop = [c for c in rec.connectors if params.loop == "all" or c.loop == params.loop]
    for c in loop:
        if c.health not in (None, "OK"):
            fails.append(f"connector {c.name} health {c.health}")
    details: dict[str, float | str] = {"connectors": len(loop), "loop": params.loop}
    main: Judgement | None = None
    for metric in ("supply_temp_c", "flow_lpm", "return_temp_c"):
        attr, worst, what = _METRICS[metric]
        values = [v for c in loop if (v := getattr(c, attr)) is not None]
        if not values:
            errors.append(f"no {what} reading on the {params.loop} connectors")
            continue
        value = float(worst(values))
        details[metric] = value
        j = compare(value, thresholds[metric], what)
        main = main or j
        if j.status is not Status.PASS:
            fails.append(j.message)
    pressures = [c.supply_pressure_kpa for c in loop if c.supply_pressure_kpa is not None]
    if pressures:
        details["supply_pressure_kpa"] = max(pressures)
    status = Status.FAIL if fails else Status.ERROR if errors else Status.PASS
    findings = fails + errors
    message = "; ".join(findings) if findings else \
        f"no leak, CDU healthy; {main.message if main else ''}"
    if main is None:
        return Judgement(status, message, details=details)
    return Judgement(status, message, main.measured, main.unit, main.expected,
                     main.percent_of_limit, details, main.better)


CHECKS = (
    Check(
        name="redundancy.psu_redfish",
        scope=Scope.NODE,
        tags=frozenset({"redundancy", "power", "redfish"}),
        description="Power supplies present, healthy and redundant (Redfish, from the BMC)",
        params_model=PsuRedfishParams,
        metrics=frozenset(),
        command=psu_command,
        timeout_s=lambda p: int(p.timeout_s),
        parse=parse_redfish_power,
        judge=judge_psu_redfish,
        applies=lambda hw: None if hw.psu is not None else "the profile has no power supplies",
        runs_on="control",
        secret_env={"RACKGATE_BMC_USER": "rackgate_bmc_user",
                    "RACKGATE_BMC_PASSWORD": "rackgate_bmc_password"},
    ),
    Check(
        name="cooling.cdu",
        scope=Scope.NODE,
        tags=frozenset({"cooling", "redfish"}),
        description="Liquid-cooling CDU: no leak, healthy, supply/return temperature and flow",
        params_model=CduParams,
        metrics=frozenset(_METRICS),
        command=cdu_command,
        timeout_s=lambda p: int(p.timeout_s),
        parse=parse_redfish_cooling,
        judge=judge_cdu,
        # Hardware has no cooling field yet: list this check only in liquid-cooled profiles
        applies=lambda hw: None,
        runs_on="control",
        secret_env={"RACKGATE_BMC_USER": "rackgate_bmc_user",
                    "RACKGATE_BMC_PASSWORD": "rackgate_bmc_password"},
    ),
)

__all__ = ["CHECKS", "CduParams", "PsuRedfishParams", "judge_cdu", "judge_psu_redfish"]
