"""rackgate's command line (the only layer that prints): the parser of every subcommand,
each with its description, examples and exit codes, and ``validate`` and ``judge``.

Exit codes follow the rack verdict: 0 ACCEPT, 1 REJECT, 2 could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
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

from rackgate import __version__
from rackgate.checks.base import Check
from rackgate.cli_baseline import register as register_baseline
from rackgate.cli_common import command, epilog, paragraphs, positive_int
from rackgate.cli_demo import register as register_demo
from rackgate.cli_diff import register as register_diff
from rackgate.cli_drain import register as register_drain
from rackgate.cli_fabric import register as register_fabric
from rackgate.cli_healthcheck import register as register_healthcheck
from rackgate.cli_history import register as register_history
from rackgate.cli_list import register as register_list
from rackgate.cli_metrics import register as register_metrics
from rackgate.cli_plan import plan_only, problem_lines, validating_line
from rackgate.cli_results import add_show, print_outcome
from rackgate.cli_verify import register as register_verify
from rackgate.collect.ansible import FORK_MIB
from rackgate.collect.phases import VIA
from rackgate.collect.plan_summary import PlanSummary
from rackgate.collect.preflight import PlanRefused
from rackgate.collect.preflight_records import Problem
from rackgate.collect.task import Interrupted, Stop
from rackgate.demo.rack import DemoError
from rackgate.inventory import InventoryError
from rackgate.model import Verdict
from rackgate.overrides import load_profile_or_fail
from rackgate.reports.diff import compared
from rackgate.reports.diff_input import DiffError
from rackgate.run import RunOutcome, judge_run, resume, retest, validate
from rackgate.store.history import HistoryError
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
        return plan_only(args, checks, _line)
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
        _line(validating_line(what, summary))
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
                                 via=args.via, say=_line)
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


def _line(text: str) -> None:
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def _print_problems(problems: Sequence[Problem]) -> None:
    for line in problem_lines(problems):
        _line(line)


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


COMPARE_HELP = ("an earlier report (report.json or its run directory) to compare with: what "
                "changed goes into report.json's diff and the HTML report (a retest compares "
                "with the report it replaces unless given)")


DESCRIPTION = """\
rackgate decides, with evidence, whether a GPU rack may enter production: it collects
evidence on the nodes (over Ansible, or as one SLURM job), judges it against a hardware
profile's thresholds, and writes the reports (HTML, JSON, JUnit XML, summary.md) and a
verdict per node and for the rack. Every subcommand has its own help: rackgate COMMAND
--help."""
RACK_DAY = ["rackgate validate -i inventory/<site> --profile <profile> --plan",
            "rackgate validate -i inventory/<site> --profile <profile>",
            "rackgate drain runs/<run>",
            "rackgate validate --retest runs/<run>",
            "rackgate diff runs/<before> runs/<after>",
            "rackgate history"]
ACCEPTED = (EXIT_ACCEPT, "the rack is accepted (every node is)")
REJECTED = (EXIT_REJECT, "the rack is rejected: a node failed, or could not be measured")
NOT_MADE = "the run could not be made or judged (bad inventory, profile or options, a plan error)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rackgate", description=paragraphs(DESCRIPTION),
                                epilog=epilog(RACK_DAY, [
                                    (0, "done; validate and judge: the rack is accepted"),
                                    (1, "validate and judge: the rack is rejected (each "
                                        "command's help says what its codes mean)"),
                                    (EXIT_CANNOT_RUN, "could not run")]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"rackgate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

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

    j = command(
        sub, "judge", summary="judge a stored run again, offline",
        description="Judge the evidence stored in a run directory again, without touching "
                    "the cluster: with the run's own profile, or another one (--profile), or "
                    "with overrides merged over it (--overrides, e.g. from rackgate "
                    "baseline). The reports are written again (into --out, or the run "
                    "directory) and the judgement is recorded in the run history.",
        examples=["rackgate judge runs/<run>",
                  "rackgate judge runs/<run> --overrides site-baseline.yaml --out /tmp/rejudged",
                  "rackgate judge runs/<run> --compare runs/<earlier>"],
        exit_codes=[ACCEPTED, REJECTED, (EXIT_CANNOT_RUN, "the run could not be judged (no "
                                                          "manifest, a bad profile or "
                                                          "overrides file)")])
    j.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (runs/<run>) holding "
                                                      "manifest.json and its evidence")
    j.add_argument("--profile", help="profile to judge with (default: the run's own)")
    j.add_argument("--overrides", action="append", type=Path, metavar="FILE",
                   help="profile overrides (YAML, e.g. from rackgate baseline) merged over the "
                        "profile; repeat to merge several, in order")
    j.add_argument("--compare", metavar="REPORT", help=COMPARE_HELP)
    j.add_argument("--out", help="where to write the reports (default: the run directory)")
    add_show(j)
    j.set_defaults(func=cmd_judge)

    register_history(sub)
    register_verify(sub)
    register_demo(sub)
    register_list(sub)
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
