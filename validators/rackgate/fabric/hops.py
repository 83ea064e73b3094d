"""Hop classes: how far apart two nodes are on the planned fabric, for one rail's HCA.

On a fat tree the path between two HCAs of one rail climbs no higher than it must: two
nodes on one leaf meet at that leaf (``same leaf``, one switch); leaves that share a spine
meet there (``across a spine``, three switches); in a three-level tree, leaves of
different pods meet at a core switch (``across the core``, five switches). Bandwidth
grouped by hop class tells a weak leaf from a weak uplink: a fault in the spine layer
shows only in the pairs that cross it.

>>> from rackgate.fabric.plan import SCHEMA, plan_from_document
>>> plan = plan_from_document({"schema": SCHEMA, "name": "t", "speed": "HDR",
...     "switches": [{"name": "l1", "role": "leaf", "ports": 4},
...                  {"name": "l2", "role": "leaf", "ports": 4},
...                  {"name": "s1", "role": "spine", "ports": 4}],
...     "nodes": [{"host": h, "hca": "mlx5_0", "switch": l, "switch_port": p, "cable": c}
...               for h, l, p, c in [("a", "l1", 1, "c1"), ("b", "l1", 2, "c2"),
...                                  ("c", "l2", 1, "c3")]],
...     "links": [{"a": {"switch": "l1", "port": 4}, "b": {"switch": "s1", "port": 1},
...                "cable": "c4"},
...               {"a": {"switch": "l2", "port": 4}, "b": {"switch": "s1", "port": 2},
...                "cable": "c5"}]}, "doc")
>>> hop_class(plan, "a", "b", "mlx5_0"), hop_class(plan, "a", "c", "mlx5_0")
('same leaf', 'across a spine')
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rackgate.fabric.plan import FabricPlan

SAME_LEAF, ACROSS_SPINE, ACROSS_CORE = "same leaf", "across a spine", "across the core"
HOP_CLASSES = (SAME_LEAF, ACROSS_SPINE, ACROSS_CORE)
NOT_PLANNED = "not in the plan"


def hop_classifier(plan: FabricPlan, hca: str) -> Callable[[str, str], str]:
    """The hop class of two nodes through their HCA ``hca`` (one rail), with the plan's
    leaves and their spines indexed once (a matrix asks for every pair)."""
    leaf = {n.host: n.switch for n in plan.nodes if n.hca == hca}
    spines: dict[str, set[str]] = {}
    for link in plan.links:
        for low, high in ((link.a.switch, link.b.switch), (link.b.switch, link.a.switch)):
            if plan.switch[high].role == "spine":
                spines.setdefault(low, set()).add(high)

    def classify(a: str, b: str) -> str:
        la, lb = leaf.get(a), leaf.get(b)
        if la is None or lb is None:
            return NOT_PLANNED
        if la == lb:
            return SAME_LEAF
        return ACROSS_SPINE if spines.get(la, set()) & spines.get(lb, set()) else ACROSS_CORE

    return classify


def hop_class(plan: FabricPlan, a: str, b: str, hca: str) -> str:
    """The hop class of nodes ``a`` and ``b`` through their HCA ``hca`` (one rail)."""
    return hop_classifier(plan, hca)(a, b)


def by_hop_class(plan: FabricPlan, pairs: Sequence[Mapping[str, Any]],
                 hca: str) -> list[dict[str, Any]]:
    """Pairs (``a``, ``b``, ``measured_gbps``, ``status``) grouped by hop class: how many,
    how many measured, median and lowest Gb/s, the lowest pair and the statuses."""
    classify = hop_classifier(plan, hca)
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for p in pairs:
        groups.setdefault(classify(p["a"], p["b"]), []).append(p)
    out = []
    for name in (*HOP_CLASSES, NOT_PLANNED):
        members = groups.get(name, [])
        if not members:
            continue
        measured = [p for p in members if p.get("measured_gbps") is not None]
        worst = min(measured, key=lambda p: p["measured_gbps"]) if measured else None
        statuses: dict[str, int] = {}
        for p in members:
            statuses[p["status"]] = statuses.get(p["status"], 0) + 1
        out.append({
            "hop_class": name, "pairs": len(members), "measured": len(measured),
            "median_gbps": (statistics.median(p["measured_gbps"] for p in measured)
                            if measured else None),
            "min_gbps": worst["measured_gbps"] if worst else None,
            "lowest_pair": f"{worst['a']} <-> {worst['b']}" if worst else None,
            "statuses": statuses,
        })
    return out
