"""MPI checks: a collective across the nodes under test, launched by the cluster's scheduler.

- ``mpi.allreduce``: MPI_Allreduce bandwidth across every node of the run, with rackgate's
  probe (``probes/mpi_allreduce.py``, mpi4py) launched once through ``srun`` (SLURM, the
  default) or ``mpirun``, from the launch host (``rackgate_launch_host``, by default the
  first host of the inventory group ``slurm_controller``). Judged on ``busbw`` (GB/s): the
  median bus bandwidth of the message sizes of at least ``judge_min_bytes``; any wrong
  element of a result is a fail; a run on fewer hosts than the nodes under test is a fail.

It measures the path a CPU-side MPI job takes between the nodes (the scheduler's PMI
wiring, the MPI library, the network) and proves the launch path itself. GPU collectives
over NVLink and the fabric are the nccl checks.

>>> argv = allreduce_command(AllreduceParams(sizes=[1024], iters=5, judge_min_bytes=1024),
...     {"rackgate_nodes": ["n1", "n2"], "inventory_hostname": "head"})
>>> argv[:2], argv[3:9]  # srun behind the readiness guard (launch.when_slurm_ready)
... # doctest: +NORMALIZE_WHITESPACE
(['python3', '-c'], ['n1,n2', '--', 'srun', '--job-name=rackgate-mpi.allreduce', '--nodes=2',
 '--nodelist=n1,n2'])
>>> argv[-8:-6], argv[-5:]
(['python3', '-c'], ['1024', '--iters', '5', '--warmup', '5'])
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rackgate.checks import Check, CommandError, Scope, compare
from rackgate.launch import Launch, LaunchError, mpirun_argv, srun_argv, when_slurm_ready
from rackgate.model import Judgement, Status
from rackgate.parsers.mpi_allreduce import AllreduceRun, parse_mpi_allreduce
from rackgate.probes import source
from rackgate.profile import Hardware, Threshold

NAME = "mpi.allreduce"


class AllreduceParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    launcher: Literal["srun", "mpirun"] = "srun"
    mpi: Literal["pmix", "pmi2", "none"] = Field(
        default="pmix", description="srun --mpi plugin (Open MPI needs pmix)")
    partition: str | None = None
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
    python: str = Field(default="python3", description="interpreter with mpi4py on the nodes")
    timeout_s: int = Field(default=300, ge=10, le=7200)

    @model_validator(mode="after")
    def _some_size_is_judged(self) -> AllreduceParams:
        if max(self.sizes) < self.judge_min_bytes:
            raise ValueError(f"no size in {self.sizes} reaches judge_min_bytes "
                             f"{self.judge_min_bytes}: nothing would be judged")
        if min(self.sizes) < 8:
            raise ValueError(f"sizes must be at least 8 bytes (one float64), got {self.sizes}")
        return self


def allreduce_command(p: AllreduceParams, hostvars: Mapping[str, Any]) -> list[str]:
    """The launcher command line run on the launch host (``hostvars`` are its variables,
    plus ``rackgate_nodes``: the nodes under test)."""
    nodes = hostvars.get("rackgate_nodes") or []
    if len(nodes) < 2:
        raise CommandError(f"{NAME} needs at least two nodes under test, got {list(nodes)}")
    program = (p.python, "-c", source("mpi_allreduce"), *(str(s) for s in p.sizes),
               "--iters", str(p.iters), "--warmup", str(p.warmup))
    try:
        launch = Launch(nodes=tuple(nodes), tasks_per_node=p.tasks_per_node, program=program,
                        timeout_s=p.timeout_s, mpi=p.mpi, partition=p.partition,
                        queue_wait_s=p.queue_wait_s)
    except LaunchError as exc:
        raise CommandError(str(exc)) from None
    if p.launcher == "mpirun":
        return mpirun_argv(launch, None, allow_run_as_root=True)
    return when_slurm_ready(launch.nodes, srun_argv(launch, job_name=f"rackgate-{NAME}"))


def judge_allreduce(run: AllreduceRun, p: AllreduceParams,
                    thresholds: Mapping[str, Threshold], hw: Hardware) -> Judgement:
    details: dict[str, float | str] = {
        "ranks": run.ranks, "hosts": ", ".join(sorted(set(run.hosts))), "mpi": run.mpi_library,
    }
    for row in run.rows:
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
    judged = [r.busbw_gbps for r in run.rows if r.size_bytes >= p.judge_min_bytes]
    if not judged:
        return Judgement(Status.ERROR, f"no message size of at least {p.judge_min_bytes} "
                                       f"bytes in the output", details=details)
    if "busbw" not in thresholds:
        return Judgement(Status.ERROR, f"the profile has no busbw threshold for {NAME}",
                         details=details)
    j = compare(statistics.median(judged), thresholds["busbw"],
                f"all-reduce bus bandwidth across {len(hosts)} hosts ({run.ranks} ranks)")
    return Judgement(j.status, j.message, j.measured, j.unit, j.expected, j.percent_of_limit,
                     details=details, better=j.better)


CHECKS = (
    Check(
        name=NAME, scope=Scope.RACK, tags=frozenset({"mpi", "fabric", "multinode"}),
        description="MPI_Allreduce bandwidth across the nodes, launched through the "
                    "scheduler (srun) or mpirun",
        params_model=AllreduceParams, metrics=frozenset({"busbw"}),
        command=allreduce_command, timeout_s=lambda p: int(p.timeout_s),
        parse=parse_mpi_allreduce, judge=judge_allreduce, runs_on="launcher",
    ),
)
