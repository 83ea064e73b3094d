"""What ``rackgate validate`` prints of its plan: with ``--plan``, the plan itself (the nodes,
the launch host, each check that will run and on which nodes, the checks skipped with their
reasons, those that cannot run) and then its problems; before collecting, one line naming
only the checks that will run, the skipped and the unrunnable counted by reason.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence

from rackgate.cli_common import aligned, names
from rackgate.collect.ansible import default_forks
from rackgate.collect.plan import plan
from rackgate.collect.plan_summary import CheckPlan, PlanSummary, summarise
from rackgate.collect.preflight import errors, preflight, unreachable
from rackgate.collect.preflight_records import Problem
from rackgate.overrides import load_profile_or_fail
from rackgate.selection import no_launch_reason, prepare
from rackgate.store.manifest import RunError

Emit = Callable[[str], None]


def _nodes_cell(c: CheckPlan, every: Sequence[str]) -> str:
    """On which nodes a check runs, where it skips or cannot run, and from where."""
    cell = f"all {len(every)}" if len(c.nodes) == len(every) else \
        f"{names(c.nodes, 3)} ({len(c.nodes)} of {len(every)})"
    if c.host:
        cell += f", from {c.host}"
    for label, pairs in (("skipped on", c.skipped), ("not run on", c.not_run)):
        if pairs:
            cell += f"; {label} {names([n for n, _ in pairs], 3)}: {pairs[0][1]}"
    if c.collected:
        cell += f"; already collected on {names(c.collected, 3)}"
    return cell


def plan_lines(summary: PlanSummary, heading: str) -> list[str]:
    """The plan as ``validate --plan`` prints it, ``heading`` first."""
    every = summary.nodes
    lines = [f"{heading}: {len(every)} node(s) ({names(every)}); launch host "
             f"{summary.launch_host or 'none'}"]
    running = summary.running
    lines.append(f"Checks that will run ({len(running)} of {len(summary.checks)}):")
    lines += [f"  {line}" for line in aligned(
        [["check", "where", "nodes"]] + [[c.check, c.where, _nodes_cell(c, every)]
                                         for c in running])]
    groups = summary.skip_reasons
    if groups:
        lines.append(f"Skipped ({sum(map(len, groups.values()))} check(s)), by reason:")
        lines += [f"  {why}: {', '.join(checks)}" for why, checks in groups.items()]
    if summary.unrunnable:
        lines.append(f"Cannot run: errors in the report ({len(summary.unrunnable)} "
                     f"check(s)):")
        lines += [f"  {c.check} on {names([h for h, _ in c.not_run], 3)}: {c.not_run[0][1]}"
                  for c in summary.unrunnable]
    return lines


def validating_line(what: str, summary: PlanSummary) -> str:
    """The line ``validate`` prints before collecting: the checks that will run, then the
    others counted by reason."""
    every = len(summary.nodes)
    parts = [f"{c.check} on {len(c.nodes)} node(s)" + (f" from {c.host}" if c.host else "")
             for c in summary.running]
    line = f"Validating ({what}): " + (", ".join(parts) or "no check to collect")
    groups = summary.skip_reasons
    if groups:
        line += f"; {sum(map(len, groups.values()))} check(s) skipped{counted(groups)}"
    if summary.unrunnable:
        line += (f"; {len(summary.unrunnable)} check(s) cannot run, errors: "
                 + ", ".join(c.check for c in summary.unrunnable))
    collected = [c.check for c in summary.checks if not c.nodes and len(c.collected) == every
                 and not c.skipped and not c.not_run]
    if collected:
        line += f"; {len(collected)} check(s) already collected"
    return line


def counted(groups: Mapping[str, Sequence[str]]) -> str:
    """`` (N: reason; ...)``, the reasons' common head (up to a ``: ``) said once.

    >>> counted({"not applicable to profile demo: no GPU": ["a", "b"],
    ...          "not applicable to profile demo: no NIC": ["c"]})
    ', not applicable to profile demo (2: no GPU; 1: no NIC)'
    >>> counted({"disabled in profile demo": ["a"]})
    ' (1: disabled in profile demo)'
    """
    whys = list(groups)
    head = whys[0] if len(whys) > 1 else ""
    for why in whys[1:]:  # the text every reason starts with
        while not why.startswith(head):
            head = head[:-1]
    head = head[:head.rfind(": ") + 2] if ": " in head else ""
    parts = "; ".join(f"{len(checks)}: {why[len(head):]}" for why, checks in groups.items())
    return f", {head[:-2]} ({parts})" if head else f" ({parts})"


def problem_lines(problems: Sequence[Problem]) -> list[str]:
    """The plan's problems, one line each (severity, host, check: message), then a summary."""
    lines = [f"{p.severity.upper():<5} {p.host or '(run)'}  {p.check or '-'}: {p.message}"
             for p in problems]
    n_err, n_down = len(errors(problems)), len(unreachable(problems))
    down = f", {n_down} node(s) that did not answer" if n_down else ""
    lines.append(f"Plan: {n_err} error(s){down}, {len(problems) - n_err - n_down} note(s)"
                 + ("" if n_err else ": ready to collect"))
    return lines


def plan_only(args: argparse.Namespace, checks: Sequence[str], emit: Emit) -> int:
    """``validate --plan``: the plan, then its problems; exit 2 on any error, 1 when a node
    did not answer (the run would judge it error and the others on their merits), else 0."""
    if args.resume or args.retest or args.no_plan:
        raise RunError("--plan plans a fresh run: drop --resume, --retest and --no-plan")
    profile = load_profile_or_fail(args.profile, args.overrides or ())
    prep = prepare(args.inventory, profile, group=args.group, limit=args.limit,
                   checks=checks or None, fabric_plan_file=args.fabric_plan)
    view = prep.view
    summary = summarise(plan(view, prep.selected, lambda host, check: False), prep.selected,
                        view, no_launch_reason(prep.inv, prep.hosts))
    for line in plan_lines(summary, f"Plan of group {args.group!r} against profile "
                                    f"{profile.name}"):
        emit(line)
    problems = preflight(view, prep.selected, prep.inv.sources,
                         forks=args.forks or default_forks(len(prep.hosts) + 1))
    for line in problem_lines(problems):
        emit(line)
    return 2 if errors(problems) else 1 if unreachable(problems) else 0
