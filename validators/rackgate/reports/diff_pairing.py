"""Pairing the nodes of two reports for ``rackgate diff``: by name when the reports share
most names (one rack over time), else by rack position (``place``: two racks of one SKU).
Every node that is not paired is listed: only in A, only in B, or not matchable (no place,
or two nodes of one report at one U).

>>> p = pair_nodes([{"name": "n1"}, {"name": "n2"}], [{"name": "n2"}, {"name": "n3"}], "name")
>>> [(a["name"], b["name"]) for a, b in p.pairs], p.only_in_a, p.only_in_b
([('n2', 'n2')], [{'name': 'n1', 'place': None}], [{'name': 'n3', 'place': None}])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Match = Literal["auto", "name", "position"]
MATCHES: tuple[Match, ...] = ("auto", "name", "position")


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
