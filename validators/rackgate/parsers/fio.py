"""Parser for fio's JSON output (``fio --output-format=json``).

Format: fio(1), section "JSON OUTPUT" and fio's ``stat.c`` (``show_thread_status_json``).
The top level holds ``fio version`` and ``jobs``; each job has ``jobname``, ``error`` and
one object per direction (``read``, ``write``, ``trim``) with ``io_bytes``, ``bw_bytes``
(bytes/s), ``iops``, ``runtime`` (ms) and ``clat_ns.percentile`` (keys like
``"99.000000"``, values in ns). Older fio reports ``bw`` in KiB/s only (2.x, and 3.1 in
the corpus) and, before 3.0, ``clat`` in usec.

Real output is often preceded by text on the same stream (fio's own notes or warnings,
an ``srun`` prefix): everything before the first line that starts with ``{`` is ignored.

>>> run = parse_fio_json('{"fio version": "fio-3.33", "jobs": [{"jobname": "r", '
...     '"error": 0, "read": {"io_bytes": 1048576, "bw_bytes": 2097152, "iops": 2.0, '
...     '"runtime": 500}}]}')
>>> run.jobs[0].read.bw_bytes_per_s, run.version
(2097152, 'fio-3.33')
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rackgate.parsers import ParseError

_DIRECTIONS = ("read", "write", "trim")


@dataclass(frozen=True)
class FioDirection:
    """Totals of one I/O direction of one job."""

    io_bytes: int
    bw_bytes_per_s: int
    iops: float
    runtime_ms: int
    clat_p99_ns: float | None  # None when fio reported no percentiles


@dataclass(frozen=True)
class FioJob:
    name: str
    error: int  # errno of the first error the job hit; 0 when none
    read: FioDirection | None
    write: FioDirection | None
    trim: FioDirection | None


@dataclass(frozen=True)
class FioRun:
    version: str
    jobs: tuple[FioJob, ...]


def _json_start(text: str) -> int:
    if text.lstrip().startswith("{"):
        return text.index("{")
    pos = text.find("\n{")
    if pos < 0:
        raise ParseError("fio JSON: no line starts with '{' (was fio run with "
                         "--output-format=json?)")
    return pos + 1


def _number(obj: dict[str, Any], key: str, where: str) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"fio JSON: {where}.{key} is missing or not a number "
                         f"(got {value!r})")
    return float(value)


def _p99_ns(direction: dict[str, Any]) -> float | None:
    clat = direction.get("clat_ns")
    scale = 1.0
    if not isinstance(clat, dict):
        clat, scale = direction.get("clat"), 1000.0  # fio < 3.0: usec
    if not isinstance(clat, dict):
        return None
    percentiles = clat.get("percentile")
    if not isinstance(percentiles, dict):
        return None
    for key, value in percentiles.items():
        try:
            if abs(float(key) - 99.0) < 1e-9 and isinstance(value, int | float):
                return float(value) * scale
        except ValueError:
            continue
    return None


def _direction(job: dict[str, Any], name: str, where: str) -> FioDirection | None:
    d = job.get(name)
    if d is None:
        return None
    if not isinstance(d, dict):
        raise ParseError(f"fio JSON: {where}.{name} is not an object")
    w = f"{where}.{name}"
    # "bw_bytes" (bytes/s) appeared in fio 3.x; fio 2.x and early 3.x (3.1 in the corpus)
    # report only "bw" in KiB/s, which is the same figure rounded to a KiB
    return FioDirection(
        io_bytes=int(_number(d, "io_bytes", w)),
        bw_bytes_per_s=int(_number(d, "bw_bytes", w)) if "bw_bytes" in d
        else int(_number(d, "bw", w) * 1024),
        iops=_number(d, "iops", w),
        runtime_ms=int(_number(d, "runtime", w)),
        clat_p99_ns=_p99_ns(d),
    )


def parse_fio_json(text: str) -> FioRun:
    """Parse fio's JSON output into a FioRun; raise ParseError on anything else."""
    if not text.strip():
        raise ParseError("fio JSON: the output is empty")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text, _json_start(text))
    except json.JSONDecodeError as exc:
        raise ParseError(f"fio JSON: not valid JSON at line {exc.lineno} column "
                         f"{exc.colno}: {exc.msg} (truncated output?)") from exc
    if not isinstance(doc, dict):
        raise ParseError("fio JSON: the top level is not an object")
    jobs = doc.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ParseError("fio JSON: 'jobs' is missing or empty")
    version = str(doc.get("fio version", "unknown"))
    parsed = []
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise ParseError(f"fio JSON: jobs[{i}] is not an object")
        where = f"jobs[{i}]"
        directions = {n: _direction(job, n, where) for n in _DIRECTIONS}
        parsed.append(FioJob(
            name=str(job.get("jobname", f"job{i}")),
            error=int(_number(job, "error", where)) if "error" in job else 0,
            read=directions["read"], write=directions["write"], trim=directions["trim"],
        ))
    return FioRun(version=version, jobs=tuple(parsed))
