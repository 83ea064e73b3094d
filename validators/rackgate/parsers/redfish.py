"""Parsers for Redfish power and cooling resources (DMTF DSP0268 / DSP2046 schemas).

Input is JSON text: either the document ``python -m rackgate.programs.redfish`` prints
(``{"collector": "rackgate.redfish", "resources": {<@odata.id>: <resource>, ...}}``) or one
or more raw Redfish resources one after the other, as a BMC returns them. Lines before
the first line that starts with ``{`` are ignored (fixture headers, warnings).

Resources are told apart by ``@odata.type`` (``#PowerSupply.v1_6_0.PowerSupply`` is a
``PowerSupply``). Schemas read:

- power: ``Power`` (legacy, deprecated in 2020.4: ``PowerSupplies[]`` with ``MemberId``,
  ``Status``, ``PowerInputWatts``, ``LastPowerOutputWatts``, ``PowerCapacityWatts``;
  ``Redundancy[]`` with ``Mode``, ``MinNumNeeded``, ``Status``), ``PowerSubsystem``
  (``PowerSupplyRedundancy[]`` with ``RedundancyType``, ``MinNeededInGroup``, ``Status``),
  ``PowerSupply`` (``Status``, ``PowerCapacityWatts``, ``Metrics`` link) and
  ``PowerSupplyMetrics`` (``InputPowerWatts.Reading``).
- cooling: ``CoolingUnit`` (``Status`` with ``Health`` and ``HealthRollup``),
  ``CoolantConnector`` (sensor excerpts ``SupplyTemperatureCelsius``,
  ``ReturnTemperatureCelsius``, ``FlowLitersPerMinute``, ``SupplyPressurekPa``,
  ``ReturnPressurekPa``, each ``{"Reading": n}``), ``LeakDetection``
  (``LeakDetectorGroups[].Detectors[]`` with ``DeviceName`` and ``DetectorState``) and
  ``LeakDetector`` (``DetectorState``: ``OK``, ``Warning`` or ``Critical``).

>>> rec = parse_redfish_cooling('{"@odata.type": "#LeakDetector.v1_2_0.LeakDetector", '
...     '"@odata.id": "/redfish/v1/X/LeakDetectors/Tray", "Name": "Tray", '
...     '"DetectorState": "Critical"}')
>>> [(d.name, d.state) for d in rec.leak_detectors]
[('Tray', 'Critical')]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.strict_json import decode, finite

COLLECTOR = "rackgate.redfish"
Resources = dict[str, dict[str, Any]]


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class PowerSupplyState:
    """One power supply as the BMC reports it (``Status.State`` ``Absent`` = empty bay)."""

    id: str  # @odata.id of the resource, or of the legacy array member
    name: str
    state: str | None  # Status.State: Enabled, Absent, StandbyOffline, UnavailableOffline...
    health: str | None  # Status.Health: OK, Warning, Critical (often absent when Absent)
    input_watts: float | None
    output_watts: float | None
    capacity_watts: float | None


@dataclass(frozen=True)
class RedundancyGroup:
    name: str
    mode: str | None  # legacy Mode (N+m, Sharing, Failover) or RedundancyType (NPlusM...)
    min_needed: int | None  # MinNumNeeded / MinNeededInGroup
    max_supported: int | None
    state: str | None  # Status.State: Enabled, or e.g. UnavailableOffline when redundancy is lost
    health: str | None


@dataclass(frozen=True)
class PowerRecord:
    source: str  # "PowerSubsystem" or "Power": which schema the supplies came from
    supplies: tuple[PowerSupplyState, ...]
    redundancy: tuple[RedundancyGroup, ...]


@dataclass(frozen=True)
class CoolingUnitState:
    id: str
    name: str
    state: str | None
    health: str | None
    health_rollup: str | None


@dataclass(frozen=True)
class CoolantConnectorReading:
    """One coolant connector; readings in Celsius, litres per minute and kPa."""

    id: str
    name: str
    loop: str  # "primary" (facility side), "secondary" (rack side) or "other"
    state: str | None
    health: str | None
    supply_temp_c: float | None
    return_temp_c: float | None
    flow_lpm: float | None
    supply_pressure_kpa: float | None
    return_pressure_kpa: float | None


@dataclass(frozen=True)
class LeakDetectorState:
    id: str  # resource @odata.id, or the DataSourceUri of a LeakDetection group entry
    name: str
    state: str | None  # DetectorState: OK, Warning, Critical; None when not reported


@dataclass(frozen=True)
class CoolingRecord:
    cdus: tuple[CoolingUnitState, ...]
    connectors: tuple[CoolantConnectorReading, ...]
    leak_detectors: tuple[LeakDetectorState, ...]


# ---------------------------------------------------------------- reading the JSON


def _start(text: str, fmt: str) -> int:
    if text.lstrip().startswith("{"):
        return text.index("{")
    pos = text.find("\n{")
    if pos < 0:
        raise ParseError(f"{fmt}: no line starts with '{{' (not Redfish JSON)")
    return pos + 1


def _add(out: Resources, key: str, res: dict[str, Any], fmt: str) -> None:
    norm = key.rstrip("/") or key
    if norm in {k.rstrip("/") or k for k in out}:
        raise ParseError(f"{fmt}: resource {key!r} appears twice (duplicated output?)")
    out[key] = res


def resources(text: str, fmt: str = "Redfish JSON") -> Resources:
    """The resources in ``text`` keyed by ``@odata.id`` (in the order given); a resource
    given twice, or a key twice in one object, is a ParseError (strict_json)."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError(f"{fmt}: the output is empty")
    pos = _start(text, fmt)
    out: Resources = {}
    while pos < len(text):
        doc, pos = decode(text, fmt, pos)
        if not isinstance(doc, dict):
            raise ParseError(f"{fmt}: a top-level value is a {type(doc).__name__}, "
                             "not a Redfish resource object")
        if doc.get("collector") == COLLECTOR:
            found = doc.get("resources")
            if not isinstance(found, dict):
                raise ParseError(f"{fmt}: the collector document has no 'resources' object")
            for key, res in found.items():
                if not isinstance(res, dict):
                    raise ParseError(f"{fmt}: resources[{key!r}] is not an object")
                _add(out, str(key), res, fmt)
        elif "@odata.type" in doc or "@odata.id" in doc:
            _add(out, str(doc.get("@odata.id", f"#{len(out)}")), doc, fmt)
        else:
            raise ParseError(f"{fmt}: a top-level object has neither @odata.type nor @odata.id "
                             f"(keys: {', '.join(sorted(map(str, doc))[:8]) or 'none'})")
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
    _complete(out, fmt)
    return out


