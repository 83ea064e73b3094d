"""Parser for fio's JSON output (``fio --output-format=json``).

Format: fio(1), section "JSON OUTPUT" and fio's ``stat.c`` (``show_thread_status_json``).
The top level holds ``fio version`` and ``jobs``; each job has ``jobname``, ``error`` and
one object per direction (``read``, ``write``, ``trim``) with ``io_bytes``, ``bw_bytes``
(bytes/s), ``iops``, ``runtime`` (ms) and ``clat_ns`` (``min``, ``max``, ``mean``, ``N``
samples, in ns) with its ``percentile`` object (keys like ``"99.000000"``). Older fio
reports ``bw`` in KiB/s only (2.x, and 3.1 in the corpus) and, before 3.0, ``clat`` in usec.
``percentile`` is printed only when ``clat_percentiles`` is on (the default) and samples
were taken (``stat.c``, ``add_ddir_lat_json``): ``gtod_reduce=1`` turns on
``disable_clat`` and turns off ``clat_percentiles`` (``options.c``, fio HOWTO), which
leaves ``clat_ns`` all 0 with ``N`` 0. The options a job ran with are its ``job options``
over the top level's ``global options`` (strings, as given; a repeated one: the last).

Real output is often preceded by text on the same stream (fio's own notes or warnings,
an ``srun`` prefix): everything before the first line that starts with ``{`` is ignored.
The figures read must be finite (``NaN``, ``Infinity``, ``1e400`` are ParseErrors naming the
field), counts whole 64-bit numbers, and no field read may be given twice (fio itself
repeats job options, which are not read).

>>> run = parse_fio_json('{"fio version": "fio-3.33", "jobs": [{"jobname": "r", '
...     '"error": 0, "read": {"io_bytes": 1048576, "bw_bytes": 2097152, "iops": 2.0, '
...     '"runtime": 500}}]}')
>>> run.jobs[0].read.bw_bytes_per_s, run.version
(2097152, 'fio-3.33')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.damage import oversized
from rackgate.parsers.strict_json import decode, field, finite

_DIRECTIONS = ("read", "write", "trim")


@dataclass(frozen=True)
class FioDirection:
    """Totals of one I/O direction of one job."""

    io_bytes: int
    bw_bytes_per_s: int
    iops: float
    runtime_ms: int
    clat_p99_ns: float | None  # None when fio reported no percentiles
    clat_samples: int | None = None  # clat_ns.N; None when fio printed none (fio < 3)
    clat_percentiles: bool = False  # clat_ns had a "percentile" object (99 in it or not)


@dataclass(frozen=True)
class FioJob:
    name: str
    error: int  # errno of the first error the job hit; 0 when none
    read: FioDirection | None
    write: FioDirection | None
    trim: FioDirection | None
    options: tuple[tuple[str, str], ...] = ()  # global options, then the job's own

    def option(self, name: str) -> str | None:
        """The value the job ran with (its own over the global one), None when not given."""
        return next((v for k, v in reversed(self.options) if k == name), None)


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
    """A finite number (NaN, Infinity and 1e400 are refused, naming the field)."""
    return finite(field(obj, key, f"fio JSON: {where}"), f"fio JSON: {where}.{key}")


def _count(obj: dict[str, Any], key: str, where: str) -> int:
    """A whole number that fits a 64-bit counter, as fio's are."""
    value = _number(obj, key, where)
    if not value.is_integer() or abs(value) >= 2.0**63:
        raise ParseError(f"fio JSON: {where}.{key} is {value!r}, not a whole 64-bit count")
    return int(value)


def _clat(direction: dict[str, Any], where: str) -> tuple[float | None, int | None, bool]:
    """(p99 in ns, clat samples, whether a percentile object was printed)."""
    w = f"fio JSON: {where}"
    clat = field(direction, "clat_ns", w)
    scale, name = 1.0, "clat_ns"
    if not isinstance(clat, dict):
        clat, scale, name = field(direction, "clat", w), 1000.0, "clat"  # fio < 3.0: usec
    if not isinstance(clat, dict):
        return None, None, False
    samples = _count(clat, "N", f"{where}.{name}") if "N" in clat else None
    percentiles = field(clat, "percentile", f"{w}.{name}")
    if not isinstance(percentiles, dict):
        return None, samples, False
    return _p99_ns(percentiles, scale, f"{where}.{name}"), samples, True


