"""Executing a plan, phase by phase, so that a failure stays with the node that failed.

1. Every node's own checks run first (phase 0: on the nodes, and on the control host).
2. A node that was unreachable in phase 0 is left out of the jobs across the nodes
   (phase 1): they are planned again without it, so the others are measured, and the
   manifest's ``launched`` record says who was left out and why (``commands.failure``'s
   sentence). When every node under test (two or more) was unreachable for the same
   cause, the cause is on the control host's side (its ssh key, its network, the demo
   rack stopped): ControlSideError, and nothing is judged.
3. A job across the nodes that failed, and whose output names the node(s) that broke it
   (``parsers.launch_failure``: SLURM's, Open MPI's and NCCL's error lines, rackgate's
   readiness guard), runs once more without them, when at least two nodes remain; its
   first attempt stays in the evidence store.

A retest may ask to be called once just before the first job launched through SLURM
(``before_slurm``: it resumes the nodes this run drained, ``scheduler.retest``): before the
nodes' own checks with ``--via slurm``, else before the jobs across the nodes that go
through the readiness guard.

Judging then blames the left-out nodes (``error``, with the reason) and judges the others
on the job that ran without them (``placement.AcrossNodes.judge``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Literal

from rackgate.checks.shared.base import Check
from rackgate.collect.ansible import collect, release_nodes
from rackgate.collect.schedule import Plan, plan
from rackgate.collect.stop import Stop
from rackgate.commands.failure import ControlSideError, did_not_answer, same_failure
from rackgate.commands.launch import slurm_guarded
from rackgate.commands.task import Task
from rackgate.inventory import Inventory
from rackgate.parsers.launch_failure import find_culprits
from rackgate.placement import (
    ACROSS_NODES,
    MIN_NODES_ACROSS,
    AcrossNodes,
    NotRun,
    RunView,
)
from rackgate.placement.evidence import broke_the_job
from rackgate.store.evidence import EvidenceError, EvidenceStore
from rackgate.store.manifest import Launched

ProgressFn = Callable[[str, str, str], None]  # host, check, outcome
Via = Literal["ansible", "slurm"]  # how the nodes' own checks are collected
VIA: tuple[Via, ...] = ("ansible", "slurm")


class Collection:
    """One collection of a run: ``run()`` executes the plan; ``launched`` then holds, per
    check launched across the nodes, where its latest job ran and who was left out."""

    def __init__(self, the_plan: Plan, view: RunView, checks: Sequence[Check], inv: Inventory,
                 store: EvidenceStore, forks: int, progress: ProgressFn, stop: Stop,
                 keep_artifacts: bool = False, via: Via = "ansible",
                 before_slurm: Callable[[], None] | None = None) -> None:
        self.plan, self.view, self.inv, self.store = the_plan, view, inv, store
        # called once, before the first job launched through SLURM (a retest resumes the
        # nodes this run drained: scheduler.retest)
        self._before_slurm = before_slurm
        # --via slurm: every node's own commands run as one SLURM job from the launch host
        self.slurm_host = view.launch_host if via == "slurm" else None
        if via == "slurm" and self.slurm_host is None:
            raise ValueError("--via slurm needs a launch host (the SLURM controller)")
        self.keep_artifacts = keep_artifacts  # ansible-runner's artifacts go to the run dir
        self.checks = {c.name: c for c in checks}
        self.forks, self.progress, self.stop = forks, progress, stop
        self.launched: dict[str, Launched] = {}
        self.statuses: list[str] = []
        self._unreachable: set[tuple[str, str]] = set()  # (host, check) reported unreachable

    def run(self) -> list[str]:
        """Collect; ansible-runner's status of each playbook run."""
        tasks = [t for phase in self.plan.phases for t in phase]
        across = [t for t in tasks if self.plan.phase_of[t.check] == ACROSS_NODES.phase]
        own = [t for t in tasks if t not in across]
        if own and self.slurm_host:
            self._slurm_ahead()
        self._phase(own, slurm_host=self.slurm_host)
        if self.stop():
            return self.statuses
        failed = self.unreachable(own)
        reached = {t.host for t in own if not t.on_control and t.host in self.view.nodes}
        same = same_failure(failed) if reached and set(failed) == reached else None
        if same is not None:  # the control host's side, not the nodes': no verdict
            raise ControlSideError(same)
        if not across:
            return self.statuses
        left = {h: did_not_answer(h, said) for h, said in failed.items()}
        if left:
            across = self._replan([t.check for t in across], left)
        if any(slurm_guarded(t.argv) for t in across):
            self._slurm_ahead()
        self._phase(across)
        again: list[Task] = []
        for t in across:
            if self.stop():
                break
            culprits = self.culprits(t)
            if culprits:
                again += self._replan([t.check], {**self.launched[t.check].left_out,
                                                  **culprits})
        self._phase(again, note=" (again, without the node that broke the job)")
        return self.statuses

    def _slurm_ahead(self) -> None:
        if self._before_slurm is not None and not self.stop():
            hook, self._before_slurm = self._before_slurm, None
            hook()

    def _phase(self, tasks: Sequence[Task], note: str = "",
               slurm_host: str | None = None) -> None:
        if not tasks or self.stop():
            return
        for t in tasks:
            if self.plan.phase_of[t.check] == ACROSS_NODES.phase:
                self.launched.setdefault(t.check, Launched(nodes=self.view.nodes))

        def progress(host: str, check: str, outcome: str) -> None:
            if outcome == "unreachable":
                self._unreachable.add((host, check))
            self.progress(host, check, outcome + note)

        self.statuses.append(collect(tasks, self.inv.sources, self.store, forks=self.forks,
                                     progress=progress, stop=self.stop,
                                     keep_artifacts=self.keep_artifacts,
                                     slurm_host=slurm_host))
        if self.stop():
            # this run's commands still running on the nodes (fio, srun) end too
            release_nodes(tasks, self.inv.sources, self.store.run_dir, forks=self.forks,
                          stop=self.stop, slurm_host=slurm_host)

    def unreachable(self, tasks: Sequence[Task]) -> dict[str, str]:
        """The nodes under test that Ansible could not reach for their own checks of this
        collection, with Ansible's words (read from the evidence of the tasks that the
        collector reported unreachable)."""
        out: dict[str, str] = {}
        for t in tasks:
            if t.on_control or t.host in out or t.host not in self.view.nodes \
                    or (t.host, t.check) not in self._unreachable:
                continue
            try:
                ev, _ = self.store.read(t.host, t.check)
            except EvidenceError:
                continue
            if ev.outcome == "unreachable":
                out[t.host] = ev.message
        return out

    def culprits(self, task: Task) -> dict[str, str]:
        """The nodes that broke ``task``'s job across the nodes, with why, when its output
        names some but not all of them; else {}."""
        nodes = self.launched[task.check].nodes
        try:
            ev, stdout = self.store.read(task.host, task.check)
        except EvidenceError:
            return {}
        if ev.outcome not in ("completed", "timeout") or ev.rc == 0:
            return {}
        failure = find_culprits(f"{stdout}\n{ev.stderr}", nodes)
        named = {n: broke_the_job(n, task.check, failure.culprits[n])
                 for n in nodes if n in failure.culprits}
        return named if 0 < len(named) < len(nodes) else {}

    def _replan(self, checks: Sequence[str], left: Mapping[str, str]) -> list[Task]:
        """The jobs of ``checks`` planned again without the ``left`` nodes; records where
        each runs (or that too few nodes remain: nothing runs, the others warn)."""
        view = replace(self.view, left_out=dict(left))
        nodes = AcrossNodes.job_nodes(view)
        for name in checks:
            self.launched[name] = Launched(nodes=tuple(nodes), left_out=dict(left))
        if len(nodes) < MIN_NODES_ACROSS:
            return []
        replanned = plan(view, [self.checks[c] for c in checks], lambda h, c: False)
        for nr in replanned.not_run:
            record_not_run(self.store, nr, self.progress)
        return [t for phase in replanned.phases for t in phase]


def record_not_run(store: EvidenceStore, nr: NotRun, progress: ProgressFn) -> None:
    """Record a (host, check) that cannot run as ``not_run`` evidence (judged ``error``)."""
    store.write(nr.host, nr.check, "", argv=(), outcome="not_run", rc=None, started=None,
                ended=None, duration_s=None, stderr="", message=nr.why)
    progress(nr.host, nr.check, "not_run")
