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
  step instead of leaving the others waiting in a collective, ``--exclusive`` so no other
  job shares the nodes, ``--label`` so every line of output carries its task id (the
  nccl-tests parser strips ``N: `` prefixes). With the nodes' lock file
  (``Launch.node_lock``), each task first takes it shared (``flock --shared``): another
  run's benchmark on a node holds it exclusively, so the job waits for it (bounded) and
  never runs beside it.
- ``mpirun`` (Open MPI): a hostfile of the nodes with their slots, ``-np``,
  ``--map-by ppr:<tasks>:node``, ``--bind-to none`` (the benchmark pins its own GPUs), and
  ``--tag-output``.

Every srun launch goes behind :func:`when_slurm_ready`: rackgate's guard
(``programs/probes/slurm_ready.py``, sent as text) asks ``sinfo --Node`` for exactly the nodes of
the job and starts it only when every one is ``idle``; otherwise it fails at once, naming
each node that is not ready with SLURM's state and reason, instead of queueing a job that
can never start.

Where one check is many jobs (per-rail nccl-tests, the pairwise matrix), they run through
:func:`rounds_argv`: rackgate's job sequencer (``programs/probes/srun_rounds.py``, sent as text),
which receives every job's argv as separate arguments and starts each with ``subprocess``.
No shell script is ever generated from data, and every identifier that reaches a command
line (node, partition, RDMA device, path, environment name) is checked in full against its
pattern here (``fullmatch`` with ``\\Z``: ``$`` would accept a trailing newline).

The benchmark's environment (NCCL_* from the profile, NCCL_TESTS_SPLIT in per-rail mode) is
passed through ``env NAME=value`` in front of the program for srun, because ``--export``
splits its argument on commas and NCCL_IB_HCA values contain commas; Open MPI's ``-x
NAME=value`` takes a value with commas as it is.

>>> launch = Launch(nodes=("n1", "n2"), tasks_per_node=8, program=("all_reduce_perf", "-g", "1"),
...                 env={"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}, timeout_s=600,
...                 node_lock="/var/lock/rackgate.lock")
>>> srun_argv(launch, job_name="rackgate-nccl")  # doctest: +NORMALIZE_WHITESPACE
['srun', '--job-name=rackgate-nccl', '--nodes=2', '--nodelist=n1,n2', '--ntasks-per-node=8',
 '--mpi=pmix', '--time=10', '--kill-on-bad-exit=1', '--exclusive', '--label',
 'env', 'NCCL_IB_HCA==mlx5_0:1,mlx5_3:1',
 'flock', '--shared', '--no-fork', '--timeout=600', '--conflict-exit-code=75',
 '/var/lock/rackgate.lock', 'all_reduce_perf', '-g', '1']
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from rackgate.commands.task import LOCK_BUSY_RC
from rackgate.programs.probes import source

# Every identifier that reaches a command line is checked against one of these with
# ``fullmatch`` and ``\Z`` (never ``match`` with ``$``, which accepts a trailing newline).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# SLURM node names and hostnames: letters, digits, '-', '_' and '.'; no list syntax here
# (the caller expands ranges: an explicit list is what is recorded as evidence).
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# A node lock path: absolute, plain characters (it is an argv word, never shell text).
LOCK_PATH = re.compile(r"/[A-Za-z0-9._/-]+\Z")
# SLURM partition names (slurm.conf PartitionName; srun --partition takes a comma list):
# SLURM gives no character set, so the portable one of node names, comma-separated.
PARTITION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:,[A-Za-z0-9][A-Za-z0-9._-]*)*\Z")
# RDMA device names, with an optional port for NCCL_IB_HCA (``mlx5_0``, ``mlx5_0:1``). The
# kernel names them ``<driver><n>`` (mlx5_0, bnxt_re0, irdma0, efa_0) or, renamed by
# rdma-core's udev rules, after the PCI path (``rocep12s0f0``, ``ibp12s0``): letters,
# digits and '_' ('.' and '-' are allowed as in node names), never a shell character.
RDMA_DEVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
HCA_PORT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(?::[0-9]+)?\Z")
# An absolute path of a program or directory: no shell character, no '..' component.
PATH_NAME = re.compile(r"/[A-Za-z0-9._+/-]*\Z")
# A program found on PATH or given by absolute path (``python3``, ``/usr/bin/python3``).
PROGRAM = re.compile(r"[A-Za-z0-9_/][A-Za-z0-9._+/-]*\Z")


def plain(pattern: re.Pattern[str], value: object, what: str) -> str:
    """``value`` when it is a string matching ``pattern`` in full, else ValueError naming it.

    >>> plain(NODE_NAME, "gpu01", "node name")
    'gpu01'
    >>> plain(NODE_NAME, "gpu01\\n", "node name")
    Traceback (most recent call last):
    ...
    ValueError: node name 'gpu01\\n' is not a plain name (letters, digits, '.', '_', '-')
    """
    if not isinstance(value, str) or not pattern.fullmatch(value) or \
            (pattern is PATH_NAME and ".." in value.split("/")):
        raise ValueError(f"{what} {value!r} is not a plain "
                         f"{'absolute path' if pattern is PATH_NAME else 'name'} "
                         "(letters, digits, '.', '_', '-')")
    return value