def _complete(found: Resources, fmt: str) -> None:
    """Every collection in the evidence is whole: all of its members were collected too.

    A collection lists its members (``Members``, counted by ``Members@odata.count``); one
    whose members are missing, miscounted or continued on another page
    (``Members@odata.nextLink``) would let a supply or a connector drop out unnoticed.
    """
    ids = {k.rstrip("/") or k for k in found}
    for key, res in found.items():
        if not resource_type(res).endswith("Collection"):
            continue
        where = f"{resource_type(res)} {key}"
        members = _list(res, "Members", where)
        count = res.get("Members@odata.count")
        if count is not None and count != len(members):
            raise ParseError(f"{fmt}: {where} counts {str(count)[:20]} members but lists "
                             f"{len(members)} (truncated output?)")
        if res.get("Members@odata.nextLink") is not None:
            raise ParseError(f"{fmt}: {where} continues on another page "
                             "(Members@odata.nextLink): not every member was collected")
        for i, m in enumerate(members):
            mid = _str(m, "@odata.id", f"{where}.Members[{i}]")
            if mid is None or (mid.rstrip("/") or mid) not in ids:
                raise ParseError(f"{fmt}: {where} lists member {mid!r}, which is not in the "
                                 "evidence (incomplete collection)")


def resource_type(res: dict[str, Any]) -> str:
    """``#CoolingUnit.v1_5_0.CoolingUnit`` -> ``CoolingUnit``.

    >>> resource_type({"@odata.type": "#Power.v1_7_3.Power"})
    'Power'
    """
    t = res.get("@odata.type")
    return t.rsplit(".", 1)[-1].lstrip("#") if isinstance(t, str) else ""


