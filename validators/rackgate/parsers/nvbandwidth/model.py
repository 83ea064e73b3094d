"""The record of an ``nvbandwidth`` run (NVIDIA/nvbandwidth), shared by its text and JSON
readers (``parsers.nvbandwidth``, ``parsers.nvbandwidth.json_format``).

nvbandwidth measures copies between the host and each GPU and between GPU pairs, one
*testcase* at a time (``host_to_device_memcpy_ce``, ``device_to_device_memcpy_read_ce``,
...). Each testcase that runs prints one or more matrices of figures (``output.cpp``,
``inline_common.h``: ``operator<<`` of ``PeerValueMatrix``): column labels 0..n-1 (the GPUs),
one row per source (row 0 is the CPU in host tests, GPU i in device-to-device tests), each
cell the median of the samples in GB/s (10^9 bytes/s; ``memcpy.cpp`` scales bytes/s by
1e-9), or ``N/A`` where nothing was measured: the diagonal of a device-to-device matrix (no
copy from a GPU to itself) and any GPU pair without peer access. Then the matrix's
``SUM <key> <value>`` line: the sum of its cells, N/A counted as 0.

A testcase is ``passed`` (it printed its matrices), ``waived`` (its ``filter()`` refused the
system: a device-to-device test where no GPU pair has peer access), ``error`` (the tool
reported an error for it: a name it does not know, or an exception while it ran), or
``running`` (started and never finished, as the JSON output leaves a testcase whose run
threw). The text output of nvbandwidth 0.5 and later prints a waived testcase as
``Waived:`` alone, without its name (``Output::addTestcase``): its ``name`` is None, and the
judge names it by its place in the command's list, which nvbandwidth runs in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from rackgate.figures import figure
from rackgate.parsers import ParseError

TEXT_FORMAT = "nvbandwidth text output"
JSON_FORMAT = "nvbandwidth JSON output (-j)"
TestcaseStatus = Literal["passed", "waived", "error", "running"]
MAX_NAME = 256  # nvbandwidth's STRING_LENGTH: device names and host names
MAX_VERSION = 80  # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE; the tool's own versions are short


@dataclass(frozen=True)
class Device:
    """One GPU of the run's device list (``Device 0: NAME (00000000:18:00)``)."""

    index: int  # the CUDA device ordinal: the matrices' row and column labels
    name: str  # cuDeviceGetName
    bus_id: str | None  # PCI domain:bus:device, printed since nvbandwidth 0.6


@dataclass(frozen=True)
class Matrix:
    """One matrix a testcase printed: ``rows[r][c]`` in GB/s (None: ``N/A``)."""

    description: str  # "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
    columns: int  # its column labels are 0..columns-1
    rows: tuple[tuple[float | None, ...], ...]  # row labels are 0..len(rows)-1
    sum_key: str  # the testcase name, with a suffix for the bidirectional ones' matrices
    sum_gb_s: float
    line: int  # where its description stands (1-based; 0 in JSON)


@dataclass(frozen=True)
class Testcase:
    name: str | None  # None: a text "Waived:" line of nvbandwidth 0.5+, which names none
    status: TestcaseStatus
    message: str  # what the tool said of an error ("" otherwise)
    matrices: tuple[Matrix, ...]
    line: int


@dataclass(frozen=True)
class NvbandwidthRun:
    """What one nvbandwidth invocation printed, in its order."""

    form: Literal["text", "json"]
    version: str  # "v0.8": the "nvbandwidth Version:" line (JSON: "version")
    git_version: str | None
    cuda_runtime_version: int | None
    driver_version: str | None
    devices: tuple[Device, ...] | None  # None: the output lists none (JSON before 0.8)
    testcases: tuple[Testcase, ...]
    error: str | None = None  # a global error the JSON output carries


def checked_sum(m: Matrix, fmt: str, decimals: int | None) -> None:
    """ParseError when the matrix's SUM disagrees with its cells beyond the printing's
    rounding: text prints every figure with ``decimals`` (2) decimals, so each of the n
    cells and the sum is off by at most half a unit of the last place; JSON prints cells
    with 6 significant digits (a relative error of 5e-6) and the sum in full."""
    cells = [v for row in m.rows for v in row if v is not None]
    total = math.fsum(cells)
    if decimals is not None:
        slack = (len(cells) + 1) * 0.5 * 10.0 ** -decimals
    else:
        slack = 5e-6 * math.fsum(abs(v) for v in cells) + 1e-9
    if not math.isfinite(total) or abs(total - m.sum_gb_s) > slack + 1e-9:
        raise ParseError(f"{fmt}: SUM {m.sum_key} {figure(m.sum_gb_s)} is not the sum of its "
                         f"{len(cells)} figures ({figure(total)}): damaged or edited output")


__all__ = ["JSON_FORMAT", "MAX_NAME", "MAX_VERSION", "TEXT_FORMAT", "Device", "Matrix",
           "NvbandwidthRun", "Testcase", "TestcaseStatus", "checked_sum"]
