"""nccl-tests checks on one node: ``nccl.all_reduce``, ``nccl.all_gather``,
``nccl.reduce_scatter``, ``nccl.alltoall`` and ``nccl.sendrecv``, each one nccl-tests binary
over all the node's GPUs in one process (``-g <gpus>``): the intra-node NVLink/NVSwitch
fabric. The multi-node variants (srun/mpirun, node pairs, racks) belong to the runner.

**What is judged: busbw at the largest sizes.** The figure is the median out-of-place
busbw over the rows of at least ``judge_min_bytes`` (default 1 GiB: the plateau where time
is size / bandwidth, nccl-tests ``doc/PERFORMANCE.md``). The median, not the maximum, so one
lucky size cannot carry a slow node, and not the ``# Avg bus bandwidth`` line: that is the
mean over EVERY size of the sweep, and from 8 B up most sizes are latency-bound with busbw
near 0, so it reads a fraction of the plateau on a healthy node (8 x A100: 68 GB/s average
against 235 GB/s at 8 GiB) and moves with ``-b``/``-e`` rather than with the hardware.
A sweep that never reaches ``judge_min_bytes`` is an error, not a pass.

The figure is compared with the profile's ``busbw`` threshold, whose ref is the physical
per-GPU, per-direction NVLink bandwidth (``limit: true``, so the report shows % of it).
Any ``#wrong`` > 0 (either side) and any ``Out of bounds values`` > 0 fail, naming size and
count; a 1-rank run (busbw 0 by definition), a missing summary (the run did not finish) or
a missing threshold are errors; in-place busbw that disagrees with out-of-place by more
than ``inplace_tolerance`` is noted in details. The result's ``better="higher"`` lets
``rackgate.peers`` turn a node that passes but lags its peers into ``warn``.

**Per-rail mode** is refused at node scope (``per_rail: true`` is a profile error): on one
node GPUs talk over NVLink/NVSwitch, never through the compute NICs, so there is no rail to
exercise, and ``NCCL_TESTS_SPLIT="MOD <gpus>"`` on one node leaves one GPU per group, whose
busbw is 0 by definition. ``rail_split_env`` gives the multi-node runner its environment.

>>> argv = all_reduce_command(NcclParams(), {})
>>> argv[0], argv[1:5]
('/opt/nccl-tests/2.17.6/build/all_reduce_perf', ['-b', '8', '-e', '8G'])
"""

from __future__ import annotations

from collections.abc import Mapping
from statistics import median
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rackgate.checks import Check, CommandError, Scope, compare
from rackgate.model import Judgement, Status
from rackgate.parsers.nccl_tests import NcclRow, NcclTestsRun, parse_nccl_tests
from rackgate.profile import Hardware, Threshold

# roles/nccl/defaults/main.yml: nccl_tests_prefix, nccl_tests_version (binaries in build/)
DEFAULT_PREFIX = "/opt/nccl-tests"
DEFAULT_VERSION = "2.17.6"
_SIZE = r"^[1-9][0-9]*[KMG]?$"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def size_bytes(size: str) -> int:
    """nccl-tests' size notation (``-b 8 -e 8G``: powers of 1024) in bytes.

    >>> size_bytes("8"), size_bytes("1G")
    (8, 1073741824)
    """
    unit = size[-1] if size[-1] in "KMG" else ""
    return int(size[:-1] if unit else size) * _UNITS[unit]


