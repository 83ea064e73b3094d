r"""Prometheus textfiles that are always valid: label values escaped as the text exposition
format (version 0.0.4) says, and every file checked, before it replaces the old one, with
the rules ``promtool check metrics`` applies to what rackgate writes. node_exporter's
textfile collector drops a file it cannot parse whole, every series in it, so a bad
label must stop the write, never reach the file.

The format escapes three characters in a label value (backslash, double quote, line
feed, as ``\\``, ``\"`` and ``\n``) and has no escape for any other: promtool refuses
``\r`` or ``\t`` as an invalid escape sequence. A carriage return written raw passes
promtool but splits the sample for every reader that takes CR as a line end (universal
newlines, ``str.splitlines``), so a label value holding a control character (C0, DEL,
C1, U+2028, U+2029) is refused, as is one that is not UTF-8 (a lone surrogate from a
JSON ``\ud800`` escape): :func:`label_problem` says which.

:func:`check_text` is the gate: every line a ``# HELP``, ``# TYPE`` or a sample; metric
and label names as the format defines them, ``__name__`` reserved, no label twice in a
sample; only the three escapes; valid UTF-8; a value Go's ParseFloat reads and no
timestamp (the textfile collector refuses them); each metric's HELP and TYPE once, before
its samples, which are together (promtool's "no help text" is a lint finding); no series
twice (node_exporter's registry refuses a scrape with a duplicate). promtool's naming
lints (snake_case, units, ``_total``) concern the metric names, which are constants of
the code: the tests run promtool over them.

>>> print(escape_label('say "hi"'))
say \"hi\"
>>> label_problem("rack\r7")
'holds the control character U+000D, which a textfile cannot carry'
>>> check_text('# HELP m x\n# TYPE m gauge\nm{a="1"} 1\nm{a="1"} 2\n')
Traceback (most recent call last):
...
rackgate.exposition.ExpositionError: line 4: m{a="1"} is listed twice
"""

from __future__ import annotations

import re
from pathlib import Path

from rackgate.store.evidence import atomic_write

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = frozenset({"gauge", "counter", "untyped"})  # the kinds whose samples carry the name
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_HELP = re.compile(rf"# HELP ({_NAME}) (.*)\Z")
_TYPE = re.compile(rf"# TYPE ({_NAME}) (\S+)\Z")
_SAMPLE = re.compile(rf"({_NAME})(?:\{{(.*)\}})? (\S+)\Z")
_PAIR = re.compile(r'([^=",{}\s]+)="((?:[^"\\]|\\.)*)"(,|\Z)')
_FLOAT = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Inf)\Z|NaN\Z")
_ESCAPE = re.compile(r"\\(.)")
# Line ends to other readers: CR, NEL and the Unicode separators (str.splitlines splits at
# each); every other C0 and C1 control (Unicode category Cc) and DEL is refused as well. A
# line feed in a value is escaped, never written raw: it is allowed here.
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


class ExpositionError(ValueError):
    """Text that is not a valid textfile: the message names the line and the rule."""


def escape_label(value: str) -> str:
    """A label value as the text format writes it between double quotes (check it first
    with :func:`label_problem`)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text as the format writes it (backslash and line feed escaped)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def label_problem(value: str) -> str | None:
    """Why ``value`` cannot be a label value of a textfile (None when it can)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"is not valid UTF-8 (U+{ord(value[exc.start]):04X} at {exc.start} is a "
                f"lone surrogate)")
    bad = _CONTROL.search(value)
    if bad is not None:
        return (f"holds the control character U+{ord(bad.group()):04X}, which a textfile "
                f"cannot carry")
    return None


