"""Checks judged node by node: their command runs on each node (:class:`OnNode`), or on
the control host about each node (:class:`OnControlHost`: its BMC)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rackgate.checks.shared.base import ControlCheck, NodeCheck
from rackgate.model import Result
from rackgate.placement.base import (
    EvidenceReader,
    Judged,
    JudgeJob,
    Placement,
    Planned,
    RunView,
    Usable,
    params_mismatch,
)
from rackgate.placement.evidence import (
    absent_from_profile,
    judge_evidence,
    missing_evidence,
    not_applicable,
)
from rackgate.store.evidence import EvidenceError


class OnNode(Placement[NodeCheck | ControlCheck]):
    """The command runs on each node under test, under the node lock. Its evidence is per
    node, so it is judged node by node (:meth:`judge_node`, in ``judge.stored``'s parallel
    loop)."""

    name = "node"
    where = "on the node"

    def plan(self, check: NodeCheck | ControlCheck, view: RunView, usable: Usable) -> list[Planned]:
        return [self._task(h, check, view.profiles[h], view) for h in view.nodes
                if not usable(h, check.name)]

    def judge_node(self, check: NodeCheck | ControlCheck, job: JudgeJob,
                   reader: EvidenceReader, host: str, judged: Judged,
                   mismatches: dict[tuple[str, str, str], str]) -> Result:
        """One node's result, recording its evidence's digest and duration in ``judged``;
        ``mismatches`` caches parameter comparisons per (check, profiles) across calls."""
        name = check.name
        now = job.profiles[host]
        absent = absent_from_profile(host, name, now)
        if absent is not None:
            return absent
        skipped = not_applicable(host, check, now)
        if skipped is not None:
            return skipped
        try:
            ev, stdout = reader.read(host, name)
        except EvidenceError as exc:
            return missing_evidence(host, name, str(exc))
        judged.evidence_of((host,), name, ev)
        then = job.collected_with[host]
        if then is not now:
            key = (name, then.sha256, now.sha256)
            if key not in mismatches:
                mismatches[key] = params_mismatch(check, then, now)
            if mismatches[key]:
                return missing_evidence(host, name, mismatches[key])
        return judge_evidence(check, ev, stdout, now)


class OnControlHost(OnNode):
    """The command runs on the control host, once per node (its BMC), without a lock;
    rackgate's own programs run with rackgate's interpreter."""

    name = "control"
    where = "on the control host"
    _on_control = True

    def _lock(self, host: str, hostvars: Mapping[str, Any], view: RunView) -> str | None:
        return None

    def _secret_var(self, check: NodeCheck | ControlCheck) -> str | None:
        return check.secret_var if isinstance(check, ControlCheck) else None

    def _argv(self, argv: Sequence[str], view: RunView) -> Sequence[str]:
        if list(argv[:2]) == ["python3", "-m"] and len(argv) > 2 \
                and argv[2].startswith("rackgate."):
            return [view.python, *argv[1:]]
        return argv
