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

**Complete, possible evidence** (``plateau``): every size of the sweep (``-b`` times ``-f``
up to ``-e``) at or above ``judge_min_bytes`` must be present exactly once; a size
missing, printed twice (runs concatenated) or not in the sweep is an error naming it.
Every busbw of every row must be a possible figure: the parser refuses non-finite numbers, and a
figure above the threshold's physical ceiling (``limit: true``, ``ceiling``) by more than
``checks.LIMIT_TOLERANCE`` is implausible evidence (an error), even where the median would hide it.

The figure is compared with the profile's ``busbw`` threshold, whose ref is the physical
per-GPU, per-direction NVLink bandwidth (``limit: true``, so the report shows % of it). Any
``#wrong`` > 0 (either side) and any ``Out of bounds values`` > 0 fail, naming size and
count, and so does an ``error`` column (< 2.13: largest deviation) above nccl-tests' own
bound for the row's type (``checks.nccl.evidence.deviations``; unknown type, or no rank count
and a value above the least bound any rank count would give: error); a 1-rank run (busbw 0
by definition), a missing summary (the run did not finish) or a missing threshold are errors;
and so is evidence that contradicts the command the check built (``nccl_evidence
.contradictions``: another test's binary, rows, types or redop, a configuration line other
than the argv's sizes, step, ``-g``, iterations or ``-c``, error cells ``N/A`` where
checking was asked);
in-place busbw that disagrees with out-of-place by more than ``inplace_tolerance`` is noted
in details. The result's ``better="higher"`` lets ``rackgate.peers`` turn a node that passes
but lags its peers into ``warn``.

**Per-rail mode** is refused at node scope (``per_rail: true`` is a profile error): on one
node GPUs talk over NVLink/NVSwitch, never through the compute NICs, so there is no rail to
exercise, and ``NCCL_TESTS_SPLIT="MOD <gpus>"`` on one node leaves one GPU per group, whose
busbw is 0 by definition. ``rail_split_env`` gives the multi-node runner its environment.

>>> argv = all_reduce_command(NcclParams(), {})
>>> argv[0], argv[1:5]
('/opt/nccl-tests/2.17.6/build/all_reduce_perf', ['-b', '8', '-e', '8G'])
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rackgate.checks.nccl.evidence import (
    asked,
    contradictions,
    deviations,
    size_bytes,
    total_ranks,
)
from rackgate.checks.shared.base import (
    Check,
    CommandError,
    NodeCheck,
    Params,
    Scope,
    compare,
    implausible,
)
from rackgate.commands.launch import PATH_NAME, plain
from rackgate.figures import figure
from rackgate.model import Judgement, Status
from rackgate.parsers.nccl_tests import NcclRow, NcclTestsRun, parse_nccl_tests
from rackgate.profile import Hardware, Threshold

# roles/nccl/defaults/main.yml: nccl_tests_prefix, nccl_tests_version (binaries in build/)
DEFAULT_PREFIX = "/opt/nccl-tests"
DEFAULT_VERSION = "2.17.6"
_SIZE = r"^[1-9][0-9]*[KMG]?$"


class NcclParams(Params):
    """One nccl-tests run on one node (``checks.nccl.local.<op>.params``)."""

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
    binary_dir: str | None = Field(default=None, description="directory of the *_perf "
                                   "binaries: an absolute path (launch.PATH_NAME)")
    timeout_s: int = Field(default=900, ge=30, le=7200)

    @field_validator("binary_dir")
    @classmethod
    def _plain_path(cls, value: str | None) -> str | None:
        return None if value is None else plain(PATH_NAME, value, "binary_dir")

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
    try:
        return plain(PATH_NAME, path, "nccl-tests directory").rstrip("/")
    except ValueError as exc:
        raise CommandError(f"{exc}: the nccl-tests directory must be an absolute path of "
                           "letters, digits, '.', '_', '+', '-' and '/'") from None


_REDUCTIONS = ("all_reduce", "reduce_scatter")


def _command(op: str) -> Any:
    def command(p: NcclParams, hostvars: Mapping[str, Any]) -> list[str]:
        argv = [f"{binary_dir(p, hostvars)}/{op}_perf", "-b", p.min_bytes, "-e", p.max_bytes,
                "-f", str(p.step_factor), "-g", str(p.gpus_per_task), "-n", str(p.iters),
                "-w", str(p.warmup_iters), "-d", p.datatype, "-c", str(p.check_iters)]
        return argv + (["-o", p.op] if op in _REDUCTIONS else [])
    return command


all_reduce_command = _command("all_reduce")


