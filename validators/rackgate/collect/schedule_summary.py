"""What a plan (``collect.schedule``) will do, check by check, for people: on which nodes each
check collects (and from which host, for a check run once per run), which nodes it skips
and why, which it cannot run and why, and which it has already collected. Pure.

``validate --plan`` prints it as a table; ``validate`` prints its one-line form before
collecting. A check launched across the nodes or run on the fabric host that plans
nothing is given the reason its judge will give (``placement.across``,
``placement.fabric``): skipped with the site's ``rackgate_no_launch_reason`` or with one
node under test, an error without a launch host, a fabric plan or a fabric host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rackgate.checks.shared.base import Check
from rackgate.collect.schedule import Plan
from rackgate.commands.task import Task
from rackgate.placement import (
    ACROSS_NODES,
    MIN_NODES_ACROSS,
    NO_FABRIC_HOST,
    NO_LAUNCH_HOST,
    NO_LAUNCH_VAR,
    NO_PLAN,
    ON_FABRIC,
    NotRun,
    Planned,
    RunView,
    Skipped,
    placement_of,
)


@dataclass(frozen=True)
class CheckPlan:
    """One check of the plan."""

    check: str
    where: str  # the placement's words: "on the node", "once, across the nodes", ...
    nodes: tuple[str, ...]  # the nodes it collects for (a job's: those it runs on)
    host: str | None  # where a check run once per run runs (launch or fabric host)
    skipped: tuple[tuple[str, str], ...]  # (node, why)
    not_run: tuple[tuple[str, str], ...]  # (host, why): judged error
    collected: tuple[str, ...]  # nodes whose evidence is already usable (resume, retest)
    pending: int  # evidence records and skips it will report (the progress total)


@dataclass(frozen=True)
class PlanSummary:
    nodes: tuple[str, ...]
    checks: tuple[CheckPlan, ...]
    launch_host: str | None

    @property
    def running(self) -> list[CheckPlan]:
        """The checks that will collect something."""
        return [c for c in self.checks if c.nodes]

    @property
    def pending(self) -> dict[str, int]:
        return {c.check: c.pending for c in self.checks}

    @property
    def skip_reasons(self) -> dict[str, list[str]]:
        """Reason -> the checks skipped for it on every node (and run on none), in plan
        order."""
        out: dict[str, list[str]] = {}
        for c in self.checks:
            if c.skipped and not c.nodes and not c.not_run:
                out.setdefault(c.skipped[0][1], []).append(c.check)
        return out

    @property
    def unrunnable(self) -> list[CheckPlan]:
        """The checks that cannot run anywhere (judged error where they cannot)."""
        return [c for c in self.checks if c.not_run and not c.nodes]


def _idle(check: Check, view: RunView, no_launch: str | None
          ) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """A check run once per run that planned nothing: its skips or its errors, as its
    judge will give them (none: it is already collected)."""
    every = view.nodes
    if placement_of(check) is ACROSS_NODES:
        if len(every) < MIN_NODES_ACROSS:
            return tuple((n, "a multi-node check, and this run has one node under test "
                             "(--limit or --group)") for n in every), ()
        if view.launch_host is None:
            if no_launch:
                return tuple((n, f"no launch path for multi-node checks at this site: "
                                 f"{no_launch} ({NO_LAUNCH_VAR})") for n in every), ()
            return (), ((view.nodes[0], NO_LAUNCH_HOST),)
    elif placement_of(check) is ON_FABRIC and (view.fabric is None or view.fabric_host is None):
        return (), ((view.nodes[0], NO_PLAN if view.fabric is None else NO_FABRIC_HOST),)
    return (), ()


def summarise(the_plan: Plan, checks: Sequence[Check], view: RunView,
              no_launch: str | None = None) -> PlanSummary:
    """``the_plan`` of ``checks`` over ``view``, check by check; ``no_launch`` is the site's
    reason to launch no job across its nodes (``selection.no_launch_reason``)."""
    pending = the_plan.pending(checks)
    by_check: dict[str, list[Planned]] = {}
    for p in the_plan.planned:
        by_check.setdefault(p.check, []).append(p)
    rows = []
    for check in checks:
        items = by_check.get(check.name, [])
        tasks = [p for p in items if isinstance(p, Task)]
        skipped = tuple((p.host, p.why) for p in items if isinstance(p, Skipped))
        not_run = tuple((p.host, p.why) for p in items if isinstance(p, NotRun))
        placement = placement_of(check)
        once = placement is ACROSS_NODES or placement is ON_FABRIC
        if once:
            host = tasks[0].host if tasks else None
            nodes = tuple(n for n in view.nodes if n not in view.left_out) if tasks else ()
            if skipped:  # skipped on the host it would run on: skipped for every node
                skipped = tuple((n, skipped[0][1]) for n in view.nodes)
            if not items:
                skipped, not_run = _idle(check, view, no_launch)
            collected = () if items or skipped or not_run else view.nodes
        else:
            host, nodes = None, tuple(t.host for t in tasks)
            planned = {p.host for p in items}
            collected = tuple(n for n in view.nodes if n not in planned)
        rows.append(CheckPlan(check.name, placement.where, nodes, host, skipped, not_run,
                              collected, pending[check.name]))
    return PlanSummary(view.nodes, tuple(rows), view.launch_host)
