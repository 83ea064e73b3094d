"""Reading Redfish evidence: the resources in a text, and typed readers for their fields.

Shared by the power (:mod:`.redfish_power`) and cooling (:mod:`.redfish`) parsers. Input
is JSON text: either the document ``python -m rackgate.programs.redfish`` prints
(``{"collector": "rackgate.redfish", "resources": {<@odata.id>: <resource>, ...}}``) or one
or more raw Redfish resources one after the other, as a BMC returns them. Lines before
the first line that starts with ``{`` are ignored (fixture headers, warnings).

A collection may come with ``$expand`` applied (DSP0266, "Query parameters": each link in
``Members`` replaced by the resource it links, as power shelves return their
``PowerSupplyCollection``): its members are then resources of the evidence too. A member
also given as its own resource must be the same resource, else the copies were read at
different times and neither is the evidence. A property name longer than 256 characters,
or a string longer than 4,096, is no BMC's (Redfish names are words, URIs and values short):
a ParseError, as a damaged name would hide the property the judge reads.

>>> found = resources('{"@odata.type": "#PowerSupplyCollection.PowerSupplyCollection", '
...     '"@odata.id": "/P", "Members@odata.count": 1, "Members": [{"@odata.id": "/P/1", '
...     '"@odata.type": "#PowerSupply.v1_6_0.PowerSupply", "Status": {"State": "Enabled"}}]}')
>>> sorted(found), resource_type(found["/P/1"])
(['/P', '/P/1'], 'PowerSupply')
"""

from __future__ import annotations

import math
import re
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.damage import oversized
from rackgate.parsers.strict_json import decode, finite

COLLECTOR = "rackgate.redfish"
Resources = dict[str, dict[str, Any]]


def _start(text: str, fmt: str) -> int:
    if text.lstrip().startswith("{"):
        return text.index("{")
    pos = text.find("\n{")
    if pos < 0:
        raise ParseError(f"{fmt}: no line starts with '{{' (not Redfish JSON)")
    return pos + 1


def _norm(key: str) -> str:
    return key.rstrip("/") or key


def _add(out: Resources, key: str, res: dict[str, Any], fmt: str) -> None:
    if _norm(key) in {_norm(k) for k in out}:
        raise ParseError(f"{fmt}: resource {key!r} appears twice (duplicated output?)")
    out[key] = res


def resources(text: str, fmt: str = "Redfish JSON") -> Resources:
    """The resources in ``text`` keyed by ``@odata.id`` (in the order given, expanded
    collection members after them); a resource given twice, or a key twice in one object,
    is a ParseError (strict_json)."""
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
                    raise ParseError(f"{fmt}: resources[{key[:80]!r}] is not an object")
                _add(out, str(key), res, fmt)
        elif "@odata.type" in doc or "@odata.id" in doc:
            _add(out, str(doc.get("@odata.id", f"#{len(out)}")), doc, fmt)
        else:
            raise ParseError(f"{fmt}: a top-level object has neither @odata.type nor @odata.id "
                             f"(keys: {', '.join(sorted(map(str, doc))[:8]) or 'none'})")
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
    for key, res in out.items():
        _plausible(key, res, fmt)
    _expanded(out, fmt)
    _complete(out, fmt)
    return out


_MAX_NAME, _MAX_STRING = 256, 4096


def _plausible(key: str, res: Any, fmt: str) -> None:
    """ParseError for a resource key or property name over _MAX_NAME characters, or a
    string over _MAX_STRING, in ``res``."""
    if len(key) > _MAX_NAME * 4 or (why := oversized(res, _MAX_NAME, _MAX_STRING)):
        where = f" {key[:120]}: {why}" if len(key) <= _MAX_NAME * 4 else \
            f" a resource key of {len(key):,} characters"
        raise ParseError(f"{fmt}:{where}: no BMC's (a damaged name?)")


def _expanded(found: Resources, fmt: str) -> None:
    """Add the members of ``$expand``-ed collections (a member with an ``@odata.type`` is
    the resource itself, not a link) to ``found``; a copy that differs is a ParseError."""
    for key, res in list(found.items()):
        if not resource_type(res).endswith("Collection"):
            continue
        where = f"{resource_type(res)} {key}"
        ids = {_norm(k): k for k in found}
        for i, m in enumerate(list_at(res, "Members", where)):
            mid = str_at(m, "@odata.id", f"{where}.Members[{i}]")
            if "@odata.type" not in m or mid is None:
                continue  # a link (or no @odata.id: _complete names it)
            given = ids.get(_norm(mid))
            if given is None:
                found[mid] = m
                ids[_norm(mid)] = mid
            elif found[given] != m:
                raise ParseError(f"{fmt}: {mid} is given twice and the copies differ (inline "
                                 f"in the expanded {where}, and as its own resource): read "
                                 "at different times, neither is the evidence")


