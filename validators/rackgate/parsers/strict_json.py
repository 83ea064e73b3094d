"""Strict JSON decoding for evidence (RFC 8259), shared by the JSON parsers.

Python's ``json`` keeps the last of two equal keys in an object, so a duplicated line of
pretty-printed output would silently replace a value; here it is a ParseError naming the
key. Nesting too deep for the decoder, and integers longer than Python converts, are
ParseErrors too, never a RecursionError or ValueError escaping the parser. Non-finite
numbers (``NaN``, ``Infinity``, ``1e400``) are decoded and left to the field readers, which
refuse them naming the field (:func:`finite`); so is a number longer than any tool
prints (``parsers.damage.json_float``), decoded as NaN.

>>> decode('{"a": 1} tail', "demo JSON")
({'a': 1}, 8)
>>> decode('{"a": 1, "a": 2}', "demo JSON")
Traceback (most recent call last):
...
rackgate.parsers.ParseError: demo JSON: key 'a' appears twice in one object (duplicated output?)
"""

from __future__ import annotations

import json
import math
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.damage import json_float


class Obj(dict[str, Any]):
    """A JSON object decoded with ``unique_keys=False``: ``repeated`` names the keys given
    more than once (the last value is kept); :func:`field` refuses to read those."""

    repeated: frozenset[str] = frozenset()


def _lenient(items: list[tuple[str, Any]]) -> Obj:
    out = Obj()
    repeated = set()
    for key, value in items:
        if key in out:
            repeated.add(key)
        out[key] = value
    out.repeated = frozenset(repeated)
    return out


def field(obj: dict[str, Any], key: str, where: str) -> Any:
    """``obj[key]`` (None when absent); ParseError when the key was given twice."""
    if isinstance(obj, Obj) and key in obj.repeated:
        raise ParseError(f"{where}.{key} is given twice (duplicated output?)")
    return obj.get(key)


def _hook(fmt: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ParseError(f"{fmt}: key {key!r} appears twice in one object "
                                 "(duplicated output?)")
            out[key] = value
        return out
    return pairs


def decode(text: str, fmt: str, pos: int = 0, unique_keys: bool = True) -> tuple[Any, int]:
    """One JSON value from ``text[pos:]`` and the index after it; ParseError otherwise.

    ``unique_keys=False`` for tools whose own output repeats keys (fio repeats a job option
    given twice, and its latency buckets): objects are then :class:`Obj` and the parser
    reads the fields it judges through :func:`field`, which refuses a repeated one."""
    decoder = json.JSONDecoder(object_pairs_hook=_hook(fmt) if unique_keys else _lenient,
                               parse_float=json_float)
    try:
        return decoder.raw_decode(text, pos)
    except ParseError:
        raise
    except json.JSONDecodeError as exc:
        raise ParseError(f"{fmt}: not valid JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg} (truncated output?)") from None
    except RecursionError:
        raise ParseError(f"{fmt}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer longer than Python converts
        raise ParseError(f"{fmt}: unreadable JSON value: {str(exc)[:80]}") from None


def finite(value: Any, where: str) -> float:
    """``value`` as a finite float, or ParseError naming ``where`` (bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"{where} is missing or not a number (got {str(value)[:40]!r})")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ParseError(f"{where} is {str(value)[:40]}, not a finite number")
    return number