MpiPlugin = Literal["pmix", "pmi2", "none"]


class LaunchError(ValueError):
    """A launch cannot be built from these values (the message names the value)."""


@dataclass(frozen=True)
class Across:
    """What a check launched across the nodes is given besides its launch host's variables:
    the nodes under test, and the lock file they all use (None: no lock)."""

    nodes: tuple[str, ...]
    node_lock: str | None = None


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
    # The nodes' rackgate lock file (``rackgate_node_lock_file``): every task takes it shared
    # before its program starts (``flock --shared``), so the job never runs beside another
    # run's benchmark on a node, which holds it exclusively; tasks of one job share it.
    # None: no lock.
    node_lock: str | None = None
    lock_wait_s: int = 600

    def __post_init__(self) -> None:
        if not self.nodes:
            raise LaunchError("launch: no nodes given")
        for node in self.nodes:
            if not isinstance(node, str) or not NODE_NAME.fullmatch(node):
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
        if self.partition is not None and not PARTITION.fullmatch(self.partition):
            raise LaunchError(f"launch: partition {self.partition!r} is not a SLURM partition "
                              "name (letters, digits, '.', '_', '-', comma-separated)")
        if self.node_lock is not None and not LOCK_PATH.fullmatch(self.node_lock):
            raise LaunchError(f"launch: node lock {self.node_lock!r} is not an absolute path "
                              "of letters, digits, '.', '_', '-' and '/'")
        if self.lock_wait_s < 1:
            raise LaunchError(f"launch: lock_wait_s must be >= 1, got {self.lock_wait_s}")
        if self.gpus_per_node is not None and self.gpus_per_node < 1:
            raise LaunchError(f"launch: gpus_per_node must be >= 1, got {self.gpus_per_node}")
        for name, value in self.env.items():
            if not ENV_NAME.fullmatch(name):
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
        "--exclusive",  # whole nodes: no other job's tasks beside the benchmark
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
    if launch.node_lock:
        argv += ["flock", "--shared", "--no-fork", f"--timeout={launch.lock_wait_s}",
                 f"--conflict-exit-code={LOCK_BUSY_RC}", launch.node_lock]
    return argv + list(launch.program)


def when_slurm_ready(nodes: Sequence[str], argv: Sequence[str], some: bool = False,
                     files: tuple[str, str] | None = None) -> list[str]:
    """``argv`` (srun, or a script of srun jobs) run by the readiness guard, which execs it
    only when SLURM reports every node of ``nodes`` idle; with ``some``, on the idle ones
    (its ``@READY`` words name them) when there is one, naming the others. With ``files``
    (records, stderr: relative to the command's directory), the guard's decision and
    srun's output go to those files instead of standard output and error.

    >>> guarded = when_slurm_ready(("n1", "n2"), ["srun", "hostname"])
    >>> guarded[:2], guarded[3:]
    (['python3', '-c'], ['n1,n2', '--', 'srun', 'hostname'])
    """
    for node in nodes:
        if not isinstance(node, str) or not NODE_NAME.fullmatch(node):
            raise LaunchError(f"launch: node name {node!r} is not a plain host name")
    if not nodes or not argv:
        raise LaunchError("launch: the readiness guard needs nodes and a command")
    into = [f"--records={files[0]}", f"--stderr={files[1]}"] if files else []
    return ["python3", "-c", source("slurm_ready"), *(["--some"] if some else []), *into,
            ",".join(nodes), "--", *argv]


def slurm_guarded(argv: Sequence[str]) -> bool:
    """Whether ``argv`` launches through SLURM behind the readiness guard
    (:func:`when_slurm_ready`): a drained node takes no part in it.

    >>> slurm_guarded(when_slurm_ready(("n1", "n2"), ["srun", "hostname"]))
    True
    """
    return len(argv) > 2 and list(argv[:2]) == ["python3", "-c"] \
        and argv[2] == source("slurm_ready")


def rounds_argv(head: str, end: str,
                rounds: Sequence[Sequence[tuple[str, Sequence[str]]]]) -> list[str]:
    """The job sequencer (``programs/probes/srun_rounds.py``, sent as text): ``rounds`` of (section
    line, job argv), the jobs of a round in parallel. Every value is its own argument and
    every job runs from its argv list: nothing is read by a shell.

    >>> argv = rounds_argv("### head", "### end", [[("### job a", ["srun", "hostname"])]])
    >>> argv[:2], argv[3:]
    (['python3', '-c'], ['### head', '### end', '--round', '--job', '### job a', '2', \
'srun', 'hostname'])
    """
    argv = ["python3", "-c", source("srun_rounds"), head, end]
    for line in (head, end, *(s for r in rounds for s, _ in r)):
        if "\n" in line or "\r" in line or "\0" in line:
            raise LaunchError(f"launch: section line {line!r} contains a newline or NUL")
    for jobs in rounds:
        argv.append("--round")
        for section, job in jobs:
            if not job or any("\0" in word for word in job):
                raise LaunchError(f"launch: job {section!r} has no argv or a NUL in it")
            argv += ["--job", section, str(len(job)), *job]
    return argv


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
