"""Parser for the output of rackgate's MPI all-reduce probe (``probes/mpi_allreduce.py``).

Format (the probe's own, documented in its header): JSON objects, one per line, printed by
rank 0. The first has ``"probe": "mpi_allreduce"`` with ``ranks``, ``hosts`` (the
processor name of every rank, in rank order) and ``mpi`` (the library version line);
each following one is a message size with ``bytes``, ``iters``, ``time_us`` (the slowest
rank's mean), ``algbw_gbps``, ``busbw_gbps`` (GB/s = 10^9 bytes/s) and ``wrong`` (result
elements that differ from the expected sum, over all ranks).

Lines that are not JSON objects are ignored: srun ``--label`` prefixes (``0: ``) are
stripped first, and MPI libraries print warnings on the same stream.

>>> run = parse_mpi_allreduce('0: {"probe": "mpi_allreduce", "ranks": 2, "hosts": ["a", "b"], '
...     '"mpi": "Open MPI v4.1.4"}\\n0: {"bytes": 8, "iters": 5, "time_us": 4.0, '
...     '"algbw_gbps": 0.002, "busbw_gbps": 0.002, "wrong": 0}')
>>> run.ranks, run.hosts, run.rows[0].busbw_gbps
(2, ('a', 'b'), 0.002)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from rackgate.parsers import ParseError

_LABEL = re.compile(r"^\s*\d+:\s?")


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


def _field(obj: dict[str, Any], key: str, kind: type, lineno: int) -> Any:
    value = obj.get(key)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ParseError(f"line {lineno}: {key!r} should be a {kind.__name__}, got {value!r}")
    return value


def parse_mpi_allreduce(text: str) -> AllreduceRun:
    header: dict[str, Any] | None = None
    rows: list[AllreduceRow] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _LABEL.sub("", raw, count=1).strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ParseError(f"line {lineno}: not a complete JSON object ({exc}): "
                             f"{line[:120]!r}") from None
        if not isinstance(obj, dict):
            continue
        if obj.get("probe") == "mpi_allreduce":
            if header is not None:
                raise ParseError(f"line {lineno}: a second probe header (two runs in one "
                                 f"output?)")
            header = obj
            continue
        if header is None:
            raise ParseError(f"line {lineno}: a size row before the probe header")
        rows.append(AllreduceRow(
            size_bytes=_field(obj, "bytes", int, lineno), iters=_field(obj, "iters", int, lineno),
            time_us=_field(obj, "time_us", float, lineno),
            algbw_gbps=_field(obj, "algbw_gbps", float, lineno),
            busbw_gbps=_field(obj, "busbw_gbps", float, lineno),
            wrong=_field(obj, "wrong", int, lineno)))
    if header is None:
        raise ParseError("no mpi_allreduce probe header: the MPI program did not start "
                         "(see the evidence's stderr)")
    if not rows:
        raise ParseError("the probe started but printed no message size")
    hosts = header.get("hosts")
    if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
        raise ParseError(f"probe header: 'hosts' should be a list of names, got {hosts!r}")
    return AllreduceRun(ranks=_field(header, "ranks", int, 0), hosts=tuple(hosts),
                        mpi_library=str(header.get("mpi", "")), rows=tuple(rows))
