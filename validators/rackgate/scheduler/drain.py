"""What ``rackgate drain`` does with each node of a judged report: pure decisions.

Drain and resume only what this run decided. A run holds a node through its claim: its id
in the node's drain reason (SLURM) or in the ``rackgate/reason`` annotation beside the
``rackgate/rejected`` taint (Kubernetes), after the marker ``rackgate/drain``
(:mod:`.slurm`). Whose a node is (:func:`hold_of`):

- ``free``: no reason, or only slurmctld's own ("Not responding"); Kubernetes: no taint;
- ``rackgate``: a reason in rackgate's format, naming the runs that hold it; or the reason
  an older rackgate wrote, ``rackgate <run id>: ...``, when it names this run and this
  run's records (:class:`Records`) hold exactly that reason;
- ``others``: anything else (a person's drain, the health check's, a down for
  maintenance, a taint with rackgate's key and a reason rackgate did not write).

SLURM (:func:`decide_slurm`), given what sinfo says of each node:

- a REJECTed node that is free is drained for this run; one that rackgate holds for other
  runs gets this run added to its reason (``drain``): it stays drained until every run on
  the list let it go; one held by others is left exactly as it is (``leave``);
- with ``--resume-passed``, an ACCEPTed node that this run holds is let go, but only when
  this run's records in its run directory show that it drained the node (the marker and
  the run id alone are text anyone can type): resumed when no other run holds it
  (``resume``), else this run taken off the list and the node left drained (``release``);
  a node other runs hold, or others, is never resumed;
- a node slurmctld does not list is an error (``unknown``): nothing is done to it; a
  reason that cannot name one more run is an error too (``conflict``), the node untouched;
- a node REJECTed only on what could not be measured (every blocking result ``error``) is
  drained only with ``include_errors``; without it, it is listed (``unmeasured``), and a
  node this run already drained stays as it is.

Kubernetes (:func:`decide_kubernetes`) decides the same from each node's taint and
reason annotation, read first; without a kubeconfig nothing is read, so only a rejected
node's commands (a taint kubectl refuses where one is already there) and the labels are
printed, and nothing is resumed.

>>> st = {"n1": NodeState("n1", "idle", ""), "n2": NodeState("n2", "drained", "ops: fan")}
>>> nodes = [ReportNode("n1", "REJECT", "fio.seq_read: slow"),
...          ReportNode("n2", "REJECT", "gpu.health: ECC")]
>>> [(d.node, d.action) for d in decide_slurm(nodes, st, "r1", Records(), resume_passed=False)]
[('n1', 'drain'), ('n2', 'leave')]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rackgate.commands.launch import NODE_NAME
from rackgate.scheduler import kubernetes as k8s
from rackgate.scheduler import slurm
from rackgate.scheduler.kubernetes import TaintState
from rackgate.scheduler.slurm import NodeState

Action = Literal["drain", "release", "resume", "leave", "none", "unknown", "conflict",
                 "unmeasured"]
CHANGES: tuple[Action, ...] = ("drain", "release", "resume")
FAILED: tuple[Action, ...] = ("unknown", "conflict")


class ReportError(ValueError):
    """A report that drain cannot act on; the message names the file and the field."""


@dataclass(frozen=True)
class ReportNode:
    """One node of a judged report, as drain reads it."""

    name: str
    verdict: Literal["ACCEPT", "REJECT"]
    message: str  # what it is drained for when rejected (slurm.message_for)
    failed: bool = True  # a measured fault (a ``fail``), not only what could not be measured


@dataclass(frozen=True)
class Records:
    """What this run's records in its run directory (``scheduler/*-drain/``, and
    ``*-retest/``) say it did: per node, the reasons of every drain it ran or was about to
    run; the record files that could not be read (named where a decision needed them);
    and per node the last change done."""

    drained: Mapping[str, frozenset[str]] = field(default_factory=dict)
    unreadable: tuple[str, ...] = ()
    # per node, the last change these records show done (drain, release, resume)
    last: Mapping[str, str] = field(default_factory=dict)

    def shows(self, node: str, reason: str | None = None) -> bool:
        """Whether this run drained ``node`` (with exactly ``reason``, when given)."""
        reasons = self.drained.get(node, frozenset())
        return bool(reasons) if reason is None else reason in reasons

    def lacks(self, node: str) -> str:
        unread = (f"; {len(self.unreadable)} record(s) unreadable: "
                  f"{', '.join(self.unreadable)}" if self.unreadable else "")
        return (f"this run's records (scheduler/*-drain/) show no drain of {node}{unread}: "
                "left as it is")


@dataclass(frozen=True)
class Hold:
    kind: Literal["free", "rackgate", "others"]
    runs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision:
    node: str
    verdict: str
    action: Action
    why: str
    before: NodeState | None = None  # the scheduler's view before (SLURM only)
    argvs: tuple[tuple[str, ...], ...] = ()  # what runs for it, in order
    reason: str | None = None  # the drain reason it writes (drain, release)

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
        out.append(ReportNode(name, verdict, slurm.message_for(n),
                              any(r["status"] == "fail" for r in results)))
    names = [n.name for n in out]
    if len(set(names)) != len(names):
        twice = sorted({x for x in names if names.count(x) > 1})
        raise ReportError(f"{source}: field nodes lists {', '.join(twice)} twice")
    return run_id, out


def hold_of(node: str, reason: str, free: bool, run_id: str, records: Records) -> Hold:
    """Whose the node is, from its reason (see the module); ``free``: the scheduler's view
    says no one holds it."""
    if free:
        return Hold("free")
    runs = slurm.claims_of(reason)
    if runs is not None:
        return Hold("rackgate", runs)
    if slurm.legacy_run(reason) == run_id and records.shows(node, reason):
        return Hold("rackgate", (run_id,))
    return Hold("others")


def _runs(runs: Sequence[str]) -> str:
    return f"run{'s' if len(runs) > 1 else ''} {', '.join(runs)}"


def decide_slurm(nodes: Sequence[ReportNode], states: Mapping[str, NodeState], run_id: str,
                 records: Records, *, resume_passed: bool,
                 include_errors: bool = False) -> list[Decision]:
    """One decision per node of the report, in the report's order; a node rejected only
    on what could not be measured is drained only with ``include_errors``."""
    out = []
    for n in nodes:
        st = states.get(n.name)
        if st is None:
            out.append(Decision(n.name, n.verdict, "unknown", "not known to slurmctld "
                                "(sinfo does not list it): nothing done"))
            continue
        hold = hold_of(n.name, st.reason, st.free, run_id, records)
        if n.verdict == "REJECT":
            out.append(_rejected(n, st, hold, run_id, include_errors))
        else:
            out.append(_accepted(n, st, hold, run_id, records, resume_passed))
    return out


def _drain(n: ReportNode, st: NodeState | None, runs: Sequence[str], message: str,
           action: Action, why: str) -> Decision:
    try:
        text = slurm.reason(runs, message)
    except ValueError as exc:
        return Decision(n.name, n.verdict, "conflict", f"{exc}: left as it is", st)
    return Decision(n.name, n.verdict, action, why.format(reason=text), st,
                    (tuple(slurm.drain_argv(n.name, text)),), text)


def _unmeasured(n: ReportNode, st: NodeState | None, ours: str | None) -> Decision:
    """A node rejected only on errors (could not measure), without --include-errors: left
    as it is (``ours``: how this run already holds it, if it does)."""
    if ours:
        return Decision(n.name, n.verdict, "none", f"{ours}; now rejected only on what could "
                        f"not be measured: {n.message}", st)
    return Decision(n.name, n.verdict, "unmeasured", f"rejected only on what could not be "
                    f"measured (error, not a measured fault): {n.message}; --include-errors "
                    f"drains it", st)


def _rejected(n: ReportNode, st: NodeState, hold: Hold, run_id: str,
              include_errors: bool) -> Decision:
    if hold.kind == "others":
        return Decision(n.name, n.verdict, "leave", f"someone else's: {st.reason}", st)
    if not (n.failed or include_errors):
        ours = hold.kind == "rackgate" and run_id in hold.runs and st.drained
        return _unmeasured(n, st, f"already drained by this run: {st.reason}" if ours else None)
    if hold.kind == "free":
        return _drain(n, st, (run_id,), n.message, "drain", "{reason}")
    if run_id not in hold.runs:
        return _drain(n, st, (*hold.runs, run_id), n.message, "drain",
                      f"also held for {_runs(hold.runs)}: {{reason}}")
    if st.drained and (hold.runs != (run_id,) or st.reason == _reason(hold.runs, n.message)):
        return Decision(n.name, n.verdict, "none", f"already drained by this run: {st.reason}",
                        st)
    return _drain(n, st, hold.runs, n.message, "drain", "{reason}")


def _reason(runs: Sequence[str], message: str) -> str | None:
    try:
        return slurm.reason(runs, message)
    except ValueError:
        return None


def _accepted(n: ReportNode, st: NodeState, hold: Hold, run_id: str, records: Records,
              resume_passed: bool) -> Decision:
    if hold.kind == "others":
        return Decision(n.name, n.verdict, "leave", f"passes; someone else's: {st.reason}",
                        st)
    if hold.kind == "free" or not st.drained:
        return Decision(n.name, n.verdict, "none", "passes", st)
    if run_id not in hold.runs:
        return Decision(n.name, n.verdict, "leave", f"passes; drained for rackgate "
                        f"{_runs(hold.runs)}, not this one (only their own follow-up "
                        f"resumes it): {st.reason}", st)
    if not records.shows(n.name):
        return Decision(n.name, n.verdict, "leave", f"passes; {st.reason!r} names this run, "
                        f"but {records.lacks(n.name)}", st)
    if not resume_passed:
        return Decision(n.name, n.verdict, "none", f"passes, still drained by this run "
                        f"(--resume-passed resumes it): {st.reason}", st)
    rest = tuple(r for r in hold.runs if r != run_id)
    if rest:
        return _drain(n, st, rest, f"{run_id} passes it; still rejected by {_runs(rest)}",
                      "release", f"passes now; stays drained for {_runs(rest)}: {{reason}}")
    return Decision(n.name, n.verdict, "resume", f"passes now; this run drained it: "
                    f"{st.reason}", st, (tuple(slurm.resume_argv(n.name)),))


def decide_kubernetes(nodes: Sequence[ReportNode], run_id: str,
                      states: Mapping[str, TaintState | str] | None, records: Records, *,
                      resume_passed: bool, kubeconfig: str | None,
                      include_errors: bool = False) -> list[Decision]:
    """The kubectl commands of each node from its taint and reason (``states``: what
    :func:`~rackgate.scheduler.kubernetes.parse_state` read, or why it could not be read;
    None when nothing was read, without a kubeconfig). ValueError when a name cannot be a
    Kubernetes one."""
    out = []
    for n in nodes:
        label = tuple(k8s.label_argv(n.name, n.verdict, run_id, kubeconfig))
        st = None if states is None else states.get(n.name, "not read")
        if isinstance(st, str):
            out.append(Decision(n.name, n.verdict, "unknown", f"its taint could not be read "
                                f"(kubectl get nodes {n.name}: {st}): nothing done"))
            continue
        hold = Hold("free") if st is None else hold_of(
            n.name, st.reason, not st.tainted, run_id, records)
        if hold.kind == "rackgate" and st is not None and st.value not in hold.runs:
            hold = Hold("others")  # a taint that its reason does not name
        if n.verdict != "REJECT":
            d = _k8s_accepted(n, st, hold, run_id, records, resume_passed, kubeconfig)
        elif n.failed or include_errors or hold.kind == "others":
            d = _k8s_rejected(n, st, hold, run_id, kubeconfig)
        else:
            d = _unmeasured(n, None, "already tainted by this run" if hold.kind == "rackgate"
                            and run_id in hold.runs else None)
        out.append(Decision(d.node, d.verdict, d.action, d.why, None, (*d.argvs, label),
                            d.reason))
    return out


def _k8s_drain(n: ReportNode, runs: Sequence[str], message: str, action: Action, why: str,
               taint: list[str] | None, kubeconfig: str | None) -> Decision:
    d = _drain(n, None, runs, message, action, why)
    if d.reason is None:
        return d
    argvs = [*([taint] if taint else []), k8s.annotate_argv(n.name, d.reason, kubeconfig)]
    return Decision(n.name, n.verdict, action, d.why, None, tuple(map(tuple, argvs)), d.reason)


def _k8s_rejected(n: ReportNode, st: TaintState | None, hold: Hold, run_id: str,
                  kubeconfig: str | None) -> Decision:
    if hold.kind == "others" and st is not None:
        return Decision(n.name, n.verdict, "leave", f"someone else's taint "
                        f"{k8s.TAINT}={st.value} ({k8s.REASON}: {st.reason!r}): left")
    if hold.kind != "rackgate":
        return _k8s_drain(n, (run_id,), n.message, "drain", "{reason}",
                          k8s.taint_argv(n.name, run_id, kubeconfig), kubeconfig)
    if run_id in hold.runs:
        return Decision(n.name, n.verdict, "none", "already tainted by this run")
    return _k8s_drain(n, (*hold.runs, run_id), n.message, "drain",
                      f"also held for {_runs(hold.runs)}: {{reason}}", None, kubeconfig)


def _k8s_accepted(n: ReportNode, st: TaintState | None, hold: Hold, run_id: str,
                  records: Records, resume_passed: bool, kubeconfig: str | None) -> Decision:
    if st is None:
        return Decision(n.name, n.verdict, "none", "passes" + (
            "; resuming reads its taint first: give --kubeconfig" if resume_passed else ""))
    if hold.kind == "others":
        return Decision(n.name, n.verdict, "leave", f"passes; someone else's taint "
                        f"{k8s.TAINT}={st.value} ({k8s.REASON}: {st.reason!r})")
    if hold.kind == "free":
        return Decision(n.name, n.verdict, "none", "passes")
    if run_id not in hold.runs:
        return Decision(n.name, n.verdict, "leave", f"passes; tainted for rackgate "
                        f"{_runs(hold.runs)}, not this one: {st.reason}")
    if not records.shows(n.name):
        return Decision(n.name, n.verdict, "leave", f"passes; {st.reason!r} names this run, "
                        f"but {records.lacks(n.name)}")
    if not resume_passed:
        return Decision(n.name, n.verdict, "none", "passes, still tainted by this run "
                        "(--resume-passed removes it)")
    rest = tuple(r for r in hold.runs if r != run_id)
    if rest:
        taint = (k8s.taint_argv(n.name, rest[0], kubeconfig, overwrite=True)
                 if st.value == run_id else None)
        return _k8s_drain(n, rest, f"{run_id} passes it; still rejected by {_runs(rest)}",
                          "release", f"passes now; stays tainted for {_runs(rest)}: "
                          "{reason}", taint, kubeconfig)
    return Decision(n.name, n.verdict, "resume", f"passes now; this run tainted it: "
                    f"{st.reason}", None, (tuple(k8s.untaint_argv(n.name, kubeconfig)),
                                           tuple(k8s.annotate_argv(n.name, None, kubeconfig))))
