"""Degraded evidence for the property tests of issue 11 (the ``TestDegraded...`` classes of
the family test modules under tests/unit/checks/) and issue 28
(tests/unit/test_fuzz_parsers.py, bench/fuzz_parsers.py).

From one healthy fixture, three kinds of damage, each drawn by hypothesis:

* a number the judge reads replaced by a non-finite one (``NON_FINITE``);
* a line the judge reads printed twice;
* the output cut anywhere before the end of the last line the judge reads.

A parser must answer each with a record or a ParseError, never another exception, and the
judge must never pass what comes out (``outcome`` is ``fail`` or ``error``). Each test says
which numbers and lines its judge reads: output the judge does not read (a fixture's other
sensors, fio's job options) can be damaged without changing any verdict, so it is not
drawn.

Issue 28's mutators (:func:`mutate`, one ``random.Random`` draws the place and the form, so
hypothesis and a plain loop share them), each on a line or number that ``lines`` or
``numbers`` picks:

* ``duplicate``: the line printed twice in a row;
* ``notation``: the number in a notation the tool does not print (:func:`notations`:
  ``0x03``, ``3.``, ``3e0``, ``+3``, leading zeros, Arabic-Indic or full-width digits);
* ``bom``: a byte-order mark at the start of the text, or of the line;
* ``cr``: CRLF line endings, or a carriage return inside the line;
* ``long``: 100,000 characters of one kind inserted into the line (``LONG``).

>>> def refuse(text):
...     raise ParseError("not the tool's output")
>>> outcome(refuse, print, "x")
<Status.ERROR: 4>
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from rackgate.model import Status
from rackgate.parsers import ParseError

NON_FINITE = ("nan", "inf", "-inf", "1e400", "NaN", "Infinity", "-Infinity", "9" * 400)
BAD = (Status.FAIL, Status.ERROR)


def outcome(parse: Callable[[str], Any], judge: Callable[[Any], Any], text: str) -> Status:
    """The judged status of ``text``; a ParseError is ``error`` (as judge_evidence makes it),
    any other exception propagates and fails the test."""
    try:
        record = parse(text)
    except ParseError:
        return Status.ERROR
    status: Status = judge(record).status
    return status


def spans(text: str, pattern: str) -> list[tuple[int, int]]:
    """Where group 1 of each match of ``pattern`` lies (MULTILINE)."""
    found = [m.span(1) for m in re.finditer(pattern, text, re.MULTILINE)]
    assert found, f"no {pattern!r} in the fixture: the test would draw nothing"
    return found


def non_finite(text: str, pattern: str) -> st.SearchStrategy[str]:
    """``text`` with one number (group 1 of ``pattern``) replaced by a non-finite token."""
    where = spans(text, pattern)
    return st.builds(lambda span, token: text[:span[0]] + token + text[span[1]:],
                     st.sampled_from(where), st.sampled_from(NON_FINITE))


def duplicated(text: str, pattern: str) -> st.SearchStrategy[str]:
    """``text`` with one line matching ``pattern`` printed twice in a row."""
    lines = text.split("\n")
    judged = [i for i, line in enumerate(lines) if re.search(pattern, line)]
    assert judged, f"no line matches {pattern!r}: the test would draw nothing"
    return st.sampled_from(judged).map(
        lambda i: "\n".join([*lines[:i + 1], lines[i], *lines[i + 1:]]))


def truncated(text: str, end: int) -> st.SearchStrategy[str]:
    """``text`` cut anywhere before ``end``, the end of the last line the judge reads."""
    assert 0 < end <= len(text)
    return st.integers(min_value=0, max_value=end - 1).map(lambda cut: text[:cut])


def degraded(text: str, numbers: str | None, lines: str, end: int) -> st.SearchStrategy[str]:
    kinds = [duplicated(text, lines), truncated(text, end)]
    if numbers is not None:
        kinds.append(non_finite(text, numbers))
    return st.one_of(*kinds)


LONG = 100_000
MUTATORS = ("duplicate", "notation", "bom", "cr", "long")
_DIGITS = ("\u0660", "\uff10")  # the zeros of the Arabic-Indic and full-width digits


def _digits(token: str, zero: str) -> str:
    return "".join(chr(ord(zero) + int(c)) if c.isascii() and c.isdigit() else c
                   for c in token)


def notations(token: str) -> list[str]:
    """Other notations of the number ``token`` (decimal, decimal with a fraction, or
    ipmitool's ``03h``), none of which the tools print.

    >>> print(ascii(notations("3")))
    ['0x3', '0x03', '3.', '3e0', '+3', '003', '\\u0663', '\\uff13']
    >>> notations("03h")[:3], notations("1.5")[:4]
    (['0x03', '3h', '003h'], ['1.50', '1.5e0', '+1.5', '01.5'])
    """
    if m := re.fullmatch(r"([0-9A-Fa-f]{2})h", token):
        forms = [f"0x{m.group(1)}", f"{int(m.group(1), 16):X}h", f"0{token}"]
    elif re.fullmatch(r"-?[0-9]+", token):
        sign, digits = ("-", token[1:]) if token[0] == "-" else ("", token)
        forms = [f"{sign}0x{int(digits):x}", f"{sign}0x{int(digits):02x}", f"{token}.",
                 f"{token}e0", f"{sign or '+'}{digits}", f"{sign}00{digits}"]
    elif re.fullmatch(r"-?[0-9]+\.[0-9]+", token):
        sign, digits = ("-", token[1:]) if token[0] == "-" else ("", token)
        forms = [f"{token}0", f"{token}e0", f"{sign or '+'}{digits}", f"{sign}0{digits}"]
    else:
        raise AssertionError(f"{token!r} is no number the notation mutator knows")
    return forms + [_digits(token, zero) for zero in _DIGITS]


def _line_spans(text: str, pattern: str) -> list[tuple[int, int]]:
    """Where each line (without its newline) that ``pattern`` finds lies."""
    out, at = [], 0
    for line in text.split("\n"):
        if re.search(pattern, line):
            out.append((at, at + len(line)))
        at += len(line) + 1
    if not out and not text.strip():
        return [(0, len(text))]  # an output that is empty (or blank): damage that
    assert out, f"no line matches {pattern!r}: the mutator would draw nothing"
    return out


def mutate(kind: str, text: str, lines: str, numbers: Sequence[str],
           rnd: random.Random, long: int = LONG) -> str:
    """``text`` damaged by one mutator of ``MUTATORS`` (see the module docstring), on a line
    ``lines`` finds or a number (group 1) one of ``numbers`` finds; ``long`` characters
    for the long line."""
    start, end = rnd.choice(_line_spans(text, lines))
    line = text[start:end]
    if kind == "duplicate":
        return text[:end] + "\n" + line + text[end:]
    if kind == "notation":
        where = [m.span(1) for p in numbers for m in re.finditer(p, text, re.MULTILINE)
                 if m.group(1)]
        if not where:  # a format with no number the judge reads: damage the line instead
            return mutate("bom", text, lines, numbers, rnd, long)
        a, b = rnd.choice(where)
        return text[:a] + rnd.choice(notations(text[a:b])) + text[b:]
    if kind == "bom":
        return "\ufeff" + text if rnd.random() < 0.2 else text[:start] + "\ufeff" + text[start:]
    if kind == "cr":
        if rnd.random() < 0.3:
            return text.replace("\n", "\r\n")
        at = rnd.randint(start, end)
        return text[:at] + "\r" + text[at:]
    if kind == "long":
        at = rnd.randint(start, end)
        return text[:at] + rnd.choice(" x9|,:=\"<-") * long + text[at:]
    raise AssertionError(f"no mutator {kind!r}")


def mutants(text: str, lines: str, numbers: Sequence[str] = (),
            long: int = LONG) -> st.SearchStrategy[str]:
    """``text`` damaged by any of ``MUTATORS``, drawn by hypothesis."""
    return st.builds(lambda kind, rnd: mutate(kind, text, lines, numbers, rnd, long),
                     st.sampled_from(MUTATORS), st.randoms(use_true_random=False))
