"""Parser for nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ...): the text
table on stdout, and the JSON file newer versions write with ``-J <file>``.

Formats, from NVIDIA/nccl-tests ``src/common.cu`` and ``src/util.cu`` and its
``doc/PERFORMANCE.md`` (busbw's definition):

* Header lines start with ``#``: ``# nccl-tests version 2.18.0 nccl-headers=22105
  nccl-library=22105`` (2.18 and later; NCCL's version code is major*10000+minor*100+patch),
  ``# Collective test starting: all_reduce_perf`` (2.17.3+), ``# nThread 1 nGpus 8 minBytes 8
  maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 ... validation: 1``, one
  device line per rank: ``#  Rank  0 Group  0 Pid 1234 on host device  0 [0000:1b:00] NVIDIA
  H100 80GB HBM3`` (no ``Group`` and ``[0x1b]`` bus ids before 2.13.x).
* The column header ``# size count type redop root time algbw busbw #wrong time algbw busbw
  #wrong`` (out-of-place, then in-place); versions before 2.13 print ``error`` (the largest
  deviation, ``%5.0le``) instead of ``#wrong`` (a count, ``%g``), no ``root`` column, and
  no ``redop`` for all_gather (alltoall rows leave it blank). ``N/A`` replaces the error
  cell when a side is not validated (``-c 0``, or alltoall in-place). ``-S`` appends a
  timestamp, ``-I`` four per-iteration columns per side: columns are mapped by the header.
* Size rows: bytes, elements, type, [redop], [root], then the measurements. Times in us,
  bandwidths in GB/s (10^9 bytes/s).
* Footer: ``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 68.4048``, the
  mean busbw over EVERY size of the sweep (tiny, latency-bound sizes included).
* JSON (``-J``, 2.17.3+, file version 1 to 3): ``{"version", "nccl_version" (code),
  "config": {"nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "warmup_iters",
  "iterations", "validation", "devices": [{"rank", "group", "pid", "hostname", "device",
  "device_hex", "device_info"}]}, "results": [{"size", "count", "type", "redop", "root",
  "out_of_place"/"in_place": {"time" (or "cpu_time"), "alg_bw", "bus_bw", "nwrong" (null
  when not validated)}}], "out_of_bounds": {"count", "okay"}, "average_bus_bandwidth":
  {"bandwidth", "okay"}, "errors": [...]}``. nccl-tests writes ``"nan"`` as a string where
  it measured nothing: that, ``NaN``/``Infinity`` and overflowing numbers are refused.

Every figure must be a finite number (``nan``, ``inf``, ``1e400`` are ParseErrors naming
the field and line) and times, bandwidths and counts non-negative. A run prints each size
row, each rank, its configuration line, its column header and its summary lines once: a
second one (two runs concatenated) is a ParseError, never extra evidence.

Launchers' line labels are removed: ``srun --label`` (``0: ``) and Open MPI
``--tag-output`` (``[1,0]<stdout>:``); rows from more than one task are refused (each task
ran its own test: nccl-tests was not built with MPI). NCCL's own log lines (``host:pid:tid
[0] NCCL INFO ...``) may be interleaved anywhere; a ``...`` line (elided output) is noted.
Inside the table, any other line is an error naming it. An output without size rows is an
error, never an empty result.

>>> run = parse_nccl_tests(
...     "# nThread 1 nGpus 2 minBytes 1024 maxBytes 1024 step: 2(factor) warmup iters: 5 "
...     "iters: 20 agg iters: 1 validation: 1 graph: 0\\n"
...     "#       size         count      type   redop    root     time   algbw   busbw "
...     "#wrong     time   algbw   busbw #wrong\\n"
...     "        1024           256     float     sum      -1    10.00    0.10    0.10      0"
...     "    10.00    0.10    0.10      0\\n"
...     "# Out of bounds values : 0 OK\\n# Avg bus bandwidth    : 0.1\\n")
>>> r = run.rows[0]
>>> (r.size_bytes, r.redop, r.out_of_place.busbw_gbps, r.in_place.wrong, run.avg_busbw_gbps)
(1024, 'sum', 0.1, 0, 0.1)
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from rackgate.parsers import ParseError

_SRUN = re.compile(r"^(\d+):\s?(.*)$")
_MPI_TAG = re.compile(r"^\[(\d+),(\d+)\]<std(?:out|err)>:\s?(.*)$")
_NCCL_LOG = re.compile(r"\bNCCL (INFO|WARN|TRACE|ABORT)\b")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+\S*)")
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version (\S+)(?:.*nccl-library=(\d+))?")
_PROGRAM = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+"
                   r"device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_ERROR = re.compile(r"^#\s*error:\s*(.+)$")
_CONFIG = {"n_threads": r"nThread (\d+)", "n_gpus": r"nGpus (\d+)",
           "min_bytes": r"minBytes (\d+)", "max_bytes": r"maxBytes (\d+)",
           "warmup_iters": r"warmup iters: (\d+)", "iters": r"(?<!warmup )(?<!agg )iters: (\d+)",
           "validation": r"validation: (\d+)"}
_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}$"), re.compile(r"^\d{2}:\d{2}:\d{2}$")
_TIME_NAMES = ("time", "cputime")
_ERR_NAMES = ("#wrong", "error")


@dataclass(frozen=True)
class NcclMeasurement:
    """One side (out-of-place or in-place) of one size row."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None  # '#wrong' elements; None when N/A (not validated) or an old 'error' column
    max_error: float | None = None  # nccl-tests < 2.13 'error' column: largest deviation


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
    pid: int
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
    ranks: tuple[NcclRank, ...] = ()
    error_column: Literal["#wrong", "error"] = "#wrong"
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


