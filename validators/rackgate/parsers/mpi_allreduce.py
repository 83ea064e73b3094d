"""Parser for the output of rackgate's MPI all-reduce probe (``programs/probes/mpi_allreduce.py``).

Format (the probe's own, documented in its header): JSON objects, one per line, printed by
rank 0. The first has ``"probe": "mpi_allreduce"`` with ``ranks``, ``hosts`` (the
processor name of every rank, in rank order) and ``mpi`` (the library version line);
each following one is a message size with ``bytes``, ``iters``, ``time_us`` (the slowest
rank's mean), ``algbw_gbps``, ``busbw_gbps`` (GB/s = 10^9 bytes/s) and ``wrong`` (result
elements that differ from the expected sum, over all ranks).

Lines that are not JSON objects are ignored: srun ``--label`` prefixes (``0: ``) are
stripped first, and MPI libraries print warnings on the same stream. A launcher's fatal
message (``parsers.launcher_text``: Open MPI's ``There are not enough slots ...``,
``srun: error: ...``) is a ParseError quoting it as a launch error, rows or not. Every
figure must be finite and non-negative (``NaN``, ``Infinity`` and ``1e400`` are refused
naming the line: a report must stay valid JSON), and the header's ``ranks`` must match its
``hosts``.

>>> run = parse_mpi_allreduce('0: {"probe": "mpi_allreduce", "ranks": 2, "hosts": ["a", "b"], '
...     '"mpi": "Open MPI v4.1.4"}\\n0: {"bytes": 8, "iters": 5, "time_us": 4.0, '
...     '"algbw_gbps": 0.002, "busbw_gbps": 0.002, "wrong": 0}')
>>> run.ranks, run.hosts, run.rows[0].busbw_gbps
(2, ('a', 'b'), 0.002)
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from rackgate.figures import figure
from rackgate.parsers import ParseError
from rackgate.parsers.damage import json_float
from rackgate.parsers.launcher_text import launcher_messages, mention, raise_if_fatal

_LABEL = re.compile(r"^\s*\d+:\s?")
MPI_MAX_LIBRARY_VERSION_STRING = 8192  # MPICH's; Open MPI's is 256
# what probes/mpi_allreduce.py prints (json.dumps: a row is a few dozen characters)
_HEADER_KEYS = frozenset({"probe", "ranks", "hosts", "mpi"})
_ROW_KEYS = frozenset({"bytes", "iters", "time_us", "algbw_gbps", "busbw_gbps", "wrong"})
_MAX_ROW = 1024


@dataclass(frozen=True)
class AllreduceRow:
    """One message size."""

    size_bytes: int
    iters: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int


@dataclass(frozen=True)
class AllreduceRun:
    ranks: int
    hosts: tuple[str, ...]  # processor name of each rank, rank order
    mpi_library: str
    rows: tuple[AllreduceRow, ...]


def _field(obj: dict[str, Any], key: str, kind: type, lineno: int, minimum: float = 0) -> Any:
    """``obj[key]`` as ``kind``: finite (never nan, inf or an overflow such as 1e400) and
    at least ``minimum`` (no negative time, bandwidth, count or size)."""
    value = obj.get(key)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value) if abs(value) <= 1e300 else math.inf
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ParseError(f"line {lineno}: {key!r} should be a {kind.__name__}, got "
                         f"{str(value)[:40]!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParseError(f"line {lineno}: {key!r} {value!r} is not a finite number: no "
                         "measurement")
    if isinstance(value, int | float) and value < minimum:
        raise ParseError(f"line {lineno}: {key!r} {value!r} is below {figure(minimum)}: not a "
                         "measurement")
    return value


def _json(line: str, lineno: int) -> Any:
    try:
        # NaN and Infinity decode: the field readers refuse them
        return json.loads(line, parse_float=json_float)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"line {lineno}: not a complete JSON object ({exc}): "
                         f"{line[:120]!r}") from None


def _known(obj: dict[str, Any], keys: frozenset[str], line: str, lineno: int) -> None:
    """ParseError for a key the probe does not print (a damaged one may be a judged one's),
    or a row longer than the probe prints (a figure of 100,000 digits)."""
    foreign = sorted(set(obj) - keys)
    if foreign or (keys is _ROW_KEYS and len(line) > _MAX_ROW):
        raise ParseError(f"line {lineno}: {line[:80]!r}: " + (
            f"key {foreign[0][:40]!r} is none the probe prints" if foreign else
            f"a row of {len(line):,} characters (the probe prints at most {_MAX_ROW})")
            + " (edited or damaged output?)")


def parse_mpi_allreduce(text: str) -> AllreduceRun:
    """The probe's header and one row per message size. Non-finite or negative figures,
    a second header and a second row for one size (two runs in one output) are
    ParseErrors naming the line."""
    header: dict[str, Any] | None = None
    rows: list[AllreduceRow] = []
    seen: dict[int, int] = {}
    unlabelled = [_LABEL.sub("", raw, count=1) for raw in text.splitlines()]
    launched = launcher_messages(unlabelled)
    raise_if_fatal(launched, "mpi_allreduce")
    for lineno, raw in enumerate(unlabelled, start=1):
        line = raw.strip()
        if not line.startswith("{"):
            continue
        obj = _json(line, lineno)
        if not isinstance(obj, dict):
            continue
        if obj.get("probe") == "mpi_allreduce":
            if header is not None:
                raise ParseError(f"line {lineno}: a second probe header (two runs in one "
                                 f"output?)")
            header = obj
            _field(header, "ranks", int, lineno, minimum=1)
            _known(obj, _HEADER_KEYS, line, lineno)
            continue
        if header is None:
            raise ParseError(f"line {lineno}: a size row before the probe header")
        row = AllreduceRow(
            size_bytes=_field(obj, "bytes", int, lineno, minimum=1),
            iters=_field(obj, "iters", int, lineno, minimum=1),
            time_us=_field(obj, "time_us", float, lineno),
            algbw_gbps=_field(obj, "algbw_gbps", float, lineno),
            busbw_gbps=_field(obj, "busbw_gbps", float, lineno),
            wrong=_field(obj, "wrong", int, lineno))
        _known(obj, _ROW_KEYS, line, lineno)
        if row.size_bytes in seen:
            raise ParseError(f"line {lineno}: a second row for {row.size_bytes} bytes (line "
                             f"{seen[row.size_bytes]}): two runs in one output are not one "
                             "measurement")
        seen[row.size_bytes] = lineno
        rows.append(row)
    if header is None:
        raise ParseError("no mpi_allreduce probe header: the MPI program did not start "
                         f"(see the evidence's stderr){mention(launched)}")
    if not rows:
        raise ParseError("the probe started but printed no message size")
    hosts = header.get("hosts")
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise ParseError(f"probe header: 'hosts' should be a list of names, got {hosts!r}")
    ranks = _field(header, "ranks", int, 0, minimum=1)
    if ranks != len(hosts):
        raise ParseError(f"probe header: {ranks} ranks but {len(hosts)} host names: the "
                         "header does not describe one run")
    library = str(header.get("mpi", ""))
    if len(library) > MPI_MAX_LIBRARY_VERSION_STRING:
        raise ParseError(f"probe header: 'mpi' is {len(library):,} characters, more than "
                         "MPI_Get_library_version returns (MPI_MAX_LIBRARY_VERSION_STRING, "
                         f"{MPI_MAX_LIBRARY_VERSION_STRING:,} in MPICH, 256 in Open MPI)")
    return AllreduceRun(ranks=ranks, hosts=tuple(hosts), mpi_library=library,
                        rows=tuple(rows))