def sweep_sizes(p: NcclParams) -> list[int]:
    """The sizes nccl-tests runs: ``-b``, then times ``-f`` while at most ``-e``
    (``src/common.cu``: ``for (size = minBytes; size <= maxBytes; size *= stepFactor)``).

    >>> sweep_sizes(NcclParams(min_bytes="1G", max_bytes="8G"))
    [1073741824, 2147483648, 4294967296, 8589934592]
    """
    sizes, size, top = [], size_bytes(p.min_bytes), size_bytes(p.max_bytes)
    while size <= top:
        sizes.append(size)
        size *= p.step_factor
    return sizes


def _slack(size: int) -> int:
    """How far below a requested size nccl-tests may print it: it rounds the element count
    down to a multiple of the ranks (``AllGatherGetCollByteCount`` and kin), a few KiB at
    most; 1 % leaves no doubt which size of a x2 (or larger) sweep a row is."""
    return size // 100


@dataclass(frozen=True)
class Plateau:
    """The judged rows of one nccl-tests run: one per expected size >= judge_min_bytes."""

    rows: tuple[NcclRow, ...]
    busbw_gbps: float | None  # median out-of-place busbw of ``rows``; None without rows
    findings: tuple[tuple[Status, str], ...]  # missing, duplicated, foreign, implausible


def _side_figures(row: NcclRow) -> list[tuple[str, float]]:
    return [(f"{row.size_bytes} B {side} busbw", m.busbw_gbps)
            for side, m in (("out-of-place", row.out_of_place), ("in-place", row.in_place))
            if m is not None]


def plateau(run: NcclTestsRun, p: NcclParams, threshold: Threshold | None) -> Plateau:
    """Every expected plateau size present exactly once, every figure a possible one.

    The expected sizes are the sweep's (``sweep_sizes``) of at least ``judge_min_bytes``;
    a size missing, printed twice (two runs in one output) or not in the sweep is an
    ``error`` naming it, and so is a busbw that is not finite, negative, or above the
    threshold's physical limit (``limit: true``) by more than ``LIMIT_TOLERANCE``.
    """
    floor = size_bytes(p.judge_min_bytes)
    expected = [e for e in sweep_sizes(p) if e >= floor]
    findings: list[tuple[Status, str]] = []
    for row in run.rows:
        for what, value in _side_figures(row):
            why = implausible(value, threshold, what) if threshold is not None else \
                (None if math.isfinite(value) and value >= 0 else f"{what} {value} is not a "
                                                                   "finite, positive number")
            if why is not None:
                findings.append((Status.ERROR, f"line {row.line}: {why}"))
    keys = Counter((r.size_bytes, r.type, r.redop, r.root) for r in run.rows if r.size_bytes)
    twice = sorted(k[0] for k, n in keys.items() if n > 1)
    if twice:
        findings.append((Status.ERROR, f"size row(s) printed more than once: "
                                       f"{', '.join(f'{s} B' for s in twice[:5])} (two runs "
                                       "in one output are not one measurement)"))
    judged: list[NcclRow] = []
    matched: set[int] = set()
    for e in expected:
        rows = [r for r in run.rows if e - _slack(e) <= r.size_bytes <= e]
        matched.update(id(r) for r in rows)
        if len(rows) > 1:
            findings.append((Status.ERROR, f"{len(rows)} rows for the {e} B size (lines "
                                           f"{', '.join(str(r.line) for r in rows)}): one "
                                           "run prints each size once"))
        elif rows and rows[0].out_of_place is None:
            findings.append((Status.ERROR, f"the {e} B row has no out-of-place figure"))
        elif rows:
            judged.append(rows[0])
    missing = [e for e in expected if not any(e - _slack(e) <= r.size_bytes <= e
                                              for r in run.rows)]
    if missing and len(missing) < len(expected):
        findings.append((Status.ERROR, f"no row for {len(missing)} expected size(s) of the "
                                       f"sweep: {', '.join(f'{e} B' for e in missing[:5])}"))
    foreign = [r for r in run.rows if r.size_bytes >= floor - _slack(floor)
               and id(r) not in matched]
    if foreign:
        findings.append((Status.ERROR, "row(s) of a size not in the sweep -b "
                                       f"{p.min_bytes} -e {p.max_bytes} -f {p.step_factor}: "
                                       + ", ".join(f"{r.size_bytes} B (line {r.line})"
                                                   for r in foreign[:5])))
    finite = [r.out_of_place.busbw_gbps for r in judged
              if r.out_of_place is not None and math.isfinite(r.out_of_place.busbw_gbps)]
    busbw = median(finite) if finite else None
    return Plateau(tuple(judged), busbw, tuple(findings))


