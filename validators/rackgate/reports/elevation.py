"""The HTML report's rack view: one elevation per rack from each node's ``place``
(``rackgate_location`` rack and U), sized to the nodes present: from the highest U used
down to the lowest, U1 at the bottom, a run of ``GAP_MIN`` or more empty units drawn as
one gap row, and the rack's height stated (``rackgate_rack_height``, else the common 42U,
or the highest U used when it is above that and a rack can be that tall). Each node is a
1U slot coloured by verdict (green ACCEPT, amber ACCEPT with warnings, red REJECT) and
linked to its worst result; two nodes claiming one U are both drawn and the clash is
written out. A node whose U its rack cannot have (0, or above the rack's height) is
flagged under its rack as outside it; nodes without a rack and unit are tiles in a "no rack
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
RACK_MIN_U = 42  # the common rack height: a rack's height when the inventory states none
GAP_MIN = 3  # this many empty units in a row or more are drawn as one gap row


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
    """A node's (rack, U), or None when report.json gives none; the U may be one its rack
    cannot have (:func:`height_of` says).

    >>> place({"place": {"rack": "r1", "u": 38}}), place({"place": None}), place({})
    (('r1', 38), None, None)
    """
    p = node.get("place") or {}
    u = p.get("u")
    if not isinstance(u, int) or isinstance(u, bool):
        return None
    return str(p.get("rack", "")), u


def _stated(node: Mapping[str, Any]) -> int | None:
    """The rack height the node's place states (``rackgate_rack_height``), when usable."""
    h = (node.get("place") or {}).get("rack_height")
    if isinstance(h, str) and h.isdigit():
        h = int(h)
    ok = isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= MAX_RACK_U
    return h if ok else None


def height_of(units: Sequence[tuple[int, Mapping[str, Any]]]) -> tuple[int, str]:
    """A rack's height and where it comes from: the tallest its nodes state
    (``rackgate_rack_height``), else the highest U used where that is above 42 (and no
    rack is taller than 60U), else 42.

    >>> height_of([(3, {"place": {"rack_height": 24}})])
    (24, 'rackgate_rack_height')
    >>> height_of([(48, {})]), height_of([(38, {}), (99, {})])
    ((48, 'its highest U used'), (42, 'assumed: the common height'))
    """
    stated = [h for _, n in units if (h := _stated(n)) is not None]
    if stated:
        return max(stated), "rackgate_rack_height"
    used = [u for u, _ in units if RACK_MIN_U < u <= MAX_RACK_U]
    if used:
        return max(used), "its highest U used"
    return RACK_MIN_U, "assumed: the common height"


def _tile(node: Mapping[str, Any], href: Callable[[Mapping[str, Any]], str]) -> dict[str, Any]:
    where = place(node)
    return {"name": node["name"], "verdict": node["verdict"], "colour": verdict_class(node),
            "href": href(node), "overridden": node.get("overridden", False),
            "location": node.get("location", ""),
            "title": "\n".join([f"{node['name']}: {node['verdict']}"
                                + (f" (rack {where[0]} U{where[1]})" if where else ""),
                                *node["reasons"]])}


def _rows(by_u: Mapping[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The units from the highest used to the lowest, top first; a run of ``GAP_MIN`` or
    more empty units as one ``gap`` row (``top``, ``bottom``, ``count``)."""
    if not by_u:
        return []
    rows: list[dict[str, Any]] = []
    empty: list[int] = []

    def flush() -> None:
        if len(empty) >= GAP_MIN:
            rows.append({"gap": True, "top": empty[0], "bottom": empty[-1],
                         "count": len(empty)})
        else:
            rows.extend({"gap": False, "u": u, "slots": []} for u in empty)
        empty.clear()

    for u in range(max(by_u), min(by_u) - 1, -1):
        if u in by_u:
            flush()
            rows.append({"gap": False, "u": u, "slots": by_u[u]})
        else:
            empty.append(u)
    flush()
    return rows


def _rack(name: str, units: Sequence[tuple[int, Mapping[str, Any]]],
          href: Callable[[Mapping[str, Any]], str]) -> dict[str, Any]:
    height, basis = height_of(units)
    by_u: dict[int, list[dict[str, Any]]] = defaultdict(list)
    outside = []
    for u, n in units:
        if 1 <= u <= height:
            by_u[u].append(_tile(n, href))
        else:
            why = f"U{u} is not a unit: U1 is the bottom" if u < 1 else \
                f"U{u} is above the rack's {height}U"
            outside.append({**_tile(n, href), "u": u, "why": why})
    return {
        "name": name, "id": f"rack-{anchor(name)}", "height": height, "basis": basis,
        "nodes": len(units),
        "rejected": sum(1 for _, n in units if n["verdict"] != "ACCEPT"),
        "top": max(by_u, default=None), "bottom": min(by_u, default=None),
        "units": _rows(by_u),
        "outside": outside,
        "collisions": [{"u": u, "names": [s["name"] for s in ss]}
                       for u, ss in sorted(by_u.items()) if len(ss) > 1],
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