class NcclParams(BaseModel):
    """One nccl-tests run on one node (``checks.nccl.<op>.params``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_bytes: str = Field(default="8", pattern=_SIZE, description="-b")
    max_bytes: str = Field(default="8G", pattern=_SIZE, description="-e")
    step_factor: int = Field(default=2, ge=2, le=16, description="-f")
    gpus_per_task: int = Field(default=8, ge=1, le=64, description="-g: the node's GPUs")
    iters: int = Field(default=20, ge=1, le=10000, description="-n")
    warmup_iters: int = Field(default=5, ge=0, le=1000, description="-w")
    datatype: Literal["int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float",
                      "double", "bfloat16"] = Field(default="float", description="-d")
    op: Literal["sum", "prod", "min", "max", "avg"] = Field(
        default="sum", description="-o, reductions only (all_reduce, reduce_scatter)")
    check_iters: int = Field(default=1, ge=0, le=100,
                             description="-c: iterations checked for correctness")
    judge_min_bytes: str = Field(default="1G", pattern=_SIZE,
                                 description="rows at least this large are judged")
    inplace_tolerance: float = Field(default=0.10, gt=0, lt=1,
                                     description="in-place vs out-of-place busbw note")
    require_summary: bool = Field(default=True, description="no summary lines: error")
    per_rail: bool = Field(default=False, description="multi-node scope only")
    binary_dir: str | None = Field(default=None, pattern=r"^/[^:]*$",
                                   description="directory of the *_perf binaries")
    timeout_s: int = Field(default=900, ge=30, le=7200)

    @model_validator(mode="after")
    def _consistent(self) -> NcclParams:
        if self.per_rail:
            raise ValueError("per_rail needs the multi-node scope: on one node the GPUs talk "
                             "over NVLink/NVSwitch, not the NIC rails, and NCCL_TESTS_SPLIT "
                             "'MOD <gpus>' leaves one GPU per group (busbw 0 by definition)")
        if size_bytes(self.min_bytes) > size_bytes(self.max_bytes):
            raise ValueError(f"min_bytes {self.min_bytes} is above max_bytes {self.max_bytes}")
        if size_bytes(self.judge_min_bytes) > size_bytes(self.max_bytes):
            raise ValueError(f"judge_min_bytes {self.judge_min_bytes} is above max_bytes "
                             f"{self.max_bytes}: no row would be judged")
        return self


def rail_split_env(gpus_per_node: int) -> dict[str, str]:
    """For the multi-node runner: one group per rail (GPU i of every node), so a slow rail
    shows as its own group (nccl-tests README, "Running multiple operations in parallel").

    >>> rail_split_env(8)
    {'NCCL_TESTS_SPLIT': 'MOD 8'}
    """
    return {"NCCL_TESTS_SPLIT": f"MOD {gpus_per_node}"}


def binary_dir(params: NcclParams, hostvars: Mapping[str, Any]) -> str:
    """The params' ``binary_dir``, else the inventory's ``rackgate_nccl_tests_dir``, else
    where the nccl role builds: ``<nccl_tests_prefix>/<nccl_tests_version>/build``."""
    if params.binary_dir:
        return params.binary_dir.rstrip("/")
    path = hostvars.get("rackgate_nccl_tests_dir")
    if path is None:
        path = (f"{hostvars.get('nccl_tests_prefix', DEFAULT_PREFIX)}/"
                f"{hostvars.get('nccl_tests_version', DEFAULT_VERSION)}/build")
    if not isinstance(path, str) or not path.startswith("/") or ".." in path.split("/"):
        raise CommandError(f"nccl-tests directory must be an absolute path, got {path!r}")
    return path.rstrip("/")


_REDUCTIONS = ("all_reduce", "reduce_scatter")


def _command(op: str) -> Any:
    def command(p: NcclParams, hostvars: Mapping[str, Any]) -> list[str]:
        argv = [f"{binary_dir(p, hostvars)}/{op}_perf", "-b", p.min_bytes, "-e", p.max_bytes,
                "-f", str(p.step_factor), "-g", str(p.gpus_per_task), "-n", str(p.iters),
                "-w", str(p.warmup_iters), "-d", p.datatype, "-c", str(p.check_iters)]
        return argv + (["-o", p.op] if op in _REDUCTIONS else [])
    return command


all_reduce_command = _command("all_reduce")


def _plateau_busbw(run: NcclTestsRun, min_bytes: int) -> tuple[list[NcclRow], float | None]:
    rows = [r for r in run.rows if r.size_bytes >= min_bytes and r.out_of_place is not None]
    values = [r.out_of_place.busbw_gbps for r in rows if r.out_of_place is not None]
    return rows, (median(values) if values else None)


def large_message_busbw(run: NcclTestsRun, min_bytes: int) -> float | None:
    """The judged figure: median out-of-place busbw over the rows >= ``min_bytes``."""
    return _plateau_busbw(run, min_bytes)[1]


def _total_ranks(run: NcclTestsRun) -> int | None:
    if run.ranks:
        return len(run.ranks)
    if run.n_gpus is not None and run.n_threads is not None and not run.task_labels:
        return run.n_gpus * run.n_threads
    return None


def _findings(run: NcclTestsRun, p: NcclParams, hw: Hardware) -> list[tuple[Status, str]]:
    out: list[tuple[Status, str]] = []
    wrong = [(r, side, m.wrong) for r in run.rows
             for side, m in (("out-of-place", r.out_of_place), ("in-place", r.in_place))
             if m is not None and m.wrong]
    if wrong:
        listed = ", ".join(f"{r.size_bytes} B {side}: {n} wrong" for r, side, n in wrong[:5])
        more = f" and {len(wrong) - 5} more" if len(wrong) > 5 else ""
        out.append((Status.FAIL, f"#wrong > 0 at {len(wrong)} size(s): {listed}{more} "
                                 "(data corrupted in transit or by a faulty GPU)"))
    if run.out_of_bounds:
        out.append((Status.FAIL, f"Out of bounds values: {run.out_of_bounds}"))
    if not run.complete and p.require_summary:
        out.append((Status.ERROR, "the output ends before nccl-tests' summary lines (Out of "
                                  "bounds values, Avg bus bandwidth): the run did not finish"))
    ranks = _total_ranks(run)
    if ranks == 1:
        out.append((Status.ERROR, "the test ran on 1 rank: busbw is 0 by definition, nothing "
                                  "crossed a link"))
    elif ranks is not None and hw.gpu is not None and ranks < hw.gpu.count:
        out.append((Status.FAIL, f"the test covered {ranks} GPU(s), the profile expects "
                                 f"{hw.gpu.count} per node"))
    if p.check_iters > 0 and all(r.out_of_place is None or r.out_of_place.wrong is None
                                 for r in run.rows) and run.error_column == "#wrong":
        out.append((Status.WARN, "no #wrong figure in any row: results were not validated"))
    return out


def judge_nccl(run: NcclTestsRun, params: NcclParams, thresholds: Mapping[str, Threshold],
               hardware: Hardware) -> Judgement:
    threshold = thresholds.get("busbw")
    if threshold is None:
        return Judgement(Status.ERROR, "the profile gives no busbw threshold for this check")
    findings = _findings(run, params, hardware)
    floor = size_bytes(params.judge_min_bytes)
    rows, busbw = _plateau_busbw(run, floor)
    details: dict[str, float | str] = {
        "rows": len(run.rows), "largest_bytes": max(r.size_bytes for r in run.rows),
        "judged_sizes": ", ".join(str(r.size_bytes) for r in rows) or "none",
        "nccl_tests_version": run.tests_version or "unknown",
        "nccl_version": run.nccl_version or "unknown",
    }
    if run.avg_busbw_gbps is not None:
        details["avg_busbw_gbps_whole_sweep"] = run.avg_busbw_gbps
    peak = max((r.out_of_place.busbw_gbps for r in run.rows if r.out_of_place), default=None)
    if peak is not None:
        details["peak_busbw_gbps"] = peak
    for r in rows:
        ip, oop = r.in_place, r.out_of_place
        if ip is not None and oop is not None and oop.busbw_gbps > 0 and \
                abs(ip.busbw_gbps - oop.busbw_gbps) / oop.busbw_gbps > params.inplace_tolerance:
            details[f"inplace_{r.size_bytes}"] = (f"in-place {ip.busbw_gbps:g} vs out-of-place "
                                                  f"{oop.busbw_gbps:g} GB/s")
    if run.elided:
        details["note"] = "the output was elided ('...'): rows are missing"
    if busbw is None:
        findings.append((Status.ERROR, f"no row of at least {params.judge_min_bytes} "
                                       f"({floor} B): the sweep ended at "
                                       f"{details['largest_bytes']} B, below the bandwidth "
                                       "plateau (raise max_bytes)"))
        findings.sort(key=lambda f: -f[0])
        return Judgement(Status.worst(s for s, _ in findings),
                         "; ".join(f"{s.label}: {t}" for s, t in findings), details=details)
    j = compare(round(busbw, 2), threshold,
                f"busbw (median of {len(rows)} size(s) >= {params.judge_min_bytes})")
    findings.sort(key=lambda f: -f[0])
    for i, (status, text) in enumerate(findings, 1):
        details[f"finding{i}"] = f"{status.label}: {text}"
    status = Status.worst([j.status, *(s for s, _ in findings)])
    message = "; ".join([j.message, *(f"{s.label}: {t}" for s, t in findings)])
    return Judgement(status, message, j.measured, j.unit, j.expected, j.percent_of_limit,
                     details, j.better)


def nccl_applies(hardware: Hardware) -> str | None:
    if hardware.gpu is None:
        return "the profile expects no GPU"
    if hardware.gpu.count < 2:
        return "one GPU per node: no intra-node collective to measure"
    return None


def _check(op: str, what: str) -> Check:
    return Check(
        name=f"nccl.{op}", scope=Scope.NODE,
        tags=frozenset({"nccl", "gpu", "nvlink", "benchmark"}),
        description=f"nccl-tests {op}_perf over the node's GPUs: {what}; busbw at the "
                    "largest sizes against the NVLink limit, #wrong",
        params_model=NcclParams, metrics=frozenset(), optional_metrics=frozenset({"busbw"}),
        command=_command(op), timeout_s=lambda p: int(p.timeout_s), parse=parse_nccl_tests,
        judge=judge_nccl, applies=nccl_applies)


CHECKS = (
    _check("all_reduce", "data-parallel gradient reduction"),
    _check("all_gather", "sharded-parameter gathering"),
    _check("reduce_scatter", "sharded-gradient reduction"),
    _check("alltoall", "expert-parallel exchange"),
    _check("sendrecv", "pipeline-parallel point-to-point"),
)

__all__ = ["CHECKS", "NcclParams", "all_reduce_command", "binary_dir", "judge_nccl",
           "large_message_busbw", "nccl_applies", "rail_split_env", "size_bytes"]
