"""Judging: stored evidence + profile -> Result. Pure: no file, network or subprocess I/O.

The order of questions is the same for every check, and every "no" is ``error``:
did the command run, in time, with rc 0, on a reachable host; does its output parse;
only then does the check's own judge compare figures with thresholds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rackgate.checks import Check
from rackgate.evidence import Evidence
from rackgate.model import Result, Status
from rackgate.parsers import ParseError
from rackgate.profile import Profile

NOT_EXECUTABLE_RC = (126, 127)  # timeout(1) and shells: cannot execute / not found


def _tail(text: str, n: int = 300) -> str:
    text = " ".join(text.strip().split())
    return text if len(text) <= n else "..." + text[-n:]


def _head(text: str, n: int = 200) -> str:
    """The start of an Ansible error: its first sentence says what went wrong."""
    text = " ".join(text.strip().split())
    return text if len(text) <= n else text[:n] + "..."


_PARAMS: dict[tuple[str, str], Any] = {}


def _params(check: Check, profile: Profile) -> Any:
    """The check's validated parameters under ``profile``, validated once per profile."""
    key = (check.name, profile.sha256)
    if key not in _PARAMS:
        cp = profile.check(check.name)
        _PARAMS[key] = check.params_model.model_validate(cp.params if cp else {})
    return _PARAMS[key]


def judge_evidence(check: Check, ev: Evidence, stdout: str, profile: Profile) -> Result:
    """One node's result for one check, from its evidence."""
    node, where = ev.host, ev.stdout_file

    def error(msg: str) -> Result:
        return Result(node, check.name, Status.ERROR, msg, evidence=where)

    if ev.outcome == "unreachable":
        return error(f"host unreachable, nothing collected: {_head(ev.message)}")
    if ev.outcome == "not_run":
        return error(f"command not run: {_tail(ev.message)}")
    if ev.outcome == "timeout":
        return error(f"command timed out: {_tail(ev.message)}")
    if ev.rc in NOT_EXECUTABLE_RC:
        tool = ev.argv[3] if ev.argv[:1] == ("timeout",) and len(ev.argv) > 3 else \
            (ev.argv[0] if ev.argv else "?")
        return error(f"cannot execute {tool} on the host (rc {ev.rc}): is it installed? "
                     f"{_tail(ev.stderr or ev.message)}")
    if ev.rc != 0:
        why = _tail(ev.stderr or ev.message or stdout) or "no output"
        return error(f"command exited with rc {ev.rc}: {why}")
    cp = profile.check(check.name)
    if cp is None:
        return error(f"profile {profile.name} has no thresholds for {check.name}")
    if not cp.enabled:
        return Result(node, check.name, Status.SKIP, f"disabled in profile {profile.name}",
                      evidence=where)
    hardware = profile.model.hardware
    try:
        record = check.parse(stdout)
    except ParseError as exc:
        return error(f"unparseable evidence {where}: {exc}")
    params = _params(check, profile)
    return Result.from_judgement(node, check.name,
                                 check.judge(record, params, cp.thresholds, hardware), where)


def judge_launched(check: Check, ev: Evidence, stdout: str, profile: Profile,
                   nodes: Sequence[str]) -> tuple[list[Result], Mapping[str, Any] | None]:
    """Every node's result from the one evidence file of a job launched across ``nodes``,
    and the check's report section (a pairwise matrix) when it has one.

    Bad evidence (not run, timed out, rc, unparseable) is the same error for every node;
    so is any outcome of a check without ``judge_nodes``.
    """
    rack = judge_evidence(check, ev, stdout, profile)
    cp = profile.check(check.name)
    bad_evidence = ev.outcome != "completed" or ev.rc != 0
    if check.judge_nodes is None or bad_evidence or cp is None or not cp.enabled:
        return [replace(rack, node=n) for n in nodes], None
    try:
        record = check.parse(stdout)
    except ParseError:
        return [replace(rack, node=n) for n in nodes], None
    results, section = check.judge_nodes(record, _params(check, profile), cp.thresholds,
                                         profile.model.hardware, list(nodes), ev.stdout_file)
    return results, (section or None)


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
