"""nccl-tests across nodes, launched through the scheduler: the inter-node fabric as a
training job uses it.

- ``nccl.fabric_all_reduce``: ``all_reduce_perf`` with one rank per GPU (``-g 1``,
  ``--ntasks-per-node`` = the node's GPUs) across every node under test, one ``srun`` job
  from the launch host, NCCL settings from the profile in the job's environment. Judged
  like the node check (median out-of-place busbw over the sizes >= ``judge_min_bytes``,
  any ``#wrong`` fails) against the profile's fabric threshold.
- **Per-rail mode** (``per_rail: true``, with ``rail_hcas``: the compute HCA of GPU 0, 1, ...):
  one job per rail, one after the other, each with one rank per node on GPU i
  (``CUDA_VISIBLE_DEVICES=i``) and only its rail's HCA (``NCCL_IB_HCA==<hca>``). Every rank
  then crosses exactly one port, so a rail's busbw compares with one port's line rate and
  a bad rail (a cable, an HCA, a leaf-switch port) is named instead of being averaged away
  by NCCL spreading traffic over the healthy ones. The jobs' outputs come back as
  sections (``### rail index=<i> hca=<hca> rc=<rc>``, ``### end``).

Every node gets the rack's judgement: a collective cannot tell which node of the ring was
slow (``fabric.pairwise_bw`` can).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from rackgate.checks import Check, CommandError, Scope, compare
from rackgate.checks.nccl import NcclParams, binary_dir, large_message_busbw, size_bytes
from rackgate.launch import Launch, LaunchError, srun_argv, when_slurm_ready
from rackgate.model import Judgement, Status
from rackgate.parsers import ParseError
from rackgate.parsers.nccl_tests import NcclTestsRun, parse_nccl_tests
from rackgate.profile import Hardware, Threshold

NAME = "nccl.fabric_all_reduce"
_NCCL_VAR = re.compile(r"^NCCL_[A-Z0-9_]+$")
_RAIL = re.compile(r"^### rail index=(\d+) hca=(\S+) rc=(-?\d*)$")
_HEAD = "### rackgate-rails"


class NcclFabricParams(NcclParams):
    gpus_per_task: int = Field(default=1, ge=1, le=1, description="-g: one GPU per rank")
    gpus_per_node: int = Field(default=8, ge=1, le=64, description="ranks per node")
    per_rail: bool = Field(default=False, description="one job per rail (rail_hcas)")
    rail_hcas: list[str] = Field(default=[], description="the compute HCA of GPU 0, 1, ...")
    nccl_env: dict[str, str] = Field(default={}, description="NCCL_* settings of the job")
    mpi: Literal["pmix", "pmi2", "none"] = "pmix"
    partition: str | None = None
    queue_wait_s: int = Field(default=120, ge=1)
    request_gpus: bool = Field(default=True, description="srun --gres=gpu:<gpus_per_node>")

    @model_validator(mode="after")
    def _consistent(self) -> NcclFabricParams:  # replaces the node check's rule
        if size_bytes(self.judge_min_bytes) > size_bytes(self.max_bytes):
            raise ValueError(f"judge_min_bytes {self.judge_min_bytes} is above max_bytes "
                             f"{self.max_bytes}: no row would be judged")
        if self.per_rail and len(self.rail_hcas) != self.gpus_per_node:
            raise ValueError(f"per_rail needs one HCA per GPU in rail_hcas ({self.gpus_per_node}"
                             f" GPUs per node), got {self.rail_hcas}")
        bad = [k for k in self.nccl_env if not _NCCL_VAR.match(k)]
        if bad:
            raise ValueError(f"nccl_env keys must be NCCL_* variables, got {bad}")
        return self


def _program(p: NcclFabricParams, hostvars: Mapping[str, Any]) -> tuple[str, ...]:
    return (f"{binary_dir(p, hostvars)}/all_reduce_perf", "-b", p.min_bytes, "-e", p.max_bytes,
            "-f", str(p.step_factor), "-g", "1", "-n", str(p.iters), "-w", str(p.warmup_iters),
            "-d", p.datatype, "-c", str(p.check_iters), "-o", p.op)


def fabric_command(p: NcclFabricParams, hostvars: Mapping[str, Any]) -> list[str]:
    """One srun job across every node, or (per rail) a script of one job per rail."""
    nodes = tuple(hostvars.get("rackgate_nodes") or ())
    if len(nodes) < 2:
        raise CommandError(f"{NAME} needs at least two nodes under test, got {list(nodes)}")
    program = _program(p, hostvars)

    def job(tasks: int, env: dict[str, str]) -> list[str]:
        launch = Launch(nodes=nodes, tasks_per_node=tasks, program=program, env=env,
                        timeout_s=p.timeout_s, mpi=p.mpi, partition=p.partition,
                        queue_wait_s=p.queue_wait_s,
                        gpus_per_node=p.gpus_per_node if p.request_gpus else None)
        return srun_argv(launch, job_name=f"rackgate-{NAME}")

    try:
        if not p.per_rail:
            return when_slurm_ready(nodes, job(p.gpus_per_node, dict(p.nccl_env)))
        lines = ["set -u", f"echo '{_HEAD} rails={len(p.rail_hcas)}'"]
        for i, hca in enumerate(p.rail_hcas):
            env = {**p.nccl_env, "CUDA_VISIBLE_DEVICES": str(i), "NCCL_IB_HCA": f"={hca}"}
            lines += [f"out=$({shlex.join(job(1, env))} 2>&1); rc=$?",
                      f'echo "### rail index={i} hca={shlex.quote(hca)} rc=$rc"',
                      'printf "%s\\n" "$out"']
        lines.append("echo '### end'")
        return when_slurm_ready(nodes, ["bash", "-c", "\n".join(lines) + "\n",
                                        "rackgate-rails"])
    except LaunchError as exc:
        raise CommandError(str(exc)) from None


@dataclass(frozen=True)
class RailRun:
    index: int | None  # None: one job over every GPU (not per rail)
    hca: str
    rc: int | None
    run: NcclTestsRun | None
    error: str  # why ``run`` is None


@dataclass(frozen=True)
class FabricRun:
    rails: tuple[RailRun, ...]


def parse_fabric(text: str) -> FabricRun:
    """One nccl-tests output, or the per-rail sections (see the module docstring)."""
    if not text.lstrip().startswith(_HEAD):
        return FabricRun((RailRun(None, "", 0, parse_nccl_tests(text), ""),))
    rails: list[RailRun] = []
    current: tuple[int, str, str] | None = None
    body: list[str] = []

    def close() -> None:
        if current is None:
            return
        index, hca, rc = current
        code = int(rc) if rc not in ("", "-") else None
        try:
            run, error = parse_nccl_tests("\n".join(body)), ""
        except ParseError as exc:
            run, error = None, str(exc)
        rails.append(RailRun(index, hca, code, run, error))

    for lineno, line in enumerate(text.splitlines(), start=1):
        if line == "### end":
            close()
            return FabricRun(tuple(rails))
        if line.startswith("### rail"):
            close()
            m = _RAIL.match(line)
            if m is None:
                raise ParseError(f"line {lineno}: not a rail header: {line!r}")
            current, body = (int(m.group(1)), m.group(2), m.group(3)), []
        elif current is not None:
            body.append(line)
    raise ParseError(f"no '### end' line after {len(rails)} rail(s): the run was cut short")


def judge_fabric(run: FabricRun, p: NcclFabricParams, thresholds: Mapping[str, Threshold],
                 hw: Hardware) -> Judgement:
    threshold = thresholds.get("busbw")
    if threshold is None:
        return Judgement(Status.ERROR, f"the profile gives no busbw threshold for {NAME}")
    floor = size_bytes(p.judge_min_bytes)
    findings: list[tuple[Status, str]] = []
    figures: dict[str, float] = {}
    details: dict[str, float | str] = {}
    for rail in run.rails:
        name = "all rails" if rail.index is None else f"rail {rail.index} ({rail.hca})"
        if rail.run is None or rail.rc not in (0, None):
            why = rail.error or f"the job exited with rc {rail.rc}"
            findings.append((Status.ERROR, f"{name}: no measurement: {why}"))
            continue
        r = rail.run
        hosts = {k.host for k in r.ranks}
        if r.ranks and len(hosts) < 2:
            findings.append((Status.ERROR, f"{name}: every rank ran on {', '.join(hosts)}: "
                                           "nothing crossed the fabric"))
        wrong = [row for row in r.rows for m in (row.out_of_place, row.in_place)
                 if m is not None and m.wrong]
        if wrong or r.out_of_bounds:
            findings.append((Status.FAIL, f"{name}: #wrong > 0 at {len(wrong)} size(s) "
                                          f"(data corrupted between nodes)"))
        if not r.complete and p.require_summary:
            findings.append((Status.ERROR, f"{name}: the output ends before the summary"))
        busbw = large_message_busbw(r, floor)
        if busbw is None:
            findings.append((Status.ERROR, f"{name}: no row of at least {p.judge_min_bytes}"))
            continue
        figures[name] = round(busbw, 2)
        details[f"busbw_gbps {name}"] = round(busbw, 2)
        j = compare(round(busbw, 2), threshold, f"{name} busbw")
        if j.status is not Status.PASS:
            findings.append((j.status, j.message))
    if not figures:
        findings.sort(key=lambda f: -f[0])
        return Judgement(Status.worst(s for s, _ in findings) if findings else Status.ERROR,
                         "; ".join(t for _, t in findings) or "no rail measured",
                         details=details)
    worst_name = min(figures, key=lambda k: figures[k])
    j = compare(figures[worst_name], threshold,
                f"lowest busbw ({worst_name}) of {len(figures)} measured")
    findings.sort(key=lambda f: -f[0])
    status = Status.worst([j.status, *(s for s, _ in findings)])
    message = "; ".join([j.message, *(t for s, t in findings if s is not Status.PASS)])
    return Judgement(status, message, j.measured, j.unit, j.expected, j.percent_of_limit,
                     details, j.better)


def _applies(hw: Hardware) -> str | None:
    if hw.gpu is None:
        return "the profile expects no GPU"
    if not any(n.role == "compute" for n in hw.nics):
        return "the profile has no compute NIC (hardware.nics)"
    return None


CHECKS = (
    Check(
        name=NAME, scope=Scope.RACK, tags=frozenset({"nccl", "gpu", "fabric", "multinode"}),
        description="nccl-tests all_reduce_perf across the nodes through srun (optionally one "
                    "job per rail): busbw at the largest sizes against the fabric threshold",
        params_model=NcclFabricParams, metrics=frozenset(), optional_metrics=frozenset({"busbw"}),
        command=fabric_command, timeout_s=lambda p: int(p.timeout_s), parse=parse_fabric,
        judge=judge_fabric, applies=_applies, runs_on="launcher",
    ),
)
