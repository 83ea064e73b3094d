"""Whether the run ``rackgate drain`` acts on is stale: pure warnings, printed before what
drain does (it still acts: the warnings say what to look at).

- **Superseded**: a later run (first judged after this run's last collection ended) judged
  some of the same nodes, in the run history beside the run directory: its verdicts are
  newer than this run's. Revisions of this run (``--resume``, ``--retest``) are this run.
- **The scheduler changed since**: SLURM set a node's reason after this run ended (sinfo's
  ``%H``, :func:`rackgate.scheduler.slurm.timed_sinfo_argv`), other than a reason this
  run's own records wrote; or this run's records show it drained a node (their last change
  of it) that SLURM no longer holds for this run: it was resumed, or drained again, since.

>>> from rackgate.scheduler.slurm import NodeState
>>> st = {"n1": NodeState("n1", "drained", "ops: fan", 1796292000)}
>>> later = [("r2", "runs/r2", ["n1"])]
>>> print(stale_warnings("r1", "2026-12-03T10:00:00+00:00", st, Records(), later)[0])
... # doctest: +NORMALIZE_WHITESPACE
run r2 (runs/r2) came after this one and judged n1: rackgate drain runs/r2 acts on the newer
verdicts
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from rackgate.scheduler.drain import Records, hold_of
from rackgate.scheduler.slurm import NodeState

LaterRuns = Sequence[tuple[str, str, list[str]]] | str  # (run id, run dir, nodes) or why not
NAMED = 10  # a warning names at most this many nodes


def _named(nodes: Sequence[str]) -> str:
    more = f" and {len(nodes) - NAMED} more" if len(nodes) > NAMED else ""
    return ", ".join(nodes[:NAMED]) + more


def stale_time(stamp: Any) -> datetime | None:
    """An ISO 8601 time of a manifest (UTC when it names no zone), or None."""
    try:
        when = datetime.fromisoformat(str(stamp))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _iso(seconds: int) -> str:
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return f"{seconds} s after the epoch"


def stale_warnings(run_id: str, ended_at: str | None, states: Mapping[str, NodeState],
                   records: Records, later: LaterRuns) -> list[str]:
    """One line per reason to think the run is stale (see the module); ``later``: the
    history's later runs of these nodes, or why the history could not be read;
    ``ended_at``: when the run's last collection ended (its manifest's finished, else
    started)."""
    out: list[str] = []
    if isinstance(later, str):
        out.append(f"the run history could not be read to look for later runs: {later}")
    else:
        out += [f"run {rid} ({where}) came after this one and judged {_named(nodes)}: "
                f"rackgate drain {where} acts on the newer verdicts"
                for rid, where, nodes in later]
    ended = stale_time(ended_at)
    for node, st in states.items():
        mine = records.shows(node, st.reason)
        if st.since is not None and ended is not None and not mine \
                and st.since > ended.timestamp():
            out.append(f"{node}: SLURM shows {st.describe()} since {_iso(st.since)}, after "
                       f"this run ended ({ended.isoformat(timespec='seconds')}): the run "
                       "does not know of it")
            continue
        hold = hold_of(node, st.reason, st.free, run_id, records)
        held = st.drained and hold.kind == "rackgate" and run_id in hold.runs
        if records.last.get(node) == "drain" and not held:
            out.append(f"{node}: this run drained it, but SLURM shows {st.describe()} now: "
                       "it was resumed or drained again since the run's drain")
    return out
