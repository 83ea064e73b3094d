"""The rack-level judgements over every node's results (``checks.shared.base.RackCheck``: peer
comparison, version drift, duplicate identities), as the rack's profile configures them
in its ``rack:`` section. Pure: results and profile in, results out.

A judgement that fails (a bug, input nobody foresaw) never stops the report: every node
then gets an ``error`` naming it, since its judgement is missing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from rackgate.checks.shared.base import RackCheck
from rackgate.model import Result, Status, describe
from rackgate.placement.evidence import finite
from rackgate.profile import Profile


def _contained(name: str, judge: Callable[[list[Result]], list[Result]],
               judged: list[Result], hosts: Sequence[str],
               kept: Sequence[Result] = ()) -> list[Result]:
    """``judge(judged)``, every figure finite; if it raises, ``kept`` (what it would have
    returned unchanged) plus an ``error`` naming it for every node."""
    try:
        return [finite(r) for r in judge(judged)]
    except Exception as exc:  # a bug here must not stop the report
        why = f"{name} failed: {describe(exc)}"
        return [*kept, *(Result(h, name, Status.ERROR, why) for h in hosts)]


def _apply(check: RackCheck, params: Mapping[str, object],
           results: list[Result]) -> list[Result]:
    return check.judge(results, check.params_model.model_validate(params))


def judge_rack(judged: list[Result], profile: Profile, hosts: Sequence[str],
               registry: Mapping[str, RackCheck]) -> list[Result]:
    """``judged`` (revised by the judgements that revise results) followed by the results
    of the others, each enabled rack-level judgement of ``profile`` in registry order."""
    results, own = judged, []
    for name, check in registry.items():
        cp = profile.rack_check(name)
        if cp is None or not cp.enabled:
            continue

        run = functools.partial(_apply, check, cp.params)
        if check.revises:
            results = _contained(name, run, results, hosts, kept=results)
        else:
            own += _contained(name, run, results, hosts)
    return results + own
