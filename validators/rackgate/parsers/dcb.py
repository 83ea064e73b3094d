"""Parser for fabric.roce_lossless's probe: iproute2 ``dcb`` JSON, one section per
interface and query.

Format: dcb(8), dcb-pfc(8), dcb-app(8) and iproute2's ``dcb/dcb_pfc.c`` / ``dcb/dcb_app.c``.
``dcb -j pfc show dev IF`` prints one object whose ``prio_pfc`` maps each priority "0".."7"
to true/false (PFC on or off); ``dcb -j app show dev IF`` prints one object whose
``dscp_prio`` is a list of ``[dscp, priority]`` pairs, left out when the table is empty
(the port then trusts PCP). The probe runs both for every interface and writes, before
each answer, a marker line ``### rackgate-dcb dev=IF what=pfc|app rc=N``; dcb's JSON
follows when rc is 0, its error message otherwise. JSON is read strictly
(``parsers.strict_json``): a repeated key, or text after the object, is a ParseError.

>>> [(p.interface, p.pfc_priorities, p.dscp_prio) for p in parse_dcb_sections(
...     "### rackgate-dcb dev=eth2 what=pfc rc=0\\n"
...     '{"pfc_cap":8,"prio_pfc":{"3":true}}\\n'
...     "### rackgate-dcb dev=eth2 what=app rc=0\\n"
...     '{"dscp_prio":[[26,3]]}\\n')]
[('eth2', (3,), ((26, 3),))]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.strict_json import decode

_SECTION = re.compile(r"^### rackgate-dcb dev=(\S+) what=(pfc|app) rc=([0-9]{1,3})$")


def _lines(text: str) -> list[str]:
    return [ln.rstrip() for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]


@dataclass(frozen=True)
class DcbPort:
    """PFC and DSCP-to-priority state of one interface, from ``dcb -j pfc|app show dev``.

    dcb(8), dcb-pfc(8), dcb-app(8): ``prio_pfc`` is an object of "0".."7" -> bool;
    ``dscp_prio`` is a list of [dscp, priority] pairs, absent when the table has none.
    """

    interface: str
    pfc_priorities: tuple[int, ...] | None  # priorities with PFC on; None if not read
    dscp_prio: tuple[tuple[int, int], ...] | None  # None if not read
    errors: tuple[str, ...]  # "pfc: <dcb's message>" for each failed query
    sections: tuple[str, ...] = ()  # the sections given for it, in order ("pfc", "app")


def _json_obj(body: str, where: str) -> dict[str, Any]:
    fmt = f"dcb JSON: {where}"
    doc, end = decode(body, fmt, len(body) - len(body.lstrip()))
    if body[end:].strip():
        raise ParseError(f"{fmt}: text after the JSON object: {body[end:].strip()[:40]!r}")
    if not isinstance(doc, dict):
        raise ParseError(f"dcb JSON: {where}: the top level is not an object")
    return doc


def parse_dcb_pfc(body: str, where: str = "dcb -j pfc show") -> tuple[int, ...]:
    """Priorities with PFC on, from ``dcb -j pfc show dev IF``.

    >>> parse_dcb_pfc('{"pfc_cap":8,"prio_pfc":{"0":false,"3":true}}')
    (3,)
    """
    prio = _json_obj(body, where).get("prio_pfc")
    if not isinstance(prio, dict):
        raise ParseError(f"dcb JSON: {where}: 'prio_pfc' is missing or not an object")
    out = []
    for key, on in prio.items():
        if not isinstance(on, bool) or key not in tuple("01234567"):
            raise ParseError(f"dcb JSON: {where}: prio_pfc[{key!r}] = {on!r} is not a "
                             "priority 0-7 mapped to true/false")
        if on:
            out.append(int(key))
    return tuple(sorted(out))


def parse_dcb_app(body: str, where: str = "dcb -j app show") -> tuple[tuple[int, int], ...]:
    """[dscp, priority] pairs from ``dcb -j app show dev IF`` (empty when none)."""
    pairs = _json_obj(body, where).get("dscp_prio", [])
    if not isinstance(pairs, list):
        raise ParseError(f"dcb JSON: {where}: 'dscp_prio' is not a list")
    out = []
    for p in pairs:
        if (not isinstance(p, list) or len(p) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in p)
                or not 0 <= p[0] <= 63 or not 0 <= p[1] <= 7):
            raise ParseError(f"dcb JSON: {where}: dscp_prio entry {p!r} is not [dscp 0-63, "
                             "priority 0-7]")
        out.append((p[0], p[1]))
    return tuple(out)


def parse_dcb_sections(text: str) -> tuple[DcbPort, ...]:
    """Parse fabric.roce_lossless's probe: ``### rackgate-dcb dev=IF what=pfc|app rc=N``
    marker lines, each followed by dcb's JSON (rc 0) or its error message."""
    sections: list[tuple[str, str, int, list[str]]] = []
    for lineno, line in enumerate(_lines(text), 1):
        m = _SECTION.match(line.strip())
        if m:
            sections.append((m.group(1), m.group(2), int(m.group(3)), []))
        elif sections:
            sections[-1][3].append(line)
        elif line.strip():
            raise ParseError(f"dcb probe: line {lineno}: {line.strip()[:60]!r} before the "
                             "first '### rackgate-dcb' marker")
    if not sections:
        raise ParseError("dcb probe: no '### rackgate-dcb dev=... what=... rc=...' marker "
                         "(empty output?)")
    by_if: dict[str, dict[str, Any]] = {}
    for dev, what, rc, body_lines in sections:
        body = "\n".join(body_lines).strip()
        entry = by_if.setdefault(dev, {"pfc": None, "app": None, "errors": [], "seen": []})
        entry["seen"].append(what)
        if what in entry["seen"][:-1]:
            continue  # a repeated section is judged as such, never merged or replaced
        if rc != 0 or not body:
            entry["errors"].append(f"{what}: dcb exited {rc}: {body or '(no output)'}")
            continue
        where = f"dcb -j {what} show dev {dev}"
        entry[what] = parse_dcb_pfc(body, where) if what == "pfc" else parse_dcb_app(body, where)
    return tuple(DcbPort(dev, e["pfc"], e["app"], tuple(e["errors"]), tuple(e["seen"]))
                 for dev, e in by_if.items())


__all__ = ["DcbPort", "parse_dcb_app", "parse_dcb_pfc", "parse_dcb_sections"]
