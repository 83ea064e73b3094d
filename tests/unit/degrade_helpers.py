"""Degraded evidence for the property tests of issue 11 (tests/unit/test_degraded_*.py).

From one healthy fixture, three kinds of damage, each drawn by hypothesis:

* a number the judge reads replaced by a non-finite one (``NON_FINITE``);
* a line the judge reads printed twice;
* the output cut anywhere before the end of the last line the judge reads.

A parser must answer each with a record or a ParseError, never another exception, and the
judge must never pass what comes out (``outcome`` is ``fail`` or ``error``). Each test says
which numbers and lines its judge reads: output the judge does not read (a fixture's other
sensors, fio's job options) can be damaged without changing any verdict, so it is not
drawn.

>>> def refuse(text):
...     raise ParseError("not the tool's output")
>>> outcome(refuse, print, "x")
<Status.ERROR: 4>
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