def _unescape(text: str, allowed: str, where: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(1) not in allowed:
            raise ExpositionError(f"{where}: invalid escape sequence '\\{m.group(1)}'")
        return {"\\": "\\", '"': '"', "n": "\n"}[m.group(1)]

    if (len(text) - len(text.rstrip("\\"))) % 2:
        raise ExpositionError(f"{where}: a backslash ends the text")
    return _ESCAPE.sub(one, text)


_VALUE = r'"([^"\\]*(?:\\[\\"n][^"\\]*)*)"'  # only the three escapes, unrolled'
_LABELS = re.compile(rf"(?:[a-zA-Z_][a-zA-Z0-9_]*={_VALUE}(?:,(?=.)|\Z))*\Z")
_LABEL = re.compile(rf"([a-zA-Z_][a-zA-Z0-9_]*)={_VALUE}")


def _labels(text: str, where: str) -> tuple[tuple[str, str], ...]:
    """The sample's labels as (name, value as written), sorted (the escaping is one to one,
    so equal written values are equal values); ExpositionError naming what is wrong."""
    if _LABELS.match(text):
        pairs = _LABEL.findall(text)
        names = [name for name, _ in pairs]
        if "__name__" in names:
            raise ExpositionError(f"{where}: label name '__name__' is reserved")
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise ExpositionError(f"{where}: label {', '.join(twice)} twice")
        return tuple(sorted(pairs))
    _label_error(text, where)
    raise ExpositionError(f"{where}: cannot read the labels from {text[:60]!r}")


def _label_error(text: str, where: str) -> None:
    """Raise the ExpositionError that says what is wrong with the labels ``text``."""
    pairs: dict[str, str] = {}
    at = 0
    while at < len(text):
        m = _PAIR.match(text, at)
        if m is None:
            raise ExpositionError(f"{where}: cannot read the labels from {text[at:at + 60]!r}")
        name, raw, comma = m.groups()
        if not LABEL_NAME.fullmatch(name):
            raise ExpositionError(f"{where}: {name!r} is not a label name")
        if name == "__name__":
            raise ExpositionError(f"{where}: label name '__name__' is reserved")
        if name in pairs:
            raise ExpositionError(f"{where}: label {name} twice")
        pairs[name] = _unescape(raw, '\\"n', f"{where}: label {name}")
        at = m.end()
        if comma and at == len(text):
            raise ExpositionError(f"{where}: a comma ends the labels")


def check_text(text: str) -> None:
    """ExpositionError naming the first line that breaks a rule (see the module)."""
    if not text.endswith("\n"):
        raise ExpositionError("the text does not end with a line feed")
    problem = label_problem(text)  # the whole text at once; the line is found after
    if problem:
        at = next(i for i, line in enumerate(text.split("\n"), 1) if label_problem(line))
        raise ExpositionError(f"line {at} {problem}")
    helped: set[str] = set()
    typed: dict[str, str] = {}
    done: set[str] = set()  # metrics whose samples ended (another metric came after)
    series: set[tuple[str, tuple[tuple[str, str], ...]]] = set()  # values as written
    current = ""
    for number, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {number}"
        if line.startswith("#"):
            m = _HELP.match(line) or _TYPE.match(line)
            if m is None:
                raise ExpositionError(f"{where}: {line[:80]!r} is not a HELP or TYPE line")
            name = m.group(1)
            if name in done or (name in typed and line.startswith("# TYPE")) or (
                    name in helped and line.startswith("# HELP")):
                raise ExpositionError(f"{where}: a second {line[2:6]} line for {name}, or "
                                      f"one after its samples")
            if line.startswith("# HELP"):
                _unescape(m.group(2), "\\n", where)
                helped.add(name)
            elif m.group(2) not in TYPES:
                raise ExpositionError(f"{where}: type {m.group(2)!r} of {name} is not one "
                                      f"of {', '.join(sorted(TYPES))}")
            else:
                typed[name] = m.group(2)
            if current and current != name:
                done.add(current)
            current = name
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise ExpositionError(f"{where}: {line[:80]!r} is not <name>{{labels}} <value> "
                                  f"(no timestamp)")
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        if name not in helped or name not in typed:
            raise ExpositionError(f"{where}: {name} has no HELP and TYPE before its samples")
        if name in done or current != name:
            raise ExpositionError(f"{where}: a sample of {name} apart from its others")
        if not _FLOAT.match(value):
            raise ExpositionError(f"{where}: value {value!r} of {name} is not a number")
        key = (name, _labels(labels, where))
        if key in series:
            raise ExpositionError(f"{where}: {name}{{{labels}}} is listed twice")
        series.add(key)


def write_textfile(path: Path, text: str, mode: int = 0o644) -> None:
    """``text`` checked (:func:`check_text`: ExpositionError, and the old file stays),
    then written to ``path`` atomically (:func:`~rackgate.store.evidence.atomic_write`): a
    temporary ``.<name>.*.tmp`` in the same directory (which the textfile collector's
    ``*.prom`` never matches), synced, made readable by node_exporter's own user
    (``mode``), renamed over ``path``. OSError when it cannot be written."""
    check_text(text)
    atomic_write(path, text.encode("utf-8"), mode=mode)
