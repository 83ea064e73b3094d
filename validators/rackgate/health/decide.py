"""What the health check does to the node in SLURM, and the textfile it leaves for
node_exporter. Pure: the node's state and reason (sinfo ``%T|%E``), the reason the health
check recorded when it last drained the node, and the items' results in; a decision and
text out.

The health check only ever touches a node whose drain is its own (:func:`owned`: the
reason starts with :data:`~rackgate.health.DRAIN_MARK` and is exactly the reason it
recorded on the node, :data:`~rackgate.health.RECORD`, when it drained it) or a node in a
state it drains from (idle, mixed, allocated, completing, planned, reserved, and those
with no reason of another's). A node drained or down for any other reason (an
operator's, an acceptance run's, one that only looks like the health check's) is left as
it is, whether the items pass or not.

>>> ours = "rackgate/healthcheck: mounts: /scratch: not mounted"
>>> st = NodeState("n1", "drained", ours)
>>> decide(st, None, ours).action, decide(st, "rackgate/healthcheck: mounts: x", ours).action
('resume', 'drain')
>>> decide(st, None, None).action  # the marker, but no record: not the health check's
'none'
>>> decide(NodeState("n1", "drained", "operator: t"), None, None).action
'none'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rackgate.health import DRAIN_MARK, ITEMS, Health, ItemResult
from rackgate.scheduler.slurm import SLURM_OWN_REASONS, NodeState, base_state, is_drained

REASON_MAX = 120  # characters: what sinfo -R shows whole
# Base states (sinfo(1) NODE STATE CODES, flags stripped) a failing node is drained from.
DRAINABLE = frozenset({"idle", "mixed", "allocated", "completing", "planned", "reserved"})
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                  " _.,:;/=+()[]@#%-")


@dataclass(frozen=True)
class Decision:
    action: Literal["drain", "resume", "none"]
    why: str


def owned(state: NodeState, recorded: str | None) -> bool:
    """Whether the node's reason is the health check's own: its marker, and the reason it
    recorded when it drained the node (``recorded``; None when there is no record)."""
    return state.reason.startswith(DRAIN_MARK) and state.reason == recorded


def drain_reason(results: Sequence[ItemResult]) -> str | None:
    """The reason for the first failed item (None when all pass): plain characters only,
    whitespace folded, at most REASON_MAX characters.

    >>> drain_reason([ItemResult("mounts", Health.FAIL, "/scr$(x): not\\tmounted")])
    'rackgate/healthcheck: mounts: /scr?(x): not mounted'
    """
    bad = [r for r in results if not r.health.ok]
    if not bad:
        return None
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    head = f"{DRAIN_MARK}{bad[0].item}: "
    why = "".join(c if c in _SAFE else "?" for c in " ".join(bad[0].why.split()))
    room = REASON_MAX - len(head) - len(more)
    if len(why) > room:
        why = why[:room - 3].rstrip() + "..."
    return f"{head}{why}{more}"


def decide(state: NodeState | None, reason: str | None, recorded: str | None) -> Decision:
    """Drain, resume or nothing, from the node's state, ``reason`` (None: healthy) and the
    reason the health check recorded when it last drained the node.

    >>> decide(NodeState("n1", "idle", ""), "rackgate/healthcheck: gpu_count: 7", None).action
    'drain'
    >>> decide(NodeState("n1", "down*", "Not responding"), "rackgate/healthcheck: x: y",
    ...        None).action
    'none'
    """
    if state is None:
        return Decision("none", "sinfo does not list the node")
    base, ours = base_state(state.state), owned(state, recorded)
    if reason is None:
        if is_drained(state.state) and ours:
            return Decision("resume", f"healthy again; was {state.describe()}")
        if is_drained(state.state):
            return Decision("none", f"healthy, but {state.describe()} is not the health "
                            "check's drain" + _unrecorded(state, recorded)
                            + ": left for whoever set it")
        return Decision("none", f"healthy, {state.describe()}")
    if ours and is_drained(state.state):
        if state.reason == reason:
            return Decision("none", "already drained by the health check for this reason")
        return Decision("drain", f"drained by the health check; the reason changed from "
                        f"{state.reason!r}")
    if is_drained(state.state) or (state.reason and not ours
                                   and state.reason not in SLURM_OWN_REASONS):
        return Decision("none", f"{state.describe()} is someone else's: not drained by the "
                        "health check" + _unrecorded(state, recorded) + ", left as it is")
    if base not in DRAINABLE:
        return Decision("none", f"state {state.state!r} is not one the health check drains "
                        f"from ({', '.join(sorted(DRAINABLE))})")
    return Decision("drain", f"unhealthy while {state.describe()}")


def _unrecorded(state: NodeState, recorded: str | None) -> str:
    if not state.reason.startswith(DRAIN_MARK):
        return ""
    return (f" (its record holds {recorded!r})" if recorded else
            " (no record of a drain on this node)")


def drained_after(state: NodeState | None, decision: Decision, applied: bool,
                  recorded: str | None) -> bool:
    """Whether the node is drained with the health check's reason once ``decision`` ran."""
    if applied and decision.action == "drain":
        return True
    if applied and decision.action == "resume":
        return False
    return state is not None and is_drained(state.state) and owned(state, recorded)


