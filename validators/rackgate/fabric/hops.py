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
from collections.abc import Mapping, Sequence
from typing import Any

from rackgate.fabric.plan import FabricPlan

SAME_LEAF, ACROSS_SPINE, ACROSS_CORE = "same leaf", "across a spine", "across the core"
HOP_CLASSES = (SAME_LEAF, ACROSS_SPINE, ACROSS_CORE)
NOT_PLANNED = "not in the plan"


def _leaf(plan: FabricPlan, host: str, hca: str) -> str | None:
    return next((n.switch for n in plan.nodes if n.host == host and n.hca == hca), None)


def _spines(plan: FabricPlan, leaf: str) -> frozenset[str]:
    ends = [(link.a.switch, link.b.switch) for link in plan.links]
    return frozenset(b if a == leaf else a for a, b in ends
                     if leaf in (a, b) and plan.switch[b if a == leaf else a].role == "spine")


def hop_class(plan: FabricPlan, a: str, b: str, hca: str) -> str:
    """The hop class of nodes ``a`` and ``b`` through their HCA ``hca`` (one rail)."""
    la, lb = _leaf(plan, a, hca), _leaf(plan, b, hca)
    if la is None or lb is None:
        return NOT_PLANNED
    if la == lb:
        return SAME_LEAF
    return ACROSS_SPINE if _spines(plan, la) & _spines(plan, lb) else ACROSS_CORE


def by_hop_class(plan: FabricPlan, pairs: Sequence[Mapping[str, Any]],
                 hca: str) -> list[dict[str, Any]]:
    """Pairs (``a``, ``b``, ``measured_gbps``, ``status``) grouped by hop class: how many,
    how many measured, median and lowest Gb/s, the lowest pair and the statuses."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for p in pairs:
        groups.setdefault(hop_class(plan, p["a"], p["b"], hca), []).append(p)
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
