"""What ``rackgate drain`` does with each node of a judged report: pure decisions.

SLURM (:func:`decide_slurm`), given what sinfo says of each node:

- a REJECTed node is drained with rackgate's reason (the run, the check, a short
  message), unless someone else's reason is on it (a person's drain, a down for
  maintenance): then it is left exactly as it is, and the decision says whose it is;
- an ACCEPTed node that rackgate drained earlier (its reason says so:
  ``slurm.RACKGATE_REASON``) is resumed with ``--resume-passed``, and otherwise reported
  as still drained; a node drained by anyone else is never resumed;
- a node slurmctld does not list is an error (``unknown``): nothing is done to it.

Kubernetes (:func:`decide_kubernetes`) has no state to read here: every node gets its
commands (``kubernetes``: taint and label a rejected node, label an accepted one, and with
``--resume-passed`` remove rackgate's own taint).

>>> st = {"n1": NodeState("n1", "idle", ""), "n2": NodeState("n2", "drained", "ops: fan")}
>>> nodes = [ReportNode("n1", "REJECT", "rackgate r1: fio.seq_read: slow"),
...          ReportNode("n2", "REJECT", "rackgate r1: gpu.health: ECC")]
>>> [(d.node, d.action) for d in decide_slurm(nodes, st, resume_passed=False)]
[('n1', 'drain'), ('n2', 'leave')]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rackgate.collect.launch import NODE_NAME
from rackgate.scheduler import kubernetes, slurm
from rackgate.scheduler.slurm import NodeState

Action = Literal["drain", "resume", "leave", "none", "unknown"]
CHANGES: tuple[Action, ...] = ("drain", "resume")


class ReportError(ValueError):
    """A report that drain cannot act on; the message names the file and the field."""


@dataclass(frozen=True)
class ReportNode:
    """One node of a judged report, as drain reads it."""

    name: str
    verdict: Literal["ACCEPT", "REJECT"]
    reason: str  # the drain reason it gets when rejected (slurm.reason_for)


@dataclass(frozen=True)
class Decision:
    node: str
    verdict: str
    action: Action
    why: str
    before: NodeState | None = None  # the scheduler's view before (SLURM only)
    argvs: tuple[tuple[str, ...], ...] = ()  # what runs for it, in order

    @property
    def changes(self) -> bool:
        return self.action in CHANGES


def report_nodes(doc: Mapping[str, Any], source: str) -> tuple[str, list[ReportNode]]:
    """The run id and nodes of a report document (schema ``rackgate.report/1``), every field
    drain reads checked: a ReportError names ``source`` and the field otherwise."""
    if doc.get("schema") != "rackgate.report/1":
        raise ReportError(f"{source}: field schema is {doc.get('schema')!r}, not "
                          f"'rackgate.report/1'")
    run = doc.get("run")
    run_id = run.get("run_id") if isinstance(run, Mapping) else None
    if not isinstance(run_id, str) or not slurm.RUN_ID.fullmatch(run_id):
        raise ReportError(f"{source}: field run.run_id {run_id!r} is not a plain run id")
    raw = doc.get("nodes")
    if not isinstance(raw, list) or not raw:
        raise ReportError(f"{source}: field nodes lists no node")
    out: list[ReportNode] = []
    for i, n in enumerate(raw):
        name = n.get("name") if isinstance(n, Mapping) else None
        if not isinstance(name, str) or not NODE_NAME.fullmatch(name):
            raise ReportError(f"{source}: field nodes[{i}].name {name!r} is not a plain "
                              f"node name")
        verdict = n.get("verdict")
        if verdict not in ("ACCEPT", "REJECT"):
            raise ReportError(f"{source}: field nodes[{i}].verdict of {name} is {verdict!r}, "
                              f"not ACCEPT or REJECT")
        results = n.get("results")
        if not isinstance(results, list) or not all(
                isinstance(r, Mapping) and isinstance(r.get("check"), str)
                and isinstance(r.get("status"), str) for r in results):
            raise ReportError(f"{source}: field nodes[{i}].results of {name} is not a list "
                              f"of results with check and status")
        if verdict == "ACCEPT" and any(r["status"] in ("fail", "error") for r in results):
            raise ReportError(f"{source}: node {name} is ACCEPT with a failed or errored "
                              f"result: the report is inconsistent")
        out.append(ReportNode(name, verdict, slurm.reason_for(run_id, n)))
    names = [n.name for n in out]
    if len(set(names)) != len(names):
        twice = sorted({x for x in names if names.count(x) > 1})
        raise ReportError(f"{source}: field nodes lists {', '.join(twice)} twice")
    return run_id, out


def decide_slurm(nodes: Sequence[ReportNode], states: Mapping[str, NodeState], *,
                 resume_passed: bool) -> list[Decision]:
    """One decision per node of the report, in the report's order."""
    out = []
    for n in nodes:
        st = states.get(n.name)
        if st is None:
            out.append(Decision(n.name, n.verdict, "unknown", "not known to slurmctld "
                                "(sinfo does not list it): nothing done"))
        elif n.verdict == "REJECT":
            out.append(_rejected(n, st))
        else:
            out.append(_accepted(n, st, resume_passed))
    return out


def _rejected(n: ReportNode, st: NodeState) -> Decision:
    if st.held_by_others:
        return Decision(n.name, n.verdict, "leave", f"someone else's: {st.reason}", st)
    if st.drained and st.reason == n.reason:
        return Decision(n.name, n.verdict, "none", "already drained by this run", st)
    return Decision(n.name, n.verdict, "drain", n.reason, st,
                    (tuple(slurm.drain_argv(n.name, n.reason)),))


def _accepted(n: ReportNode, st: NodeState, resume_passed: bool) -> Decision:
    if st.drained and st.by_rackgate:
        if resume_passed:
            return Decision(n.name, n.verdict, "resume", f"passes now; rackgate drained it: "
                            f"{st.reason}", st, (tuple(slurm.resume_argv(n.name)),))
        return Decision(n.name, n.verdict, "none", f"passes, still drained by rackgate "
                        f"(--resume-passed resumes it): {st.reason}", st)
    if st.held_by_others:
        return Decision(n.name, n.verdict, "leave", f"passes; someone else's: {st.reason}",
                        st)
    return Decision(n.name, n.verdict, "none", "passes", st)


def decide_kubernetes(nodes: Sequence[ReportNode], run_id: str, *, resume_passed: bool,
                      kubeconfig: str | None) -> list[Decision]:
    """The kubectl commands of each node (Kubernetes' state is not read here)."""
    out = []
    for n in nodes:
        if n.verdict == "REJECT":
            argvs = kubernetes.reject_argvs(n.name, run_id, n.reason, kubeconfig)
            out.append(Decision(n.name, n.verdict, "drain", n.reason,
                                argvs=tuple(map(tuple, argvs))))
        elif resume_passed:
            argvs = kubernetes.resume_argvs(n.name, run_id, kubeconfig)
            out.append(Decision(n.name, n.verdict, "resume", "passes: rackgate's taint "
                                "removed (if it is there), labelled ACCEPT",
                                argvs=tuple(map(tuple, argvs))))
        else:
            argvs = kubernetes.accept_argvs(n.name, run_id, kubeconfig)
            out.append(Decision(n.name, n.verdict, "none", "passes: labelled ACCEPT",
                                argvs=tuple(map(tuple, argvs))))
    return out
