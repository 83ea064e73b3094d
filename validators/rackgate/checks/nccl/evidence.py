"""What nccl-tests evidence must show besides its bandwidth: that it answers the command the
check asked (``contradictions``), and that its ``error`` column is within nccl-tests' bound
(``deviations``). Shared by every nccl-tests judge (``checks.nccl.local``, ``checks.nccl.fabric``).

**The command asked.** A judge reads what was asked from the argv its own check builds from
the same params (``asked``): the two cannot drift. nccl-tests prints what it ran
(NVIDIA/nccl-tests ``src/util.cu`` ``writeDeviceReport``, ``src/common.cu``):

* ``# Collective test starting: <binary>`` (2.17.3+; the JSON's ``args[0]``): the test;
* ``# nThread T nGpus G minBytes B maxBytes E step: F(factor) warmup iters: W iters: N ...
  validation: C``: ``-g``, ``-b``, ``-e``, ``-f``, ``-w``, ``-n`` and ``-c`` as it read them,
  and ``# Reducing maxBytes to M due to memory limitation`` when GPU memory cut the sweep;
* each size row's ``type`` (``-d``; a name the build lacks becomes float: "invalid type X,
  defaulting to float") and ``redop`` (``-o`` for the reductions; ``none`` for all_gather
  and alltoall, blank or absent before 2.13; sendrecv prints the op it was given, by
  default sum), and its ``count``, the elements per rank (``setupArgs`` and each test's
  ``GetCollByteCount``): ``size / type width`` for all_reduce and sendrecv, ``size / (type
  width x ranks)`` for all_gather, alltoall and reduce_scatter;
* an error cell is ``N/A`` exactly where a side is not checked: every cell with ``-c 0``;
  with checking on, only the in-place side of alltoall and sendrecv (``args->reportErrors
  = in_place ? 0 : 1``).

Every figure the output prints must be what the command asked; one that differs is an
``error`` naming it (another command's output, or a run nccl-tests changed), never a
measurement of this command. What an output does not print (an excerpt without its
header) is not compared.

**The error column** (nccl-tests < 2.13 ``error``, 1.x ``res``: the largest absolute
deviation, one digit, ``%5.0le``): nccl-tests counts a result out of bounds above
``DeltaMaxValue(type) x (ranks - 1)`` (``deviation_bound``). Without a rank count the
bound is not needed when every value is within the smallest bound any rank count the
evidence allows would give: every count from 2 when a row's busbw is above 0 for a
collective whose bus factor is 0 on one rank (all_reduce 2(n-1)/n; all_gather,
reduce_scatter, alltoall (n-1)/n: ``doc/PERFORMANCE.md``, each test's ``GetBw``), else
from 1 (bound 0). A value above that least bound without a rank count stays an error.

>>> a = asked(["/opt/nccl-tests/build/all_gather_perf", "-b", "8", "-e", "8G", "-f", "2",
...            "-g", "8", "-n", "20", "-w", "5", "-d", "float", "-c", "1"])
>>> a.collective, a.max_bytes, a.op
('all_gather', 8589934592, None)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rackgate.figures import figure
from rackgate.model import Status
from rackgate.parsers.nccl_tests.record import (
    NcclMeasurement,
    NcclRow,
    NcclTestsRun,
    deviation_bound,
)

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
# the flags rackgate's nccl-tests commands pass (checks.nccl.local._command, checks.nccl.fabric)
_FLAGS = {"-b": "min_bytes", "-e": "max_bytes", "-f": "step_factor", "-g": "gpus",
          "-n": "iters", "-w": "warmup_iters", "-d": "datatype", "-o": "op",
          "-c": "check_iters"}
# bytes per element of each type nccl-tests names (src/common.cu test_typenames, NCCL 1's
# "char" and "int" included)
_WIDTH = {"int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2,
          "bfloat16": 2, "int32": 4, "uint32": 4, "int": 4, "float": 4, "int64": 8,
          "uint64": 8, "double": 8}
_PER_RANK = frozenset({"all_gather", "alltoall", "reduce_scatter"})  # count: per rank
_NO_REDOP = frozenset({"all_gather", "alltoall"})  # redop "none"
_INPLACE_UNCHECKED = frozenset({"alltoall", "sendrecv"})  # in-place N/A with checking on
_CROSSED = frozenset({"all_reduce", "all_gather", "reduce_scatter", "alltoall"})  # busbw 0 at 1


def size_bytes(size: str) -> int:
    """nccl-tests' size notation (``-b 8 -e 8G``: powers of 1024) in bytes.

    >>> size_bytes("8"), size_bytes("1G")
    (8, 1073741824)
    """
    unit = size[-1] if size[-1] in "KMG" else ""
    return int(size[:-1] if unit else size) * _UNITS[unit]


@dataclass(frozen=True)
class Asked:
    """What one nccl-tests command line asks for."""

    program: str  # the binary's name: "all_reduce_perf"
    min_bytes: int
    max_bytes: int
    step_factor: int
    gpus: int  # -g, per process
    iters: int
    warmup_iters: int
    datatype: str
    op: str | None  # -o; None: the command fixes none (nccl-tests' default, sum)
    check_iters: int  # -c

    @property
    def collective(self) -> str:
        return self.program.removesuffix("_perf")


def asked(argv: Sequence[str]) -> Asked:
    """What an nccl-tests argv of rackgate's asks for: ValueError for a flag it does not
    pass or one missing (every flag but ``-o`` is always given)."""
    flags = dict(zip(argv[1::2], argv[2::2], strict=False))
    missing = sorted(set(_FLAGS) - {"-o"} - set(flags))
    foreign = sorted(set(flags) - set(_FLAGS))
    if len(argv) % 2 != 1 or missing or foreign or len(flags) != len(argv) // 2:
        raise ValueError(f"not an nccl-tests command of rackgate's: {list(argv)[:24]} "
                         f"(missing {missing}, foreign {foreign})")
    return Asked(program=argv[0].rsplit("/", 1)[-1], min_bytes=size_bytes(flags["-b"]),
                 max_bytes=size_bytes(flags["-e"]), step_factor=int(flags["-f"]),
                 gpus=int(flags["-g"]), iters=int(flags["-n"]),
                 warmup_iters=int(flags["-w"]), datatype=flags["-d"], op=flags.get("-o"),
                 check_iters=int(flags["-c"]))


def _listed(items: Sequence[str], n: int = 5) -> str:
    more = f" and {len(items) - n} more" if len(items) > n else ""
    return ", ".join(items[:n]) + more


def _configuration(run: NcclTestsRun, a: Asked) -> list[str]:
    printed = (("minBytes (-b)", run.min_bytes, a.min_bytes),
               ("maxBytes (-e)", run.max_bytes, a.max_bytes),
               ("step factor (-f)", run.step_factor, a.step_factor),
               ("nGpus (-g)", run.n_gpus, a.gpus), ("iters (-n)", run.iters, a.iters),
               ("warmup iters (-w)", run.warmup_iters, a.warmup_iters),
               ("validation (-c)", run.validation, a.check_iters))
    wrong = [f"{name} {got} where the command asked {want}"
             for name, got, want in printed if got is not None and got != want]
    if run.step_bytes is not None:
        wrong.append(f"step {run.step_bytes}(bytes) where the command asked a factor of "
                     f"{a.step_factor}")
    out = [f"the output's configuration line is not the command's: {_listed(wrong)}"] \
        if wrong else []
    if run.reduced_max_bytes is not None:
        out.append(f"nccl-tests reduced maxBytes to {run.reduced_max_bytes} B (GPU memory "
                   f"limitation): the sweep to {a.max_bytes} B the command asked did not run")
    return out


def _redop_fits(redop: str, a: Asked) -> bool:
    if not redop:
        return True  # the version or the layout prints none
    if a.collective in _NO_REDOP:
        return redop == "none"
    return redop == a.op if a.op is not None else redop != "none"


def _count_fits(row: NcclRow, a: Asked, ranks: int | None) -> bool:
    width = _WIDTH.get(row.type)
    if width is None or row.size_bytes == 0:
        return True
    if a.collective not in _PER_RANK or ranks == 1:
        return row.count == row.size_bytes // width
    if ranks is not None:
        return row.count == row.size_bytes // (width * ranks)
    return row.count <= row.size_bytes // (2 * width)  # some count of ranks from 2


def _rows(run: NcclTestsRun, a: Asked, ranks: int | None) -> list[str]:
    out = []
    types = sorted({r.type for r in run.rows} - {a.datatype})
    if types:
        out.append(f"rows of type {', '.join(types)[:80]} where the command asked -d "
                   f"{a.datatype} (a type the build lacks runs as float: 'invalid type')")
    redops = sorted({r.redop for r in run.rows if not _redop_fits(r.redop, a)})
    if redops:
        want = ("'none' (no reduction)" if a.collective in _NO_REDOP else
                f"-o {a.op}" if a.op is not None else "a reduction's name")
        out.append(f"rows with redop {', '.join(redops)[:80]} where {a.collective} with "
                   f"the command's arguments prints {want}: another test's rows")
    odd = [f"{r.size_bytes} B: {r.count} elements" for r in run.rows
           if r.type == a.datatype and not _count_fits(r, a, ranks)]
    if odd:
        per = "size / (type width x ranks)" if a.collective in _PER_RANK else "size / width"
        out.append(f"element counts that are not {a.collective}'s ({per}): {_listed(odd)}: "
                   "another collective's rows")
    return out


def _checked(m: NcclMeasurement) -> bool:
    return m.wrong is not None or m.max_error is not None


def _checking(run: NcclTestsRun, a: Asked) -> list[str]:
    cells = [(r, side, m) for r in run.rows for side, m in
             (("out-of-place", r.out_of_place), ("in-place", r.in_place)) if m is not None]
    if a.check_iters > 0:
        blank = [f"{r.size_bytes} B {side}" for r, side, m in cells if not _checked(m)
                 and not (side == "in-place" and a.collective in _INPLACE_UNCHECKED)]
        if blank:
            return [f"{len(blank)} error cell(s) N/A ({_listed(blank, 3)}) where the command "
                    f"asked -c {a.check_iters}: nccl-tests prints N/A only for a side it "
                    "does not check (-c 0): the data of this run was not checked"]
        return []
    figures = [f"{r.size_bytes} B {side}" for r, side, m in cells if _checked(m)]
    if figures:
        return [f"{len(figures)} error cell(s) carry a figure ({_listed(figures, 3)}) where "
                "the command asked -c 0 (N/A in every cell): another command's output"]
    return []


def contradictions(run: NcclTestsRun, a: Asked) -> list[str]:
    """Where the evidence contradicts the command ``a`` (see the module docstring); each
    is an ``error`` for the judge."""
    out = []
    if run.program is not None and run.program != a.program:
        out.append(f"the output is {run.program}'s ('Collective test starting'), the "
                   f"command ran {a.program}: another test's evidence")
    return out + _configuration(run, a) + _rows(run, a, total_ranks(run)) + _checking(run, a)


def total_ranks(run: NcclTestsRun) -> int | None:
    """The run's ranks: its ``#  Rank`` lines, else nThread x nGpus of one process."""
    if run.ranks:
        return len(run.ranks)
    if run.n_gpus and run.n_threads and not run.task_labels:
        return run.n_gpus * run.n_threads
    return None


