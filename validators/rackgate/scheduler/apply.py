"""``rackgate drain`` against the cluster: the scheduler's commands run through the
collector (Ansible, argv lists under ``timeout``), as every other command of rackgate runs.

SLURM's commands run on the run's launch host (the host its jobs across the nodes were
launched from): first sinfo for the nodes' states, then one ``scontrol update`` per node to
change, then sinfo again to show what it did (:mod:`.session`). Kubernetes' kubectl
commands run on the control host (where the kubeconfig is): first one ``kubectl get`` per
node for its taint and reason, then the changes. Nothing takes the node lock: a drain must
not wait for a benchmark.

Everything run is recorded in the run directory, as evidence of its own kind:
``RUN_DIR/scheduler/<UTC stamp>-drain/evidence/<host>/<command>.{out,json}``, a
``planned.json`` with every change decided, written before any runs, and an
``actions.json`` with every decision, the command it ran, its outcome and the state after.
These records, and those of ``validate --retest`` (``<UTC stamp>-retest/``), are what a
later ``--resume-passed`` of the same run trusts (:func:`read_records`): a node is resumed
only if this run's records show it drained it. A ``--dry-run`` reads the states into a
temporary directory and changes nothing. Before deciding, the run is checked for being
stale (:mod:`.stale`): each warning is in the outcome.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from rackgate.collect.ansible import collect
from rackgate.collect.stop import Stop
from rackgate.commands.task import Task
from rackgate.documents import load_json
from rackgate.inventory import InventoryError, load_inventory
from rackgate.refusal import Refusal
from rackgate.reports import UnreadableReport, read_report
from rackgate.scheduler import kubernetes as k8s
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
from rackgate.scheduler.session import (
    COMMAND_TIMEOUT_S,
    Done,
    SlurmSession,
    ran_ok,
    write_planned,
)
from rackgate.scheduler.slurm import NodeState
from rackgate.scheduler.stale import stale_time, stale_warnings
from rackgate.selection import launch_host
from rackgate.store.evidence import EvidenceError, EvidenceStore, write_json
from rackgate.store.history import HistoryError, default_history_path, later_runs, open_history
from rackgate.store.manifest import Manifest, new_stamped_dir, read_manifest

Scheduler = Literal["slurm", "kubernetes"]
RECORD_MAX_BYTES = 64 * 2**20  # a record of 10,000 nodes' actions is a few MB
RECORDS = ("*-drain/*.json", "*-retest/*.json")  # drain's records, and --retest's
__all__ = ["Done", "DrainOutcome", "drain", "read_records"]


@dataclass(frozen=True)
class DrainOutcome:
    run_id: str
    scheduler: Scheduler
    where: str  # the host the commands ran on (SLURM: the launch host; Kubernetes: here)
    applied: bool  # False: a dry run, or Kubernetes without a kubeconfig
    done: tuple[Done, ...]
    record: Path | None  # RUN_DIR/scheduler/<stamp>-drain, when something ran
    warnings: tuple[str, ...] = ()  # why the run may be stale (scheduler.stale)

    @property
    def failed(self) -> list[Done]:
        return [d for d in self.done if d.decision.action in FAILED or (d.ran and not d.ok)]


def drain(run_dir: Path, *, scheduler: Scheduler | None = None, dry_run: bool = False,
          resume_passed: bool = False, include_errors: bool = False,
          kubeconfig: str | None = None, forks: int = 20,
          stop: Stop | None = None) -> DrainOutcome:
    """Decide per node of the run's report, and unless ``dry_run``, act; a node rejected
    only on errors (could not measure) is drained only with ``include_errors``. Refusal
    when the run, its report or the scheduler cannot be used."""
    manifest = read_manifest(run_dir)
    run_id, nodes = run_report(run_dir, manifest)
    inventory = manifest.inventory
    stop = stop or Stop()
    records = read_records(run_dir, run_id, scheduler or "slurm")
    ended_at = manifest.finished or manifest.started
    later = _later_runs(run_dir, run_id, [n.name for n in nodes], ended_at)

    def stale(states: Mapping[str, NodeState]) -> list[str]:
        return stale_warnings(run_id, ended_at, states, records, later)

    if scheduler == "kubernetes":
        return _kubernetes(run_dir, run_id, nodes, records, inventory, kubeconfig,
                           dry_run=dry_run, resume_passed=resume_passed,
                           include_errors=include_errors, forks=forks, stop=stop,
                           warnings=tuple(stale({})))
    launch = _launch_host(manifest, nodes)
    if not launch:
        raise Refusal(f"run {run_id}: no SLURM launch host: SLURM's commands run on the "
                       f"nodes' rackgate_launch_host, or the first host of group "
                       f"slurm_controller, and {', '.join(inventory)} names neither"
                       + ("" if scheduler else "; give --scheduler kubernetes for a "
                          "Kubernetes site"))
    return _slurm(run_dir, run_id, nodes, records, launch, inventory, dry_run=dry_run,
                  resume_passed=resume_passed, include_errors=include_errors, forks=forks,
                  stop=stop, stale=stale)


def run_report(run_dir: Path, manifest: Manifest) -> tuple[str, list[ReportNode]]:
    """The run id and nodes of the run's report.json, checked against its manifest."""
    try:
        doc, path = read_report(run_dir)
        if not isinstance(doc, dict):
            raise ReportError(f"{path}: the report is not a JSON object")
        source = str(path)
        run_id, nodes = report_nodes(doc, source)
    except (UnreadableReport, ReportError, ValueError) as exc:
        raise Refusal(str(exc)) from None
    if run_id != manifest.run_id:
        raise Refusal(f"{source}: field run.run_id {run_id!r} is not this run's "
                       f"({manifest.run_id!r} in manifest.json)")
    return run_id, nodes


