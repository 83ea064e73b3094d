"""Parsers for Redfish power and cooling resources (DMTF DSP0268 / DSP2046 schemas).

Input is JSON text: the collector's document or raw resources, read by
:mod:`.redfish_json` (``$expand``-ed collections included). The power parser lives in
:mod:`.redfish_power` (``parse_redfish_power``, re-exported here); this module reads cooling:

- ``CoolingUnit`` (``Status`` with ``Health`` and ``HealthRollup``),
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

from rackgate.parsers import ParseError
from rackgate.parsers.redfish.json_format import (
    COLLECTOR,
    Resources,
    list_at,
    name_of,
    reading_at,
    resource_type,
    resources,
    status_at,
    str_at,
)
from rackgate.parsers.redfish.power import (
    PowerRecord,
    PowerSupplyState,
    RedundancyGroup,
    parse_redfish_power,
)

# ---------------------------------------------------------------- records


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
            state, health, rollup = status_at(res, where)
            cdus.append(CoolingUnitState(key, name_of(res, where, key), state, health, rollup))
        elif kind == "CoolantConnector":
            state, health, _ = status_at(res, where)
            connectors.append(CoolantConnectorReading(
                id=key, name=name_of(res, where, key), loop=_loop(key), state=state,
                health=health,
                supply_temp_c=reading_at(res, "SupplyTemperatureCelsius", where),
                return_temp_c=reading_at(res, "ReturnTemperatureCelsius", where),
                flow_lpm=reading_at(res, "FlowLitersPerMinute", where),
                supply_pressure_kpa=reading_at(res, "SupplyPressurekPa", where),
                return_pressure_kpa=reading_at(res, "ReturnPressurekPa", where)))
        elif kind == "LeakDetection":
            for i, group in enumerate(list_at(res, "LeakDetectorGroups", where)):
                gw = f"{where}.LeakDetectorGroups[{i}]"
                for j, d in enumerate(list_at(group, "Detectors", gw)):
                    w = f"{where}.LeakDetectorGroups[{i}].Detectors[{j}]"
                    uri = str_at(d, "DataSourceUri", w) or f"{key}#{i}/{j}"
                    name = str_at(d, "DeviceName", w) or uri
                    detectors.setdefault(uri, LeakDetectorState(uri, name,
                                                                str_at(d, "DetectorState", w)))
        elif kind == "LeakDetector":
            # the resource itself wins over a summary that points at it
            detectors[key] = LeakDetectorState(key, name_of(res, where, key),
                                               str_at(res, "DetectorState", where))
    if not (cdus or connectors or detectors
            or any(resource_type(r) == "LeakDetection" for r in found.values())):
        types = sorted({resource_type(r) or "untyped" for r in found.values()})
        raise ParseError(f"{fmt}: no CoolingUnit, CoolantConnector, LeakDetection or "
                         f"LeakDetector resource (found: {', '.join(types) or 'nothing'})")
    return CoolingRecord(tuple(cdus), tuple(connectors), tuple(detectors.values()))


__all__ = ["COLLECTOR", "CoolantConnectorReading", "CoolingRecord", "CoolingUnitState",
           "LeakDetectorState", "PowerRecord", "PowerSupplyState", "RedundancyGroup",
           "Resources", "parse_redfish_cooling", "parse_redfish_power", "resource_type",
           "resources"]
