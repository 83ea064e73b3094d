"""What a judge of the whole fabric returns, and how it becomes each node's result.

A fabric check (``fabric.as_built``, ``fabric.links``, ``fabric.errors``, ``fabric.sm``)
reads one evidence file taken once for the fabric, and judges it against the plan. Its
judge returns a :class:`FabricVerdict`: every finding, each with the nodes it bears on, and
what a node without a finding is told. :func:`node_results` turns that into one result per
node under test: the worst finding that bears on it, all of them named.

Whom a finding bears on: the node of an HCA end of a link; for an inter-switch link, the
nodes behind its leaf ends; for a link between spines and cores, or the subnet manager,
every node (``hosts`` empty: the whole fabric).

>>> v = FabricVerdict((FabricFinding(Status.FAIL, "cable C1 missing", frozenset({"n1"})),),
...                   "12 links as planned")
>>> [(r.node, r.status.label, r.message) for r in node_results(v, ["n1", "n2"], "x", "ev")]
[('n1', 'fail', 'cable C1 missing'), ('n2', 'pass', '12 links as planned')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rackgate.model import Result, Status

MAX_NAMED = 6  # findings named in one node's message; the rest are counted


@dataclass(frozen=True)
class FabricFinding:
    status: Status  # WARN, FAIL or ERROR
    message: str  # names both ends, the cable label, the switch's location
    hosts: frozenset[str] = frozenset()  # the nodes it bears on; empty: every node


@dataclass(frozen=True)
class FabricVerdict:
    findings: tuple[FabricFinding, ...]
    summary: str  # what a node without findings is told (what was checked, and how much)
    measured: float | None = None
    unit: str = ""


def node_results(verdict: FabricVerdict, nodes: Sequence[str], check: str,
                 evidence: str | None) -> list[Result]:
    """One result per node under test: pass with the summary, or the worst finding that
    bears on it with every such finding named (the first MAX_NAMED, then a count)."""
    out = []
    for node in nodes:
        mine = sorted((f for f in verdict.findings if not f.hosts or node in f.hosts),
                      key=lambda f: -f.status)
        if not mine:
            out.append(Result(node, check, Status.PASS, verdict.summary, verdict.measured,
                              verdict.unit, evidence=evidence))
            continue
        named = "; ".join(f.message for f in mine[:MAX_NAMED])
        more = f"; and {len(mine) - MAX_NAMED} more" if len(mine) > MAX_NAMED else ""
        out.append(Result(node, check, mine[0].status, f"{named}{more}", verdict.measured,
                          verdict.unit, evidence=evidence))
    return out