def _strip_label(line: str) -> tuple[str | None, str]:
    s = line.strip()
    m = _MPI_TAG.match(s)
    if m:
        return f"{m.group(1)},{m.group(2)}", m.group(3).strip()
    m = _SRUN.match(s)
    if m:
        return m.group(1), m.group(2).strip()
    return None, s


def _number(tok: str, what: str, n: int, raw: str, negative: bool = False) -> float:
    """A finite number (never nan, inf or an overflow such as 1e400), >= 0 unless
    ``negative``: nccl-tests prints no other times, bandwidths or counts."""
    try:
        value = float(tok)
    except ValueError:
        raise ParseError(f"nccl-tests: line {n}: {what} {tok!r} is not a number "
                         f"(expected a size row: {raw.strip()[:100]!r})") from None
    if not math.isfinite(value):
        raise ParseError(f"nccl-tests: line {n}: {what} {tok!r} is not a finite number: "
                         f"no measurement ({raw.strip()[:100]!r})")
    if value < 0 and not negative:
        raise ParseError(f"nccl-tests: line {n}: {what} {tok!r} is negative: not a "
                         f"measurement ({raw.strip()[:100]!r})")
    return value


def _integer(tok: str, what: str, n: int, raw: str) -> int:
    try:
        return int(tok)
    except ValueError:
        raise ParseError(f"nccl-tests: line {n}: {what} {tok!r} is not an integer "
                         f"(expected a size row: {raw.strip()[:100]!r})") from None


@dataclass(frozen=True)
class _Layout:
    """Where each figure is among a row's trailing measurement columns."""

    width: int  # columns per side
    sides: int  # 2 (out-of-place and in-place)
    time: int
    algbw: int
    busbw: int
    err: int
    err_name: Literal["#wrong", "error"]
    timestamp: bool


_DEFAULT = _Layout(4, 2, 0, 1, 2, 3, "#wrong", False)


def _layout(tokens: list[str], n: int) -> _Layout:
    names = [t for t in tokens if t != "#"]
    names[0] = names[0].lstrip("#")
    starts = [i for i, t in enumerate(names) if t in _TIME_NAMES]
    if len(starts) != 2:
        raise ParseError(f"nccl-tests: line {n}: column header without an out-of-place and an "
                         f"in-place 'time' column: {' '.join(tokens)[:120]!r}")
    side = names[starts[0]:starts[1]]
    try:
        err_name = next(t for t in side if t in _ERR_NAMES)
        layout = _Layout(len(side), 2, side.index(side[0]), side.index("algbw"),
                         side.index("busbw"), side.index(err_name),
                         "#wrong" if err_name == "#wrong" else "error",
                         "timestamp" in names[starts[1]:])
    except (StopIteration, ValueError):
        raise ParseError(f"nccl-tests: line {n}: column header lacks algbw, busbw or "
                         f"#wrong/error: {' '.join(tokens)[:120]!r}") from None
    return layout


