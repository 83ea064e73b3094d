"""rackgate's command line; the only layer that prints.

Exit codes follow the rack verdict: 0 ACCEPT, 1 REJECT, 2 could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from rackgate import __version__
from rackgate.checks import RACK_REGISTRY, REGISTRY
from rackgate.checks.base import Check
from rackgate.cli_baseline import register as register_baseline
from rackgate.cli_demo import register as register_demo
from rackgate.cli_diff import register as register_diff
from rackgate.cli_drain import register as register_drain
from rackgate.cli_fabric import register as register_fabric
from rackgate.cli_healthcheck import register as register_healthcheck
from rackgate.cli_metrics import register as register_metrics
from rackgate.cli_results import STATUS_STYLE, add_show, print_outcome
from rackgate.cli_verify import register as register_verify
from rackgate.collect.ansible import FORK_MIB, default_forks
from rackgate.collect.phases import VIA
from rackgate.collect.preflight import PlanRefused, errors, preflight
from rackgate.collect.preflight_records import Problem
from rackgate.collect.task import Interrupted, Stop
from rackgate.demo.rack import DemoError
from rackgate.figures import with_unit
from rackgate.inventory import InventoryError
from rackgate.model import Verdict
from rackgate.overrides import load_profile_or_fail
from rackgate.placement import placement_of
from rackgate.profile import available_profiles
from rackgate.reports.diff import compared
from rackgate.reports.diff_input import DiffError
from rackgate.run import RunOutcome, judge_run, resume, retest, validate
from rackgate.selection import prepare
from rackgate.store.history import HistoryError, default_history_path, node_history, open_history
from rackgate.store.manifest import RunError

EXIT_ACCEPT, EXIT_REJECT, EXIT_CANNOT_RUN = 0, 1, 2

# Logs (CI, pipes) get a wide table instead of rich's 80-column default.
_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160
out = Console(width=_WIDTH)
err = Console(stderr=True, width=_WIDTH)


def _summary(outcome: RunOutcome, show: str = "problems") -> int:
    print_outcome(outcome, show, out, err)
    return EXIT_ACCEPT if outcome.rack.verdict is Verdict.ACCEPT else EXIT_REJECT


def cmd_validate(args: argparse.Namespace) -> int:
    if args.resume and args.retest:
        raise RunError("--resume and --retest are two ways to go on with a run: give one")
    if args.resume:
        if args.inventory or args.profile or args.overrides or args.checks or args.limit:
            raise RunError("--resume takes the inventory, profile, hosts and checks from the "
                           "run's manifest.json; drop -i/--profile/--overrides/--checks/--limit")
    elif args.retest:
        if args.inventory or args.profile or args.overrides or args.checks:
            raise RunError("--retest takes the inventory, profile and checks from the run's "
                           "manifest.json; drop -i/--profile/--overrides/--checks (--limit "
                           "picks nodes)")
    elif not (args.inventory and args.profile):
        raise RunError("validate needs -i INVENTORY and --profile PROFILE (or --resume RUN_DIR, "
                       "or --retest RUN_DIR)")
    checks = [c.strip() for part in (args.checks or []) for c in part.split(",") if c.strip()]
    if args.checks is not None and not checks:
        raise RunError(f"--checks {','.join(args.checks)!r} names no check or tag")
    if args.limit is not None and not args.limit.replace(",", " ").replace(":", " ").strip():
        raise RunError(f"--limit {args.limit!r} names no host pattern (leave it out to "
                       f"validate the whole group)")
    if args.plan:
        return _plan_only(args, checks)
    interactive = out.is_terminal
    progress = Progress(TextColumn("{task.description:<22}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), console=out,
                        disable=not interactive)
    tasks: dict[str, TaskID] = {}
    totals: dict[str, int] = {}
    done: dict[str, int] = {}

    def on_plan(selected: Sequence[Check], pending: Mapping[str, int]) -> None:
        what = (f"resuming {args.resume}" if args.resume else
                f"retesting the failures of {args.retest}" if args.retest else
                f"group {args.group!r} against profile {args.profile}")
        out.print(f"Validating ({what}): " + ", ".join(f"{c.name} on {pending[c.name]} node(s)"
                                                     for c in selected),
                  markup=False, highlight=False)
        for c in selected:
            tasks[c.name] = progress.add_task(c.name, total=pending[c.name])
            totals[c.name], done[c.name] = pending[c.name], 0

    outcomes: dict[str, Counter[str]] = defaultdict(Counter)

    def on_result(host: str, check: str, outcome: str) -> None:
        """Logs (no terminal) get a line per command that did not simply complete (every
        line with --show all) and one per check when its last node is in."""
        done[check] += 1
        totals[check] = max(totals[check], done[check])  # a job run again counts too
        progress.update(tasks[check], total=totals[check], advance=1)
        outcomes[check][outcome] += 1
        if interactive:
            return
        where = f"[{done[check]}/{totals[check]}] {check}"
        if args.show == "all" or outcome not in ("completed", "skipped"):
            out.print(f"{where} {host}: {outcome}", markup=False, highlight=False)
        if done[check] == totals[check]:
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
                                 via=args.via, say=_say)
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
    except (RunError, InventoryError) as exc:
        if stop():  # Ctrl-C also reached a child (ansible-inventory): say what happened
            raise Interrupted(stop.signame) from exc
        raise
    code = _summary(outcome, args.show)
    if stop():  # it came after collection: the reports stand, the exit code says so
        err.print(f"rackgate validate: interrupted by {stop.signame} after the reports were "
                  f"written", markup=False, highlight=False)
        return EXIT_CANNOT_RUN
    return code


def _say(line: str) -> None:
    out.print(line, markup=False, highlight=False)


def _print_problems(problems: Sequence[Problem]) -> None:
    """The plan's problems, one line each (severity, host, check: message), then a summary."""
    for p in problems:
        out.print(f"{p.severity.upper():<5} {p.host or '(run)'}  {p.check or '-'}: {p.message}",
                  markup=False, highlight=False)
    n_err = len(errors(problems))
    out.print(f"Plan: {n_err} error(s), {len(problems) - n_err} note(s)" + (
        "" if n_err else ": ready to collect"), markup=False, highlight=False)


