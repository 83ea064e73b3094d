"""Parser for Redfish power resources (DMTF DSP0268 / DSP2046 schemas): the supplies of a
chassis and their redundancy, from the collector's document or raw resources
(:mod:`.redfish_json` reads both, ``$expand``-ed collections included).

Resources are told apart by ``@odata.type`` (``#PowerSupply.v1_6_0.PowerSupply`` is a
``PowerSupply``). Schemas read: ``Power`` (legacy, deprecated in 2020.4: ``PowerSupplies[]``
with ``MemberId``, ``Status``, ``PowerInputWatts``, ``LastPowerOutputWatts``,
``PowerCapacityWatts``; ``Redundancy[]`` with ``Mode``, ``MinNumNeeded``, ``Status``),
``PowerSubsystem`` (``PowerSupplyRedundancy[]`` with ``RedundancyType``,
``MinNeededInGroup``, ``Status``), ``PowerSupply`` (``Status``, ``PowerCapacityWatts``,
``Metrics`` link, or the metrics inline when expanded), ``PowerSupplyCollection`` (its
members, links or whole supplies) and ``PowerSupplyMetrics`` (``InputPowerWatts.Reading``).

``Status.State``, ``Status.Health`` and ``Status.HealthRollup`` are kept as given, a
vendor value such as ``Standby`` or an absent one (None) included: the judge decides what
each means. A bay without a supply is listed too (``State`` ``Absent``).
``PowerCapacityWatts`` may be a decimal string (``"3300"``); anything else that is not a
non-negative finite number is a ParseError naming the field and the value.

>>> rec = parse_redfish_power('{"@odata.type": "#Power.v1_7_3.Power", "@odata.id": "/P", '
...     '"PowerSupplies": [{"MemberId": "0", "Status": {"State": "Standby", "Health": "OK"}, '
...     '"PowerCapacityWatts": "3300"}]}')
>>> [(s.name, s.state, s.capacity_watts) for s in rec.supplies]
[('0', 'Standby', 3300.0)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.redfish.json_format import (
    Resources,
    int_at,
    link_at,
    list_at,
    name_of,
    num_at,
    obj_at,
    reading_at,
    resource_type,
    resources,
    status_at,
    str_at,
    watts_rating_at,
)


@dataclass(frozen=True)
class PowerSupplyState:
    """One power supply as the BMC reports it (``Status.State`` ``Absent`` = empty bay)."""

    id: str  # @odata.id of the resource, or of the legacy array member
    name: str
    state: str | None  # Status.State: Enabled, Absent, StandbySpare... or a vendor value
    health: str | None  # Status.Health: OK, Warning, Critical (often absent when Absent)
    input_watts: float | None
    output_watts: float | None
    capacity_watts: float | None
    health_rollup: str | None = None  # Status.HealthRollup: the supply and its dependents


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


def _legacy_supply(member: dict[str, Any], where: str, i: int) -> PowerSupplyState:
    state, health, rollup = status_at(member, where)
    return PowerSupplyState(
        id=str_at(member, "@odata.id", where) or f"{where}/{i}",
        name=str_at(member, "Name", where) or str_at(member, "MemberId", where) or f"PSU {i}",
        state=state, health=health,
        input_watts=num_at(member, "PowerInputWatts", where),
        output_watts=num_at(member, "LastPowerOutputWatts", where),
        capacity_watts=watts_rating_at(member, "PowerCapacityWatts", where),
        health_rollup=rollup,
    )


def _metrics(res: dict[str, Any], found: Resources, where: str) -> tuple[str, dict[str, Any]]:
    """The supply's PowerSupplyMetrics: collected on its own, or inline when expanded."""
    metrics_id = link_at(res, "Metrics", where)
    if metrics_id is None:
        return "", {}
    if metrics_id in found:
        return metrics_id, found[metrics_id]
    inline = obj_at(res, "Metrics", where)
    return metrics_id, inline if "@odata.type" in inline else {}


def _supply(key: str, res: dict[str, Any], found: Resources) -> PowerSupplyState:
    where = f"PowerSupply {key}"
    state, health, rollup = status_at(res, where)
    metrics_id, metrics = _metrics(res, found, where)
    mw = f"PowerSupplyMetrics {metrics_id}"
    return PowerSupplyState(id=key, name=name_of(res, where, key), state=state, health=health,
                            input_watts=reading_at(metrics, "InputPowerWatts", mw),
                            output_watts=reading_at(metrics, "OutputPowerWatts", mw),
                            capacity_watts=watts_rating_at(res, "PowerCapacityWatts", where),
                            health_rollup=rollup)


def _legacy(fmt: str, where: str, res: dict[str, Any]) -> tuple[list[PowerSupplyState],
                                                                list[RedundancyGroup]]:
    members = list_at(res, "PowerSupplies", where)
    supplies = [_legacy_supply(m, f"{where}.PowerSupplies[{i}]", i)
                for i, m in enumerate(members)]
    for field in ("@odata.id", "MemberId"):
        ids = [m.get(field) for m in members if m.get(field) is not None]
        twice = sorted({str(x) for x in ids if ids.count(x) > 1})
        if twice:
            raise ParseError(f"{fmt}: {where}.PowerSupplies lists {field} "
                             f"{', '.join(twice)} twice (duplicated output?)")
    groups = []
    for i, g in enumerate(list_at(res, "Redundancy", where)):
        w = f"{where}.Redundancy[{i}]"
        state, health, _ = status_at(g, w)
        groups.append(RedundancyGroup(
            name=str_at(g, "Name", w) or f"Redundancy {i}", mode=str_at(g, "Mode", w),
            min_needed=int_at(g, "MinNumNeeded", w),
            max_supported=int_at(g, "MaxNumSupported", w), state=state, health=health))
    return supplies, groups


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
            supplies, found_groups = _legacy(fmt, where, res)
            legacy += supplies
            groups += found_groups
        elif kind == "PowerSubsystem":
            seen = True
            for i, g in enumerate(list_at(res, "PowerSupplyRedundancy", where)):
                w = f"{where}.PowerSupplyRedundancy[{i}]"
                state, health, _ = status_at(g, w)
                groups.append(RedundancyGroup(
                    name=f"PowerSupplyRedundancy {i}", mode=str_at(g, "RedundancyType", w),
                    min_needed=int_at(g, "MinNeededInGroup", w),
                    max_supported=int_at(g, "MaxSupportedInGroup", w), state=state,
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