def least_ranks(run: NcclTestsRun, collective: str) -> int:
    """The fewest ranks the evidence allows: its rank count when it prints one; else 2 when
    a row's busbw is above 0 for a collective whose bus factor is 0 on one rank; else 1."""
    ranks = total_ranks(run)
    if ranks is not None:
        return ranks
    crossed = collective in _CROSSED and any(
        m.busbw_gbps > 0 for r in run.rows for m in (r.out_of_place, r.in_place)
        if m is not None)
    return 2 if crossed else 1


def deviations(run: NcclTestsRun, collective: str = "all_reduce") -> list[tuple[Status, str]]:
    """The ``error`` column (one digit, ``%5.0le``) against nccl-tests' bound: above it even
    at the least number printing so (2e-05: 1.5e-05); nearer is for its Out of bounds
    count. Without a rank count, against the least bound of every rank count the evidence
    allows (``least_ranks``): a value above that one needs the rank count (error)."""
    ranks, least = total_ranks(run), least_ranks(run, collective)
    bad: list[str] = []
    unknown: list[str] = []
    why = ""
    for r, side, e in ((row, s, m.max_error) for row in run.rows for s, m in
                       (("out-of-place", row.out_of_place), ("in-place", row.in_place))
                       if m is not None and m.max_error is not None and m.max_error > 0):
        bound = deviation_bound(r.type, least)  # e < 0: 1.x, not checked
        low = e - 0.5 * 10 ** math.floor(math.log10(e))
        if bound is None or (ranks is None and low > bound):
            unknown.append(f"{figure(e)} at {r.size_bytes} B {side} ({r.type})")
        elif low > bound:
            bad.append(f"largest deviation {figure(e)} at {r.size_bytes} B {side}")
            why = f"{figure(bound)} for {r.type} on {ranks} ranks, DeltaMaxValue x (ranks - 1)"
    out: list[tuple[Status, str]] = []
    if bad:
        out.append((Status.FAIL, f"error column above nccl-tests' bound ({why}) at {len(bad)} "
                                 f"result(s): {_listed(bad)}: wrong data"))
    if unknown:
        out.append((Status.ERROR, "error column: no known bound for the type, or a value "
                                  "above the least bound of any rank count and no rank count "
                                  f"(ranks: {ranks or 'unknown'}; at least {least}): "
                                  f"{', '.join(unknown[:5])}"))
    return out


__all__ = ["Asked", "asked", "contradictions", "deviations", "least_ranks", "size_bytes",
           "total_ranks"]