def _p99_ns(percentiles: dict[str, Any], scale: float, where: str) -> float | None:
    for key in percentiles:
        try:
            at_99 = abs(float(key) - 99.0) < 1e-9
        except ValueError:
            continue
        if at_99:
            w = f"fio JSON: {where}.percentile"
            return finite(field(percentiles, key, w), f"{w}[{key!r}]") * scale
    return None


def _direction(job: dict[str, Any], name: str, where: str) -> FioDirection | None:
    d = field(job, name, f"fio JSON: {where}")
    if d is None:
        return None
    if not isinstance(d, dict):
        raise ParseError(f"fio JSON: {where}.{name} is not an object")
    w = f"{where}.{name}"
    p99, samples, printed = _clat(d, w)
    for key in ("io_bytes", "bw_bytes", "bw", "iops", "runtime", "clat_ns", "clat"):
        field(d, key, f"fio JSON: {w}")  # a repeated key is refused even where unread
    # "bw_bytes" (bytes/s) appeared in fio 3.x; fio 2.x and early 3.x (3.1 in the corpus)
    # report only "bw" in KiB/s, which is the same figure rounded to a KiB
    return FioDirection(
        io_bytes=_count(d, "io_bytes", w),
        bw_bytes_per_s=_count(d, "bw_bytes", w) if "bw_bytes" in d
        else _count(d, "bw", w) * 1024,
        iops=_number(d, "iops", w),
        runtime_ms=_count(d, "runtime", w),
        clat_p99_ns=p99, clat_samples=samples, clat_percentiles=printed,
    )


def _errno(job: dict[str, Any], where: str) -> int:
    """The job's errno: 0 or a positive int (os.strerror takes a C int)."""
    if "error" not in job:
        return 0
    value = _count(job, "error", where)
    if not 0 <= value < 2**31:
        raise ParseError(f"fio JSON: {where}.error is {value}, not an errno")
    return value


def _options(obj: dict[str, Any], key: str, where: str) -> tuple[tuple[str, str], ...]:
    """``obj[key]``'s options as (name, value) strings; fio repeats an option given twice,
    and the decoder keeps the last, the one fio ran with."""
    options = field(obj, key, f"fio JSON: {where}")
    if options is None:
        return ()
    if not isinstance(options, dict):
        raise ParseError(f"fio JSON: {where}.{key!r} is not an object")
    return tuple((str(k), str(v)) for k, v in options.items())


def parse_fio_json(text: str) -> FioRun:
    """Parse fio's JSON output into a FioRun; raise ParseError on anything else."""
    if not text.strip():
        raise ParseError("fio JSON: the output is empty")
    doc, _ = decode(text, "fio JSON", _json_start(text), unique_keys=False)
    if why := oversized(doc, 64, 8192):  # fio's keys are short words, its strings options
        raise ParseError(f"fio JSON: {why}: no output of fio's (a damaged name?)")
    if not isinstance(doc, dict):
        raise ParseError("fio JSON: the top level is not an object")
    jobs = field(doc, "jobs", "fio JSON: the top level")
    if not isinstance(jobs, list) or not jobs:
        raise ParseError("fio JSON: 'jobs' is missing or empty")
    version = str(field(doc, "fio version", "fio JSON: the top level") or "unknown")
    global_options = _options(doc, "global options", "the top level")
    parsed = []
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise ParseError(f"fio JSON: jobs[{i}] is not an object")
        where = f"jobs[{i}]"
        directions = {n: _direction(job, n, where) for n in _DIRECTIONS}
        parsed.append(FioJob(
            name=str(field(job, "jobname", f"fio JSON: {where}") or f"job{i}"),
            error=_errno(job, where),
            read=directions["read"], write=directions["write"], trim=directions["trim"],
            options=global_options + _options(job, "job options", where),
        ))
    return FioRun(version=version, jobs=tuple(parsed))
