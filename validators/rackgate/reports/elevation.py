"""The HTML report's rack view: one elevation per rack from each node's ``place``
(``rackgate_location`` rack and U): U1 at the bottom, as tall as the highest U used (at
least 42), each node a 1U slot coloured by verdict (green ACCEPT, amber ACCEPT with
warnings, red REJECT) and linked to its worst result; two nodes claiming one U are both
drawn and the clash is written out. Nodes without a place are tiles in a "no rack
position" strip.

Past ``MAX_RACKS`` racks only the racks with a rejected node are drawn (at most
``MAX_RACKS``), and past ``MAX_TILES`` nodes without a place the strip shows the rejected
ones only; the view says what it left out.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rackgate.inventory import MAX_RACK_U
from rackgate.reports.anchors import anchor

MAX_TILES = 300
MAX_RACKS = 16
RACK_MIN_U = 42  # the common rack height: a rack is drawn at least this tall


def verdict_class(node: Mapping[str, Any]) -> str:
    """The rack view's colour of a node: ``accept``, ``warn`` (accepted with warnings) or
    ``reject``.

    >>> [verdict_class({"verdict": v, "status": s})
    ...  for v, s in (("ACCEPT", "skip"), ("ACCEPT", "warn"), ("REJECT", "error"))]
    ['accept', 'warn', 'reject']
    """
    if node["verdict"] != "ACCEPT":
        return "reject"
    return "warn" if node["status"] == "warn" else "accept"


def _natural(text: str) -> list[Any]:
    """Sort key: r2 before r10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def place(node: Mapping[str, Any]) -> tuple[str, int] | None:
    """A node's (rack, U), or None when report.json gives none or a U outside 1-60.

    >>> place({"place": {"rack": "r1", "u": 38}}), place({"place": None}), place({})
    (('r1', 38), None, None)
    """
    p = node.get("place") or {}
    u = p.get("u")
    if not isinstance(u, int) or isinstance(u, bool) or not 1 <= u <= MAX_RACK_U:
        return None
    return str(p.get("rack", "")), u


def _tile(node: Mapping[str, Any], href: Callable[[Mapping[str, Any]], str]) -> dict[str, Any]:
    where = place(node)
    return {"name": node["name"], "verdict": node["verdict"], "colour": verdict_class(node),
            "href": href(node), "overridden": node.get("overridden", False),
            "location": node.get("location", ""),
            "title": "\n".join([f"{node['name']}: {node['verdict']}"
                                + (f" (rack {where[0]} U{where[1]})" if where else ""),
                                *node["reasons"]])}


def _rack(name: str, units: Sequence[tuple[int, Mapping[str, Any]]],
          href: Callable[[Mapping[str, Any]], str]) -> dict[str, Any]:
    by_u: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for u, n in units:
        by_u[u].append(n)
    height = max([RACK_MIN_U, *by_u])
    return {
        "name": name, "id": f"rack-{anchor(name)}", "height": height, "nodes": len(units),
        "rejected": sum(1 for _, n in units if n["verdict"] != "ACCEPT"),
        "units": [{"u": u, "slots": [_tile(n, href) for n in by_u.get(u, [])]}
                  for u in range(height, 0, -1)],
        "collisions": [{"u": u, "names": [n["name"] for n in ns]}
                       for u, ns in sorted(by_u.items()) if len(ns) > 1],
    }


def elevations(doc: Mapping[str, Any],
               href: Callable[[Mapping[str, Any]], str] = lambda n: "") -> dict[str, Any]:
    """The rack view: one elevation per rack (natural order of rack names), the nodes
    without a place as tiles, and what the fleet-size caps left out. ``href`` gives each
    node's link (its worst result)."""
    placed: dict[str, list[tuple[int, Mapping[str, Any]]]] = defaultdict(list)
    unplaced = []
    for n in doc["nodes"]:
        where = place(n)
        if where:
            placed[where[0]].append((where[1], n))
        else:
            unplaced.append(n)
    names = sorted(placed, key=_natural)
    accepted_racks = 0
    if len(names) > MAX_RACKS:
        rejecting = [r for r in names if any(n["verdict"] != "ACCEPT" for _, n in placed[r])]
        accepted_racks = len(names) - len(rejecting)
        names = rejecting
    tiles = unplaced if len(unplaced) <= MAX_TILES else \
        [n for n in unplaced if n["verdict"] != "ACCEPT"][:MAX_TILES]
    hidden = Counter(n["verdict"] for n in unplaced) - Counter(n["verdict"] for n in tiles)
    return {
        "racks": [_rack(r, placed[r], href) for r in names[:MAX_RACKS]],
        "racks_accepted_hidden": accepted_racks,
        "racks_rejecting_hidden": max(0, len(names) - MAX_RACKS),
        "unplaced": [_tile(n, href) for n in tiles],
        "unplaced_total": len(unplaced),
        "tiles_accepted_hidden": hidden["ACCEPT"],
        "tiles_rejected_hidden": hidden["REJECT"],
    }