def large_message_busbw(run: NcclTestsRun, min_bytes: int) -> float | None:
    """The median out-of-place busbw over the rows >= ``min_bytes`` (no completeness
    check: the judges use ``plateau``)."""
    values = [r.out_of_place.busbw_gbps for r in run.rows
              if r.size_bytes >= min_bytes and r.out_of_place is not None]
    return median(values) if values else None


def _findings(run: NcclTestsRun, p: NcclParams, hw: Hardware, op: str
              ) -> list[tuple[Status, str]]:
    out = deviations(run, op)
    out += [(Status.ERROR, t) for t in contradictions(run, asked(_command(op)(p, {})))]
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
    ranks = total_ranks(run)
    if ranks == 1:
        out.append((Status.ERROR, "the test ran on 1 rank: busbw is 0 by definition, nothing "
                                  "crossed a link"))
    elif ranks is not None and hw.gpu is not None and ranks < hw.gpu.count:
        out.append((Status.FAIL, f"the test covered {ranks} GPU(s), the profile expects "
                                 f"{hw.gpu.count} per node"))
    return out


def judge_nccl(run: NcclTestsRun, params: NcclParams, thresholds: Mapping[str, Threshold],
               hardware: Hardware, op: str = "all_reduce") -> Judgement:
    """nccl.<op>'s judgement of one run (each registered check passes its own ``op``)."""
    threshold = thresholds.get("busbw")
    if threshold is None:
        return Judgement(Status.ERROR, "the profile gives no busbw threshold for this check")
    findings = _findings(run, params, hardware, op)
    floor = size_bytes(params.judge_min_bytes)
    judged = plateau(run, params, threshold)
    findings += judged.findings
    rows, busbw = judged.rows, judged.busbw_gbps
    details: dict[str, float | str] = {
        "rows": len(run.rows), "largest_bytes": max(r.size_bytes for r in run.rows),
        "judged_sizes": ", ".join(str(r.size_bytes) for r in rows) or "none",
        "nccl_tests_version": run.tests_version or "unknown",
        "nccl_version": run.nccl_version or "unknown",
    }
    if run.avg_busbw_gbps is not None and math.isfinite(run.avg_busbw_gbps):
        details["avg_busbw_gbps_whole_sweep"] = run.avg_busbw_gbps
    peak = max((r.out_of_place.busbw_gbps for r in run.rows if r.out_of_place
                and math.isfinite(r.out_of_place.busbw_gbps)), default=None)
    if peak is not None:
        details["peak_busbw_gbps"] = peak
    for r in rows:
        ip, oop = r.in_place, r.out_of_place
        if ip is not None and oop is not None and oop.busbw_gbps > 0 and \
                abs(ip.busbw_gbps - oop.busbw_gbps) / oop.busbw_gbps > params.inplace_tolerance:
            details[f"inplace_{r.size_bytes}"] = (f"in-place {figure(ip.busbw_gbps)} vs "
                                                  f"out-of-place {figure(oop.busbw_gbps)} GB/s")
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
    def judge(run: NcclTestsRun, params: NcclParams, thresholds: Mapping[str, Threshold],
              hardware: Hardware) -> Judgement:
        return judge_nccl(run, params, thresholds, hardware, op)

    return NodeCheck(
        name=f"nccl.{op}", scope=Scope.NODE,
        tags=frozenset({"nccl", "gpu", "nvlink", "benchmark"}),
        description=f"nccl-tests {op}_perf over the node's GPUs: {what}; busbw at the "
                    "largest sizes against the NVLink limit, #wrong",
        params_model=NcclParams, metrics=frozenset(), optional_metrics=frozenset({"busbw"}),
        better={"busbw": "higher"}, command=_command(op), parse=parse_nccl_tests,
        judge=judge, applies=nccl_applies, baseline=(("busbw", "measured"),))


CHECKS = (
    _check("all_reduce", "data-parallel gradient reduction"),
    _check("all_gather", "sharded-parameter gathering"),
    _check("reduce_scatter", "sharded-gradient reduction"),
    _check("alltoall", "expert-parallel exchange"),
    _check("sendrecv", "pipeline-parallel point-to-point"),
)

__all__ = ["CHECKS", "NcclParams", "Plateau", "all_reduce_command", "binary_dir", "deviations",
           "judge_nccl", "large_message_busbw", "nccl_applies", "plateau", "rail_split_env",
           "size_bytes", "sweep_sizes"]
