"""MPI checks: a collective across the nodes under test, launched by the cluster's scheduler.

- ``mpi.allreduce``: MPI_Allreduce bandwidth across every node of the run, with rackgate's
  probe (``programs/probes/mpi_allreduce.py``, mpi4py) launched once through ``srun`` (SLURM, the
  default) or ``mpirun``, from the launch host (``rackgate_launch_host``, by default the
  first host of the inventory group ``slurm_controller``). Judged on ``busbw`` (GB/s): the
  median bus bandwidth of the message sizes of at least ``judge_min_bytes``; any wrong
  element of a result is a fail. The evidence must be complete: its ranks ran on exactly
  the nodes under test, ``tasks_per_node`` on each (a node missing or named twice too
  often, or a host that is not under test, is an error naming it), and every message size
  of ``sizes`` is present exactly once, timed over the command's ``--iters`` (another count
  is another command's output); every figure is a possible one (finite, and not above the
  threshold's physical limit when it has one).

It measures the path a CPU-side MPI job takes between the nodes (the scheduler's PMI
wiring, the MPI library, the network) and proves the launch path itself. GPU collectives
over NVLink and the fabric are the nccl checks.

>>> argv = allreduce_command(AllreduceParams(sizes=[1024], iters=5, judge_min_bytes=1024),
...     {"inventory_hostname": "head"}, Across(("n1", "n2")))
>>> argv[:2], argv[3:9]  # srun behind the readiness guard (launch.when_slurm_ready)
... # doctest: +NORMALIZE_WHITESPACE
(['python3', '-c'], ['n1,n2', '--', 'srun', '--job-name=rackgate-mpi.allreduce', '--nodes=2',
 '--nodelist=n1,n2'])
>>> argv[-8:-6], argv[-5:]
(['python3', '-c'], ['1024', '--iters', '5', '--warmup', '5'])
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rackgate.checks.shared.base import (
    AcrossCheck,
    CommandError,
    Params,
    Scope,
    compare,
    implausible,
)
from rackgate.commands.launch import (
    PARTITION,
    PROGRAM,
    Across,
    Launch,
    LaunchError,
    mpirun_argv,
    plain,
    srun_argv,
    when_slurm_ready,
)
from rackgate.model import Judgement, Result, Status
from rackgate.parsers.launch_failure import host_matches
from rackgate.parsers.mpi_allreduce import AllreduceRun, parse_mpi_allreduce
from rackgate.profile import Hardware, Threshold
from rackgate.programs.probes import source

NAME = "mpi.allreduce"


def row_bytes(size: int) -> int:
    """The bytes the probe reduces for a requested size: whole float64 elements."""
    return max(1, size // 8) * 8


class AllreduceParams(Params):
    launcher: Literal["srun", "mpirun"] = "srun"
    mpi: Literal["pmix", "pmi2", "none"] = Field(
        default="pmix", description="srun --mpi plugin (Open MPI needs pmix)")
    partition: str | None = Field(default=None, description="SLURM partition(s)")
    queue_wait_s: int | None = Field(
        default=60, ge=1, description="srun --immediate: fail when the nodes are not "
                                      "allocated within this time (a node down or drained)")
    tasks_per_node: int = Field(default=1, ge=1, le=256)
    sizes: list[int] = Field(default=[1 << 10, 1 << 16, 1 << 20, 1 << 22, 1 << 24],
                             min_length=1, description="message sizes, bytes")
    iters: int = Field(default=20, ge=1, le=10000)
    warmup: int = Field(default=5, ge=0, le=1000)
    judge_min_bytes: int = Field(default=1 << 22, ge=8,
                                 description="judge the sizes at least this large")
    python: str = Field(default="python3", description="interpreter with mpi4py on the nodes "
                                                       "(a name on PATH or an absolute path)")
    timeout_s: int = Field(default=300, ge=10, le=7200)

    @field_validator("partition")
    @classmethod
    def _plain_partition(cls, value: str | None) -> str | None:
        return None if value is None else plain(PARTITION, value, "partition")

    @field_validator("python")
    @classmethod
    def _plain_python(cls, value: str) -> str:
        return plain(PROGRAM, value, "python")

    @model_validator(mode="after")
    def _some_size_is_judged(self) -> AllreduceParams:
        if max(self.sizes) < self.judge_min_bytes:
            raise ValueError(f"no size in {self.sizes} reaches judge_min_bytes "
                             f"{self.judge_min_bytes}: nothing would be judged")
        if min(self.sizes) < 8:
            raise ValueError(f"sizes must be at least 8 bytes (one float64), got {self.sizes}")
        twice = sorted(b for b, n in Counter(row_bytes(s) for s in self.sizes).items()
                       if n > 1)
        if twice:
            raise ValueError(f"sizes {self.sizes} name {twice} more than once (in whole "
                             "float64 elements): each size is measured once")
        return self


def allreduce_command(p: AllreduceParams, hostvars: Mapping[str, Any],
                      across: Across) -> list[str]:
    """The launcher command line run on the launch host (``hostvars`` are its variables,
    ``across``: the nodes under test and their lock file)."""
    nodes = across.nodes
    if len(nodes) < 2:
        raise CommandError(f"{NAME} needs at least two nodes under test, got {list(nodes)}")
    program = (p.python, "-c", source("mpi_allreduce"), *(str(s) for s in p.sizes),
               "--iters", str(p.iters), "--warmup", str(p.warmup))
    try:
        launch = Launch(nodes=tuple(nodes), tasks_per_node=p.tasks_per_node, program=program,
                        timeout_s=p.timeout_s, mpi=p.mpi, partition=p.partition,
                        queue_wait_s=p.queue_wait_s,
                        node_lock=across.node_lock)
    except LaunchError as exc:
        raise CommandError(str(exc)) from None
    if p.launcher == "mpirun":
        return mpirun_argv(launch, None, allow_run_as_root=True)
    return when_slurm_ready(launch.nodes, srun_argv(launch, job_name=f"rackgate-{NAME}"))


def _host_problems(run: AllreduceRun, p: AllreduceParams, nodes: Sequence[str]) -> list[str]:
    """The ranks must have run on exactly ``nodes``, ``tasks_per_node`` on each."""
    owner = [next((n for n in nodes if host_matches(h, n)), None) for h in run.hosts]
    out = []
    foreign = sorted({h for h, o in zip(run.hosts, owner, strict=True) if o is None})
    if foreign:
        out.append(f"rank(s) ran on host(s) not under test: {', '.join(foreign)}")
    counts = Counter(owner)
    for n in nodes:
        if counts[n] != p.tasks_per_node:
            out.append(f"node {n} ran {counts[n]} rank(s), expected {p.tasks_per_node} "
                       f"(tasks_per_node)")
    return out


def _size_problems(run: AllreduceRun, p: AllreduceParams) -> list[str]:
    """Every size of ``p.sizes`` once, nothing else, each timed over the command's
    ``--iters`` (the probe prints its count on every row)."""
    expected = {row_bytes(s) for s in p.sizes}
    counts = Counter(r.size_bytes for r in run.rows)
    out = [f"no row for the {b}-byte message size" for b in sorted(expected - set(counts))]
    out += [f"{n} rows for the {b}-byte message size: one run measures each size once"
            for b, n in sorted(counts.items()) if n > 1 and b in expected]
    foreign = sorted(set(counts) - expected)
    if foreign:
        out.append(f"row(s) for size(s) {foreign} that params.sizes does not name")
    iters = sorted({r.iters for r in run.rows} - {p.iters})
    if iters:
        out.append(f"row(s) timed over {iters} iterations where the command asked --iters "
                   f"{p.iters}: another command's output")
    return out


def judge_allreduce(run: AllreduceRun, p: AllreduceParams,
                    thresholds: Mapping[str, Threshold], hw: Hardware,
                    nodes: Sequence[str] | None = None) -> Judgement:
    """The rack's judgement; with ``nodes`` (the nodes under test, ``judge_nodes``) the
    ranks' hosts must be exactly those nodes."""
    details: dict[str, float | str] = {
        "ranks": run.ranks, "hosts": ", ".join(sorted(set(run.hosts))), "mpi": run.mpi_library,
    }
    for row in run.rows:
        if math.isfinite(row.busbw_gbps):
            details[f"busbw_gbps@{row.size_bytes}"] = round(row.busbw_gbps, 4)
    wrong = [r for r in run.rows if r.wrong]
    if wrong:
        r = wrong[0]
        return Judgement(Status.FAIL, f"MPI_Allreduce returned {r.wrong} wrong element(s) at "
                                      f"{r.size_bytes} bytes: the data path corrupts data",
                         details=details)
    hosts = set(run.hosts)
    if len(hosts) < 2:
        return Judgement(Status.ERROR, f"all {run.ranks} rank(s) ran on one host "
                                       f"({', '.join(hosts)}): not a multi-node measurement",
                         details=details)
    problems = _size_problems(run, p)
    if nodes is not None:
        problems = _host_problems(run, p, nodes) + problems
    threshold = thresholds.get("busbw")
    if threshold is None:
        return Judgement(Status.ERROR, f"the profile has no busbw threshold for {NAME}",
                         details=details)
    problems += [why for r in run.rows
                 if (why := implausible(r.busbw_gbps, threshold,
                                        f"busbw at {r.size_bytes} bytes")) is not None]
    if problems:
        return Judgement(Status.ERROR, "incomplete or impossible evidence: "
                         + "; ".join(problems), details=details)
    judged = [r.busbw_gbps for r in run.rows if r.size_bytes >= p.judge_min_bytes]
    if not judged:
        return Judgement(Status.ERROR, f"no message size of at least {p.judge_min_bytes} "
                                       f"bytes in the output", details=details)
    j = compare(statistics.median(judged), threshold,
                f"all-reduce bus bandwidth across {len(hosts)} hosts ({run.ranks} ranks)")
    return Judgement(j.status, j.message, j.measured, j.unit, j.expected, j.percent_of_limit,
                     details=details, better=j.better)


def judge_nodes(run: AllreduceRun, p: AllreduceParams, thresholds: Mapping[str, Threshold],
                hw: Hardware, nodes: Sequence[str], evidence: str | None
                ) -> tuple[list[Result], dict[str, Any]]:
    """Every node under test gets the rack's judgement, made knowing which nodes those are:
    a run on other hosts proves nothing about them."""
    j = judge_allreduce(run, p, thresholds, hw, nodes=list(nodes))
    return [Result.from_judgement(n, NAME, j, evidence) for n in nodes], {}


CHECKS = (
    AcrossCheck(
        name=NAME, scope=Scope.RACK, tags=frozenset({"mpi", "fabric", "multinode"}),
        description="MPI_Allreduce bandwidth across the nodes, launched through the "
                    "scheduler (srun) or mpirun",
        params_model=AllreduceParams, metrics=frozenset({"busbw"}), better={"busbw": "higher"},
        command=allreduce_command,
        parse=parse_mpi_allreduce, judge=judge_allreduce,
        judge_nodes=judge_nodes,
        baseline=(("busbw", "measured"),),  # the job's median busbw, one figure
    ),
)