def _str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ParseError(f"{where}.{key} is not a string (got {value!r})")


def _num(obj: dict[str, Any], key: str, where: str) -> float | None:
    """A finite number, or None when absent; ParseError naming the field otherwise."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}.{key} is not a number (got {str(value)[:40]!r})")
    return finite(value, f"{where}.{key}")


def _int(obj: dict[str, Any], key: str, where: str) -> int | None:
    value = _num(obj, key, where)
    if value is None:
        return None
    if not value.is_integer():
        raise ParseError(f"{where}.{key} is {value:g}, not a whole number")
    return int(value)


def _obj(obj: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseError(f"{where}.{key} is not an object (got {value!r})")
    return value


def _list(obj: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ParseError(f"{where}.{key} is not an array of objects")
    return value


def _status(obj: dict[str, Any], where: str) -> tuple[str | None, str | None, str | None]:
    status = _obj(obj, "Status", where)
    w = f"{where}.Status"
    return _str(status, "State", w), _str(status, "Health", w), _str(status, "HealthRollup", w)


def _reading(obj: dict[str, Any], key: str, where: str) -> float | None:
    """A SensorExcerpt's ``Reading`` (``{"Reading": 30, "DataSourceUri": ...}``)."""
    return _num(_obj(obj, key, where), "Reading", f"{where}.{key}")


def _name(res: dict[str, Any], where: str, default: str) -> str:
    return _str(res, "Name", where) or _str(res, "Id", where) or default


def _link(res: dict[str, Any], key: str, where: str) -> str | None:
    return _str(_obj(res, key, where), "@odata.id", f"{where}.{key}")


# ---------------------------------------------------------------- power


def _legacy_supply(member: dict[str, Any], where: str, i: int) -> PowerSupplyState:
    state, health, _ = _status(member, where)
    return PowerSupplyState(
        id=_str(member, "@odata.id", where) or f"{where}/{i}",
        name=_str(member, "Name", where) or _str(member, "MemberId", where) or f"PSU {i}",
        state=state, health=health,
        input_watts=_num(member, "PowerInputWatts", where),
        output_watts=_num(member, "LastPowerOutputWatts", where),
        capacity_watts=_num(member, "PowerCapacityWatts", where),
    )


def _supply(key: str, res: dict[str, Any], found: Resources) -> PowerSupplyState:
    where = f"PowerSupply {key}"
    state, health, _ = _status(res, where)
    input_w = output_w = None
    metrics_id = _link(res, "Metrics", where)
    metrics = found.get(metrics_id) if metrics_id else None
    if metrics is not None:
        mw = f"PowerSupplyMetrics {metrics_id}"
        input_w = _reading(metrics, "InputPowerWatts", mw)
        output_w = _reading(metrics, "OutputPowerWatts", mw)
    return PowerSupplyState(id=key, name=_name(res, where, key), state=state, health=health,
                            input_watts=input_w, output_watts=output_w,
                            capacity_watts=_num(res, "PowerCapacityWatts", where))


