"""Redfish checks: power-supply redundancy and the liquid-cooling CDU, read from the BMC.

Both run ``python3 -m rackgate.programs.redfish`` (the collector: basic auth as
``rackgate_bmc_user``, the password read from a private file the collector makes from
``rackgate_bmc_password``, one JSON document of raw resources).

``redundancy.psu_redfish``: the chassis' supplies (``rackgate_bmc_url``, chassis
``rackgate_bmc_chassis`` or the ``chassis`` param), judged by :mod:`.redfish_power`: every
supply Enabled and OK or a healthy spare within the profile's redundancy (the allow-list
``SUPPLY_STATES`` says why each other DMTF state is not), exactly ``hardware.psu.count`` of
them present (bays the BMC lists ``Absent`` are named, not counted), and every redundancy
group Enabled and OK.

``cooling.cdu``: the rack's coolant distribution unit (``rackgate_cdu_url``, CDU ``cdu``
param). A leak detector in any state but OK fails the check, whatever else holds; so does
the CDU or a connector that is not Enabled and OK. Every connector of the judged loop must
report supply and return temperature and flow, each physically plausible (bounds and basis
above ``CduParams``); the worst of each (maximum temperature, minimum flow) is judged
against the profile's thresholds; a missing or implausible reading is an error. The result
carries each metric judged (``metrics``: its figure, band and status), so that the reports
show the one that failed; its headline figure stays the supply temperature. Hardware
profiles have no cooling field yet: the check applies wherever the profile lists it, so
list it for liquid-cooled racks only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from rackgate.checks.redundancy.psu_redfish import (
    HEALTH_STATES,
    ID_PATTERN,
    PsuRedfishParams,
    judge_psu_redfish,
)
from rackgate.checks.redundancy.psu_redfish import status_findings as _status_findings
from rackgate.checks.shared.base import (
    SECRET_FILE,
    CommandError,
    ControlCheck,
    Params,
    Scope,
    compare,
    metric_of,
)
from rackgate.figures import figure
from rackgate.model import Judgement, Metric, Status
from rackgate.parsers.redfish import (
    CoolingRecord,
    parse_redfish_cooling,
    parse_redfish_power,
)
from rackgate.profile import Hardware, Threshold

_ID = ID_PATTERN


# Physical plausibility of the CDU's readings (an implausible reading is unusable evidence,
# an error, not a measurement to compare with a threshold):
# - temperatures: a flowing liquid loop is neither frozen nor boiling. Water freezes at 0 C
#   and boils at 100 C at 1 atm; a glycol loop (PG-25 freezes near -10 C) may lower
#   ``coolant_freezing_point_c``. A loop pressurised to ~3 bar boils near 134 C, so no
#   liquid-cooling reading above 100 C is taken as real either way.
# - flow: a CDU's flow is bounded by its pipework. The largest CDU connections are DN200
#   (8 in); water at 5 m/s, well above the ~3 m/s design velocity of water piping, moves
#   pi x 0.1 m^2 x 5 m/s = 0.157 m^3/s = 9,425 L/min through one. Hence a 10,000 L/min
#   default ceiling (``max_flow_lpm``); a negative flow is no reading a flow meter gives.
# - pressure: no gauge reads below vacuum, -101.325 kPa relative to 1 atm.
BOILING_POINT_C = 100.0
VACUUM_KPA = -101.325


class CduParams(Params):
    cdu: str = Field(default="1", pattern=_ID, description="ThermalEquipment/CDUs/<cdu>")
    loop: Literal["secondary", "primary", "all"] = Field(
        default="secondary", description="connectors judged: the rack side by default")
    coolant_freezing_point_c: float = Field(
        default=0.0, ge=-60.0, le=0.0, description="readings below it are implausible "
        "(water 0 C; lower it for a glycol mix, e.g. about -10 C for PG-25)")
    max_flow_lpm: float = Field(default=10_000.0, gt=0, le=100_000.0,
                                description="flow readings above it are implausible")
    request_timeout_s: int = Field(default=10, ge=1, le=120)


def _url(hostvars: Mapping[str, Any], var: str) -> str:
    url = hostvars.get(var)
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise CommandError(f"{var} must be the Redfish service's http(s) URL, got {url!r}")
    return url.rstrip("/")


def _collector(hostvars: Mapping[str, Any]) -> list[str]:
    """The collector and its credentials: the user in clear, the password from the file
    that SECRET_FILE stands for (never the password itself: argv is public in ``ps``)."""
    user = hostvars.get("rackgate_bmc_user", "admin")
    if not isinstance(user, str) or not user or user.startswith("-") or any(
            not c.isprintable() for c in user):
        raise CommandError(f"rackgate_bmc_user must be a user name in clear (vault the "
                           f"password, rackgate_bmc_password), got {user!r}")
    return ["python3", "-m", "rackgate.programs.redfish", "--user", user, "--password-file",
            SECRET_FILE]


def psu_command(params: PsuRedfishParams, hostvars: Mapping[str, Any]) -> list[str]:
    """argv of the power collector.

    >>> psu_command(PsuRedfishParams(), {"rackgate_bmc_url": "https://bmc1"})[3:9]
    ['--user', 'admin', '--password-file', '{rackgate:secret-file}', '--base-url', \
'https://bmc1']
    """
    chassis = str(hostvars.get("rackgate_bmc_chassis", params.chassis))
    if not chassis or "/" in chassis:
        raise CommandError(f"rackgate_bmc_chassis must be a Chassis Id, got {chassis!r}")
    return [*_collector(hostvars), "--base-url", _url(hostvars, "rackgate_bmc_url"),
            "--chassis", chassis, "--timeout", str(params.request_timeout_s), "power"]


def cdu_command(params: CduParams, hostvars: Mapping[str, Any]) -> list[str]:
    return [*_collector(hostvars), "--base-url", _url(hostvars, "rackgate_cdu_url"),
            "--cdu", params.cdu, "--timeout", str(params.request_timeout_s), "cooling"]


_METRICS = {  # metric -> (connector attribute, worst-case aggregate, wording)
    "supply_temp_c": ("supply_temp_c", max, "supply temperature"),
    "return_temp_c": ("return_temp_c", max, "return temperature"),
    "flow_lpm": ("flow_lpm", min, "coolant flow"),
}


def _implausible(attr: str, value: float, params: CduParams) -> str | None:
    """Why a reading cannot be real (bounds and their basis above CduParams), or None."""
    if attr == "flow_lpm":
        lo, hi, unit = 0.0, params.max_flow_lpm, "L/min"
    elif attr.endswith("_temp_c"):
        lo, hi, unit = params.coolant_freezing_point_c, BOILING_POINT_C, "C"
    else:
        lo, hi, unit = VACUUM_KPA, float("inf"), "kPa"
    if lo <= value <= hi:
        return None
    return (f"{figure(value)} {unit} is outside the physically plausible {figure(lo)} to "
            f"{figure(hi)} {unit}")


def _cdu_findings(rec: CoolingRecord, params: CduParams) -> tuple[list[str], list[str]]:
    """(fails, errors) about the CDU itself: the one unit the check asked for, healthy."""
    fails: list[str] = []
    errors: list[str] = []
    if not rec.cdus:
        errors.append("no CoolingUnit resource: CDU health unknown")
    elif len(rec.cdus) > 1:
        errors.append(f"{len(rec.cdus)} CoolingUnit resources "
                      f"({', '.join(u.id for u in rec.cdus)}), expected only CDU {params.cdu}")
    for u in rec.cdus:
        if u.id.rstrip("/").rsplit("/", 1)[-1] != params.cdu:
            errors.append(f"CoolingUnit {u.id} is not the CDU asked for ({params.cdu})")
        for st, text in _status_findings(f"CDU {u.name}", u.state, u.health):
            (fails if st is Status.FAIL else errors).append(text)
        if u.health_rollup is not None and u.health_rollup not in HEALTH_STATES:
            errors.append(f"CDU {u.name} HealthRollup {u.health_rollup!r} is not OK, Warning "
                          "or Critical")
        elif u.health_rollup not in (None, "OK"):
            fails.append(f"CDU {u.name} is {u.state or '?'}, health {u.health or 'unknown'}, "
                         f"rollup {u.health_rollup}")
    return fails, errors


def judge_cdu(rec: CoolingRecord, params: CduParams, thresholds: Mapping[str, Threshold],
              hardware: Hardware | None = None) -> Judgement:
    """A leak is a fail whatever else holds; then health; then readings vs thresholds.

    Expected: one leak detector at least, every one OK; the one CDU ``params.cdu``, Enabled
    and OK; at least one connector on the judged loop, each Enabled and OK and each
    reporting every thresholded reading, each reading physically plausible."""
    fails: list[str] = []
    errors: list[str] = []
    for d in rec.leak_detectors:
        if d.state != "OK":
            fails.append(f"LEAK: detector {d.name} reports {d.state or 'no DetectorState'}")
    if not rec.leak_detectors:
        errors.append("no leak detector reported: a leak cannot be ruled out")
    f, e = _cdu_findings(rec, params)
    fails += f
    errors += e
    loop = [c for c in rec.connectors if params.loop == "all" or c.loop == params.loop]
    for c in loop:
        for st, text in _status_findings(f"connector {c.name}", c.state, c.health):
            (fails if st is Status.FAIL else errors).append(text)
        if c.supply_pressure_kpa is not None and \
                (why := _implausible("pressure", c.supply_pressure_kpa, params)):
            errors.append(f"connector {c.name} supply pressure {why}")
    details: dict[str, float | str] = {"connectors": len(loop), "loop": params.loop}
    main: Judgement | None = None
    metrics: list[Metric] = []  # each metric with its own figure, band and status
    for metric in ("supply_temp_c", "flow_lpm", "return_temp_c"):
        attr, worst, what = _METRICS[metric]
        if not loop:
            errors.append(f"no {what} reading on the {params.loop} connectors")
            metrics.append(metric_of(metric, thresholds[metric]))
            continue
        values = []
        for c in loop:
            v = getattr(c, attr)
            if v is None:
                errors.append(f"connector {c.name} ({c.id}): no {what} reading")
            elif why := _implausible(attr, v, params):
                errors.append(f"connector {c.name} {what} {why}: implausible evidence")
            else:
                values.append(v)
        if not values:
            metrics.append(metric_of(metric, thresholds[metric]))
            continue
        value = float(worst(values))
        details[metric] = value
        j = compare(value, thresholds[metric], what)
        metrics.append(metric_of(metric, thresholds[metric], j))
        main = main or j
        if j.status is Status.FAIL:
            fails.append(j.message)
        elif j.status is not Status.PASS:
            errors.append(j.message)
    pressures = [c.supply_pressure_kpa for c in loop if c.supply_pressure_kpa is not None]
    if pressures:
        details["supply_pressure_kpa"] = max(pressures)
    status = Status.FAIL if fails else Status.ERROR if errors else Status.PASS
    findings = fails + errors
    message = "; ".join(findings) if findings else \
        f"no leak, CDU healthy; {main.message if main else ''}"
    if main is None:
        return Judgement(status, message, details=details, metrics=tuple(metrics))
    return Judgement(status, message, main.measured, main.unit, main.expected,
                     main.percent_of_limit, details, main.better, tuple(metrics))


CHECKS = (
    ControlCheck(
        name="redundancy.psu_redfish",
        scope=Scope.NODE,
        tags=frozenset({"redundancy", "power", "redfish"}),
        description="Power supplies present, healthy and redundant (Redfish, from the BMC)",
        params_model=PsuRedfishParams,
        metrics=frozenset(),
        command=psu_command,
        parse=parse_redfish_power,
        judge=judge_psu_redfish,
        applies=lambda hw: None if hw.psu is not None else "the profile has no power supplies",
        secret_var="rackgate_bmc_password",
    ),
    ControlCheck(
        name="cooling.cdu",
        scope=Scope.NODE,
        tags=frozenset({"cooling", "redfish"}),
        description="Liquid-cooling CDU: no leak, healthy, supply/return temperature and flow",
        params_model=CduParams,
        metrics=frozenset(_METRICS),
        better={m: "higher" if m == "flow_lpm" else "lower" for m in _METRICS},
        command=cdu_command,
        parse=parse_redfish_cooling,
        judge=judge_cdu,
        # Hardware has no cooling field yet: list this check only in liquid-cooled profiles
        applies=lambda hw: None,
        secret_var="rackgate_bmc_password",
    ),
)

__all__ = ["CHECKS", "CduParams", "PsuRedfishParams", "judge_cdu", "judge_psu_redfish"]