def _side(vals: list[str], lay: _Layout, n: int, raw: str, where: str) -> NcclMeasurement:
    err_tok = vals[lay.err]
    wrong: int | None = None
    max_error: float | None = None
    if err_tok != "N/A":
        value = _number(err_tok, f"{where} {lay.err_name}", n, raw,
                        negative=lay.err_name == "error")
        if lay.err_name == "error":
            max_error = value
        elif value < 0 or value != int(value):
            raise ParseError(f"nccl-tests: line {n}: {where} #wrong {err_tok!r} is not a "
                             "count of wrong elements")
        else:
            wrong = int(value)
    return NcclMeasurement(time_us=_number(vals[lay.time], f"{where} time", n, raw),
                           algbw_gbps=_number(vals[lay.algbw], f"{where} algbw", n, raw),
                           busbw_gbps=_number(vals[lay.busbw], f"{where} busbw", n, raw),
                           wrong=wrong, max_error=max_error)


def _row(text: str, lay: _Layout, n: int) -> NcclRow:
    tokens = text.split()
    if len(tokens) >= 2 and _STAMP[0].match(tokens[-2]) and _STAMP[1].match(tokens[-1]):
        tokens = tokens[:-2]
    tail = lay.width * lay.sides
    head = tokens[:-tail] if len(tokens) > tail else []
    if not 3 <= len(head) <= 5:
        raise ParseError(f"nccl-tests: line {n}: expected a size row of size, count, type, "
                         f"[redop], [root] and {tail} measurement columns, got {len(tokens)} "
                         f"fields (truncated line?): {text.strip()[:100]!r}")
    vals = tokens[-tail:]
    extra = head[3:]
    redop, root = "", None
    if len(extra) == 2:
        redop, root = extra[0], _integer(extra[1], "root", n, text)
    elif len(extra) == 1:
        if re.fullmatch(r"-?\d+", extra[0]):
            root = int(extra[0])
        else:
            redop = extra[0]
    return NcclRow(
        size_bytes=_integer(head[0], "size", n, text), count=_integer(head[1], "count", n, text),
        type=head[2], redop=redop, root=root,
        out_of_place=_side(vals[:lay.width], lay, n, text, "out-of-place"),
        in_place=_side(vals[lay.width:], lay, n, text, "in-place"), line=n)


def _refuse_duplicates(rows: list[NcclRow], ranks: list[NcclRank]) -> None:
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


def _parse_text(text: str) -> NcclTestsRun:
    facts: dict[str, Any] = {}
    rows: list[NcclRow] = []
    ranks: list[NcclRank] = []
    labels: dict[str, None] = {}
    row_labels: dict[str, None] = {}
    warnings: list[str] = []
    errors: list[str] = []
    layout: _Layout | None = None
    in_table = elided = False
    once: dict[str, list[int]] = {}  # lines that a run prints once: a second one is a second run
    for n, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
        label, line = _strip_label(raw)
        if label is not None:
            labels[label] = None
        if not line:
            continue
        if _NCCL_LOG.search(line):
            v = _NCCL_VERSION.search(line)
            if v:
                facts.setdefault("nccl_version", v.group(1))
            if " NCCL WARN " in f" {line} ":
                warnings.append(line.strip()[:200])
            continue
        if line.startswith("NCCL version"):
            v = _NCCL_VERSION.search(line)
            if v:
                facts.setdefault("nccl_version", v.group(1))
            continue
        if line in ("...", "\u2026"):
            elided = True
            continue
        if line.startswith("#"):
            tokens = line.split()
            names = {t.lstrip("#") for t in tokens}
            if {"size", "count", "busbw"} <= names:
                layout, in_table = _layout(tokens, n), True
                once.setdefault("column header", []).append(n)
            elif m := _RANK.match(line):
                ranks.append(NcclRank(int(m.group(1)), int(m.group(2)) if m.group(2) else None,
                                      int(m.group(3)), m.group(4), int(m.group(5)), m.group(6),
                                      m.group(7).strip()))
            elif m := _TESTS_VERSION.match(line):
                facts["tests_version"] = m.group(1)
                if m.group(2):
                    facts["nccl_version"] = nccl_version_from_code(int(m.group(2)))
            elif m := _PROGRAM.match(line):
                facts["program"] = m.group(1)
            elif line.lstrip("# ").startswith("nThread"):
                once.setdefault("'# nThread' configuration line", []).append(n)
                for key, pattern in _CONFIG.items():
                    if c := re.search(pattern, line):
                        facts[key] = int(c.group(1))
            elif m := _OOB.match(line):
                facts["out_of_bounds"], in_table = int(m.group(1)), False
                once.setdefault("'Out of bounds values' summary line", []).append(n)
            elif m := _AVG.match(line):
                once.setdefault("'Avg bus bandwidth' summary line", []).append(n)
                facts["avg_busbw_gbps"] = _number(m.group(1), "Avg bus bandwidth", n, line)
                in_table = False
            elif m := _ERROR.match(line):
                errors.append(m.group(1).strip()[:200])
            continue
        if line[0].isdigit():
            rows.append(_row(line, layout or _DEFAULT, n))
            row_labels[label or ""] = None
            in_table = True
            continue
        if in_table:
            raise ParseError(f"nccl-tests: line {n}: expected a size row, a '#' line or an NCCL "
                             f"log line inside the results table, got {line[:100]!r}")
    if len(row_labels) > 1:
        raise ParseError(f"nccl-tests: size rows from {len(row_labels)} tasks "
                         f"({', '.join(k or '(no label)' for k in row_labels)}): each task ran "
                         "its own test (nccl-tests built without MPI?); judge one task's output")
    for what, lines in once.items():
        if len(lines) > 1:
            raise ParseError(f"nccl-tests: {what} printed {len(lines)} times (lines "
                             f"{', '.join(map(str, lines[:5]))}): two runs in one output are "
                             "not one measurement")
    _refuse_duplicates(rows, ranks)
    if not rows:
        why = (errors + warnings)[:1]
        raise ParseError("nccl-tests: no size rows (no line of size, count, type, ... busbw)"
                         + (f"; the output says: {why[0]}" if why else "")
                         + ": the test did not run or its output was cut before the table")
    return NcclTestsRun(rows=tuple(rows), source_format="text", ranks=tuple(ranks),
                        error_column=(layout or _DEFAULT).err_name, elided=elided,
                        task_labels=tuple(labels), nccl_warnings=tuple(warnings),
                        errors=tuple(errors), **facts)