def _later_runs(run_dir: Path, run_id: str, nodes: Sequence[str],
                ended: str | None) -> list[tuple[str, str, list[str]]] | str:
    """The runs of the history (beside the run directory) first judged after this run
    ended (``ended``), that judged any of ``nodes``; or why the history could not be
    read."""
    path = default_history_path(run_dir.resolve().parent)
    if not path.is_file() or stale_time(ended) is None:
        return []  # no history, or no time of the run's end to compare with
    try:
        conn = open_history(path)
        try:
            return later_runs(conn, nodes, str(ended), run_id)
        finally:
            conn.close()
    except (HistoryError, ValueError) as exc:
        return f"{path}: {exc}"


def read_records(run_dir: Path, run_id: str, scheduler: str) -> Records:
    """What this run's earlier drains and retests (``RUN_DIR/scheduler/*-drain/`` and
    ``*-retest/``: planned.json and actions.json of ``scheduler``, naming ``run_id``)
    drained: per node, the reasons written; and the last change each node's records show
    done (in the order the records were written). A record that cannot be read is named,
    never trusted."""
    drained: dict[str, set[str]] = {}
    done: list[tuple[int, str, list[Any]]] = []
    unreadable: list[str] = []
    paths = sorted(p for pattern in RECORDS for p in (run_dir / "scheduler").glob(pattern))
    for path in paths:
        if path.name not in ("planned.json", "actions.json"):
            continue
        try:
            if path.stat().st_size > RECORD_MAX_BYTES:
                raise ValueError(f"over {RECORD_MAX_BYTES} bytes")
            doc = load_json(path.read_text(encoding="utf-8"))
            written = path.stat().st_mtime_ns
        except (OSError, ValueError):
            unreadable.append(str(path))
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("actions"), list):
            unreadable.append(str(path))
            continue
        if doc.get("run_id") != run_id or doc.get("scheduler") != scheduler:
            continue
        if path.name == "actions.json":
            done.append((written, str(path), doc["actions"]))
        for a in doc["actions"]:
            if not isinstance(a, dict) or a.get("action") != "drain":
                continue
            # older records had no "reason": a drain's reason was its "why"
            text = a.get("reason") if "reason" in a else a.get("why")
            if isinstance(a.get("node"), str) and isinstance(text, str):
                drained.setdefault(a["node"], set()).add(text)
    last = {a["node"]: a["action"] for _, _, actions in sorted(done, key=lambda d: d[:2])
            for a in actions if isinstance(a, dict) and isinstance(a.get("node"), str)
            and a.get("action") in ("drain", "release", "resume") and a.get("ok") is True
            and a.get("ran") is True}
    return Records({n: frozenset(r) for n, r in drained.items()}, tuple(unreadable), last)


def _launch_host(manifest: Manifest, nodes: Sequence[ReportNode]) -> str | None:
    """The host the run launched its jobs across the nodes from; for a run without such
    jobs, the one the inventory names (as ``validate`` would choose it)."""
    if manifest.launch_host:
        return manifest.launch_host
    try:
        return launch_host(load_inventory(manifest.inventory), [n.name for n in nodes])
    except InventoryError as exc:
        raise Refusal(str(exc)) from None