def _plan_only(args: argparse.Namespace, checks: Sequence[str]) -> int:
    """``validate --plan``: the plan's problems; exit 2 on any error, else 0."""
    if args.resume or args.retest or args.no_plan:
        raise RunError("--plan plans a fresh run: drop --resume, --retest and --no-plan")
    prep = prepare(args.inventory, load_profile_or_fail(args.profile, args.overrides or ()),
                   group=args.group, limit=args.limit, checks=checks or None,
                   fabric_plan_file=args.fabric_plan)
    problems = preflight(prep.view, prep.selected, prep.inv.sources,
                         forks=args.forks or default_forks(len(prep.hosts) + 1))
    _print_problems(problems)
    return EXIT_CANNOT_RUN if errors(problems) else EXIT_ACCEPT


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


def cmd_judge(args: argparse.Namespace) -> int:
    profile = load_profile_or_fail(args.profile) if args.profile else None
    out_dir = Path(args.out) if args.out else None
    compare = compared(args.compare) if args.compare else None
    return _summary(judge_run(Path(args.run_dir), profile, out_dir, args.overrides or (),
                              compare), args.show)


def cmd_history(args: argparse.Namespace) -> int:
    path = default_history_path(Path(args.runs_dir))
    if not path.is_file():
        raise RunError(f"no run history at {path} (it is written by validate and judge)")
    conn = open_history(path)
    try:
        rows = node_history(conn, args.node, args.check, args.limit)
    finally:
        conn.close()
    if not rows:
        out.print(f"no results for node {args.node!r} in {path}", markup=False, highlight=False)
        return EXIT_REJECT
    table = Table(title=f"history of {args.node}")
    for col in ("judged", "run", "rev", "profile", "check", "attempt", "status", "measured",
                "message"):
        table.add_column(col, overflow="fold")
    for r in rows:
        measured = with_unit(r.measured, r.unit) if r.measured is not None else "-"
        table.add_row(r.judged_at, r.run_id, str(r.revision), Text(r.profile), Text(r.check),
                      str(r.attempt) if r.attempt else "-",
                      f"[{STATUS_STYLE[r.status.label]}]{r.status.label}[/]", Text(measured),
                      Text(r.message))
    out.print(table)
    return EXIT_ACCEPT


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "profiles":
        for name in available_profiles():
            out.print(name)
    else:
        for c in REGISTRY.values():
            out.print(f"{c.name:<24} {c.scope.value:<9} {placement_of(c).where:<22} "
                      f"{','.join(sorted(c.tags)):<14} {c.description}", markup=False,
                      highlight=False)
        for r in RACK_REGISTRY.values():
            out.print(f"{r.name:<24} {r.scope.value:<9} {'over every result':<22} "
                      f"{','.join(sorted(r.tags)):<14} {r.description}", markup=False,
                      highlight=False)
    return 0


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--forks 0`` would run nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


