"""What one nccl-tests run is, read from either of its outputs (``parsers.nccl_tests``: the
text table; ``parsers.nccl_tests.json_format``: the ``-J`` file), and the rule both obey: one run
prints each size row and each rank once.

Format: NVIDIA/nccl-tests ``src/common.cu`` (the table's columns, the ``#  Rank`` device
lines, the summary lines) and ``doc/PERFORMANCE.md`` (busbw: algbw times the collective's
bus factor, so it compares with the hardware's link bandwidth). Times in us, bandwidths
in GB/s (10^9 bytes/s).

>>> run = NcclTestsRun(rows=(), source_format="text")
>>> run.complete, nccl_version_from_code(21903)
(False, '2.19.3')
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from rackgate.parsers import ParseError


@dataclass(frozen=True)
class NcclMeasurement:
    """One side (out-of-place or in-place) of one size row."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None  # '#wrong' elements; None when N/A (not validated) or an old 'error' column
    max_error: float | None = None  # < 2.13 'error' (1.x 'res'): largest absolute deviation


@dataclass(frozen=True)
class NcclRow:
    size_bytes: int
    count: int  # elements
    type: str
    redop: str  # "" when the version or the collective prints none
    root: int | None  # None when the version prints no root column
    out_of_place: NcclMeasurement | None
    in_place: NcclMeasurement | None
    line: int  # line of the evidence it came from (0 for JSON)


@dataclass(frozen=True)
class NcclRank:
    """One ``#  Rank ...`` device line: which GPU of which host ran a rank."""

    rank: int
    group: int | None  # NCCL_TESTS_SPLIT colour; None before nccl-tests 2.13
    pid: int | None  # None in nccl-tests 1.x, which prints no Pid
    host: str
    device: int
    bus_id: str
    device_name: str


@dataclass(frozen=True)
class NcclTestsRun:
    rows: tuple[NcclRow, ...]
    source_format: Literal["text", "json"]
    tests_version: str | None = None  # nccl-tests' own version (2.18+ text, JSON file version)
    nccl_version: str | None = None  # from nccl-tests' header, the JSON or an NCCL INFO line
    program: str | None = None  # "all_reduce_perf" (2.17.3+)
    n_threads: int | None = None
    n_gpus: int | None = None  # GPUs per thread (-g)
    min_bytes: int | None = None
    max_bytes: int | None = None
    warmup_iters: int | None = None
    iters: int | None = None
    validation: int | None = None  # -c: 0 = results not checked
    step_factor: int | None = None  # -f, from 'step: 2(factor)'
    step_bytes: int | None = None  # -i, from 'step: 1048576(bytes)' (no -f)
    reduced_max_bytes: int | None = None  # 'Reducing maxBytes to N due to memory limitation'
    ranks: tuple[NcclRank, ...] = ()
    error_column: Literal["#wrong", "error"] = "#wrong"  # "error": also 1.x's "res"
    out_of_bounds: int | None = None  # None: the summary line is missing
    avg_busbw_gbps: float | None = None  # the 'Avg bus bandwidth' line: whole-sweep mean
    elided: bool = False  # a '...' line: someone cut rows out
    task_labels: tuple[str, ...] = ()  # srun / mpirun labels seen
    nccl_warnings: tuple[str, ...] = ()  # NCCL WARN lines, and '# error:' lines
    errors: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Both summary lines were printed: the run reached its end."""
        return self.out_of_bounds is not None and self.avg_busbw_gbps is not None


def nccl_version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE -> "2.21.5" (major*10000+minor*100+patch since 2.9, else *1000).

    >>> nccl_version_from_code(22105), nccl_version_from_code(2708)
    ('2.21.5', '2.7.8')
    """
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


# nccl-tests < 2.13 (src/common.cu, DeltaMaxValue and CheckData): a result is out of bounds
# when its largest deviation exceeds DeltaMaxValue(type) x (ranks - 1); integer types 1e-200
_DELTA_MAX = {"half": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "double": 1e-12}
_EXACT = frozenset({"int8", "uint8", "int32", "uint32", "int64", "uint64", "char", "int"})


def deviation_bound(type_name: str, ranks: int) -> float | None:
    """The largest deviation nccl-tests (the ``error``/``res`` column) still counts as right
    for ``type_name`` on ``ranks`` ranks: DeltaMaxValue(type) x (ranks - 1), 0 for the
    integer types; None for a type those versions did not have.

    >>> deviation_bound("float", 8), deviation_bound("int32", 8), deviation_bound("fp8e4m3", 8)
    (7e-05, 0.0, None)
    """
    if type_name in _EXACT:
        return 0.0
    delta = _DELTA_MAX.get(type_name)
    return None if delta is None else float(f"{delta * max(ranks - 1, 0):.12g}")


def refuse_duplicates(rows: list[NcclRow], ranks: list[NcclRank]) -> None:
    """One run prints each size row (size, type, redop, root) once and each rank once.

    Size 0 may repeat: nccl-tests rounds the element count down to a multiple of the
    ranks, so the smallest sizes of a sweep all print as 0 B (8 GPUs: 8, 16, 32 B). For a
    step of 2 or more no two sizes above 0 round to the same one.
    """
    seen: dict[tuple[int, str, str, int | None], int] = {}
    for r in (r for r in rows if r.size_bytes > 0):
        key = (r.size_bytes, r.type, r.redop, r.root)
        if key in seen:
            where = f"lines {seen[key]} and {r.line}" if r.line else "two results"
            raise ParseError(f"nccl-tests: two rows for {r.size_bytes} B {r.type} ({where}): "
                             "two runs in one output are not one measurement")
        seen[key] = r.line
    twice = sorted(k for k, c in Counter(k.rank for k in ranks).items() if c > 1)
    if twice:
        raise ParseError(f"nccl-tests: rank(s) {', '.join(map(str, twice[:5]))} listed twice in "
                         "the '#  Rank' device lines: two runs in one output?")


__all__ = ["NcclMeasurement", "NcclRank", "NcclRow", "NcclTestsRun", "deviation_bound",
           "nccl_version_from_code", "refuse_duplicates"]
