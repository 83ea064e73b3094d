"""What changed between two reports (``rackgate diff``): node by node and check by check,
the verdicts, statuses and figures, the profile's thresholds and sha256, and each node's
identity (serials, BIOS, kernel, OS, machine id, GPU driver, VBIOS, HCA firmware).

Pure: two report documents (report.json's dict, schema ``rackgate.report/1``) in, a diff
document (schema ``rackgate.diff/1``, docs/diff-schema.md) out; :func:`render_text` and
:func:`render_html` print it. A report the diff cannot read is refused with a
:class:`DiffError` naming the report and the field, never half-compared.

Nodes are paired by name when the reports share most names (one rack over time), else by
rack position (``place``: two racks of one SKU). Every node that is not paired is listed
(only in A, only in B, or not matchable: no place, or two nodes at one U).

``changes[]`` holds exactly the (node, check) results whose status changed (a check added
or removed is a status change, from or to none) and those whose figure moved by more than
``figure_threshold_pct`` percent or changed unit; ``show_all`` lists every difference.

>>> a = {"status": "pass", "measured": 612.3, "unit": "MB/s", "expected": ">= 50 MB/s",
...      "message": "read 612.3 MB/s"}
>>> b = dict(a, measured=598.0, message="read 598 MB/s")
>>> result_change(a, b, 5.0, False) is None  # -2.3 %: within the threshold
True
>>> c = result_change(a, dict(b, status="fail"), 5.0, False)
>>> c["changed"], c["percent_change"]
(['status', 'figure', 'message'], -2.335)
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jinja2

from rackgate.figures import figure, with_unit
from rackgate.model import Status, Verdict
from rackgate.reports import SCHEMA as REPORT_SCHEMA

SCHEMA = "rackgate.diff/1"
DEFAULT_FIGURE_THRESHOLD_PCT = 5.0
Match = Literal["auto", "name", "position"]
MATCHES: tuple[Match, ...] = ("auto", "name", "position")

STATUSES = tuple(s.label for s in Status)
VERDICTS = tuple(v.value for v in Verdict)
IDENTITY_CHECK = "node.identity"  # its details are the node's ``identity`` object
# Versions and serials other checks record in their details (as rack.version_drift reads
# them): the GPU driver, CUDA, VBIOS and each GPU's bus id, serial, UUID and VBIOS
# (checks/gpu.py), each HCA's firmware (checks/infiniband.py, ``fw.<device>``).
VERSION_DETAILS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("gpu.health", re.compile(r"(?:driver_version|cuda_version|vbios_versions|gpu\d+)\Z")),
    ("fabric.ports", re.compile(r"fw\..+\Z")),
)
_TEMPLATES = Path(__file__).parent / "templates"


class DiffError(ValueError):
    """A report the diff cannot read, said in one line naming the report and the field."""


# ----------------------------------------------------------------- reading a report

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


# ------------------------------------------------------------------- pairing nodes

@dataclass(frozen=True)
class Pairing:
    """How the nodes of A and B were paired, and every node that was not."""

    by: Literal["name", "position"]
    key: str  # "name", "rack and U" or "U"
    pairs: list[tuple[dict[str, Any], dict[str, Any]]]
    only_in_a: list[dict[str, Any]] = field(default_factory=list)  # {name, place}
    only_in_b: list[dict[str, Any]] = field(default_factory=list)
    unmatched: list[dict[str, Any]] = field(default_factory=list)  # + report, reason


def choose_match(a: Sequence[str], b: Sequence[str]) -> Literal["name", "position"]:
    """``name`` when more than half of the smaller report's nodes are in the other one by
    name (one rack over time), else ``position`` (two racks of one SKU).

    >>> choose_match(["n1", "n2", "n3"], ["n1", "n2", "n4"]), choose_match(["a1"], ["b1"])
    ('name', 'position')
    """
    smaller = min(len(a), len(b))
    return "name" if not smaller or 2 * len(set(a) & set(b)) > smaller else "position"


def pair_nodes(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]], match: Match
               ) -> Pairing:
    """Pair A's nodes with B's, in A's order; ``auto`` chooses by :func:`choose_match`."""
    by = choose_match([n["name"] for n in a], [n["name"] for n in b]) \
        if match == "auto" else match
    if by == "name":
        names_b = {n["name"]: n for n in b}
        names_a = {n["name"] for n in a}
        return Pairing("name", "name", [(n, names_b[n["name"]]) for n in a
                                        if n["name"] in names_b],
                       [_brief(n) for n in a if n["name"] not in names_b],
                       [_brief(n) for n in b if n["name"] not in names_a])
    racks = [{n["place"]["rack"] for n in side if n.get("place")} for side in (a, b)]
    by_rack = racks[0] == racks[1]
    unmatched: list[dict[str, Any]] = []
    keyed = [_by_position(side, label, by_rack, unmatched) for side, label in
             ((a, "A"), (b, "B"))]
    return Pairing("position", "rack and U" if by_rack else "U",
                   [(n, keyed[1][k]) for k, n in keyed[0].items() if k in keyed[1]],
                   [_brief(n) for k, n in keyed[0].items() if k not in keyed[1]],
                   [_brief(n) for k, n in keyed[1].items() if k not in keyed[0]], unmatched)


