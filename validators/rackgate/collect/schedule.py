"""Planning: which command runs where, before anything runs. Pure.

:func:`plan` turns a run's view (nodes, inventory variables, profiles, launch host), its
checks and what stored evidence is already usable into a :class:`Plan`: the tasks to
collect, in phases, the (host, check) pairs that cannot run (recorded as ``not_run``
evidence, so their nodes are judged ``error``) and those the profile says do not apply.
Each check's placement decides its part; collection executes the plan, and judging never
plans again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rackgate.checks.shared.base import Check
from rackgate.commands.task import Task
from rackgate.placement import (
    NotRun,
    OnNode,
    Planned,
    RunView,
    Skipped,
    Usable,
    placement_of,
)


@dataclass(frozen=True)
class Plan:
    """What a collection does. ``planned`` keeps every (host, check) in the order the run
    reports progress: node by node for the per-node checks, then the jobs across nodes."""

    planned: tuple[Planned, ...]

    @property
    def phases(self) -> list[list[Task]]:
        """The tasks, phase by phase (every node's own benchmarks, then jobs across them),
        leaving out empty phases."""
        tasks = [p for p in self.planned if isinstance(p, Task)]
        out: dict[int, list[Task]] = {}
        for t in tasks:
            out.setdefault(self.phase_of[t.check], []).append(t)
        return [out[k] for k in sorted(out)]

    @property
    def not_run(self) -> list[NotRun]:
        return [p for p in self.planned if isinstance(p, NotRun)]

    @property
    def skipped(self) -> list[Skipped]:
        return [p for p in self.planned if isinstance(p, Skipped)]

    def pending(self, checks: Sequence[Check]) -> dict[str, int]:
        """How many evidence records (or skips) each check will see, for progress."""
        counts = Counter(p.check for p in self.planned)
        return {c.name: counts[c.name] for c in checks}

    phase_of: dict[str, int]  # check -> its placement's phase


def plan(view: RunView, checks: Sequence[Check], usable: Usable) -> Plan:
    """Plan collecting ``checks`` for ``view``, leaving out what ``usable`` says is stored."""
    node_order = {n: i for i, n in enumerate(view.nodes)}
    per_node: list[tuple[int, int, Planned]] = []
    later: list[Planned] = []
    phase = {}
    for k, check in enumerate(checks):
        placement = placement_of(check)
        phase[check.name] = placement.phase
        for item in placement.plan(check, view, usable):
            if isinstance(placement, OnNode):  # node by node, checks in their order
                per_node.append((node_order.get(item.host, len(node_order)), k, item))
            else:
                later.append(item)
    ordered = [item for _, _, item in sorted(per_node, key=lambda t: (t[0], t[1]))]
    return Plan(tuple(ordered + later), phase)
