"""perftest's result tables: the ``#bytes`` header that gives a table's layout, and its rows.

Format, from perftest's source (``src/perftest_parameters.h``, ``print_report_bw``,
``print_report_lat``): ``RESULT_FMT`` `` #bytes #iterations BW peak[MiB/sec] BW
average[MiB/sec] MsgRate[Mpps]`` (``MB/sec`` before perftest commit 1d202bb, 2024-03;
``Gb/sec`` with ``--report_gbits``; ``#sl`` first in the QoS table, four more columns with
dual-port ``Port1``, one more with ``CPU_Util``), ``RESULT_FMT_LAT`` (`` #bytes #iterations
t_min[usec] t_max[usec] t_typical[usec] t_avg[usec] t_stdev[usec] 99% percentile[usec]
99.9% percentile[usec]``) or, for ``--duration`` latency runs, ``RESULT_FMT_LAT_DUR``
(`` #bytes #iterations t_avg[usec] tps average``); one row per message size.

Units: perftest divides bytes/s by ``format_factor = 0x100000`` for MB/sec and MiB/sec (so
its "MB" is 2^20 bytes, which is why it was renamed MiB) and by ``125000000`` for Gb/sec
(10^9 bit/s). Every bandwidth here is converted to Gb/s (10^9 bit/s). A ``BW peak`` of 0
means perftest did not measure the peak (``--duration`` or ``-N``): it is recorded as
``None``, never as a zero bandwidth.

Every cell of a row must be a finite, non-negative number (``nan``, ``inf`` or an overflow
such as ``1e400`` is a ParseError naming the line). A row may repeat, identical, once per
``#bytes`` header (server and client captured together); two different rows for one
message size, or more copies than headers, are refused.

>>> layout = table_layout(" #bytes #iterations BW peak[MiB/sec] BW average[MiB/sec] "
...                       "MsgRate[Mpps]", 1, "ib_write_bw")
>>> layout.kind, layout.bw_unit, layout.columns
('bw', 'MiB/sec', 5)
>>> bw_row([65536.0, 5000.0, 0.0, 46700.0, 0.747], layout.bw_unit).bw_peak_gbps is None
True
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from rackgate.parsers import ParseError

MIB = 1 << 20  # perftest's format_factor for MB/sec and MiB/sec
_GBIT_PER_MIB = MIB * 8 / 1e9  # 1 MiB/s in Gb/s (10^9 bit/s)

TableKind = Literal["bw", "lat", "lat_duration"]


@dataclass(frozen=True)
class BwRow:
    """One row of a bandwidth table, in Gb/s (10^9 bit/s) whatever perftest printed."""

    size_bytes: int
    iterations: int
    bw_peak_gbps: float | None  # None: not measured (--duration, -N print 0.00)
    bw_average_gbps: float
    msg_rate_mpps: float


@dataclass(frozen=True)
class LatRow:
    """One row of a latency table (microseconds); a --duration run prints only the average
    and the transactions per second, the other fields are then None."""

    size_bytes: int
    iterations: int
    t_avg_us: float
    t_min_us: float | None = None
    t_max_us: float | None = None
    t_typical_us: float | None = None
    t_stdev_us: float | None = None
    t_p99_us: float | None = None
    t_p99_9_us: float | None = None
    tps_average: float | None = None  # --duration only


@dataclass(frozen=True)
class TableLayout:
    """What a ``#bytes`` header says about the rows under it."""

    kind: TableKind
    bw_unit: str  # as printed: "MB/sec", "MiB/sec" (2^20 bytes/s), "Gb/sec"; "" if latency
    columns: int
    skip_col: int | None  # the QoS table's #sl column


def table_layout(line: str, lineno: int, tool: str) -> TableLayout:
    """The layout a ``#bytes`` results header gives; ParseError for any other header."""
    unit = re.search(r"BW peak\[(MB|MiB|Gb)/sec\]", line)
    if unit:
        kind: TableKind = "bw"
        skip_col = 1 if "#sl" in line else None
        columns = 5 + (4 if "Port1" in line else 0) + (1 if skip_col is not None else 0)
    elif "t_min[usec]" in line:
        kind, columns, skip_col = "lat", 9, None
    elif "t_avg[usec]" in line and "tps average" in line:
        kind, columns, skip_col = "lat_duration", 4, None
    else:
        raise ParseError(f"{tool}: line {lineno}: results header {line[:100]!r} is none of "
                         "perftest's RESULT_FMT (bandwidth) or RESULT_FMT_LAT (latency)")
    if "CPU_Util" in line:
        columns += 1
    return TableLayout(kind, f"{unit.group(1)}/sec" if unit else "", columns, skip_col)


