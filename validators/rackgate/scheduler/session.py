"""SLURM's commands of ``rackgate drain`` and ``validate --retest``, run on the launch host
through the collector (Ansible, argv lists under ``timeout``), as every other command of
rackgate runs, and recorded in one directory of the run (``RUN_DIR/scheduler/<stamp>-<what>``):
the evidence of each command, ``planned.json`` (every change decided, written before any
runs) and ``actions.json`` (every decision, its commands, their outcome, the state after).

:func:`ran_ok` and :func:`write_planned` serve the Kubernetes path too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rackgate.collect.ansible import collect
from rackgate.collect.stop import Stop
from rackgate.commands.task import Task
from rackgate.model import last_words
from rackgate.refusal import Refusal
from rackgate.scheduler import slurm
from rackgate.scheduler.drain import Decision
from rackgate.scheduler.slurm import NodeState
from rackgate.store.evidence import EvidenceError, EvidenceStore, write_json

COMMAND_TIMEOUT_S = 60  # sinfo and scontrol answer in well under a second when slurmctld is up
STATE = "scheduler.state"


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


def _state_doc(st: NodeState) -> dict[str, Any]:
    return {"state": st.state, "reason": st.reason,
            **({} if st.since is None else {"since": st.since})}


def write_planned(record: Path, run_id: str, scheduler: str,
                  decisions: Sequence[Decision]) -> None:
    """planned.json: the changes about to be made, before any runs (a drain killed between
    its command and actions.json is still this run's to resume)."""
    write_json(record / "planned.json", {"run_id": run_id, "scheduler": scheduler, "actions": [
        {"node": d.node, "action": d.action, "why": d.why, "reason": d.reason,
         "commands": [list(a) for a in d.argvs]} for d in decisions if d.changes]})


def ran_ok(store: EvidenceStore, task: Task) -> tuple[bool, str]:
    """Whether ``task`` ran and exited 0, and what it said."""
    try:
        ev, stdout = store.read(task.host, task.check)
    except EvidenceError as exc:
        return False, str(exc)
    said = last_words(ev.stderr or stdout or ev.message or "", 300)
    if ev.outcome == "completed" and ev.rc == 0:
        return True, said
    return False, f"{ev.outcome}, rc {ev.rc}: {said or 'no message'}"


@dataclass
class SlurmSession:
    """SLURM's commands on ``launch``, their evidence in ``record`` (``sync`` False: a
    temporary directory of a dry run)."""

    record: Path
    launch: str
    inventory: Sequence[str]
    forks: int
    stop: Stop
    sync: bool = True
    store: EvidenceStore = field(init=False)

    def __post_init__(self) -> None:
        self.store = EvidenceStore(self.record, sync=self.sync)

    def run(self, tasks: Sequence[Task]) -> None:
        collect(tasks, self.inventory, self.store, forks=self.forks, stop=self.stop)
        self.stop.check()

    def states(self, names: Sequence[str]) -> dict[str, NodeState]:
        """What sinfo says of ``names`` (with the time of each reason); Refusal when it
        does not answer."""
        task = Task(self.launch, STATE, tuple(slurm.timed_sinfo_argv(names)),
                    COMMAND_TIMEOUT_S, lock_file=None)
        self.run([task])
        try:
            ev, stdout = self.store.read(self.launch, STATE)
        except EvidenceError as exc:
            raise Refusal(f"{self.launch}: sinfo: {exc}") from None
        if ev.outcome != "completed" or ev.rc != 0:
            said = last_words(ev.stderr or ev.message or "", 300)
            raise Refusal(f"{self.launch}: {' '.join(task.argv)}: {ev.outcome}, rc {ev.rc}: "
                           f"{said or 'no message'} (is slurmctld running?)")
        try:
            return slurm.parse_timed_states(stdout)
        except ValueError as exc:
            raise Refusal(f"{self.launch}: {exc}") from None

    def apply(self, run_id: str, decisions: Sequence[Decision],
              names: Sequence[str]) -> tuple[Done, ...]:
        """Run every change of ``decisions`` (one ``scontrol update`` per node), read the
        states of ``names`` again and record what was done (actions.json)."""
        tasks = {d.node: Task(self.launch, f"scheduler.{d.action}.{d.node}", d.argvs[0],
                              COMMAND_TIMEOUT_S, lock_file=None)
                 for d in decisions if d.changes}
        if tasks:
            write_planned(self.record, run_id, "slurm", decisions)
            self.run(list(tasks.values()))
        after = self.states(names)
        done = tuple(self._done(d, tasks.get(d.node), after.get(d.node)) for d in decisions)
        write_json(self.record / "actions.json", {
            "run_id": run_id, "scheduler": "slurm", "where": self.launch,
            "actions": [d.to_doc() for d in done]})
        return done

    def _done(self, d: Decision, task: Task | None, after: NodeState | None) -> Done:
        if task is None:
            return Done(d, False, True, "", after)
        ok, message = ran_ok(self.store, task)
        if ok and after is not None:
            drained = after.drained and after.reason == d.reason
            if d.action in ("drain", "release") and not drained:
                ok, message = False, f"sinfo shows {after.describe()} after the {d.action}"
            if d.action == "resume" and after.drained:
                ok, message = False, f"sinfo shows {after.describe()} after the resume"
        return Done(d, True, ok, message, after)
