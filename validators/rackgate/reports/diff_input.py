"""Reading a report for ``rackgate diff``: :func:`check_report` refuses a report document
the diff cannot read (not ``rackgate.report/1``, a field it reads missing or malformed, a
node or a node's check that appears twice) with a :class:`DiffError` naming the report and
the field, so that two reports are never half-compared. Only the fields the diff reads
are checked; docs/report-schema.md has them all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rackgate.model import Status, Verdict
from rackgate.refusal import Refusal
from rackgate.reports import SCHEMA as REPORT_SCHEMA

STATUSES = tuple(s.label for s in Status)
VERDICTS = tuple(v.value for v in Verdict)


class DiffError(Refusal, ValueError):
    """A report the diff cannot read, said in one line naming the report and the field."""


def check_report(doc: Any, where: str) -> None:
    """DiffError naming ``where`` and the first field the diff reads that is missing or
    malformed; a node or a node's check that appears twice is refused too (the pairing
    would be ambiguous).

    >>> try:
    ...     check_report({"schema": "rackgate.report/2"}, "B old.json")
    ... except DiffError as exc:
    ...     print(exc)
    B old.json: schema is 'rackgate.report/2', expected rackgate.report/1
    """
    if not isinstance(doc, dict):
        raise DiffError(f"{where}: not a JSON object (a rackgate report is one)")
    if doc.get("schema") != REPORT_SCHEMA:
        raise DiffError(f"{where}: schema is {doc.get('schema')!r}, expected {REPORT_SCHEMA}")
    _get(doc, "generated", str, where)
    _get(_get(doc, "run", dict, where), "run_id", str, where, "run.")
    _choice(doc, "verdict", VERDICTS, where, "")
    summary = _get(doc, "summary", dict, where)
    for key in ("nodes", "accepted", "rejected"):
        _get(summary, key, int, where, "summary.")
    _get(summary, "results", dict, where, "summary.")
    profile = _get(doc, "profile", dict, where)
    _get(profile, "name", str, where, "profile.")
    _get(profile, "sha256", str, where, "profile.")
    checks = _get(profile, "checks", dict, where, "profile.")
    # rack: absent in reports of rackgate before rack judgements were recorded
    rack = _get(profile, "rack", dict, where, "profile.") if "rack" in profile else {}
    for section, entries in (("checks", checks), ("rack", rack)):
        for name, value in entries.items():
            if not isinstance(value, dict):
                raise DiffError(f"{where}: profile.{section}.{name} is not an object")
    names: set[str] = set()
    for i, node in enumerate(_get(doc, "nodes", list, where)):
        _check_node(node, f"nodes[{i}]", where)
        if node["name"] in names:
            raise DiffError(f"{where}: nodes[{i}].name {node['name']!r} appears twice")
        names.add(node["name"])


def _check_node(node: Any, path: str, where: str) -> None:
    if not isinstance(node, dict):
        raise DiffError(f"{where}: {path} is not an object")
    if not _get(node, "name", str, where, path + "."):
        raise DiffError(f"{where}: {path}.name is empty")
    path = f"{path} ({node['name']})"
    _choice(node, "verdict", VERDICTS, where, path + ".")
    _choice(node, "status", STATUSES, where, path + ".")
    _get(node, "profile_sha256", str, where, path + ".")
    _get(node, "identity", dict, where, path + ".")
    place = node.get("place")  # absent in reports of rackgate before places: no place
    if place is not None and not (isinstance(place, dict) and isinstance(place.get("rack"), str)
                                  and _is_int(place.get("u"))):
        raise DiffError(f"{where}: {path}.place is {place!r}, expected {{rack, u}} or null")
    checks: set[str] = set()
    for j, r in enumerate(_get(node, "results", list, where, path + ".")):
        rpath = f"{path}.results[{j}]"
        if not isinstance(r, dict) or not _get(r, "check", str, where, rpath + "."):
            raise DiffError(f"{where}: {rpath} is not a result with a check name")
        if r["check"] in checks:
            raise DiffError(f"{where}: {rpath}.check {r['check']!r} appears twice")
        checks.add(r["check"])
        rpath = f"{rpath} ({r['check']})"
        _choice(r, "status", STATUSES, where, rpath + ".")
        for key in ("unit", "expected", "message"):
            _get(r, key, str, where, rpath + ".")
        measured = _get(r, "measured", object, where, rpath + ".")
        if measured is not None and not (_is_number(measured) and math.isfinite(measured)):
            raise DiffError(f"{where}: {rpath}.measured is {measured!r}, expected a finite "
                            "number or null")
        if not isinstance(r.get("details", {}), dict):
            raise DiffError(f"{where}: {rpath}.details is not an object")


def _get(obj: Mapping[str, Any], key: str, kind: type, where: str, path: str = "") -> Any:
    if key not in obj:
        raise DiffError(f"{where}: {path}{key} is missing")
    value = obj[key]
    if (kind is int and not _is_int(value)) or not isinstance(value, kind):
        raise DiffError(f"{where}: {path}{key} is {value!r:.80}, expected "
                        f"{'an integer' if kind is int else kind.__name__}")
    return value


def _choice(obj: Mapping[str, Any], key: str, allowed: Sequence[str], where: str,
            path: str) -> None:
    if _get(obj, key, str, where, path) not in allowed:
        raise DiffError(f"{where}: {path}{key} is {obj[key]!r:.80}, expected one of "
                        f"{', '.join(allowed)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