def parse_redfish_power(text: str) -> PowerRecord:
    """Power supplies and their redundancy from Redfish Power / PowerSubsystem resources."""
    fmt = "Redfish power"
    found = resources(text, fmt)
    legacy: list[PowerSupplyState] = []
    modern: list[PowerSupplyState] = []
    groups: list[RedundancyGroup] = []
    seen = False
    for key, res in found.items():
        kind = resource_type(res)
        where = f"{kind} {key}"
        if kind == "Power":
            seen = True
            members = _list(res, "PowerSupplies", where)
            legacy += [_legacy_supply(m, f"{where}.PowerSupplies[{i}]", i)
                       for i, m in enumerate(members)]
            for field in ("@odata.id", "MemberId"):
                ids = [m.get(field) for m in members if m.get(field) is not None]
                twice = sorted({str(x) for x in ids if ids.count(x) > 1})
                if twice:
                    raise ParseError(f"{fmt}: {where}.PowerSupplies lists {field} "
                                     f"{', '.join(twice)} twice (duplicated output?)")
            for i, g in enumerate(_list(res, "Redundancy", where)):
                w = f"{where}.Redundancy[{i}]"
                state, health, _ = _status(g, w)
                groups.append(RedundancyGroup(
                    name=_str(g, "Name", w) or f"Redundancy {i}", mode=_str(g, "Mode", w),
                    min_needed=_int(g, "MinNumNeeded", w),
                    max_supported=_int(g, "MaxNumSupported", w), state=state, health=health))
        elif kind == "PowerSubsystem":
            seen = True
            for i, g in enumerate(_list(res, "PowerSupplyRedundancy", where)):
                w = f"{where}.PowerSupplyRedundancy[{i}]"
                state, health, _ = _status(g, w)
                groups.append(RedundancyGroup(
                    name=f"PowerSupplyRedundancy {i}", mode=_str(g, "RedundancyType", w),
                    min_needed=_int(g, "MinNeededInGroup", w),
                    max_supported=_int(g, "MaxSupportedInGroup", w), state=state,
                    health=health))
        elif kind == "PowerSupply":
            seen = True
            modern.append(_supply(key, res, found))
    if not seen:
        types = sorted({resource_type(r) or "untyped" for r in found.values()})
        raise ParseError(f"{fmt}: no Power, PowerSubsystem or PowerSupply resource "
                         f"(found: {', '.join(types) or 'nothing'})")
    # a BMC may offer both schemas for the same supplies: prefer the current one
    if modern:
        return PowerRecord("PowerSubsystem", tuple(modern), tuple(groups))
    return PowerRecord("Power", tuple(legacy), tuple(groups))


# ---------------------------------------------------------------- cooling


def _loop(key: str) -> str:
    if "/PrimaryCoolantConnectors/" in key:
        return "primary"
    if "/SecondaryCoolantConnectors/" in key:
        return "secondary"
    return "other"


def parse_redfish_cooling(text: str) -> CoolingRecord:
    """CDUs, their coolant connectors' readings and the leak detectors' states."""
    fmt = "Redfish cooling"
    found = resources(text, fmt)
    cdus: list[CoolingUnitState] = []
    connectors: list[CoolantConnectorReading] = []
    detectors: dict[str, LeakDetectorState] = {}
    for key, res in found.items():
        kind = resource_type(res)
        where = f"{kind} {key}"
        if kind == "CoolingUnit":
            state, health, rollup = _status(res, where)
            cdus.append(CoolingUnitState(key, _name(res, where, key), state, health, rollup))
        elif kind == "CoolantConnector":
            state, health, _ = _status(res, where)
            connectors.append(CoolantConnectorReading(
                id=key, name=_name(res, where, key), loop=_loop(key), state=state,
                health=health,
                supply_temp_c=_reading(res, "SupplyTemperatureCelsius", where),
                return_temp_c=_reading(res, "ReturnTemperatureCelsius", where),
                flow_lpm=_reading(res, "FlowLitersPerMinute", where),
                supply_pressure_kpa=_reading(res, "SupplyPressurekPa", where),
                return_pressure_kpa=_reading(res, "ReturnPressurekPa", where)))
        elif kind == "LeakDetection":
            for i, group in enumerate(_list(res, "LeakDetectorGroups", where)):
                gw = f"{where}.LeakDetectorGroups[{i}]"
                for j, d in enumerate(_list(group, "Detectors", gw)):
                    w = f"{where}.LeakDetectorGroups[{i}].Detectors[{j}]"
                    uri = _str(d, "DataSourceUri", w) or f"{key}#{i}/{j}"
                    name = _str(d, "DeviceName", w) or uri
                    detectors.setdefault(uri, LeakDetectorState(uri, name,
                                                                _str(d, "DetectorState", w)))
        elif kind == "LeakDetector":
            # the resource itself wins over a summary that points at it
            detectors[key] = LeakDetectorState(key, _name(res, where, key),
                                               _str(res, "DetectorState", where))
    if not (cdus or connectors or detectors
            or any(resource_type(r) == "LeakDetection" for r in found.values())):
        types = sorted({resource_type(r) or "untyped" for r in found.values()})
        raise ParseError(f"{fmt}: no CoolingUnit, CoolantConnector, LeakDetection or "
                         f"LeakDetector resource (found: {', '.join(types) or 'nothing'})")
    return CoolingRecord(tuple(cdus), tuple(connectors), tuple(detectors.values()))
