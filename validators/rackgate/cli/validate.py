"""``rackgate validate``: collect evidence on a rack, judge it, write the reports; with
``--plan``, only the plan (the nodes, the launch host, each check that will run and on which
nodes, the checks skipped with their reasons, those that cannot run) and then its problems.
Before collecting, one line names the checks that will run, the skipped and the unrunnable
counted by reason; while collecting, a progress bar per check (a terminal) or a line per
command that did not simply complete (logs).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from rackgate.checks.shared.base import Check
from rackgate.cli.common import EXIT_CANNOT_RUN, aligned, command, names, positive_int
from rackgate.cli.results import (
    ACCEPTED,
    COMPARE_HELP,
    NOT_MADE,
    REJECTED,
    add_show,
    err,
    line,
    out,
    summary_code,
)
from rackgate.collect.ansible import FORK_MIB, default_forks
from rackgate.collect.phases import VIA
from rackgate.collect.preflight import PlanRefused, errors, preflight, unreachable
from rackgate.collect.preflight_records import Problem
from rackgate.collect.schedule import plan
from rackgate.collect.schedule_summary import CheckPlan, PlanSummary, summarise
from rackgate.collect.stop import Interrupted, Stop
from rackgate.overrides import load_profile_or_fail
from rackgate.refusal import Refusal
from rackgate.reports.diff import compared
from rackgate.run import resume, retest, validate
from rackgate.selection import no_launch_reason, prepare


def cmd_validate(args: argparse.Namespace) -> int:
    if args.resume and args.retest:
        raise Refusal("--resume and --retest are two ways to go on with a run: give one")
    if args.resume:
        if args.inventory or args.profile or args.overrides or args.checks or args.limit:
            raise Refusal("--resume takes the inventory, profile, hosts and checks from the "
                           "run's manifest.json; drop -i/--profile/--overrides/--checks/--limit")
    elif args.retest:
        if args.inventory or args.profile or args.overrides or args.checks:
            raise Refusal("--retest takes the inventory, profile and checks from the run's "
                           "manifest.json; drop -i/--profile/--overrides/--checks (--limit "
                           "picks nodes)")
    elif not (args.inventory and args.profile):
        raise Refusal("validate needs -i INVENTORY and --profile PROFILE (or --resume RUN_DIR, "
                       "or --retest RUN_DIR)")
    checks = [c.strip() for part in (args.checks or []) for c in part.split(",") if c.strip()]
    if args.checks is not None and not checks:
        raise Refusal(f"--checks {','.join(args.checks)!r} names no check or tag")
    if args.limit is not None and not args.limit.replace(",", " ").replace(":", " ").strip():
        raise Refusal(f"--limit {args.limit!r} names no host pattern (leave it out to "
                       f"validate the whole group)")
    if args.plan:
        return plan_only(args, checks, line)
    interactive = out.is_terminal
    progress = Progress(TextColumn("{task.description:<22}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=out,
                        disable=not interactive)
    tasks: dict[str, TaskID] = {}
    totals: dict[str, int] = {}
    done: dict[str, int] = {}

    def on_plan(selected: Sequence[Check], summary: PlanSummary) -> None:
        what = (f"resuming {args.resume}" if args.resume else
                f"retesting the failures of {args.retest}" if args.retest else
                f"group {args.group!r} against profile {args.profile}")
        line(validating_line(what, summary))
        pending, running = summary.pending, {c.check for c in summary.running}
        for c in selected:  # a bar for each check that runs; the others are counted too
            tasks[c.name] = progress.add_task(c.name, total=pending[c.name],
                                              visible=c.name in running)
            totals[c.name], done[c.name] = pending[c.name], 0

    outcomes: dict[str, Counter[str]] = defaultdict(Counter)

    def on_result(host: str, check: str, outcome: str) -> None:
        """Logs (no terminal) get a line per command that did not simply complete (every
        line with --show all) and one per check when its last node is in (not for a check
        only skipped: the Validating line counted it)."""
        done[check] += 1
        totals[check] = max(totals[check], done[check])  # a job run again counts too
        progress.update(tasks[check], total=totals[check], advance=1)
        outcomes[check][outcome] += 1
        if interactive:
            return
        where = f"[{done[check]}/{totals[check]}] {check}"
        if args.show == "all" or outcome not in ("completed", "skipped"):
            out.print(f"{where} {host}: {outcome}", markup=False, highlight=False)
        if done[check] == totals[check] and (args.show == "all"
                                             or set(outcomes[check]) != {"skipped"}):
            out.print(f"{where}: " + ", ".join(f"{n} {o}" for o, n in outcomes[check].items()),
                      markup=False, highlight=False)

    compare = compared(args.compare) if args.compare else None  # read before collecting
    stop = Stop()
    try:
        with stop_on_signals(stop), progress:
            if args.resume:
                outcome = resume(Path(args.resume), forks=args.forks, on_plan=on_plan,
                                 progress=on_result, stop=stop,
                                 keep_artifacts=args.keep_artifacts, via=args.via)
            elif args.retest:
                outcome = retest(Path(args.retest), limit=args.limit, forks=args.forks,
                                 on_plan=on_plan, progress=on_result, stop=stop,
                                 keep_artifacts=args.keep_artifacts, compare=compare,
                                 via=args.via, say=line)
            else:
                outcome = validate(args.inventory,
                                   load_profile_or_fail(args.profile, args.overrides or ()),
                                   group=args.group, limit=args.limit,
                                   checks=checks or None, runs_dir=Path(args.runs_dir),
                                   forks=args.forks, on_plan=on_plan, progress=on_result,
                                   stop=stop, keep_artifacts=args.keep_artifacts,
                                   plan_first=not args.no_plan, on_problems=_print_problems,
                                   fabric_plan=args.fabric_plan, compare=compare,
                                   via=args.via)
    except PlanRefused as exc:
        _print_problems(exc.problems)
        raise
    except Interrupted:
        raise
    except Refusal as exc:  # InventoryError is one
        if stop():  # Ctrl-C also reached a child (ansible-inventory): say what happened
            raise Interrupted(stop.signame) from exc
        raise
    code = summary_code(outcome, args.show)
    if stop():  # it came after collection: the reports stand, the exit code says so
        err.print(f"rackgate validate: interrupted by {stop.signame} after the reports were "
                  f"written", markup=False, highlight=False)
        return EXIT_CANNOT_RUN
    return code


def _print_problems(problems: Sequence[Problem]) -> None:
    for text in problem_lines(problems):
        line(text)


@contextlib.contextmanager
def stop_on_signals(stop: Stop) -> Iterator[None]:
    """While validating, SIGTERM and SIGINT ask ``stop`` to end the run: nothing more is
    launched, the collection's processes (here and on the nodes) are ended, and the run
    exits 2 with the evidence it has. A second signal skips the clean-up on the nodes."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
        raise Refusal("--plan plans a fresh run: drop --resume, --retest and --no-plan")
    profile = load_profile_or_fail(args.profile, args.overrides or ())
    prep = prepare(args.inventory, profile, group=args.group, limit=args.limit,
                   checks=checks or None, fabric_plan_file=args.fabric_plan)
    view = prep.view
    summary = summarise(plan(view, prep.selected, lambda host, check: False), prep.selected,
                        view, no_launch_reason(prep.inv, prep.hosts))
    for text in plan_lines(summary, f"Plan of group {args.group!r} against profile "
                                    f"{profile.name}"):
        emit(text)
    problems = preflight(view, prep.selected, prep.inv.sources,
                         forks=args.forks or default_forks(len(prep.hosts) + 1))
    for text in problem_lines(problems):
        emit(text)
    return 2 if errors(problems) else 1 if unreachable(problems) else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate validate`` to the top-level parser."""
    v = command(
        sub, "validate", summary="collect evidence on a rack, judge it, write reports",
        description="Collect evidence on the nodes of --group (default compute) of an Ansible "
                    "inventory, judge it against --profile, and write the reports into a new "
                    "run directory under --runs-dir: report.html, report.json, report.xml "
                    "(JUnit) and summary.md, and a line in the run history. The plan runs "
                    "first, in seconds (--plan: only the plan, printed with its problems); "
                    "validate refuses to start on a plan error.\n\n"
                    "--resume RUN_DIR collects what a run lacks; --retest RUN_DIR collects "
                    "its failures again, after a repair, as the run's next revision.",
        examples=["rackgate validate -i inventory/<site> --profile dgx-h100 --plan",
                  "rackgate validate -i inventory/<site> --profile dgx-h100",
                  "rackgate validate -i inventory/<site> --profile dgx-h100 --limit 'dgx0[01:08]'"
                  " --checks fio.seq_read,storage",
                  "rackgate validate --resume runs/<run>",
                  "rackgate validate --retest runs/<run> --limit rg-node01"],
        exit_codes=[ACCEPTED, REJECTED, (EXIT_CANNOT_RUN, f"{NOT_MADE}, or interrupted; "
                                                          f"--plan: 0 no error, 2 an error")])
    v.add_argument("-i", "--inventory", action="append",
                   help="Ansible inventory (repeat to combine sources)")
    v.add_argument("--profile", help="shipped profile name or a profile file")
    v.add_argument("--overrides", action="append", type=Path, metavar="FILE",
                   help="profile overrides (YAML, e.g. from rackgate baseline) merged over "
                        "--profile; repeat to merge several, in order")
    v.add_argument("--compare", metavar="REPORT", help=COMPARE_HELP)
    v.add_argument("--fabric-plan", type=Path, help="the fabric plan (default: the fabric.yml "
                   "beside the inventory, if there is one)")
    v.add_argument("--resume", metavar="RUN_DIR",
                   help="collect only what RUN_DIR lacks (missing, damaged, failed or timed-out "
                        "evidence), then judge the whole run")
    v.add_argument("--retest", metavar="RUN_DIR",
                   help="collect again, in RUN_DIR, every (node, check) that ended fail or "
                        "error (of the nodes --limit selects) and the checks across the "
                        "nodes, keeping the earlier evidence as attempts; the reports become "
                        "the run's next revision (each revision's kept as report.rev<N>.*), "
                        "compared with the first. A retested node that this run's "
                        "'rackgate drain' drained in SLURM is resumed for the retest's jobs "
                        "and drained again after it if still rejected; any other drain "
                        "stays")
    v.add_argument("--group", default="compute", help="inventory group of the nodes to accept "
                                                      "(default: compute)")
    v.add_argument("--limit", metavar="PATTERN",
                   help="Ansible host patterns selecting nodes of the group, as "
                        "ansible-playbook --limit reads them: 'dgx01*,dgx02', '!dgx004', "
                        "'compute:&rack12', 'dgx0[01:16]', '@retry-file'")
    v.add_argument("--keep-artifacts", action="store_true",
                   help="keep ansible-runner's artifacts (stdout, job events; never the "
                        "credential files) in RUN_DIR/ansible-artifacts/")
    v.add_argument("--checks", action="append",
                   help="check names or tags, comma-separated (default: all in the profile)")
    v.add_argument("--runs-dir", default="runs", help="where run directories go (default: runs)")
    v.add_argument("--forks", type=positive_int,
                   help="hosts Ansible works on at once (default: one per host, as many as "
                        f"half of this host's available memory holds at {FORK_MIB} MiB each)")
    v.add_argument("--via", choices=VIA, default="ansible",
                   help="how every node's own checks are collected: 'ansible' runs "
                        "rackgate's node collector on each host over Ansible; 'slurm' runs "
                        "it as one SLURM job across the nodes from the launch host "
                        "(default: ansible)")
    v.add_argument("--plan", action="store_true", help="only plan, in seconds: list every "
                   "problem a run would meet (no benchmark runs); exit 2 on an error, 1 "
                   "when a node did not answer (a run judges it error, the others on their "
                   "merits)")
    v.add_argument("--no-plan", action="store_true", help="collect without the plan first "
                   "(validate refuses to start on a plan error; --resume never re-plans)")
    add_show(v)
    v.set_defaults(func=cmd_validate)

