"""Marks of damaged evidence: what no tool rackgate reads prints.

:data:`DAMAGE`, the characters no tool prints inside a line of its text output: C0 and C1
control characters but the tab (a carriage return inside a line among them),
the soft hyphen, the zero-width and direction marks, the line and paragraph separators,
the byte-order mark and lone surrogates. A line holding one was damaged on its way (or
written by something else than the tool); parsers that meet one refuse the line rather
than read around it, since the damage may sit in a name or a number the judge reads.

:func:`oversized`, for JSON: a property name or a string longer than the tool writes (a
damaged name hides the property the judge reads as surely as a missing one);
:func:`json_float`, a number longer than a tool prints.

>>> bool(DAMAGE.search("PSU1 Status | 01h")), bool(DAMAGE.search("\\ufeffPSU1 Status"))
(False, True)
"""

from __future__ import annotations

import math
import re
from typing import Any

DAMAGE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f"
                    "\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]")



def oversized(doc: Any, max_name: int, max_string: int) -> str | None:
    """Where ``doc`` (decoded JSON) holds a property name over ``max_name`` characters or a
    string over ``max_string``, as a message; None when nowhere. Walked without recursion.

    >>> oversized({"a": ["x" * 9]}, 4, 8)
    'a[0] is a string of 9 characters (at most 8)'
    """
    todo: list[tuple[str, Any]] = [("", doc)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, str) and len(value) > max_string:
            return (f"{where[:120]} is a string of {len(value):,} characters "
                    f"(at most {max_string:,})")
        if isinstance(value, dict):
            for name, item in value.items():
                if len(str(name)) > max_name:
                    return (f"{where[:120] or 'the top level'} has a property named with "
                            f"{len(str(name)):,} characters (at most {max_name})")
                todo.append((f"{where}.{name}" if where else str(name), item))
        elif isinstance(value, list):
            todo.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
    return None


MAX_FIGURE = 64  # characters of a JSON number: %f of 1e30 is 37, a 64-bit integer 20


def json_float(token: str) -> float:
    """``json``'s ``parse_float``: NaN for a number longer than any tool prints (a run of
    digits pushed into a figure would read as another figure), which the field readers
    refuse naming the field, as they refuse ``NaN`` and ``1e400``. Integers need no bound:
    one longer than Python converts is a ParseError, a shorter one out of every range."""
    return float(token) if len(token) <= MAX_FIGURE else math.nan


__all__ = ["DAMAGE", "MAX_FIGURE", "json_float", "oversized"]
