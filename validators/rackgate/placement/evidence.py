"""Judging: stored evidence + profile -> Result. Pure: no file, network or subprocess I/O.

The order of questions is the same for every check, and every "no" is ``error``:
did the command run, in time, with rc 0, on a reachable host; does its output parse;
only then does the check's own judge compare figures with thresholds. A parser or judge
that raises anything (a bug, or input nobody foresaw) is an ``error`` for that one
(node, check), naming the exception: it never stops the other nodes' reports. A result
whose figures are not finite numbers is an ``error`` too: reports never carry NaN or
infinity.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rackgate.checks.shared.base import AcrossCheck, Check, FabricCheck, JudgedCheck
from rackgate.commands.failure import MODULE_FAILED, NOT_EXECUTABLE_RC, did_not_answer
from rackgate.commands.task import LOCK_BUSY_RC, check_argv
from rackgate.fabric.findings import node_results
from rackgate.fabric.plan import FabricPlan
from rackgate.model import Result, Status, describe, last_words
from rackgate.parsers import LauncherFailed, ParseError
from rackgate.parsers.launch_failure import find_culprits
from rackgate.profile import Profile
from rackgate.store.evidence import Evidence

# The line that collect.runner_events.ansible_error adds to Ansible's message on a module that
# could not run (commands.failure.MODULE_FAILED) with the module's stderr or stdout.
_MODULE_SAID = re.compile(r"^module (?:stderr|stdout): (.*)", re.M | re.S)


def module_failure(ev: Evidence) -> str | None:
    """What the host said when Ansible could not run its module there (a missing or broken
    Python interpreter: the module's stderr, else Ansible's first line), or None when the
    module ran, and with it the check's own command (or the shell's "not found" for it)."""
    said = _MODULE_SAID.search(ev.message)
    if said and said.group(1).strip():
        return said.group(1).strip()
    if said or ev.message.startswith(MODULE_FAILED):
        return ev.message.strip().splitlines()[0]
    return None


_PARAMS: dict[tuple[str, str], Any] = {}


def _params(check: Check, profile: Profile) -> Any:
    """The check's validated parameters under ``profile``, validated once per profile."""
    key = (check.name, profile.sha256)
    if key not in _PARAMS:
        cp = profile.check(check.name)
        _PARAMS[key] = check.params_model.model_validate(cp.params if cp else {})
    return _PARAMS[key]


def _not_finite(r: Result) -> str | None:
    """The first figure of ``r`` that is not a finite number, named, or None."""
    figures: list[tuple[str, object]] = [("measured", r.measured),
                                         ("percent_of_limit", r.percent_of_limit)]
    figures += [(f"details.{k}", v) for k, v in r.details.items()]
    figures += [(f"metrics.{m.metric}.{k}", v) for m in r.metrics
                for k, v in (("measured", m.measured), ("lower", m.lower), ("upper", m.upper))]
    for name, value in figures:
        if isinstance(value, float) and not math.isfinite(value):
            return f"{name} = {value}"
    return None


def finite(r: Result) -> Result:
    """``r``, or an ``error`` when one of its figures is NaN or infinite (a judge that let
    such a number through must not pass a node, and JSON cannot carry it).

    >>> from rackgate.model import Result, Status, describe, last_words
    >>> finite(Result("n1", "fio.seq_read", Status.PASS, "ok", measured=float("inf"))).status
    <Status.ERROR: 4>
    """
    bad = _not_finite(r)
    if bad is None:
        return r
    details = {k: v for k, v in r.details.items()
               if not (isinstance(v, float) and not math.isfinite(v))}
    return Result(r.node, r.check, Status.ERROR, f"implausible evidence: {bad} is not a "
                  f"finite number (the judgement was: {r.status.label}: {r.message})",
                  unit=r.unit, expected=r.expected, evidence=r.evidence, details=details)


def absent_from_profile(node: str, check: str, profile: Profile) -> Result | None:
    """``error`` when the run collected ``check`` but the judging profile does not define it:
    evidence nobody can judge is never a skip."""
    if profile.check(check) is not None:
        return None
    return Result(node, check, Status.ERROR, f"{check} was collected, but profile "
                  f"{profile.name} does not define it: judge with a profile that lists it")