def _complete(found: Resources, fmt: str) -> None:
    """Every collection in the evidence is whole: all of its members were collected too.

    A collection lists its members (``Members``, counted by ``Members@odata.count``); one
    whose members are missing, miscounted or continued on another page
    (``Members@odata.nextLink``) would let a supply or a connector drop out unnoticed.
    """
    ids = {_norm(k) for k in found}
    for key, res in found.items():
        if not resource_type(res).endswith("Collection"):
            continue
        where = f"{resource_type(res)} {key}"
        members = list_at(res, "Members", where)
        count = res.get("Members@odata.count")
        if count is not None and count != len(members):
            raise ParseError(f"{fmt}: {where} counts {str(count)[:20]} members but lists "
                             f"{len(members)} (truncated output?)")
        if res.get("Members@odata.nextLink") is not None:
            raise ParseError(f"{fmt}: {where} continues on another page "
                             "(Members@odata.nextLink): not every member was collected")
        seen: set[str] = set()
        for i, m in enumerate(members):
            mid = str_at(m, "@odata.id", f"{where}.Members[{i}]")
            if mid is None or _norm(mid) not in ids:
                raise ParseError(f"{fmt}: {where} lists member {mid!r}, which is not in the "
                                 "evidence (incomplete collection)")
            if _norm(mid) in seen:
                raise ParseError(f"{fmt}: {where} lists member {mid!r} twice (duplicated "
                                 "output?)")
            seen.add(_norm(mid))


def resource_type(res: dict[str, Any]) -> str:
    """``#CoolingUnit.v1_5_0.CoolingUnit`` -> ``CoolingUnit``.

    >>> resource_type({"@odata.type": "#Power.v1_7_3.Power"})
    'Power'
    """
    t = res.get("@odata.type")
    return t.rsplit(".", 1)[-1].lstrip("#") if isinstance(t, str) else ""


# ---------------------------------------------------------------- field readers


def str_at(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ParseError(f"{where}.{key} is not a string (got {value!r})")


def num_at(obj: dict[str, Any], key: str, where: str) -> float | None:
    """A finite number, or None when absent; ParseError naming the field otherwise."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where}.{key} is not a number (got {str(value)[:40]!r})")
    return finite(value, f"{where}.{key}")


_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def watts_rating_at(obj: dict[str, Any], key: str, where: str) -> float | None:
    """A rating in W (``PowerCapacityWatts``): a JSON number as the schemas give it, or a
    decimal string such as ``"3300"`` as some BMCs print it; never negative or non-finite.

    >>> watts_rating_at({"PowerCapacityWatts": "3300"}, "PowerCapacityWatts", "PSU 1")
    3300.0
    """
    value = obj.get(key)
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value) or not math.isfinite(float(value)):
            raise ParseError(f"{where}.{key} is {value[:40]!r}, not a number of watts")
        value = float(value)
    watts = num_at({key: value}, key, where)
    if watts is not None and watts < 0:
        raise ParseError(f"{where}.{key} is {watts!r} W: a rating is never negative")
    return watts


def int_at(obj: dict[str, Any], key: str, where: str) -> int | None:
    value = num_at(obj, key, where)
    if value is None:
        return None
    if not value.is_integer():
        raise ParseError(f"{where}.{key} is {value!r}, not a whole number")
    return int(value)


def obj_at(obj: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseError(f"{where}.{key} is not an object (got {value!r})")
    return value


def list_at(obj: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ParseError(f"{where}.{key} is not an array of objects")
    return value


def status_at(obj: dict[str, Any], where: str) -> tuple[str | None, str | None, str | None]:
    """``Status``'s State, Health and HealthRollup, as given (the judges decide)."""
    status = obj_at(obj, "Status", where)
    w = f"{where}.Status"
    return str_at(status, "State", w), str_at(status, "Health", w), \
        str_at(status, "HealthRollup", w)


def reading_at(obj: dict[str, Any], key: str, where: str) -> float | None:
    """A SensorExcerpt's ``Reading`` (``{"Reading": 30, "DataSourceUri": ...}``)."""
    return num_at(obj_at(obj, key, where), "Reading", f"{where}.{key}")


def name_of(res: dict[str, Any], where: str, default: str) -> str:
    return str_at(res, "Name", where) or str_at(res, "Id", where) or default


def link_at(res: dict[str, Any], key: str, where: str) -> str | None:
    return str_at(obj_at(res, key, where), "@odata.id", f"{where}.{key}")
