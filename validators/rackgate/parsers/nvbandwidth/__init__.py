"""Parser for ``nvbandwidth`` (NVIDIA/nvbandwidth, versions 0.2 to 0.8): its text output,
and its JSON output (``-j``, 0.5 and later; ``parsers.nvbandwidth.json_format``), told apart by the
first character. The record: ``parsers.nvbandwidth.model``.

Text (``output.cpp``, ``inline_common.h``; 0.2 to 0.4 printed the same from
``nvbandwidth.cpp``), in order:

    nvbandwidth Version: v0.8
    Built from Git version: v0.8

    CUDA Runtime Version: 12060
    CUDA Driver Version: 12060
    Driver Version: 560.35.05

    gpu-node-01                                    (the host name, 0.8)
    Device 0: NVIDIA H100 80GB HBM3 (00000000:18:00)

    Running host_to_device_memcpy_ce.
    memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
               0         1
     0     55.12     55.09

    SUM host_to_device_memcpy_ce 110.21

    NOTE: The reported results may not reflect the full capabilities of the platform.
    Performance can vary with software drivers, hardware clocks, and system topology.

Every figure is printed with two decimals (``std::fixed``, ``setprecision(2)``), a cell not
measured as ``N/A``; rows and columns are labelled 0..n-1 (0.7 and later pad the labels
wider). A testcase that ran prints ``Running <name>.`` then its matrices (three for the
bidirectional device-to-device ones), each closed by ``SUM <key> <sum>`` (``&&&& PERF <key>
<sum> +GB/s`` with the hidden ``--perfFormatter``). One the system cannot run prints
``Waived:`` (0.5+, without its name) or ``Waiving <name>.`` (0.4 and earlier); an unknown name
``ERROR: Testcase <name> not found!``; an error while it ran ``Error: <why>`` (0.5+) or
``ERROR: <why>``. ``-v`` adds ``Sample`` lines before a matrix and ``MIN``/``MAX``/``AVG``
lines after its SUM; they are recognised and not kept. The ``NOTE:`` lines the versions
print, and the device list's host name line (0.8), are recognised too.

Every line is accounted for: any other line, a label out of order, a row with another
number of cells than its header, a matrix without its SUM or a SUM that is not the sum of
its figures, a header line twice, or a character no tool prints
(``parsers.damage.DAMAGE``) is a ParseError naming the line.

>>> r = parse_nvbandwidth("nvbandwidth Version: v0.8\\nDevice 0: NVIDIA H100 80GB HBM3\\n"
...     "Running host_to_device_memcpy_ce.\\n"
...     "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\\n           0\\n 0     55.12\\n\\n"
...     "SUM host_to_device_memcpy_ce 55.12\\n")
>>> r.version, r.testcases[0].status, r.testcases[0].matrices[0].rows
('v0.8', 'passed', ((55.12,),))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rackgate.parsers import ParseError
from rackgate.parsers.damage import DAMAGE
from rackgate.parsers.nvbandwidth.json_format import parse_nvbandwidth_json
from rackgate.parsers.nvbandwidth.model import (
    MAX_NAME,
    TEXT_FORMAT,
    Device,
    Matrix,
    NvbandwidthRun,
    Testcase,
    TestcaseStatus,
    checked_sum,
)

_NAME = r"[A-Za-z0-9_]{1,100}"
_HEAD = {  # header lines, each at most once: field -> pattern
    "git": re.compile(r"Built from Git version:(?: (\S{1,80}))?"),
    "runtime": re.compile(r"CUDA Runtime Version: ([0-9]{1,9})"),
    "cuda_driver": re.compile(r"CUDA Driver Version: ([0-9]{1,9})"),
    "driver": re.compile(r"Driver Version: (\S{1,80})"),
}
_VERSION = re.compile(r"nvbandwidth Version: (\S{1,80})")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
_DEVICE = re.compile(r"Device ([0-9]{1,4}): (.+?)(?: \(([0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2})\))?")
_RUNNING = re.compile(rf"Running ({_NAME})\.")
_WAIVING = re.compile(rf"Waiving ({_NAME})\.")
_ERROR = re.compile(r"(?:ERROR|Error): ?(.{0,2000})")
_NOT_FOUND = re.compile(rf"Testcase (?:index )?({_NAME}) (?:not found!|out of bound!)")
_DESCRIPTION = re.compile(r"(?:memcpy|memory latency) .{1,200}\((?:GB/s|ns)\)")
_COLUMNS = re.compile(r"[ \t]*0(?:[ \t]+[0-9]{1,4})*")
_ROW = re.compile(r"[ \t]*([0-9]{1,4})((?:[ \t]+(?:[0-9]{1,12}\.[0-9]{2}|N/A)){1,1024})")
_SUM = re.compile(rf"(?:SUM|&&&& PERF) ({_NAME}) ([0-9]{{1,15}}\.[0-9]{{2}})(?: \+GB/s| -ns)?")
_STAT = re.compile(rf"(MIN|MAX|AVG) ({_NAME}) \S{{1,40}}")
_SAMPLE = re.compile(r"[ \t]*Sample [0-9]{1,6}: .{1,400}")
_NOTES = {  # a NOTE line the versions print -> the line that must follow it (None: none)
    "NOTE: This tool reports current measured bandwidth on your system.":
        "Additional system-specific tuning may be required to achieve maximal peak bandwidth.",
    "NOTE: The reported results may not reflect the full capabilities of the platform.":
        "Performance can vary with software drivers, hardware clocks, and system topology.",
    "NOTE: You have chosen a buffer size that is smaller than the default buffer size.":
        "It is suggested to use the default buffer size (64MB) to achieve maximal peak "
        "bandwidth.",
    "NOTE: You have chosen a buffer size that is smaller than the default buffer size. It "
    "is suggested to use the default buffer size (64MB) to achieve maximal peak bandwidth.":
        None,
}


@dataclass
class _Open:
    """The testcase being read, and its matrix being read (``desc`` set)."""

    name: str
    line: int
    matrices: list[Matrix] = field(default_factory=list)
    error: str | None = None
    desc: tuple[str, int] | None = None
    columns: int | None = None
    rows: list[tuple[float | None, ...]] = field(default_factory=list)
    stats: set[str] = field(default_factory=set)


class _Reader:
    def __init__(self) -> None:
        self.head: dict[str, str | None] = {}
        self.version: str | None = None
        self.host_seen = False
        self.devices: list[Device] = []
        self.done: list[Testcase] = []
        self.open: _Open | None = None
        self.notes: set[str] = set()
        self.follow: str | None = None  # the line a NOTE needs next

    def fail(self, n: int, why: str) -> ParseError:
        return ParseError(f"{TEXT_FORMAT}: line {n}: {why}")

    def close(self, n: int) -> None:
        t = self.open
        if t is None:
            return
        if t.desc is not None:
            raise self.fail(n, f"the matrix of {t.name} (line {t.desc[1]}) ends before its "
                               "SUM line (cut output?)")
        status: TestcaseStatus = "error" if t.error is not None else \
            "passed" if t.matrices else "running"
        self.done.append(Testcase(t.name, status, t.error or "", tuple(t.matrices), t.line))
        self.open = None

    def line(self, n: int, s: str) -> None:
        if self.follow is not None:
            if s != self.follow:
                raise self.fail(n, f"{s[:60]!r} where the NOTE above continues with "
                                   f"{self.follow[:40]!r}...")
            self.follow = None
            return
        if self.version is None:
            m = _VERSION.fullmatch(s)
            if m is None:
                raise self.fail(n, f"{s[:60]!r} where 'nvbandwidth Version: ...' opens the "
                                   "output (not nvbandwidth's, or cut at the start?)")
            self.version = m.group(1)
            return
        t = self.open
        if t is not None and t.desc is not None:
            self.matrix_line(n, s, t)
        elif s in _NOTES:
            if s in self.notes:
                raise self.fail(n, f"the NOTE {s[:40]!r}... twice (duplicated output?)")
            self.close(n)
            self.notes.add(s)
            self.follow = _NOTES[s]
        elif not self.done and t is None and self.header_line(n, s):
            return
        else:
            self.body_line(n, s, t)

    def header_line(self, n: int, s: str) -> bool:
        for key, pattern in _HEAD.items():
            if m := pattern.fullmatch(s):
                if key in self.head or self.devices:
                    raise self.fail(n, f"{s[:60]!r} out of place or twice (duplicated output?)")
                self.head[key] = m.group(1)
                return True
        if m := _DEVICE.fullmatch(s):
            index, name = int(m.group(1)), m.group(2)
            if index != len(self.devices) or len(name) > MAX_NAME:
                raise self.fail(n, f"Device {index} where Device {len(self.devices)} comes next, "
                                   "or a name longer than the tool prints (edited output?)")
            self.devices.append(Device(index, name, m.group(3)))
            return True
        if "driver" in self.head and not self.devices and not self.host_seen \
                and _HOST.fullmatch(s) and not _RUNNING.fullmatch(s):
            self.host_seen = True  # 0.8 prints the host name above the device list
            return True
        return False

    def body_line(self, n: int, s: str, t: _Open | None) -> None:
        if m := _RUNNING.fullmatch(s):
            self.close(n)
            self.open = _Open(m.group(1), n)
        elif s == "Waived:" or _WAIVING.fullmatch(s):
            self.close(n)
            waiving = _WAIVING.fullmatch(s)  # 0.4 and earlier name it
            self.done.append(Testcase(waiving.group(1) if waiving else None, "waived", "", (),
                                      n))
        elif m := _ERROR.fullmatch(s):
            named = _NOT_FOUND.fullmatch(m.group(1))
            if named:
                self.close(n)
                self.done.append(Testcase(named.group(1), "error", m.group(1), (), n))
            elif t is None or t.error is not None:
                raise self.fail(n, f"{s[:60]!r} outside a running testcase (edited output?)")
            else:
                t.error = m.group(1)
        elif t is not None and t.error is None and _SAMPLE.fullmatch(s):
            return  # -v: one sample of the testcase being measured
        elif t is not None and t.error is None and _DESCRIPTION.fullmatch(s):
            t.desc, t.columns, t.rows, t.stats = (s, n), None, [], set()
        elif t is not None and t.matrices and (m := _STAT.fullmatch(s)):
            if m.group(1) in t.stats or m.group(2) != t.matrices[-1].sum_key:
                raise self.fail(n, f"{s[:60]!r} repeated, or not of the SUM above it")
            t.stats.add(m.group(1))
        else:
            where = f"in testcase {t.name}" if t is not None else "between testcases"
            raise self.fail(n, f"{s[:60]!r} {where} is no line nvbandwidth prints "
                               "(edited, cut or mixed output?)")

    def matrix_line(self, n: int, s: str, t: _Open) -> None:
        assert t.desc is not None
        if t.columns is None:
            if not _COLUMNS.fullmatch(s) or s.split() != [str(i) for i in range(len(s.split()))]:
                raise self.fail(n, f"{s[:60]!r} where the column labels 0..n-1 of "
                                   f"{t.desc[0][:40]!r} belong")
            t.columns = len(s.split())
            return
        if m := _ROW.fullmatch(s):
            cells = m.group(2).split()
            if int(m.group(1)) != len(t.rows) or len(cells) != t.columns:
                raise self.fail(n, f"row {m.group(1)} with {len(cells)} figures where row "
                                   f"{len(t.rows)} with {t.columns} comes next (cut or edited?)")
            t.rows.append(tuple(None if c == "N/A" else float(c) for c in cells))
            return
        m = _SUM.fullmatch(s)
        if m is None or not t.rows or not (m.group(1) == t.name
                                           or m.group(1).startswith(t.name + "_")):
            raise self.fail(n, f"{s[:60]!r} where a row or 'SUM {t.name} ...' of the matrix "
                               "belongs (cut or edited output?)")
        matrix = Matrix(t.desc[0], t.columns, tuple(t.rows), m.group(1), float(m.group(2)),
                        t.desc[1])
        checked_sum(matrix, TEXT_FORMAT, 2)
        t.matrices.append(matrix)
        t.desc = None


def parse_nvbandwidth_text(text: str) -> NvbandwidthRun:
    """The text output of one nvbandwidth run; ParseError naming the line otherwise."""
    reader = _Reader()
    lines = text.replace("\r\n", "\n").split("\n")
    for n, raw in enumerate(lines, 1):
        if DAMAGE.search(raw):
            raise reader.fail(n, "holds a character no tool prints (damaged output?)")
        s = raw.rstrip()
        if s:
            reader.line(n, s)
    if reader.follow is not None:
        raise reader.fail(len(lines), "the output ends inside a NOTE (cut output?)")
    reader.close(len(lines))
    if reader.version is None:
        raise ParseError(f"{TEXT_FORMAT}: empty output")
    head = reader.head
    runtime = head.get("runtime")
    return NvbandwidthRun(
        form="text", version=reader.version, git_version=head.get("git"),
        cuda_runtime_version=int(runtime) if runtime else None,
        driver_version=head.get("driver"),
        devices=tuple(reader.devices) if reader.devices else None,
        testcases=tuple(reader.done))


def parse_nvbandwidth(text: str) -> NvbandwidthRun:
    """nvbandwidth's output, text or JSON (``-j``: it starts with ``{``)."""
    if text.lstrip(" \t\r\n").startswith("{"):
        return parse_nvbandwidth_json(text)
    return parse_nvbandwidth_text(text)


__all__ = ["parse_nvbandwidth", "parse_nvbandwidth_text"]