def evidence_problem(check: Check, ev: Evidence, stdout: str,
                     profile: Profile) -> Result | None:
    """Why ``ev`` cannot be judged (an ``error``: unreachable, not run, timed out, a failed
    command; a ``skip``: disabled), or None when its output is to be parsed and judged."""
    node, where = ev.host, ev.stdout_file

    def error(msg: str) -> Result:
        return Result(node, check.name, Status.ERROR, msg, evidence=where)

    if ev.outcome == "unreachable":  # one sentence; the evidence has Ansible's words
        return error(f"nothing collected: {did_not_answer(node, ev.message)}")
    failed = module_failure(ev) if ev.outcome != "timeout" else None
    if failed is not None:  # the check's command never started
        rc = f" (rc {ev.rc})" if ev.rc is not None else ""
        hint = " (check ansible_python_interpreter)" if ev.rc in NOT_EXECUTABLE_RC else ""
        return error(f"Ansible could not run its module on the host{rc}: "
                     f"{last_words(failed)}{hint}")
    if ev.outcome == "not_run":
        return error(f"command not run: {last_words(ev.message)}")
    if ev.outcome == "timeout":
        return error(f"command timed out: {last_words(ev.message)}")
    if ev.rc in NOT_EXECUTABLE_RC:
        tool = (check_argv(ev.argv) or ("?",))[0]  # inside rackgate's lock and timeout
        return error(f"cannot execute {tool} on the host (rc {ev.rc}): is it installed? "
                     f"{last_words(ev.stderr or ev.message)}")
    if ev.rc != 0:
        why = last_words(ev.stderr or ev.message or stdout) or "no output"
        return error(f"command exited with rc {ev.rc}: {why}")
    cp = profile.check(check.name)
    if cp is None:
        return error(f"profile {profile.name} has no thresholds for {check.name}")
    if not cp.enabled:
        return Result(node, check.name, Status.SKIP, f"disabled in profile {profile.name}",
                      evidence=where)
    return None


def _parsed(check: Check, stdout: str, where: str | None) -> Any:
    """The check's record of ``stdout``; ParseError carrying the message to report."""
    try:
        return check.parse(stdout)
    except LauncherFailed as exc:
        raise ParseError(f"launch error in {where}: {exc}") from None
    except ParseError as exc:
        raise ParseError(f"unparseable evidence {where}: {exc}") from None
    except Exception as exc:  # one bad input must not stop the other nodes
        raise ParseError(f"the {check.name} parser failed on {where}: {describe(exc)}") \
            from None


def judge_evidence(check: JudgedCheck, ev: Evidence, stdout: str, profile: Profile) -> Result:
    """One node's result for one check, from its evidence."""
    node, where = ev.host, ev.stdout_file

    def error(msg: str) -> Result:
        return Result(node, check.name, Status.ERROR, msg, evidence=where)

    problem = evidence_problem(check, ev, stdout, profile)
    if problem is not None:
        return problem
    cp = profile.check(check.name)
    assert cp is not None  # evidence_problem saw it
    hardware = profile.model.hardware
    try:
        record = _parsed(check, stdout, where)
    except ParseError as exc:
        return error(str(exc))
    try:
        judgement = check.judge(record, _params(check, profile), cp.thresholds, hardware)
    except Exception as exc:  # as above
        return error(f"the {check.name} judge failed on {where}: {describe(exc)}")
    return finite(Result.from_judgement(node, check.name, judgement, where))


def judge_launched(check: AcrossCheck, ev: Evidence, stdout: str, profile: Profile,
                   nodes: Sequence[str]) -> tuple[list[Result], Mapping[str, Any] | None]:
    """Every node's result from the one evidence file of a job launched across ``nodes``,
    and the check's report section (a pairwise matrix) when it has one.

    A job that failed and whose output names the node(s) that broke it (SLURM's, Open
    MPI's or NCCL's error lines, rackgate's readiness guard: ``parsers.launch_failure``)
    is an ``error`` for those nodes and a ``warn`` for the others, which were not measured
    through no fault of their own. Other bad evidence (not run, timed out, rc,
    unparseable) is the same error for every node; so is any outcome of a check without
    ``judge_nodes``.
    """
    rack = judge_evidence(check, ev, stdout, profile)
    cp = profile.check(check.name)
    bad_evidence = ev.outcome != "completed" or ev.rc != 0
    if bad_evidence and rack.status is Status.ERROR:
        blamed = blame(check.name, ev, stdout, nodes, rack.message)
        if blamed:
            return blamed, None
    if check.judge_nodes is None or bad_evidence or cp is None or not cp.enabled:
        return [replace(rack, node=n) for n in nodes], None
    try:
        record = check.parse(stdout)
    except Exception:  # judge_evidence already turned it into the rack's error
        return [replace(rack, node=n) for n in nodes], None
    try:
        results, section = check.judge_nodes(record, _params(check, profile), cp.thresholds,
                                             profile.model.hardware, list(nodes),
                                             ev.stdout_file)
    except Exception as exc:  # one bad input must not stop the report
        why = f"the {check.name} judge failed on {ev.stdout_file}: {describe(exc)}"
        return [Result(n, check.name, Status.ERROR, why, evidence=ev.stdout_file)
                for n in nodes], None
    return exactly_the_nodes(check.name, results, nodes, ev.stdout_file), (section or None)


