"""``rackgate drain`` against the cluster: the scheduler's commands run through the
collector (Ansible, argv lists under ``timeout``), as every other command of rackgate runs.

SLURM's commands run on the run's launch host (the host its jobs across the nodes were
launched from): first sinfo for the nodes' states, then one ``scontrol update`` per node to
change, then sinfo again to show what it did. Kubernetes' kubectl commands run on the
control host (where the kubeconfig is): first one ``kubectl get`` per node for its
taint and reason, then the changes. Nothing takes the node lock: a drain must not wait
for a benchmark.

Everything run is recorded in the run directory, as evidence of its own kind:
``RUN_DIR/scheduler/<UTC stamp>-drain/evidence/<host>/<command>.{out,json}``, a
``planned.json`` with every change decided, written before any runs, and an
``actions.json`` with every decision, the command it ran, its outcome and the state after.
These records are what a later ``--resume-passed`` of the same run trusts
(:func:`read_records`): a node is resumed only if this run's records show it drained it.
A ``--dry-run`` reads the states into a temporary directory and changes nothing.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rackgate.collect.ansible import collect
from rackgate.collect.task import Stop, Task
from rackgate.documents import load_json
from rackgate.inventory import InventoryError, load_inventory
from rackgate.model import last_words
from rackgate.reports import UnreadableReport, read_report
from rackgate.scheduler import kubernetes as k8s
from rackgate.scheduler import slurm
from rackgate.scheduler.drain import (
    FAILED,
    Decision,
    Records,
    ReportError,
    ReportNode,
    decide_kubernetes,
    decide_slurm,
    report_nodes,
)
from rackgate.scheduler.kubernetes import NOT_TAINTED, TaintState
from rackgate.scheduler.slurm import NodeState
from rackgate.selection import launch_host
from rackgate.store.evidence import EvidenceError, EvidenceStore, write_json
from rackgate.store.manifest import RunError, new_stamped_dir, read_manifest

Scheduler = Literal["slurm", "kubernetes"]
COMMAND_TIMEOUT_S = 60  # sinfo and scontrol answer in well under a second when slurmctld is up
STATE = "scheduler.state"
RECORD_MAX_BYTES = 64 * 2**20  # a record of 10,000 nodes' actions is a few MB


@dataclass(frozen=True)
class Done:
    """What one decision's commands did: ``ok`` only when every command exited 0 (and, for
    SLURM, sinfo shows the state the action asked for afterwards)."""

    decision: Decision
    ran: bool  # its commands were run (not a dry run, not a decision without commands)
    ok: bool
    message: str = ""
    after: NodeState | None = None

    def to_doc(self) -> dict[str, Any]:
        d = self.decision
        return {"node": d.node, "verdict": d.verdict, "action": d.action, "why": d.why,
                "reason": d.reason, "before": None if d.before is None else _state_doc(d.before),
                "commands": [list(a) for a in d.argvs], "ran": self.ran, "ok": self.ok,
                "message": self.message,
                "after": None if self.after is None else _state_doc(self.after)}


def _state_doc(st: NodeState) -> dict[str, str]:
    return {"state": st.state, "reason": st.reason}


@dataclass(frozen=True)
class DrainOutcome:
    run_id: str
    scheduler: Scheduler
    where: str  # the host the commands ran on (SLURM: the launch host; Kubernetes: here)
    applied: bool  # False: a dry run, or Kubernetes without a kubeconfig
    done: tuple[Done, ...]
    record: Path | None  # RUN_DIR/scheduler/<stamp>-drain, when something ran

    @property
    def failed(self) -> list[Done]:
        return [d for d in self.done if d.decision.action in FAILED or (d.ran and not d.ok)]


def drain(run_dir: Path, *, scheduler: Scheduler | None = None, dry_run: bool = False,
          resume_passed: bool = False, kubeconfig: str | None = None, forks: int = 20,
          stop: Stop | None = None) -> DrainOutcome:
    """Decide per node of the run's report, and unless ``dry_run``, act. RunError when the
    run, its report or the scheduler cannot be used."""
    manifest = read_manifest(run_dir)
    try:
        doc, path = read_report(run_dir)
        if not isinstance(doc, dict):
            raise ReportError(f"{path}: the report is not a JSON object")
        source = str(path)
        run_id, nodes = report_nodes(doc, source)
    except (UnreadableReport, ReportError, ValueError) as exc:
        raise RunError(str(exc)) from None
    if run_id != manifest["run_id"]:
        raise RunError(f"{source}: field run.run_id {run_id!r} is not this run's "
                       f"({manifest['run_id']!r} in manifest.json)")
    inventory = manifest["inventory"]
    stop = stop or Stop()
    records = read_records(run_dir, run_id, scheduler or "slurm")
    if scheduler == "kubernetes":
        return _kubernetes(run_dir, run_id, nodes, records, inventory, kubeconfig,
                           dry_run=dry_run, resume_passed=resume_passed, forks=forks, stop=stop)
    launch = _launch_host(manifest, nodes)
    if not launch:
        raise RunError(f"run {run_id}: no SLURM launch host: SLURM's commands run on the "
                       f"nodes' rackgate_launch_host, or the first host of group "
                       f"slurm_controller, and {', '.join(inventory)} names neither"
                       + ("" if scheduler else "; give --scheduler kubernetes for a "
                          "Kubernetes site"))
    return _slurm(run_dir, run_id, nodes, records, launch, inventory, dry_run=dry_run,
                  resume_passed=resume_passed, forks=forks, stop=stop)


def read_records(run_dir: Path, run_id: str, scheduler: str) -> Records:
    """What this run's earlier drains (``RUN_DIR/scheduler/*-drain/planned.json`` and
    ``actions.json`` of ``scheduler``, naming ``run_id``) drained: per node, the reasons
    written. A record that cannot be read is named, never trusted."""
    drained: dict[str, set[str]] = {}
    unreadable: list[str] = []
    for path in sorted((run_dir / "scheduler").glob("*-drain/*.json")):
        if path.name not in ("planned.json", "actions.json"):
            continue
        try:
            if path.stat().st_size > RECORD_MAX_BYTES:
                raise ValueError(f"over {RECORD_MAX_BYTES} bytes")
            doc = load_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            unreadable.append(str(path))
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("actions"), list):
            unreadable.append(str(path))
            continue
        if doc.get("run_id") != run_id or doc.get("scheduler") != scheduler:
            continue
        for a in doc["actions"]:
            if not isinstance(a, dict) or a.get("action") != "drain":
                continue
            # older records had no "reason": a drain's reason was its "why"
            text = a.get("reason") if "reason" in a else a.get("why")
            if isinstance(a.get("node"), str) and isinstance(text, str):
                drained.setdefault(a["node"], set()).add(text)
    return Records({n: frozenset(r) for n, r in drained.items()}, tuple(unreadable))


def _plan(record: Path, run_id: str, scheduler: str, decisions: Sequence[Decision]) -> None:
    """planned.json: the changes about to be made, before any runs (a drain killed between
    its command and actions.json is still this run's to resume)."""
    write_json(record / "planned.json", {"run_id": run_id, "scheduler": scheduler, "actions": [
        {"node": d.node, "action": d.action, "why": d.why, "reason": d.reason,
         "commands": [list(a) for a in d.argvs]} for d in decisions if d.changes]})


def _launch_host(manifest: Mapping[str, Any], nodes: Sequence[ReportNode]) -> str | None:
    """The host the run launched its jobs across the nodes from; for a run without such
    jobs, the one the inventory names (as ``validate`` would choose it)."""
    if manifest.get("launch_host"):
        return str(manifest["launch_host"])
    try:
        return launch_host(load_inventory(manifest["inventory"]), [n.name for n in nodes])
    except InventoryError as exc:
        raise RunError(str(exc)) from None


Run = Callable[[Sequence[Task]], None]


def _states(run: Run, store: EvidenceStore, launch: str, names: Sequence[str]) \
        -> dict[str, NodeState]:
    task = Task(launch, STATE, tuple(slurm.sinfo_argv(names)), COMMAND_TIMEOUT_S,
                lock_file=None)
    run([task])
    try:
        ev, stdout = store.read(launch, STATE)
    except EvidenceError as exc:
        raise RunError(f"{launch}: sinfo: {exc}") from None
    if ev.outcome != "completed" or ev.rc != 0:
        said = last_words(ev.stderr or ev.message or "", 300)
        raise RunError(f"{launch}: {' '.join(task.argv)}: {ev.outcome}, rc {ev.rc}: "
                       f"{said or 'no message'} (is slurmctld running?)")
    try:
        return slurm.parse_states(stdout)
    except ValueError as exc:
        raise RunError(f"{launch}: {exc}") from None


def _slurm(run_dir: Path, run_id: str, nodes: Sequence[ReportNode], records: Records,
           launch: str, inventory: Sequence[str], *, dry_run: bool, resume_passed: bool,
           forks: int, stop: Stop) -> DrainOutcome:
    names = [n.name for n in nodes]
    with tempfile.TemporaryDirectory(prefix="rackgate-drain-") as tmp:
        record = Path(tmp) if dry_run else new_stamped_dir(run_dir / "scheduler", "drain")
        store = EvidenceStore(record, sync=not dry_run)

        def run(tasks: Sequence[Task]) -> None:
            collect(tasks, inventory, store, forks=forks, stop=stop)
            stop.check()

        decisions = decide_slurm(nodes, _states(run, store, launch, names), run_id, records,
                                 resume_passed=resume_passed)
        if dry_run:
            return DrainOutcome(run_id, "slurm", launch, False,
                                tuple(Done(d, False, True) for d in decisions), None)
        tasks = {d.node: Task(launch, f"scheduler.{d.action}.{d.node}", d.argvs[0],
                              COMMAND_TIMEOUT_S, lock_file=None)
                 for d in decisions if d.changes}
        if tasks:
            _plan(record, run_id, "slurm", decisions)
            run(list(tasks.values()))
        after = _states(run, store, launch, names)
        done = tuple(_slurm_done(d, tasks.get(d.node), store, after.get(d.node))
                     for d in decisions)
        write_json(record / "actions.json", {"run_id": run_id, "scheduler": "slurm",
                                             "where": launch, "actions": [
                                                 d.to_doc() for d in done]})
        return DrainOutcome(run_id, "slurm", launch, True, done, record)


def _slurm_done(d: Decision, task: Task | None, store: EvidenceStore,
                after: NodeState | None) -> Done:
    if task is None:
        return Done(d, False, True, "", after)
    ok, message = _ran_ok(store, task)
    if ok and after is not None:
        drained = after.drained and after.reason == d.reason
        if d.action in ("drain", "release") and not drained:
            ok, message = False, f"sinfo shows {after.describe()} after the {d.action}"
        if d.action == "resume" and after.drained:
            ok, message = False, f"sinfo shows {after.describe()} after the resume"
    return Done(d, True, ok, message, after)


def _ran_ok(store: EvidenceStore, task: Task) -> tuple[bool, str]:
    try:
        ev, stdout = store.read(task.host, task.check)
    except EvidenceError as exc:
        return False, str(exc)
    said = last_words(ev.stderr or stdout or ev.message or "", 300)
    if ev.outcome == "completed" and ev.rc == 0:
        return True, said
    return False, f"{ev.outcome}, rc {ev.rc}: {said or 'no message'}"


def _kubernetes(run_dir: Path, run_id: str, nodes: Sequence[ReportNode], records: Records,
                inventory: Sequence[str], kubeconfig: str | None, *, dry_run: bool,
                resume_passed: bool, forks: int, stop: Stop) -> DrainOutcome:
    """Without a kubeconfig: the commands decided without the nodes' state, printed. With
    one: each node's taint read (into a temporary directory for a dry run), then decided,
    then (unless a dry run) run, kubectl on the control host once per node, in order."""
    try:
        if kubeconfig is None:
            decisions = decide_kubernetes(nodes, run_id, None, records,
                                          resume_passed=resume_passed, kubeconfig=None)
            return DrainOutcome(run_id, "kubernetes", "the control host", False,
                                tuple(Done(d, False, True) for d in decisions), None)
        reads = [Task(n.name, "scheduler.kubectl.state",
                      tuple(k8s.state_argv(n.name, kubeconfig)), COMMAND_TIMEOUT_S,
                      on_control=True, lock_file=None) for n in nodes]
    except ValueError as exc:
        raise RunError(f"run {run_id}: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="rackgate-drain-") as tmp:
        record = Path(tmp) if dry_run else new_stamped_dir(run_dir / "scheduler", "drain")
        store = EvidenceStore(record, sync=not dry_run)
        collect(reads, inventory, store, forks=forks, stop=stop)
        stop.check()
        states: dict[str, TaintState | str] = {}
        for task in reads:  # a node whose state was not read is "unknown", saying why
            ok, message = _ran_ok(store, task)
            try:
                states[task.host] = (k8s.parse_state(task.host, store.read(
                    task.host, task.check)[1]) if ok else message)
            except (ValueError, EvidenceError) as exc:
                states[task.host] = str(exc)
        decisions = decide_kubernetes(nodes, run_id, states, records,
                                      resume_passed=resume_passed, kubeconfig=kubeconfig)
        if dry_run:
            return DrainOutcome(run_id, "kubernetes", "the control host", False,
                                tuple(Done(d, False, True) for d in decisions), None)
        return _kubectl(record, store, run_id, decisions, inventory, forks, stop)


def _kubectl(record: Path, store: EvidenceStore, run_id: str, decisions: Sequence[Decision],
             inventory: Sequence[str], forks: int, stop: Stop) -> DrainOutcome:
    _plan(record, run_id, "kubernetes", decisions)
    tasks: dict[str, list[Task]] = {}
    for d in decisions:  # kubectl runs here (on_control), once per node, in order
        tasks[d.node] = [Task(d.node, f"scheduler.kubectl.{i}", argv, COMMAND_TIMEOUT_S,
                              on_control=True, lock_file=None)
                         for i, argv in enumerate(d.argvs, 1)]
    collect([t for ts in tasks.values() for t in ts], inventory, store, forks=forks, stop=stop)
    stop.check()
    done = []
    for d in decisions:
        results = [_ran_ok(store, t) for t in tasks[d.node]]
        # removing a taint that is not there is nothing to do (kubectl: "not found")
        results = [(True, m) if not ok and d.action == "resume" and i == 0
                   and NOT_TAINTED in m else (ok, m) for i, (ok, m) in enumerate(results)]
        bad = [m for ok, m in results if not ok]
        done.append(Done(d, bool(tasks[d.node]), not bad, "; ".join(bad)))
    write_json(record / "actions.json", {"run_id": run_id, "scheduler": "kubernetes",
                                         "where": "the control host",
                                         "actions": [x.to_doc() for x in done]})
    return DrainOutcome(run_id, "kubernetes", "the control host", True, tuple(done), record)
