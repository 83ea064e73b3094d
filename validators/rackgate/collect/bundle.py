"""Bundles: one command that runs many tasks through the node collector. Pure: no I/O.

Both collection paths run a node's own checks through the node collector
(``programs/probes/node_collector.py``), which runs them one after the other, each exactly
as it would run alone (under the node lock and ``timeout``: :func:`commands.task.wrapped`),
and returns their evidence records (``collect.framing``):

- ``--via ansible`` (:func:`on_host`): Ansible runs the collector once per host, for all
  of that host's commands, instead of one module call per command.
- ``--via slurm`` (:func:`slurm_job`): the launch host runs ONE srun job across every
  node under test, one task per node, each task the collector with that node's commands;
  SLURM's tree fan-out starts it on every node. The readiness guard
  (``programs/probes/slurm_ready.py --some``) leaves out the nodes SLURM reports not idle,
  naming SLURM's state and reason, which become those nodes' ``not_run`` evidence.
  ``srun --label`` puts each task's number in front of every line it prints, so each
  line is bound to the task (and the node) it came from (``collect.slurm_records``).

Either way the records never pass through an Ansible result (ansible-runner empties any
result above its ``MAX_EVENT_RES``): the bundle's command runs in a private directory on
its host (made by Ansible's ``tempfile``) and writes them to :data:`RECORDS` there (the
collector itself, or the guard and srun, with srun's stderr in :data:`ERRORS`); Ansible
fetches the bundle's ``files`` to the control host and removes the directory.

Commands on the control host (BMC queries) and commands that read a credential stay
single Ansible items (``collect.ansible``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rackgate.collect.framing import collector_argv, node_input
from rackgate.commands.launch import NODE_NAME, LaunchError, when_slurm_ready
from rackgate.commands.task import KILL_AFTER_S, Task, wrapped

QUEUE_WAIT_S = 60  # srun --immediate: the nodes were idle a moment ago
JOB_PREFIX = "rackgate-collect-"
RECORDS = "rackgate-records"  # the framed records, in the bundle's private directory
ERRORS = "rackgate-stderr"  # a SLURM job's stderr (srun's and the tasks'), beside them


@dataclass(frozen=True)
class Bundle:
    """One command (``argv`` with ``stdin``) on ``host`` that runs ``members``; ``job``:
    the SLURM job's name when it is one job across the nodes (its members are on other
    hosts than ``host``, the launch host), else None; ``files``: what it writes in its
    directory, fetched to the control host."""

    host: str
    members: tuple[Task, ...]
    argv: tuple[str, ...]
    stdin: str
    job: str | None = None
    files: tuple[str, ...] = (RECORDS,)

    def nodes(self) -> dict[str, list[Task]]:
        """The members per node, in the order they run."""
        out: dict[str, list[Task]] = {}
        for t in self.members:
            out.setdefault(t.host, []).append(t)
        return out

    def bound_s(self) -> int:
        """How long the bundle may take: the slowest node's commands one after the other
        (each at its bound), plus SLURM's queue wait for a job."""
        return slowest_s(self.members) + (QUEUE_WAIT_S if self.job else 0)


def slowest_s(tasks: Sequence[Task]) -> int:
    """The slowest node's commands of ``tasks``, one after the other, each at its bound."""
    per_node: dict[str, int] = {}
    for t in tasks:
        per_node[t.host] = per_node.get(t.host, 0) + bound_of(t)
    return max(per_node.values())


def bound_of(task: Task) -> int:
    """A member's bound in the collector: its lock wait, timeout and kill-after, and a
    margin; ``timeout`` ends it well before."""
    locked = task.lock_file is not None and not task.on_control
    return task.timeout_s + KILL_AFTER_S + (task.lock_wait_s if locked else 0) + 30


def bundled(task: Task) -> bool:
    """Whether ``task`` runs through the node collector: it runs on its node (not on the
    control host) and reads no credential (that file is written by Ansible per item)."""
    return not task.on_control and task.secret_var is None


def _input(tasks: Sequence[Task], attempt: str, who: str
           ) -> tuple[str, dict[Task, tuple[str, ...]]]:
    ran = {t: wrapped(t, attempt, who) for t in tasks}
    per_node: dict[str, list[tuple[str, Sequence[str], int]]] = {}
    for t in tasks:
        per_node.setdefault(t.host, []).append((t.check, ran[t], bound_of(t)))
    return node_input(per_node), ran


def on_host(host: str, tasks: Sequence[Task], attempt: str, who: str
            ) -> tuple[Bundle, dict[Task, tuple[str, ...]]]:
    """The collector on ``host`` for its ``tasks`` (their node lock wrappers carry
    ``attempt``: :func:`commands.task.attempt_token`), and the argv each member really runs."""
    stdin, ran = _input(tasks, attempt, who)
    return Bundle(host, tuple(tasks), tuple(collector_argv(host, RECORDS)), stdin), ran


def job_name(token: str) -> str:
    """The collection job's SLURM name, from the run token (or an attempt of the run,
    which begins with it): one per run (``scancel --name`` ends it)."""
    return f"{JOB_PREFIX}{token[:12]}"


def slurm_job(launch_host: str, tasks: Sequence[Task], attempt: str, who: str
              ) -> tuple[Bundle, dict[Task, tuple[str, ...]]]:
    """One srun job on ``launch_host`` running every node's ``tasks`` (one task per node),
    behind the readiness guard; and the argv each member really runs.

    >>> b, _ = slurm_job("head", [Task("n1", "c", ("true",), 5)], "0123456789abcdef", "me")
    >>> b.argv[3:7], b.argv[9:13], b.job
    (('--some', '--records=rackgate-records', '--stderr=rackgate-stderr', 'n1'), \
('--job-name=rackgate-collect-0123456789ab', '--nodes=@READY', '--nodelist=@READY', \
'--label'), 'rackgate-collect-0123456789ab')
    """
    nodes = sorted({t.host for t in tasks})
    for node in nodes:
        if not NODE_NAME.fullmatch(node):
            raise LaunchError(f"launch: node name {node!r} is not a plain host name")
    stdin, ran = _input(tasks, attempt, who)
    name = job_name(attempt)
    srun = ["srun", f"--job-name={name}", "--nodes=@READY", "--nodelist=@READY", "--label",
            "--ntasks-per-node=1", "--kill-on-bad-exit=0", "--no-kill", "--wait=0",
            "--input=all", "--chdir=/",
            f"--time={math.ceil((slowest_s(tasks) + QUEUE_WAIT_S) / 60) + 1}",
            f"--immediate={QUEUE_WAIT_S}", *collector_argv()]
    argv = when_slurm_ready(nodes, srun, some=True, files=(RECORDS, ERRORS))
    return Bundle(launch_host, tuple(tasks), tuple(argv), stdin, name, (RECORDS, ERRORS)), ran