def looks_numeric(token: str) -> bool:
    """Whether a line inside a results table starts like a row (``65536``, ``nan``, ``inf``)."""
    try:
        float(token)
    except ValueError:
        return False
    return True


def _numbers(lineno: int, cells: list[str], layout: TableLayout, tool: str) -> list[float]:
    if len(cells) != layout.columns:
        raise ParseError(f"{tool}: line {lineno}: result row has {len(cells)} columns, the "
                         f"{layout.kind} table has {layout.columns} (truncated or garbled "
                         "row?)")
    if layout.skip_col is not None:
        cells = cells[:layout.skip_col] + cells[layout.skip_col + 1:]
    # perftest prints "%-7.2f" and the like: a 100,000-digit cell is damage, not a figure
    values = [float(c) if len(c) <= 32 else math.nan for c in cells]
    bad = next((c[:40] for c, v in zip(cells, values, strict=True)
                if not math.isfinite(v) or v < 0), None)
    if bad is not None:
        raise ParseError(f"{tool}: line {lineno}: result cell {bad!r} is not a finite, "
                         "non-negative number: no measurement")
    return values


def distinct_rows(rows: list[tuple[int, list[str]]], layout: TableLayout, tables: int,
                  tool: str) -> list[list[float]]:
    """The rows of one run, as numbers. Server and client captured together print the table
    twice (``tables`` '#bytes' headers, in sequence or interleaved when they share a
    terminal): each size may then repeat, identical, once per header. Two different rows
    for one message size, or more copies of a row than there are headers, are refused."""
    seen: dict[int, tuple[int, list[float], int]] = {}
    out = []
    for lineno, cells in rows:
        values = _numbers(lineno, cells, layout, tool)
        size = int(values[0])
        if size in seen:
            first, before, copies = seen[size]
            if before != values:
                raise ParseError(
                    f"{tool}: line {lineno}: a second, different result row for "
                    f"{size} bytes (line {first}): --run_infinitely output or two "
                    "runs concatenated; rackgate judges one run per evidence file")
            if copies + 1 > tables:
                raise ParseError(
                    f"{tool}: line {lineno}: the result row for {size} bytes printed "
                    f"{copies + 1} times (first at line {first}) under {tables} '#bytes' "
                    "header(s): perftest prints each size once per side")
            seen[size] = (first, before, copies + 1)
            continue
        seen[size] = (lineno, values, 1)
        out.append(values)
    return out


def _to_gbps(value: float, unit: str) -> float:
    return value if unit == "Gb/sec" else round(value * _GBIT_PER_MIB, 6)


def bw_row(v: list[float], unit: str) -> BwRow:
    """One bandwidth row (#sl dropped) in Gb/s; a peak of 0 beside a measured average is
    'not measured'."""
    peak = _to_gbps(v[2], unit)
    return BwRow(int(v[0]), int(v[1]), None if peak == 0 and v[3] > 0 else peak,
                 _to_gbps(v[3], unit), v[4])


def lat_row(v: list[float], kind: TableKind) -> LatRow:
    """One latency row: every figure of RESULT_FMT_LAT, or RESULT_FMT_LAT_DUR's two."""
    if kind == "lat":
        return LatRow(int(v[0]), int(v[1]), t_avg_us=v[5], t_min_us=v[2], t_max_us=v[3],
                      t_typical_us=v[4], t_stdev_us=v[6], t_p99_us=v[7], t_p99_9_us=v[8])
    return LatRow(int(v[0]), int(v[1]), t_avg_us=v[2], tps_average=v[3])


__all__ = ["MIB", "BwRow", "LatRow", "TableKind", "TableLayout", "bw_row", "distinct_rows",
           "lat_row", "looks_numeric", "table_layout"]