def _by_position(nodes: Sequence[dict[str, Any]], label: str, by_rack: bool,
                 unmatched: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Nodes by (rack, U), or ("", U); a node without a place, or sharing its key with
    another node of the same report, goes to ``unmatched`` with the reason."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for n in nodes:
        place = n.get("place")
        if not place:
            unmatched.append(dict(_brief(n), report=label,
                                  reason="no rack position (place) in the report"))
            continue
        groups.setdefault((place["rack"] if by_rack else "", place["u"]), []).append(n)
    keyed = {}
    for (rack, u), group in groups.items():
        if len(group) == 1:
            keyed[rack, u] = group[0]
            continue
        at = f"rack {rack} U {u}" if by_rack else f"U {u}"
        for n in group:
            others = ", ".join(o["name"] for o in group if o is not n)
            unmatched.append(dict(_brief(n), report=label, reason=f"shares {at} with {others}"))
    return keyed


def _brief(node: Mapping[str, Any]) -> dict[str, Any]:
    return {"name": node["name"], "place": node.get("place")}


# ----------------------------------------------------------------------- comparing

def percent_change(a: float | None, b: float | None) -> float | None:
    """(b - a) / |a| in percent, rounded to four significant digits; None when either is
    None or a is 0 (no ratio: a figure from 0, or none).

    >>> percent_change(612.3, 42.0), percent_change(0, 5), percent_change(50, 50)
    (-93.14, None, 0.0)
    """
    if a is None or b is None or a == 0:
        return None
    pct = (b - a) / abs(a) * 100
    if not math.isfinite(pct):
        return None
    return 0.0 if pct == 0 else round(pct, 3 - math.floor(math.log10(abs(pct))))


def result_change(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None,
                  threshold_pct: float, show_all: bool) -> dict[str, Any] | None:
    """One ``changes[]`` entry (without the node names) for one check's results in A and
    B (None: not in that report), or None when it is not listed: same status, and its
    figure moved by at most ``threshold_pct`` percent in the same unit (``show_all``:
    nothing differs)."""
    if a is None and b is None:
        return None
    ra: Mapping[str, Any] = a or {}
    rb: Mapping[str, Any] = b or {}
    status = ra.get("status") != rb.get("status")
    ma, mb = ra.get("measured"), rb.get("measured")
    pct = percent_change(ma, mb)
    unit = a is not None and b is not None and ra["unit"] != rb["unit"]
    moved = a is not None and b is not None and ma != mb
    beyond = moved and (pct is None or abs(pct) > threshold_pct)
    differs = {
        "status": status,
        "figure": moved,
        "unit": unit,
        "expected": a is not None and b is not None and ra["expected"] != rb["expected"],
        "message": (status or show_all) and ra.get("message") != rb.get("message"),
    }
    if not (status or unit or beyond or (show_all and any(differs.values()))):
        return None
    return {
        "kind": "added" if a is None else "removed" if b is None else "changed",
        "changed": [k for k, v in differs.items() if v],
        **{f"{key}_{side}": r.get(key) for key in ("status", "measured", "unit")
           for side, r in (("a", ra), ("b", rb))},
        "percent_change": pct,
        **{f"{key}_{side}": r.get(key) for key in ("expected", "message")
           for side, r in (("a", ra), ("b", rb))},
    }


def identity_of(node: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Source check -> identity field -> value: the node's ``identity`` object (from
    ``node.identity``) and the versions and serials of :data:`VERSION_DETAILS`; a source
    that recorded none of its fields is absent."""
    out = {IDENTITY_CHECK: {k: str(v) for k, v in node["identity"].items()}}
    for r in node["results"]:
        for check, pattern in VERSION_DETAILS:
            if r["check"] == check:
                out[check] = {k: str(v) for k, v in r.get("details", {}).items()
                              if pattern.match(k)}
    return {source: fields for source, fields in out.items() if fields}


def identity_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each identity field that differs, per source both nodes recorded (a source one of
    them lacks is not compared: that check's status change says why); a field only one
    recorded is a change from or to null.

    >>> na = {"identity": {"bios_version": "1.2", "kernel": "6.1"}, "results": []}
    >>> identity_changes(na, {"identity": {"bios_version": "1.3", "kernel": "6.1"},
    ...                       "results": []})
    [{'source': 'node.identity', 'field': 'bios_version', 'a': '1.2', 'b': '1.3'}]
    """
    ia, ib = identity_of(a), identity_of(b)
    out = []
    for source in [s for s in ia if s in ib]:
        fa, fb = ia[source], ib[source]
        for key in list(fa) + [k for k in fb if k not in fa]:
            if fa.get(key) != fb.get(key):
                out.append({"source": source, "field": key, "a": fa.get(key), "b": fb.get(key)})
    return out


def profile_changes(a: Mapping[str, Any], b: Mapping[str, Any], show_all: bool
                    ) -> list[dict[str, Any]]:
    """Differences of the two profiles' checks and rack judgements (enabled, params,
    thresholds), one per leaf field; a check in one profile only is one entry with field
    "" and that check's section as its value. ``basis`` texts only with ``show_all``.

    >>> pa = {"checks": {"fio": {"thresholds": {"read": {"ref": 100, "min_ratio": 0.5,
    ...                                                    "basis": "x"}}}}}
    >>> pb = {"checks": {"fio": {"thresholds": {"read": {"ref": 100, "min_ratio": 0.6,
    ...                                                    "basis": "y"}}}}}
    >>> profile_changes(pa, pb, False)
    [{'section': 'checks', 'name': 'fio', 'field': 'thresholds.read.min_ratio', 'a': 0.5, 'b': 0.6}]
    """
    out = []
    for section in ("checks", "rack"):
        sa, sb = a.get(section, {}), b.get(section, {})
        for name in list(sa) + [n for n in sb if n not in sa]:
            if name not in sa or name not in sb:
                out.append({"section": section, "name": name, "field": "",
                            "a": sa.get(name), "b": sb.get(name)})
                continue
            fa, fb = _flat(sa[name]), _flat(sb[name])
            for key in list(fa) + [k for k in fb if k not in fa]:
                if (show_all or key.rsplit(".", 1)[-1] != "basis") and fa.get(key) != fb.get(key):
                    out.append({"section": section, "name": name, "field": key,
                                "a": fa.get(key), "b": fb.get(key)})
    return out


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted keys; lists and scalars are leaves (an empty object has
    none: ``params: {}`` and no params read the same).

    >>> _flat({"a": {"b": 1, "c": [2]}, "d": None, "e": {}})
    {'a.b': 1, 'a.c': [2], 'd': None}
    """
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for k, v in value.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _side(doc: Mapping[str, Any], source: str) -> dict[str, Any]:
    return {"source": source, "run_id": doc["run"]["run_id"], "generated": doc["generated"],
            "revision": doc.get("revision"), "verdict": doc["verdict"],
            "profile": {"name": doc["profile"]["name"], "sha256": doc["profile"]["sha256"]},
            "summary": doc["summary"]}


def _checks(a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]]
            ) -> list[tuple[str, Mapping[str, Any] | None, Mapping[str, Any] | None]]:
    ra, rb = {r["check"]: r for r in a}, {r["check"]: r for r in b}
    return [(c, ra.get(c), rb.get(c)) for c in list(ra) + [c for c in rb if c not in ra]]


def diff_reports(a: Mapping[str, Any], b: Mapping[str, Any], *, a_source: str = "A",
                 b_source: str = "B", match: Match = "auto",
                 figure_threshold_pct: float = DEFAULT_FIGURE_THRESHOLD_PCT,
                 show_all: bool = False) -> dict[str, Any]:
    """The diff document of reports A and B (``a_source``/``b_source`` name them in the
    document and in refusals). DiffError when either is not a readable
    ``rackgate.report/1``, or ``figure_threshold_pct`` is negative or not finite."""
    if not math.isfinite(figure_threshold_pct) or figure_threshold_pct < 0:
        raise DiffError(f"figure threshold {figure_threshold_pct!r} % is not a number >= 0")
    if match not in MATCHES:
        raise DiffError(f"match {match!r} is not one of {', '.join(MATCHES)}")
    check_report(a, f"A {a_source}")
    check_report(b, f"B {b_source}")
    pairing = pair_nodes(a["nodes"], b["nodes"], match)
    nodes, changes = [], []
    for na, nb in pairing.pairs:
        found = [dict(node_a=na["name"], node_b=nb["name"], check=check, **entry)
                 for check, ra, rb in _checks(na["results"], nb["results"])
                 if (entry := result_change(ra, rb, figure_threshold_pct, show_all))]
        changes += found
        nodes.append({"a": na["name"], "b": nb["name"],
                      "place_a": na.get("place"), "place_b": nb.get("place"),
                      **{f"{k}_{s}": n[k] for k in ("verdict", "status", "profile_sha256")
                         for s, n in (("a", na), ("b", nb))},
                      "identity": identity_changes(na, nb), "changes": len(found)})
    count = Counter(k for c in changes for k in c["changed"])
    unpaired = len(pairing.only_in_a) + len(pairing.only_in_b) + len(pairing.unmatched)
    verdicts = sum(n["verdict_a"] != n["verdict_b"] for n in nodes)
    return {
        "schema": SCHEMA,
        "a": _side(a, a_source),
        "b": _side(b, b_source),
        "options": {"match": match, "figure_threshold_pct": figure_threshold_pct,
                    "all": show_all},
        "matching": {"by": pairing.by, "key": pairing.key, "pairs": len(pairing.pairs),
                     "only_in_a": pairing.only_in_a, "only_in_b": pairing.only_in_b,
                     "unmatched": pairing.unmatched},
        "profile_changes": profile_changes(a["profile"], b["profile"], show_all),
        "nodes": nodes,
        "changes": changes,
        "counts": {"changes": len(changes), "status": count["status"],
                   "figure": count["figure"], "unit": count["unit"],
                   "node_verdicts": verdicts,
                   "identity": sum(len(n["identity"]) for n in nodes),
                   "node_profile_sha256": sum(n["profile_sha256_a"] != n["profile_sha256_b"]
                                              for n in nodes),
                   "not_paired": unpaired},
        "changed": bool(a["verdict"] != b["verdict"] or verdicts or count["status"]
                        or unpaired),
    }


# ------------------------------------------------------------------------ printing

def place_text(place: Mapping[str, Any] | None) -> str:
    """``rack r7 u 3`` (as inventory locations read), or ``no place``.

    >>> place_text({"rack": "r7", "u": 3}), place_text(None)
    ('rack r7 u 3', 'no place')
    """
    return f"rack {place['rack']} u {place['u']}" if place else "no place"


def measured_text(value: float | None, unit: str | None) -> str:
    """A figure with its unit, or ``none``.

    >>> measured_text(19810.4, "MB/s"), measured_text(None, "MB/s")
    ('19,810 MB/s', 'none')
    """
    return "none" if value is None else with_unit(value, unit or "")


def percent_text(pct: float | None) -> str:
    """A signed percentage, or "" when there is none.

    >>> percent_text(-93.14), percent_text(16.67), percent_text(None)
    ('-93.14%', '+16.67%', '')
    """
    return "" if pct is None else f"{'+' if pct > 0 else ''}{figure(pct)}%"


def value_text(value: Any) -> str:
    """A profile or identity value on one line: figures through :func:`figure`, objects
    and lists as compact JSON.

    >>> value_text(0.6), value_text(None), value_text(True), value_text({"ref": 50})
    ('0.6', 'none', 'true', '{"ref": 50}')
    """
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_number(value):
        return figure(value)
    if isinstance(value, str):
        return one_line(value)
    return one_line(json.dumps(value, sort_keys=True, ensure_ascii=False))


def one_line(text: str) -> str:
    """``text`` as one printable line: whitespace runs become one space, other control
    characters are escaped (a message cannot break the one-line-per-change form or drive
    the terminal).

    >>> one_line("a\\n  b\\x1b[31m")
    'a b\\\\x1b[31m'
    """
    text = " ".join(text.split())
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def node_label(a: str, b: str) -> str:
    """A pair's name: the name, or ``A-name/B-name`` when they differ.

    >>> node_label("n1", "n1"), node_label("gpu001", "gpu101")
    ('n1', 'gpu001/gpu101')
    """
    return a if a == b else f"{a}/{b}"


def change_text(c: Mapping[str, Any]) -> str:
    """One ``changes[]`` entry as one line, node and check first.

    >>> change_text({"node_a": "n2", "node_b": "n2", "check": "fio.seq_read",
    ...     "kind": "changed", "changed": ["status", "figure", "message"],
    ...     "status_a": "pass", "status_b": "fail", "measured_a": 612.3, "measured_b": 42.0,
    ...     "unit_a": "MB/s", "unit_b": "MB/s", "percent_change": -93.14,
    ...     "expected_a": ">= 50 MB/s", "expected_b": ">= 50 MB/s",
    ...     "message_a": "ok", "message_b": "slow"})
    'n2 fio.seq_read: status pass -> fail; measured 612.3 MB/s -> 42 MB/s (-93.14%); message: slow'
    """
    head = f"{node_label(c['node_a'], c['node_b'])} {c['check']}: "
    if c["kind"] != "changed":
        side = "b" if c["kind"] == "added" else "a"
        return (f"{head}{c['kind']} ({c[f'status_{side}']}, "
                f"{measured_text(c[f'measured_{side}'], c[f'unit_{side}'])}): "
                f"{one_line(c[f'message_{side}'])}")
    parts = []
    if "status" in c["changed"]:
        parts.append(f"status {c['status_a']} -> {c['status_b']}")
    if {"figure", "unit"} & set(c["changed"]):
        pct = percent_text(c["percent_change"])
        parts.append(f"measured {measured_text(c['measured_a'], c['unit_a'])} -> "
                     f"{measured_text(c['measured_b'], c['unit_b'])}"
                     + (f" ({pct})" if pct else ""))
    if "expected" in c["changed"]:
        parts.append(f"expected {one_line(c['expected_a']) or 'none'} -> "
                     f"{one_line(c['expected_b']) or 'none'}")
    if "message" in c["changed"]:
        parts.append(f"message: {one_line(c['message_b'])}")
    return head + "; ".join(parts)


def _side_text(label: str, s: Mapping[str, Any]) -> str:
    revision = f" revision {s['revision']}" if s["revision"] is not None else ""
    return (f"{label}: {one_line(s['source'])}: run {one_line(s['run_id'])}{revision}, judged "
            f"{one_line(s['generated'])}, profile {one_line(s['profile']['name'])} (sha256 "
            f"{s['profile']['sha256'][:12]}), {s['verdict']}, {s['summary']['accepted']} of "
            f"{s['summary']['nodes']} nodes accepted")


def _unpaired_text(m: Mapping[str, Any]) -> list[str]:
    lines = [f"only in {side}: {n['name']} ({place_text(n['place'])})"
             for side, key in (("A", "only_in_a"), ("B", "only_in_b")) for n in m[key]]
    return lines + [f"not matched in {n['report']}: {n['name']} ({place_text(n['place'])}): "
                    f"{n['reason']}" for n in m["unmatched"]]


def render_text(diff: Mapping[str, Any]) -> str:
    """The diff for a terminal: the two runs, the rack verdict, how nodes were paired,
    profile changes, then per node its verdict, profile and identity changes and one line
    per changed result (node and check first), the nodes not paired, and a summary."""
    a, b, m = diff["a"], diff["b"], diff["matching"]
    lines = [_side_text("A", a), _side_text("B", b),
             f"rack verdict: {a['verdict']} -> {b['verdict']}" if a["verdict"] != b["verdict"]
             else f"rack verdict: {a['verdict']} (unchanged)",
             f"nodes paired by {m['key']}: {m['pairs']} pair(s), {len(m['only_in_a'])} only in "
             f"A, {len(m['only_in_b'])} only in B, {len(m['unmatched'])} not matched"]
    if a["profile"]["name"] != b["profile"]["name"]:
        lines.append(f"profile: {a['profile']['name']} -> {b['profile']['name']}")
    if a["profile"]["sha256"] != b["profile"]["sha256"]:
        lines.append(f"profile sha256: {a['profile']['sha256']} -> {b['profile']['sha256']}")
    lines += [f"profile {p['section']} {p['name']}{' ' + p['field'] if p['field'] else ''}: "
              + ("added" if p["a"] is None and not p["field"] else
                 "removed" if p["b"] is None and not p["field"] else
                 f"{value_text(p['a'])} -> {value_text(p['b'])}")
              for p in diff["profile_changes"]]
    by_pair: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for c in diff["changes"]:
        by_pair.setdefault((c["node_a"], c["node_b"]), []).append(c)
    for n in diff["nodes"]:
        label = node_label(n["a"], n["b"])
        if n["verdict_a"] != n["verdict_b"]:
            lines.append(f"{label}: verdict {n['verdict_a']} -> {n['verdict_b']}")
        if n["profile_sha256_a"] != n["profile_sha256_b"]:
            lines.append(f"{label}: profile sha256 {n['profile_sha256_a'][:12]} -> "
                         f"{n['profile_sha256_b'][:12]}")
        lines += [f"{label}: identity {i['source']} {one_line(i['field'])}: "
                  f"{value_text(i['a'])} -> {value_text(i['b'])}" for i in n["identity"]]
        lines += [change_text(c) for c in by_pair.get((n["a"], n["b"]), [])]
    lines += _unpaired_text(m)
    k = diff["counts"]
    threshold = "--all" if diff["options"]["all"] else \
        f"figure threshold {figure(diff['options']['figure_threshold_pct'])}%"
    lines.append(f"{k['changes']} changed result(s) ({k['status']} status, {k['figure']} "
                 f"figure; {threshold}), {k['node_verdicts']} node verdict(s), "
                 f"{k['identity']} identity field(s), {k['not_paired']} node(s) not paired")
    return "\n".join(lines) + "\n"


FILTERS = {"diff_measured": measured_text, "diff_percent": percent_text,
           "diff_value": value_text, "diff_place": place_text, "diff_node": node_label}
"""Filters the diff section's template uses: give them to the Jinja environment that
renders it (``env.filters.update(FILTERS)``)."""


def render_html(diff: Mapping[str, Any]) -> str:
    """The diff as one self-contained HTML page (``templates/diff.html.j2``: the report's
    look, the section ``templates/diff_section.html.j2`` renders); every value escaped."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters.update(FILTERS)
    return env.get_template("diff.html.j2").render(diff=diff)
