"""Parser for nccl-tests output (``all_reduce_perf``, ``all_gather_perf``, ...): the text
table on stdout, and the JSON file newer versions write with ``-J <file>``.

Formats, from NVIDIA/nccl-tests ``src/common.cu`` and ``src/util.cu`` and its
``doc/PERFORMANCE.md`` (busbw's definition):

* Header lines start with ``#``: ``# nccl-tests version 2.18.0 nccl-headers=22105
  nccl-library=22105`` (2.18 and later; NCCL's version code is major*10000+minor*100+patch),
  ``# Collective test starting: all_reduce_perf`` (2.17.3+), ``# nThread 1 nGpus 8 minBytes 8
  maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 ... validation: 1``, one
  device line per rank: ``#  Rank  0 Group  0 Pid 1234 on host device  0 [0000:1b:00] NVIDIA
  H100 80GB HBM3`` (no ``Group`` and ``[0x1b]`` bus ids before 2.13.x, no ``Pid`` in 1.x);
  ``step: 1048576(bytes)`` instead of ``(factor)`` for ``-i``; ``# Reducing maxBytes to N due
  to memory limitation`` when GPU memory cut the sweep short (all read into the record).
* The column header ``# size count type redop root time algbw busbw #wrong time algbw busbw
  #wrong`` (out-of-place, then in-place); versions before 2.13 print ``error`` (the largest
  absolute deviation from the expected result, ``%5.0le``) instead of ``#wrong`` (a count,
  ``%g``), no ``root`` column, and no ``redop`` for all_gather (alltoall rows leave it
  blank). ``N/A`` replaces the error cell when a side is not validated (``-c 0``, or
  alltoall in-place). ``-S`` appends a timestamp, ``-I`` four per-iteration columns per
  side: columns are mapped by the header.
* Size rows: bytes, elements, type, [redop], [root], then the measurements. Times in us,
  bandwidths in GB/s (10^9 bytes/s).
* Footer: ``# Out of bounds values : 0 OK`` (``2 FAILED``: results beyond nccl-tests' bound)
  and ``# Avg bus bandwidth    : 68.4048``, the mean busbw over EVERY size of the sweep
  (tiny, latency-bound sizes included).
* nccl-tests 1.x (tag v1.0.0, before the ``#`` prefix of v2.0.0, 2019): ``nThread ...`` and
  the footer lines without ``#``, the column header ``# bytes N type op time algbw busbw res
  ...`` (``res``: the largest deviation, ``%7.0le``), times in ms (read here as us, x1000),
  no units line. Captures that replaced every leading ``#`` with a space are read the same
  way: a header, units, rank, configuration or footer line is recognised with or without
  its ``#``.
* JSON (``-J``, 2.17.3+): its fields and rules are ``parsers.nccl_tests.json_format``'s.

Every figure must be a finite number (``nan``, ``inf``, ``1e400`` are ParseErrors naming
the field and line) and times, bandwidths and counts non-negative. A run prints each size
row, each rank, its configuration line, its column header and its summary lines once: a
second one (two runs concatenated) is a ParseError, never extra evidence.

Launchers' line labels are removed: ``srun --label`` (``0: ``) and Open MPI
``--tag-output`` (``[1,0]<stdout>:``); rows from more than one task are refused (each task
ran its own test: nccl-tests was not built with MPI). The launchers' own messages
(``parsers.launcher_text``: Open MPI help blocks, ``srun: error:`` lines) are never read as
rows: a fatal one is a ParseError quoting it as a launch error, a warning is skipped.
NCCL's own log lines (``host:pid:tid [0] NCCL INFO ...``) may be interleaved anywhere; a
``...`` line (elided output) is noted. Inside the table, any other line is an error naming
it. An output without size rows is an error, never an empty result.

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

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from rackgate.parsers import ParseError
from rackgate.parsers.launcher_text import (
    launcher_lines,
    launcher_messages,
    mention,
    raise_if_fatal,
)
from rackgate.parsers.nccl_tests.json_format import parse_nccl_tests_json
from rackgate.parsers.nccl_tests.record import (
    NcclMeasurement,
    NcclRank,
    NcclRow,
    NcclTestsRun,
    nccl_version_from_code,
    refuse_duplicates,
)

_MAX_FIGURE = 32  # "%7.2f" / "%g" of a time or bandwidth: no figure is longer
_WORD = re.compile(r"[a-z][a-z0-9_]{0,15}", re.ASCII)  # a type ("bfloat16") or redop ("sum")
_SRUN = re.compile(r"^(\d+):\s?(.*)$")
_MPI_TAG = re.compile(r"^\[(\d+),(\d+)\]<std(?:out|err)>:\s?(.*)$")
_NCCL_LOG = re.compile(r"\bNCCL (INFO|WARN|TRACE|ABORT)\b")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+\S*)")
# matched on a header line without its '#' (1.x prints some lines without it)
_TESTS_VERSION = re.compile(r"^nccl-tests version (\S+)(?:.*nccl-library=(\d+))?")
_PROGRAM = re.compile(r"^Collective test starting:\s*(\S+)")
_RANK = re.compile(r"^Rank\s+([0-9]{1,10})\s+(?:Group\s+([0-9]{1,10})\s+)?"
                   r"(?:Pid\s+([0-9]{1,10})\s+)?on\s+(\S+)\s+"
                   r"device\s+([0-9]{1,10})\s+\[([^\]]*)\]\s*(.*)$")
_OOB = re.compile(r"^Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"^Avg bus bandwidth\s*:\s*(\S+)")
_ERROR = re.compile(r"^error:\s*(.+)$")  # only with its '#'
_HEADS = ({"size", "count", "busbw"}, {"bytes", "N", "busbw"})  # 2.x, 1.x
_CONFIG = {"n_threads": r"nThread (\d+)", "n_gpus": r"nGpus (\d+)",
           "min_bytes": r"minBytes (\d+)", "max_bytes": r"maxBytes (\d+)",
           "warmup_iters": r"warmup iters: (\d+)", "iters": r"(?<!warmup )(?<!agg )iters: (\d+)",
           "validation": r"validation: (\d+)"}
_STEP = re.compile(r"step: (\d+)\((factor|bytes)\)")
_REDUCED = re.compile(r"^Reducing maxBytes to (\d+)")  # GPU memory cut the sweep
_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}$"), re.compile(r"^\d{2}:\d{2}:\d{2}$")
_TIME_NAMES = ("time", "cputime")
_ERR_NAMES = ("#wrong", "error", "res")  # res: 1.x


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
        value = float(tok) if len(tok) <= _MAX_FIGURE else math.nan
    except ValueError:
        raise ParseError(f"nccl-tests: line {n}: {what} {tok[:40]!r} is not a number "
                         f"(expected a size row: {raw.strip()[:100]!r})") from None
    if not math.isfinite(value):
        raise ParseError(f"nccl-tests: line {n}: {what} {tok[:40]!r} is not a finite number "
                         f"as nccl-tests prints it (%.2f, %g: at most {_MAX_FIGURE} characters): "
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
    time_scale: float = 1.0  # to us: 1000 for 1.x, which prints ms


_DEFAULT = _Layout(4, 2, 0, 1, 2, 3, "#wrong", False)


def _is_header(tokens: list[str]) -> bool:
    names = {t.lstrip("#") for t in tokens}
    return any(head <= names for head in _HEADS)


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
                         "timestamp" in names[starts[1]:], 1000.0 if "bytes" in names else 1.0)
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
    return NcclMeasurement(time_us=_number(vals[lay.time], f"{where} time", n, raw)
                           * lay.time_scale,
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
    if any(not _WORD.fullmatch(w) for w in (head[2], redop) if w):
        raise ParseError(f"nccl-tests: line {n}: type {head[2][:40]!r} / redop {redop[:40]!r} "
                         f"is no name nccl-tests prints: {text.strip()[:100]!r}")
    return NcclRow(
        size_bytes=_integer(head[0], "size", n, text), count=_integer(head[1], "count", n, text),
        type=head[2], redop=redop, root=root,
        out_of_place=_side(vals[:lay.width], lay, n, text, "out-of-place"),
        in_place=_side(vals[lay.width:], lay, n, text, "in-place"), line=n)


def _header_line(body: str, n: int, facts: dict[str, Any], ranks: list[NcclRank],
                 once: dict[str, list[int]]) -> Literal["fact", "footer"] | None:
    """Read one header or footer line (its '#' removed) into ``facts``/``ranks``; None
    when it is none of them."""
    if m := _RANK.match(body):
        ranks.append(NcclRank(int(m.group(1)), int(m.group(2)) if m.group(2) else None,
                              int(m.group(3)) if m.group(3) else None, m.group(4),
                              int(m.group(5)), m.group(6), m.group(7).strip()))
    elif m := _TESTS_VERSION.match(body):
        facts["tests_version"] = m.group(1)
        if m.group(2):
            facts["nccl_version"] = nccl_version_from_code(int(m.group(2)))
    elif m := _PROGRAM.match(body):
        facts["program"] = m.group(1)
    elif body.startswith("nThread"):
        once.setdefault("'# nThread' configuration line", []).append(n)
        for key, pattern in _CONFIG.items():
            if c := re.search(pattern, body):
                facts[key] = int(c.group(1))
        if c := _STEP.search(body):
            facts[f"step_{c.group(2)}"] = int(c.group(1))
    elif m := _REDUCED.match(body):
        facts["reduced_max_bytes"] = int(m.group(1))
    elif m := _OOB.match(body):
        facts["out_of_bounds"] = int(m.group(1))
        once.setdefault("'Out of bounds values' summary line", []).append(n)
        return "footer"
    elif m := _AVG.match(body):
        once.setdefault("'Avg bus bandwidth' summary line", []).append(n)
        facts["avg_busbw_gbps"] = _number(m.group(1), "Avg bus bandwidth", n, body)
        return "footer"
    else:
        return None
    return "fact"


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
    stripped = [_strip_label(raw)
                for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    launched = launcher_messages([line for _, line in stripped])
    raise_if_fatal(launched, "nccl-tests")
    launcher = launcher_lines(launched)
    for n, (label, line) in enumerate(stripped, 1):
        if label is not None:
            labels[label] = None
        if not line or n in launcher:
            continue
        if "NCCL " in line and _NCCL_LOG.search(line):
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
        hashed = line.startswith("#")
        body = line.lstrip("#").strip() if hashed else line
        tokens = body.split()
        if tokens and _is_header(tokens) and (hashed or tokens[0] in ("size", "bytes")):
            layout, in_table = _layout(tokens, n), True
            once.setdefault("column header", []).append(n)
            continue
        if not hashed and (all(t[0] + t[-1] == "()" for t in tokens)
                           or set(tokens) == {"out-of-place", "in-place"}):
            continue  # the units line, or the sides' titles, without their '#'
        kind = _header_line(body, n, facts, ranks, once)
        if kind == "footer":
            in_table = False
        if hashed and kind is None and (m := _ERROR.match(body)):
            errors.append(m.group(1).strip()[:200])
        if hashed or kind is not None:
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
    refuse_duplicates(rows, ranks)
    if not rows:
        why = (errors + warnings)[:1]
        raise ParseError("nccl-tests: no size rows (no line of size, count, type, ... busbw)"
                         + (f"; the output says: {why[0]}" if why else mention(launched))
                         + ": the test did not run or its output was cut before the table")
    return NcclTestsRun(rows=tuple(rows), source_format="text", ranks=tuple(ranks),
                        error_column=(layout or _DEFAULT).err_name, elided=elided,
                        task_labels=tuple(labels), nccl_warnings=tuple(warnings),
                        errors=tuple(errors), **facts)


def parse_nccl_tests(text: str) -> NcclTestsRun:
    """Parse nccl-tests stdout (any version, 1.x included) or its ``-J`` JSON file;
    ParseError naming the line and what was expected for anything else, for an output
    without size rows, and for a launcher's fatal message (quoted)."""
    if not text.strip():
        raise ParseError("nccl-tests: the output is empty (no size rows)")
    if text.lstrip().startswith("{"):
        return parse_nccl_tests_json(text)
    try:
        return _parse_text(text)
    except ParseError:
        raise
    except ValueError as exc:  # int() of more digits than Python converts (4,300)
        raise ParseError(f"nccl-tests: unreadable figure: {str(exc)[:80]}") from None


__all__ = ["NcclMeasurement", "NcclRank", "NcclRow", "NcclTestsRun", "nccl_version_from_code",
           "parse_nccl_tests"]