def _slurm(run_dir: Path, run_id: str, nodes: Sequence[ReportNode], records: Records,
           launch: str, inventory: Sequence[str], *, dry_run: bool, resume_passed: bool,
           include_errors: bool, forks: int, stop: Stop,
           stale: Callable[[Mapping[str, NodeState]], list[str]]) -> DrainOutcome:
    names = [n.name for n in nodes]
    with tempfile.TemporaryDirectory(prefix="rackgate-drain-") as tmp:
        record = Path(tmp) if dry_run else new_stamped_dir(run_dir / "scheduler", "drain")
        session = SlurmSession(record, launch, inventory, forks, stop, sync=not dry_run)
        states = session.states(names)
        warnings = tuple(stale(states))
        decisions = decide_slurm(nodes, states, run_id, records, resume_passed=resume_passed,
                                 include_errors=include_errors)
        if dry_run:
            return DrainOutcome(run_id, "slurm", launch, False,
                                tuple(Done(d, False, True) for d in decisions), None, warnings)
        return DrainOutcome(run_id, "slurm", launch, True,
                            session.apply(run_id, decisions, names), record, warnings)


def _kubernetes(run_dir: Path, run_id: str, nodes: Sequence[ReportNode], records: Records,
                inventory: Sequence[str], kubeconfig: str | None, *, dry_run: bool,
                resume_passed: bool, include_errors: bool, forks: int, stop: Stop,
                warnings: tuple[str, ...]) -> DrainOutcome:
    """Without a kubeconfig: the commands decided without the nodes' state, printed. With
    one: each node's taint read (into a temporary directory for a dry run), then decided,
    then (unless a dry run) run, kubectl on the control host once per node, in order."""
    try:
        if kubeconfig is None:
            decisions = decide_kubernetes(nodes, run_id, None, records,
                                          resume_passed=resume_passed, kubeconfig=None,
                                          include_errors=include_errors)
            return DrainOutcome(run_id, "kubernetes", "the control host", False,
                                tuple(Done(d, False, True) for d in decisions), None, warnings)
        reads = [Task(n.name, "scheduler.kubectl.state",
                      tuple(k8s.state_argv(n.name, kubeconfig)), COMMAND_TIMEOUT_S,
                      on_control=True, lock_file=None) for n in nodes]
    except ValueError as exc:
        raise Refusal(f"run {run_id}: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="rackgate-drain-") as tmp:
        record = Path(tmp) if dry_run else new_stamped_dir(run_dir / "scheduler", "drain")
        store = EvidenceStore(record, sync=not dry_run)
        collect(reads, inventory, store, forks=forks, stop=stop)
        stop.check()
        states: dict[str, TaintState | str] = {}
        for task in reads:  # a node whose state was not read is "unknown", saying why
            ok, message = ran_ok(store, task)
            try:
                states[task.host] = (k8s.parse_state(task.host, store.read(
                    task.host, task.check)[1]) if ok else message)
            except (ValueError, EvidenceError) as exc:
                states[task.host] = str(exc)
        decisions = decide_kubernetes(nodes, run_id, states, records,
                                      resume_passed=resume_passed, kubeconfig=kubeconfig,
                                      include_errors=include_errors)
        if dry_run:
            return DrainOutcome(run_id, "kubernetes", "the control host", False,
                                tuple(Done(d, False, True) for d in decisions), None, warnings)
        return replace(_kubectl(record, store, run_id, decisions, inventory, forks, stop),
                       warnings=warnings)


def _kubectl(record: Path, store: EvidenceStore, run_id: str, decisions: Sequence[Decision],
             inventory: Sequence[str], forks: int, stop: Stop) -> DrainOutcome:
    write_planned(record, run_id, "kubernetes", decisions)
    tasks: dict[str, list[Task]] = {}
    for d in decisions:  # kubectl runs here (on_control), once per node, in order
        tasks[d.node] = [Task(d.node, f"scheduler.kubectl.{i}", argv, COMMAND_TIMEOUT_S,
                              on_control=True, lock_file=None)
                         for i, argv in enumerate(d.argvs, 1)]
    collect([t for ts in tasks.values() for t in ts], inventory, store, forks=forks, stop=stop)
    stop.check()
    done = []
    for d in decisions:
        results = [ran_ok(store, t) for t in tasks[d.node]]
        # removing a taint that is not there is nothing to do (kubectl: "not found")
        results = [(True, m) if not ok and d.action == "resume" and i == 0
                   and NOT_TAINTED in m else (ok, m) for i, (ok, m) in enumerate(results)]
        bad = [m for ok, m in results if not ok]
        done.append(Done(d, bool(tasks[d.node]), not bad, "; ".join(bad)))
    write_json(record / "actions.json", {"run_id": run_id, "scheduler": "kubernetes",
                                         "where": "the control host",
                                         "actions": [x.to_doc() for x in done]})
    return DrainOutcome(run_id, "kubernetes", "the control host", True, tuple(done), record)