def textfile(results: Sequence[ItemResult], drained: bool, now_s: float,
             duration_s: float) -> str:
    """The node_exporter textfile (Prometheus text format 0.0.4). A skipped item (as
    configured) has no item_ok sample: it was not checked, so it is neither 1 nor 0.

    >>> print(textfile([ItemResult("mounts", Health.PASS, "ok")], False, 1.0, 0.25), end="")
    ... # doctest: +NORMALIZE_WHITESPACE
    # HELP rackgate_healthcheck_ok 1 if every item passed, 0 if at least one failed.
    # TYPE rackgate_healthcheck_ok gauge
    rackgate_healthcheck_ok 1
    # HELP rackgate_healthcheck_item_ok 1 if the item passed, 0 if it failed (skipped items: none).
    # TYPE rackgate_healthcheck_item_ok gauge
    rackgate_healthcheck_item_ok{item="mounts"} 1
    # HELP rackgate_healthcheck_drained 1 if the node is drained with the health check's reason.
    # TYPE rackgate_healthcheck_drained gauge
    rackgate_healthcheck_drained 0
    # HELP rackgate_healthcheck_last_run_timestamp_seconds Unix time of the last run.
    # TYPE rackgate_healthcheck_last_run_timestamp_seconds gauge
    rackgate_healthcheck_last_run_timestamp_seconds 1.000
    # HELP rackgate_healthcheck_duration_seconds How long the last run took.
    # TYPE rackgate_healthcheck_duration_seconds gauge
    rackgate_healthcheck_duration_seconds 0.250
    """
    ok = all(r.health.ok for r in results)
    order = {item: i for i, item in enumerate(ITEMS)}
    items = sorted((r for r in results if r.health is not Health.SKIP),
                   key=lambda r: order.get(r.item, len(order)))
    lines = [
        "# HELP rackgate_healthcheck_ok 1 if every item passed, 0 if at least one failed.",
        "# TYPE rackgate_healthcheck_ok gauge", f"rackgate_healthcheck_ok {int(ok)}",
        "# HELP rackgate_healthcheck_item_ok 1 if the item passed, 0 if it failed "
        "(skipped items: none).",
        "# TYPE rackgate_healthcheck_item_ok gauge",
        *(f'rackgate_healthcheck_item_ok{{item="{r.item}"}} {int(r.health.ok)}' for r in items),
        "# HELP rackgate_healthcheck_drained 1 if the node is drained with the health check's "
        "reason.",
        "# TYPE rackgate_healthcheck_drained gauge", f"rackgate_healthcheck_drained {int(drained)}",
        "# HELP rackgate_healthcheck_last_run_timestamp_seconds Unix time of the last run.",
        "# TYPE rackgate_healthcheck_last_run_timestamp_seconds gauge",
        f"rackgate_healthcheck_last_run_timestamp_seconds {now_s:.3f}",
        "# HELP rackgate_healthcheck_duration_seconds How long the last run took.",
        "# TYPE rackgate_healthcheck_duration_seconds gauge",
        f"rackgate_healthcheck_duration_seconds {duration_s:.3f}",
    ]
    return "\n".join(lines) + "\n"
