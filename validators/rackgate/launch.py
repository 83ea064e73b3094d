"""Command lines that launch a multi-node benchmark through the cluster's own launcher.

Multi-node checks (nccl-tests across nodes, an MPI all-reduce) are never started by a
home-made fan-out: the job goes through the scheduler the site runs, so it sees the same
placement, cgroups, PMI wiring and environment a training job sees. This module only
builds argv lists from a :class:`Launch` (pure, no I/O); the runner executes them on the
launch host (a SLURM login/controller node, or the node that holds the MPI hostfile).

Two launchers:

- ``srun`` (SLURM): one job step over an explicit node list, ``--ntasks-per-node``,
  ``--mpi=<plugin>`` (pmix for Open MPI; pmi2 aborts with Open MPI, see PROBES.md),
  ``--time`` from the check's timeout, ``--kill-on-bad-exit=1`` so one failed rank ends the
  step instead of leaving the others waiting in a collective, ``--label`` so every line of
  output carries its task id (the nccl-tests parser strips ``N: `` prefixes).
- ``mpirun`` (Open MPI): a hostfile of the nodes with their slots, ``-np``,
  ``--map-by ppr:<tasks>:node``, ``--bind-to none`` (the benchmark pins its own GPUs), and
  ``--tag-output``.

Every srun launch goes behind :func:`when_slurm_ready`: rackgate's guard
(``probes/slurm_ready.py``, sent as text) asks ``sinfo --Node`` for exactly the nodes of
the job and starts it only when every one is ``idle``; otherwise it fails at once, naming
each node that is not ready with SLURM's state and reason, instead of queueing a job that
can never start.

The benchmark's environment (NCCL_* from the profile, NCCL_TESTS_SPLIT in per-rail mode) is
passed through ``env NAME=value`` in front of the program for srun, because ``--export``
splits its argument on commas and NCCL_IB_HCA values contain commas; Open MPI's ``-x
NAME=value`` takes a value with commas as it is.

>>> launch = Launch(nodes=("n1", "n2"), tasks_per_node=8, program=("all_reduce_perf", "-g", "1"),
...                 env={"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}, timeout_s=600)
>>> srun_argv(launch, job_name="rackgate-nccl")  # doctest: +NORMALIZE_WHITESPACE
['srun', '--job-name=rackgate-nccl', '--nodes=2', '--nodelist=n1,n2', '--ntasks-per-node=8',
 '--mpi=pmix', '--time=10', '--kill-on-bad-exit=1', '--label',
 'env', 'NCCL_IB_HCA==mlx5_0:1,mlx5_3:1', 'all_reduce_perf', '-g', '1']
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rackgate.probes import source

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# SLURM node names and hostnames: letters, digits, '-', '_' and '.'; no list syntax here
# (the caller expands ranges: an explicit list is what is recorded as evidence).
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

MpiPlugin = Literal["pmix", "pmi2", "none"]


class LaunchError(ValueError):
    """A launch cannot be built from these values (the message names the value)."""


@dataclass(frozen=True)
class Launch:
    """One multi-node run: where, how many tasks, what, with which environment."""

    nodes: tuple[str, ...]
    tasks_per_node: int
    program: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: int = 600
    mpi: MpiPlugin = "pmix"
    partition: str | None = None
    gpus_per_node: int | None = None  # --gres=gpu:N (SLURM) where the partition needs it
    # srun --immediate: give up when the nodes are not allocated within this many seconds
    # (a node that is down or drained), instead of waiting in the queue for the time limit
    queue_wait_s: int | None = None

    def __post_init__(self) -> None:
        if not self.nodes:
            raise LaunchError("launch: no nodes given")
        for node in self.nodes:
            if not NODE_NAME.match(node):
                raise LaunchError(f"launch: node name {node!r} is not a plain host name")
        if len(set(self.nodes)) != len(self.nodes):
            raise LaunchError(f"launch: a node is listed twice in {list(self.nodes)}")
        if self.tasks_per_node < 1:
            raise LaunchError(f"launch: tasks_per_node must be >= 1, got {self.tasks_per_node}")
        if not self.program:
            raise LaunchError("launch: no program given")
        if self.timeout_s < 1:
            raise LaunchError(f"launch: timeout_s must be >= 1, got {self.timeout_s}")
        if self.queue_wait_s is not None and self.queue_wait_s < 1:
            raise LaunchError(f"launch: queue_wait_s must be >= 1, got {self.queue_wait_s}")
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise LaunchError(f"launch: gpus_per_node must be >= 1, got {self.gpus_per_node}")
        for name, value in self.env.items():
            if not ENV_NAME.match(name):
                raise LaunchError(f"launch: {name!r} is not an environment variable name")
            if "\n" in value or "\0" in value:
                raise LaunchError(f"launch: the value of {name} contains a newline or NUL")

    @property
    def ntasks(self) -> int:
        return len(self.nodes) * self.tasks_per_node


def _env_words(env: Mapping[str, str]) -> list[str]:
    return [f"{name}={env[name]}" for name in sorted(env)]


def srun_argv(launch: Launch, job_name: str) -> list[str]:
    """The ``srun`` command line for one job step on exactly ``launch.nodes``."""
    argv = [
        "srun",
        f"--job-name={job_name}",
        f"--nodes={len(launch.nodes)}",
        f"--nodelist={','.join(launch.nodes)}",
        f"--ntasks-per-node={launch.tasks_per_node}",
        f"--mpi={launch.mpi}",
        # SLURM's --time is in minutes; never shorter than the check's own timeout.
        f"--time={max(1, math.ceil(launch.timeout_s / 60))}",
        "--kill-on-bad-exit=1",
        "--label",
    ]
    if launch.partition:
        argv.insert(2, f"--partition={launch.partition}")
    if launch.gpus_per_node:
        argv.insert(-2, f"--gres=gpu:{launch.gpus_per_node}")
    if launch.queue_wait_s:
        argv.insert(-2, f"--immediate={launch.queue_wait_s}")
    if launch.env:
        argv += ["env", *_env_words(launch.env)]
    return argv + list(launch.program)


def when_slurm_ready(nodes: Sequence[str], argv: Sequence[str]) -> list[str]:
    """``argv`` (srun, or a script of srun jobs) run by the readiness guard, which execs it
    only when SLURM reports every node of ``nodes`` idle.

    >>> guarded = when_slurm_ready(("n1", "n2"), ["srun", "hostname"])
    >>> guarded[:2], guarded[3:]
    (['python3', '-c'], ['n1,n2', '--', 'srun', 'hostname'])
    """
    for node in nodes:
        if not NODE_NAME.match(node):
            raise LaunchError(f"launch: node name {node!r} is not a plain host name")
    if not nodes or not argv:
        raise LaunchError("launch: the readiness guard needs nodes and a command")
    return ["python3", "-c", source("slurm_ready"), ",".join(nodes), "--", *argv]


def hostfile(launch: Launch) -> str:
    """Open MPI hostfile text: one ``<node> slots=<tasks_per_node>`` line per node.

    >>> print(hostfile(Launch(nodes=("a", "b"), tasks_per_node=2, program=("x",))), end="")
    a slots=2
    b slots=2
    """
    return "".join(f"{node} slots={launch.tasks_per_node}\n" for node in launch.nodes)


def mpirun_argv(launch: Launch, hostfile_path: str | None,
                allow_run_as_root: bool = False) -> list[str]:
    """The Open MPI ``mpirun`` command line; ``hostfile_path`` holds :func:`hostfile`, or
    with None the nodes and their slots go on the command line (``--host a:8,b:8``).

    >>> mpirun_argv(Launch(nodes=("a", "b"), tasks_per_node=1, program=("hostname",),
    ...                    env={"NCCL_DEBUG": "WARN"}), "/tmp/hosts")
    ... # doctest: +NORMALIZE_WHITESPACE
    ['mpirun', '--hostfile', '/tmp/hosts', '-np', '2', '--map-by', 'ppr:1:node',
     '--bind-to', 'none', '--tag-output', '-x', 'NCCL_DEBUG=WARN', 'hostname']
    """
    if hostfile_path is None:
        where = ["--host", ",".join(f"{n}:{launch.tasks_per_node}" for n in launch.nodes)]
    else:
        where = ["--hostfile", hostfile_path]
    argv = ["mpirun", *where, "-np", str(launch.ntasks),
            "--map-by", f"ppr:{launch.tasks_per_node}:node", "--bind-to", "none",
            "--tag-output"]
    if allow_run_as_root:
        argv.append("--allow-run-as-root")
    for word in _env_words(launch.env):
        argv += ["-x", word]
    return argv + list(launch.program)
