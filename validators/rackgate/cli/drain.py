"""``rackgate drain runs/<run>``: take the run's REJECTed nodes out of the scheduler, and with
``--resume-passed`` put back the nodes this run drained that now pass (only those: a drain
of another run, a person's or the health check's stays; rackgate.scheduler.drain). A node
rejected only on what could not be measured (``error``) is drained only with
``--include-errors``.

First a WARNING line per reason to think the run stale (rackgate.scheduler.stale), then one
line per node (node, verdict, the scheduler's state before, what was done, the state
after), then one line of counts. Exit codes: 0 every action was done (or there was none),
1 an action failed, a node is not known to the scheduler or its reason cannot name one
more run, 2 drain could not run (no report, no launch host, sinfo did not answer).
"""

from __future__ import annotations

import argparse
import shlex
from collections import Counter
from pathlib import Path

from rackgate.cli.common import command
from rackgate.refusal import Refusal
from rackgate.scheduler.apply import Done, DrainOutcome, drain

EXIT_OK, EXIT_FAILED, EXIT_CANNOT_RUN = 0, 1, 2
_DONE = {"drain": "drained", "release": "released", "resume": "resumed",
         "leave": "left as it is", "none": "nothing to do",
         "unmeasured": "not drained",
         "unknown": "unknown to the scheduler", "conflict": "FAILED"}
_TO_DO = {"drain": "to drain", "release": "to release", "resume": "to resume"}


def _line(d: Done, applied: bool) -> str:
    """node, verdict, state before (-> after), what was done: why."""
    dec = d.decision
    states = dec.before.state if dec.before else "-"
    if d.ran and d.after:
        states += f" -> {d.after.state}"
    did = (_TO_DO.get(dec.action, _DONE[dec.action]) if not applied else
           f"FAILED ({_DONE[dec.action]}: {d.message})" if d.ran and not d.ok else
           _DONE[dec.action])
    return f"{dec.node:<20} {dec.verdict:<7} {states:<20} {did}: {dec.why}"


def render(outcome: DrainOutcome) -> list[str]:
    """The lines ``rackgate drain`` prints."""
    where = ("SLURM, on the launch host " + outcome.where if outcome.scheduler == "slurm"
             else "Kubernetes (kubectl, on the control host)")
    mode = "" if outcome.applied else " (dry run: nothing changed)"
    lines = [f"WARNING: {w}" for w in outcome.warnings]
    lines += [f"Run {outcome.run_id}: {where}{mode}",
              f"{'node':<20} {'verdict':<7} {'state':<20} action: why"]
    lines += [_line(d, outcome.applied) for d in outcome.done]
    if not outcome.applied:
        cmds = [shlex.join(a) for d in outcome.done for a in d.decision.argvs]
        if cmds:
            lines += ["Commands:", *(f"  {c}" for c in cmds)]
    counts: Counter[str] = Counter(d.decision.action for d in outcome.done)
    said = _DONE if outcome.applied else {**_DONE, **_TO_DO}
    lines.append(", ".join(f"{counts[a]} {said[a]}" for a in said if counts[a])
                 + (f"; {len(outcome.failed)} failed" if outcome.failed else "")
                 + ("; those not drained were rejected only on what could not be "
                    "measured (error): --include-errors drains them" if counts["unmeasured"]
                    else ""))
    if outcome.record:
        lines.append(f"Recorded in {outcome.record}")
    return lines


def cmd_drain(args: argparse.Namespace) -> int:
    if args.kubeconfig and args.scheduler != "kubernetes":
        raise Refusal("--kubeconfig is for --scheduler kubernetes")
    if args.forks < 1:
        raise Refusal(f"--forks {args.forks} is not at least 1")
    outcome = drain(Path(args.run_dir), scheduler=args.scheduler, dry_run=args.dry_run,
                    resume_passed=args.resume_passed, include_errors=args.include_errors,
                    kubeconfig=args.kubeconfig, forks=args.forks)
    for line in render(outcome):
        print(line)
    if outcome.scheduler == "kubernetes" and not outcome.applied and not args.dry_run:
        print("Not applied: give --kubeconfig FILE to run these commands")
    return EXIT_FAILED if outcome.failed else EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate drain`` to the top-level parser."""
    d = command(
        sub, "drain", summary="drain the run's rejected nodes in the scheduler (SLURM, or "
                              "Kubernetes taints and labels)",
        description="Take a judged run's REJECTed nodes out of the scheduler: SLURM (scontrol, "
                    "on the run's launch host) or Kubernetes (taints and labels). With "
                    "--resume-passed, put back the nodes this run drained that pass now; a "
                    "drain by another run, a person or the health check stays. One line per "
                    "node: its verdict, the scheduler's state before and after, what was done "
                    "and why; --dry-run only reads the states and prints the commands.",
        examples=["rackgate drain runs/<run> --dry-run",
                  "rackgate drain runs/<run>",
                  "rackgate drain runs/<run> --resume-passed",
                  "rackgate drain runs/<run> --scheduler kubernetes --kubeconfig admin.conf"],
        exit_codes=[(EXIT_OK, "every action was done (or there was none)"),
                    (EXIT_FAILED, "an action failed, a node is unknown to the scheduler, or "
                                  "its reason cannot name one more run"),
                    (EXIT_CANNOT_RUN, "drain could not run (no report, no launch host, the "
                                      "scheduler did not answer)")])
    d.add_argument("run_dir", metavar="RUN_DIR", help="a judged run directory (runs/<run>)")
    d.add_argument("--dry-run", action="store_true",
                   help="read the nodes' states and print what would be done; change nothing")
    d.add_argument("--resume-passed", action="store_true",
                   help="resume the nodes this run drained (its records in the run "
                        "directory say so) that pass now; nodes drained by another run, a "
                        "person or the health check stay")
    d.add_argument("--include-errors", action="store_true",
                   help="also drain the nodes rejected only on what could not be measured "
                        "(error: no evidence, a command that did not run); by default only "
                        "measured faults (fail) are drained and those are listed as not "
                        "drained")
    d.add_argument("--scheduler", choices=["slurm", "kubernetes"],
                   help="default: slurm, on the run's launch host")
    d.add_argument("--kubeconfig", help="Kubernetes: apply the kubectl commands with this "
                                        "kubeconfig (without it they are only printed)")
    d.add_argument("--forks", type=int, default=20, help="parallel hosts for kubectl "
                                                         "(default: 20)")
    d.set_defaults(func=cmd_drain)
