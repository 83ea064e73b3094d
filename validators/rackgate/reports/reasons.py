"""Rack-level reasons, each said once: the verdict's reasons grouped, for the console's
verdict, the HTML banner and summary.md (report.json's ``rack_reasons``).

A fault of a rack component gives every node it serves the same result: one CDU leak is
one ``cooling.cdu: fail: LEAK ...`` on each node, a fabric or launched job's failure the
same message on each node of the job. A node that did not answer gives the same error for
each of its checks. One reason stands for each such set: the blocking results with the
same status and message (the same words; never figures that differ), grouped first per
node (its checks) and then across the nodes with the same checks, so that a reason names
exactly the nodes and checks it stands for. A node rejected with no blocking result (no
check judged, every check skipped) has its own reason. Reasons that stand for more nodes
come first; the per-node results stay in the per-node sections and report.json.

>>> items = [Blocking(n, "", c, "fail", "LEAK") for n in ("n1", "n2") for c in ["cdu"]]
>>> items += [Blocking("n3", "u3", c, "error", "unreachable") for c in ("a", "b")]
>>> [r.text for r in group(items)]
['cdu: fail: LEAK (on 2 nodes: n1, n2)', 'n3 (u3): 2 checks (a, b): error: unreachable']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rackgate.model import RackVerdict

MAX_NAMED = 20  # a row or reason names at most this many nodes (or checks)


def named(names: Sequence[str]) -> str:
    """Names as a row or reason lists them: at most ``MAX_NAMED``, then how many more.

    >>> named(["n1", "n2"]), named([f"n{i}" for i in range(22)]).endswith("and 2 more")
    ('n1, n2', True)
    """
    more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
    return ", ".join(names[:MAX_NAMED]) + more


@dataclass(frozen=True)
class Blocking:
    """One reason a node was rejected: a result of its (``check`` "" and ``status`` ""
    for a node rejected with no blocking result; ``message`` is then its reason)."""

    node: str
    location: str
    check: str
    status: str
    message: str


@dataclass(frozen=True)
class Reason:
    """One reason, said once: the ``checks`` on the ``nodes`` (name, location) that gave
    the same ``status`` and ``message``; ``members`` are its items' indices."""

    status: str
    message: str
    checks: tuple[str, ...]
    nodes: tuple[tuple[str, str], ...]
    members: tuple[int, ...]

    @property
    def checks_text(self) -> str:
        checks = [c for c in self.checks if c]
        if len(checks) > 1:
            return f"{len(checks)} checks ({named(checks)})"
        return checks[0] if checks else ""

    @property
    def nodes_text(self) -> str:
        """The node and its location, or how many nodes and which."""
        if len(self.nodes) == 1:
            name, location = self.nodes[0]
            return f"{name} ({location})" if location else name
        return f"{len(self.nodes)} nodes: {named([n for n, _ in self.nodes])}"

    @property
    def text(self) -> str:
        """``node (location): check: status: message`` for one node (as a node's reason
        reads); for several, ``check: status: message (on N nodes: ...)``."""
        said = ": ".join(p for p in (self.checks_text, self.status, self.message) if p)
        if not self.nodes:
            return said
        if len(self.nodes) == 1:
            return f"{self.nodes_text}: {said}"
        return f"{said} (on {self.nodes_text})"

    def to_doc(self) -> dict[str, Any]:
        return {"text": self.text, "status": self.status, "message": self.message,
                "checks": [c for c in self.checks if c],
                "nodes": [{"name": n, "location": loc} for n, loc in self.nodes]}


def group(items: Sequence[Blocking]) -> list[Reason]:
    """One reason per set of nodes and checks with the same status and message (module
    docstring); those standing for more nodes first, else in the items' order."""
    per_node: dict[tuple[str, str, str], list[int]] = {}
    for i, b in enumerate(items):
        per_node.setdefault((b.status, " ".join(b.message.split()), b.node), []).append(i)
    across: dict[tuple[str, str, tuple[str, ...]], list[list[int]]] = {}
    for (status, message, _), members in per_node.items():
        checks = tuple(dict.fromkeys(items[i].check for i in members))
        across.setdefault((status, message, checks), []).append(members)
    reasons = []
    for (status, _, checks), sets in across.items():
        first = [items[s[0]] for s in sets]
        reasons.append(Reason(status, first[0].message, checks,
                              tuple((b.node, b.location) for b in first),
                              tuple(i for s in sets for i in s)))
    return sorted(reasons, key=lambda r: (-len(r.nodes), r.members[0]))


NO_NODE = Reason("", "no node was judged", (), (), ())


def of_rack(rack: RackVerdict) -> list[Reason]:
    """The rack verdict's reasons, grouped: what the console prints under the verdict."""
    if not rack.nodes:
        return [NO_NODE]
    items = []
    for n in rack.nodes:
        blocking = [r for r in n.results if r.status.blocks_accept]
        items += [Blocking(n.node, n.location, r.check, r.status.label, r.message)
                  for r in blocking]
        if n.verdict.value == "REJECT" and not blocking:
            items += [Blocking(n.node, n.location, "", "", why) for why in n.reasons]
    return group(items)


def of_doc(doc: Mapping[str, Any], statuses: Iterable[str] = ("fail", "error"),
           rejected: bool = True) -> tuple[list[Reason], list[tuple[Mapping[str, Any],
                                                                    Mapping[str, Any]]]]:
    """The report document's results of ``statuses`` grouped, and the (node, result) each
    reason's ``members`` index; with ``rejected``, a rejected node with none of them is an
    item too (its result: ``{"check": "", "status": "", "message": its reasons}``)."""
    wanted = tuple(statuses)
    rows: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    for n in doc["nodes"]:
        mine = [(n, r) for r in n["results"] if r["status"] in wanted]
        if rejected and not mine and n.get("verdict") == "REJECT":
            mine = [(n, {"check": "", "status": "",
                         "message": "; ".join(n.get("reasons") or []) or "rejected"})]
        rows += mine
    items = [Blocking(n["name"], n.get("location") or "", r["check"], r["status"],
                      r["message"]) for n, r in rows]
    if rejected and not doc["nodes"]:
        return [NO_NODE], rows
    return group(items), rows