def _merge_results(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON object hook: nccl-tests opens a new "results" list per test it runs (-d all).
    A key given twice in a size row or one of its sides would silently replace a figure
    (a duplicated line): refused."""
    out: dict[str, Any] = {}
    twice = []
    for key, value in pairs:
        if key == "results" and isinstance(out.get(key), list) and isinstance(value, list):
            out[key] = out[key] + value
        else:
            if key in out:
                twice.append(key)
            out[key] = value
    if twice and _MEASURED_KEYS & out.keys():
        raise ParseError(f"nccl-tests JSON: key(s) {', '.join(map(repr, twice))} appear twice "
                         "in one result object (duplicated output?)")
    return out


_MEASURED_KEYS = frozenset({"size", "count", "bus_bw", "alg_bw", "time", "cpu_time", "nwrong"})


def _jfloat(obj: dict[str, Any], key: str, where: str, negative: bool = False) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"nccl-tests JSON: {where}.{key} is missing or not a number "
                         f"(got {str(value)[:40]!r}; nccl-tests writes \"nan\" where it "
                         "measured nothing)")
    if isinstance(value, int) and abs(value) > 1e300:
        value = math.inf  # an integer beyond any float: no figure
    if not math.isfinite(value):
        raise ParseError(f"nccl-tests JSON: {where}.{key} {str(value)[:40]} is not a finite "
                         "number")
    if value < 0 and not negative:
        raise ParseError(f"nccl-tests JSON: {where}.{key} {value!r} is negative: not a "
                         "measurement")
    return float(value)


def _jint(value: Any, where: str, default: int | None = None) -> int:
    """An integer field: an int, or an integral float (JSON has one number type)."""
    if value is None and default is not None:
        return default
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,20}", value.strip()):
        return int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            (isinstance(value, float) and (not math.isfinite(value) or value != int(value))):
        raise ParseError(f"nccl-tests JSON: {where} is not an integer (got {value!r})")
    return int(value)


def _jside(row: dict[str, Any], key: str, where: str) -> NcclMeasurement | None:
    side = row.get(key)
    if side is None:
        return None
    if not isinstance(side, dict):
        raise ParseError(f"nccl-tests JSON: {where}.{key} is not an object")
    w = f"{where}.{key}"
    nwrong = side.get("nwrong")
    if nwrong is not None and (isinstance(nwrong, bool) or not isinstance(nwrong, int | float)
                               or (isinstance(nwrong, float) and not math.isfinite(nwrong))
                               or nwrong < 0 or nwrong != int(nwrong)):
        raise ParseError(f"nccl-tests JSON: {w}.nwrong is not a count (got {nwrong!r})")
    return NcclMeasurement(
        time_us=_jfloat(side, "time" if "time" in side else "cpu_time", w),
        algbw_gbps=_jfloat(side, "alg_bw", w), busbw_gbps=_jfloat(side, "bus_bw", w),
        wrong=None if nwrong is None else int(nwrong))


def _jrank(d: dict[str, Any], i: int) -> NcclRank:
    where = f"config.devices[{i}]"
    group = d.get("group")
    return NcclRank(_jint(d.get("rank"), f"{where}.rank"),
                    None if group is None else _jint(group, f"{where}.group"),
                    _jint(d.get("pid"), f"{where}.pid", 0), str(d.get("hostname", "")),
                    _jint(d.get("device"), f"{where}.device", -1),
                    str(d.get("device_hex", "")), str(d.get("device_info", "")))


def _parse_json(text: str) -> NcclTestsRun:
    try:
        # NaN and Infinity decode (Python's json): _jfloat refuses them naming the field
        doc = json.loads(text, object_pairs_hook=_merge_results)
    except json.JSONDecodeError as exc:
        raise ParseError(f"nccl-tests JSON: not valid JSON at line {exc.lineno} column "
                         f"{exc.colno}: {exc.msg} (truncated file: did the run finish?)") from exc
    except RecursionError:
        raise ParseError("nccl-tests JSON: nested too deeply to be nccl-tests output") from None
    except ValueError as exc:  # an integer longer than Python converts
        raise ParseError(f"nccl-tests JSON: unreadable value: {str(exc)[:80]}") from None
    if not isinstance(doc, dict):
        raise ParseError("nccl-tests JSON: the top level is not an object")
    results = doc.get("results")
    if not isinstance(results, list) or not results:
        raise ParseError("nccl-tests JSON: 'results' is missing or empty (no size rows)")
    rows = []
    for i, r in enumerate(results):
        where = f"results[{i}]"
        if not isinstance(r, dict):
            raise ParseError(f"nccl-tests JSON: {where} is not an object")
        if "size" not in r or "count" not in r or "type" not in r:
            raise ParseError(f"nccl-tests JSON: {where}: size, count or type missing")
        root = str(r.get("root", "")).strip()
        rows.append(NcclRow(size_bytes=_jint(r["size"], f"{where}.size"),
                            count=_jint(r["count"], f"{where}.count"),
                            type=str(r["type"]), redop=str(r.get("redop", "")).strip(),
                            root=_jint(root, f"{where}.root") if root else None,
                            out_of_place=_jside(r, "out_of_place", where),
                            in_place=_jside(r, "in_place", where), line=0))
    raw_config = doc.get("config")
    config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
    raw_devices = config.get("devices")
    devices: list[Any] = raw_devices if isinstance(raw_devices, list) else []
    ranks = tuple(_jrank(d, i) for i, d in enumerate(devices) if isinstance(d, dict))
    _refuse_duplicates(rows, list(ranks))
    oob, avg = doc.get("out_of_bounds"), doc.get("average_bus_bandwidth")
    code = doc.get("nccl_version")

    def cfg(key: str) -> int | None:
        v = config.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    errs = doc.get("errors")
    return NcclTestsRun(
        rows=tuple(rows), source_format="json",
        tests_version=f"json file version {doc.get('version')}",
        nccl_version=nccl_version_from_code(code)
        if isinstance(code, int) and not isinstance(code, bool) and code >= 0 else None,
        n_threads=cfg("nthreads"), n_gpus=cfg("ngpus"), min_bytes=cfg("minimum_bytes"),
        max_bytes=cfg("maximum_bytes"), warmup_iters=cfg("warmup_iters"),
        iters=cfg("iterations"), validation=cfg("validation"), ranks=ranks,
        out_of_bounds=_jint(oob["count"], "out_of_bounds.count")
        if isinstance(oob, dict) and "count" in oob else None,
        avg_busbw_gbps=_jfloat(avg, "bandwidth", "average_bus_bandwidth")
        if isinstance(avg, dict) else None,
        errors=tuple(str(e) for e in errs) if isinstance(errs, list) else ())


def parse_nccl_tests(text: str) -> NcclTestsRun:
    """Parse nccl-tests stdout (any version 2.x) or its ``-J`` JSON file; ParseError naming
    the line and what was expected for anything else, and for an output without size rows."""
    if not text.strip():
        raise ParseError("nccl-tests: the output is empty (no size rows)")
    if text.lstrip().startswith("{"):
        return _parse_json(text)
    return _parse_text(text)