def broke_the_job(node: str, check: str, why: str) -> str:
    """Why ``node`` is blamed for the failure of ``check``'s job across the nodes, in words:
    its task's exit code 75 is the node lock held by another run (``flock
    --conflict-exit-code``), a busy node, not a broken one."""
    if re.search(rf"\bExited with exit code {LOCK_BUSY_RC}\b", why):
        return (f"{node} was busy: another run holds its node lock, so its task of the "
                f"{check} job gave up (exit code {LOCK_BUSY_RC}): {last_words(why, 200)}")
    return f"{node} broke the {check} job: {last_words(why, 200)}"


def blame(check: str, ev: Evidence, stdout: str, nodes: Sequence[str],
          why: str) -> list[Result]:
    """When the failed job's output names the node(s) that broke it, and not every node:
    ``error`` for them and ``warn`` (not measured) for the others; else []."""
    if ev.outcome not in ("completed", "timeout"):
        return []
    failure = find_culprits(f"{stdout}\n{ev.stderr}", nodes)
    culprits = {n: failure.culprits[n] for n in nodes if n in failure.culprits}
    if not culprits or len(culprits) == len(nodes):
        return []
    where = ev.stdout_file
    named = "; ".join(f"{n}: {last_words(w)}" for n, w in culprits.items())
    return [Result(n, check, Status.ERROR, f"{broke_the_job(n, check, culprits[n])} ({why})",
                   evidence=where) if n in culprits
            else Result(n, check, Status.WARN, f"not measured: the job across the nodes "
                        f"failed on another node ({named})", evidence=where)
            for n in nodes]


def exactly_the_nodes(check: str, results: Sequence[Result], nodes: Sequence[str],
                      evidence: str | None) -> list[Result]:
    """One finite result per node under test: a node the judge left out, or judged twice, is
    an ``error``; results for hosts that are not under test are dropped."""
    by_node: dict[str, list[Result]] = {}
    for r in results:
        by_node.setdefault(r.node, []).append(r)
    out = []
    for n in nodes:
        mine = by_node.get(n, [])
        if len(mine) == 1:
            out.append(finite(mine[0]))
        else:
            why = "no result" if not mine else f"{len(mine)} results"
            out.append(Result(n, check, Status.ERROR, f"the {check} judge gave {why} for this "
                              f"node, which is under test", evidence=evidence))
    return out


def not_applicable(node: str, check: Check, profile: Profile) -> Result | None:
    """SKIP when the profile says this node has no such hardware (the demo has no GPU):
    the check is then neither run nor judged, and the report says why."""
    cp = profile.check(check.name)
    if cp is not None and not cp.enabled:
        return Result(node, check.name, Status.SKIP, f"disabled in profile {profile.name}")
    reason = check.applies(profile.model.hardware)
    if reason is None:
        return None
    return Result(node, check.name, Status.SKIP, f"not applicable to profile {profile.name}: "
                                                 f"{reason}")


def missing_evidence(node: str, check: str, why: str) -> Result:
    return Result(node, check, Status.ERROR, why)


def judge_fabric(check: FabricCheck, ev: Evidence, stdout: str, profile: Profile,
                 plan: FabricPlan, nodes: Sequence[str]) -> list[Result]:
    """Every node's result from the one evidence file of a fabric check: its judge's
    findings against ``plan``, each node told those that bear on it. Bad evidence is the
    same error (or skip) for every node."""
    where = ev.stdout_file

    def every(msg: str) -> list[Result]:
        return [Result(n, check.name, Status.ERROR, msg, evidence=where) for n in nodes]

    problem = evidence_problem(check, ev, stdout, profile)
    if problem is not None:
        return [replace(problem, node=n) for n in nodes]
    cp = profile.check(check.name)
    assert cp is not None and check.judge_plan is not None
    try:
        record = _parsed(check, stdout, where)
    except ParseError as exc:
        return every(str(exc))
    try:
        verdict = check.judge_plan(record, _params(check, profile), cp.thresholds, plan)
    except Exception as exc:  # one bad input must not stop the report
        return every(f"the {check.name} judge failed on {where}: {describe(exc)}")
    return [finite(r) for r in node_results(verdict, nodes, check.name, where)]