COMPARE_HELP = ("an earlier report (report.json or its run directory) to compare with: what "
                "changed goes into report.json's diff and the HTML report (a retest compares "
                "with the report it replaces unless given)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rackgate", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"rackgate {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="collect evidence on a rack, judge it, write reports")
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
                   "problem a run would meet (no benchmark runs); exit 2 on an error")
    v.add_argument("--no-plan", action="store_true", help="collect without the plan first "
                   "(validate refuses to start on a plan error; --resume never re-plans)")
    add_show(v)
    v.set_defaults(func=cmd_validate)

    j = sub.add_parser("judge", help="judge a stored run again, offline")
    j.add_argument("run_dir")
    j.add_argument("--profile", help="profile to judge with (default: the run's own)")
    j.add_argument("--overrides", action="append", type=Path, metavar="FILE",
                   help="profile overrides (YAML, e.g. from rackgate baseline) merged over the "
                        "profile; repeat to merge several, in order")
    j.add_argument("--compare", metavar="REPORT", help=COMPARE_HELP)
    j.add_argument("--out", help="where to write the reports (default: the run directory)")
    add_show(j)
    j.set_defaults(func=cmd_judge)

    h = sub.add_parser("history", help="a node's results over time (runs/history.sqlite)")
    h.add_argument("node")
    h.add_argument("--check", help="only this check")
    h.add_argument("--limit", type=positive_int, default=50,
                   help="newest N results (default: 50)")
    h.add_argument("--runs-dir", default="runs", help="where run directories go (default: runs)")
    h.set_defaults(func=cmd_history)

    register_verify(sub)

    register_demo(sub)
    ls = sub.add_parser("list", help="list shipped profiles or registered checks")
    ls.add_argument("what", choices=["profiles", "checks"])
    ls.set_defaults(func=cmd_list)
    register_fabric(sub)
    register_drain(sub)
    register_baseline(sub)
    register_diff(sub)
    register_metrics(sub)
    register_healthcheck(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "command", None) == "demo" and not args.inventory:
        args.inventory = ["inventory/demo"]
    try:
        code: int = args.func(args)
        return code
    except (RunError, InventoryError, DemoError, HistoryError, Interrupted, DiffError) as exc:
        err.print(f"rackgate {args.command}: {exc}", markup=False, highlight=False)
        return EXIT_CANNOT_RUN
    except OSError as exc:  # a runs directory that is a file, a disk that is full...
        where = f" {exc.filename}" if exc.filename else ""
        err.print(f"rackgate {args.command}: cannot use{where}: {exc.strerror or exc}",
                  markup=False, highlight=False)
        return EXIT_CANNOT_RUN
    except KeyboardInterrupt:
        err.print(f"rackgate {args.command}: interrupted", markup=False, highlight=False)
        return EXIT_CANNOT_RUN


if __name__ == "__main__":
    sys.exit(main())
