"""Parser for nvme-cli's ``nvme smart-log -o json DEVICE``: the NVMe SMART / Health
Information log (Log Identifier 02h), and the record both disk readers give of it
(:class:`NvmeHealth`; smartctl's ``nvme_smart_health_information_log`` is read into the
same record by ``parsers.smartctl``).

The log's fields (NVM Express Base Specification, "SMART / Health Information (Log
Identifier 02h)"; libnvme's ``struct nvme_smart_log``): Critical Warning (byte 0, a bit
field), Composite Temperature (bytes 2:1, kelvin), Available Spare and Available Spare
Threshold (bytes 3 and 4, normalized percentages 0 to 100; threshold values 101 to 255
are reserved), Percentage Used (byte 5, a vendor estimate of the life used: 100 means the
rated endurance is consumed; it may exceed 100, and 255 stands for 255 or more), and
Media and Data Integrity Errors (bytes 175:160, a 128-bit count of unrecovered data
integrity errors).

nvme-cli's JSON, by version (``json_smart_log`` in nvme-print.c, later
src/nvme-print-json.c): ``critical_warning`` is an integer, or, with ``--verbose`` (and
always from 2.11), an object holding it as ``value`` beside one 0/1 member per bit;
``temperature`` is in kelvin; ``avail_spare``, ``spare_thresh`` and ``percent_used`` are
integers; the 128-bit counters (``media_errors``, ...) are numbers printed with ``%.0Lf``
up to 2.3, and decimal strings from 2.4 (``util_json_object_new_uint128``). Other members
(thermal management counters, sensors) are not read. The JSON names no device: the disk
is the one the command was given (``parsers.disk_health``).

JSON is read strictly (``parsers.strict_json``): a repeated key, text after the object, a
float or a string of digits in another notation where an integer stands, a name or string
longer than nvme-cli writes: each a ParseError naming the field.

>>> h = parse_nvme_smart_log('{"critical_warning":0,"temperature":308,"avail_spare":100,'
...                          '"spare_thresh":10,"percent_used":3,"media_errors":"0"}')
>>> h.critical_warning, h.available_spare_pct, h.percentage_used_pct, h.media_errors
(0, 100, 3, 0)
>>> h.temperature_c
35
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.damage import DAMAGE, oversized
from rackgate.parsers.strict_json import decode

U8 = 255  # one byte of the log
U128 = 2**128 - 1  # the log's 16-byte counters
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,38}", re.ASCII)  # how nvme-cli prints a uint128
# the 0/1 members nvme-cli's critical_warning object gives beside "value", by bit
_CW_BITS = {"available_spare": 0, "temp_threshold": 1, "reliability_degraded": 2, "ro": 3,
            "vmbu_failed": 4, "pmr_ro": 5}


@dataclass(frozen=True)
class NvmeHealth:
    """The SMART / Health Information log fields rackgate judges, as the disk reported
    them (ranges are the judge's: a byte is read as 0..255 here)."""

    critical_warning: int  # byte 0: the bit field
    available_spare_pct: int  # byte 3
    available_spare_threshold_pct: int  # byte 4
    percentage_used_pct: int  # byte 5
    media_errors: int  # bytes 175:160
    temperature_c: int | None = None  # the composite temperature, for the details only


def strict_document(text: str, fmt: str) -> dict[str, Any]:
    """The one JSON object ``text`` holds (blank lines around it allowed); ParseError for
    damage no tool prints (control characters, byte-order marks), for text after the
    object, and for names or strings longer than the disk tools write."""
    if not text.strip():
        raise ParseError(f"{fmt}: the output is empty")
    if m := DAMAGE.search(text):
        raise ParseError(f"{fmt}: character {m.group(0)!r} at offset {m.start()}: no "
                         "output of the tool's (damaged evidence)")
    doc, end = decode(text, fmt, len(text) - len(text.lstrip()))
    if text[end:].strip():
        raise ParseError(f"{fmt}: text after the JSON object: {text[end:].strip()[:40]!r}")
    if not isinstance(doc, dict):
        raise ParseError(f"{fmt}: the top level is not an object")
    if why := oversized(doc, 64, 1024):  # the tools' names are words, their strings short
        raise ParseError(f"{fmt}: {why}: no output of the tool's (a damaged name?)")
    return doc


def uint(value: Any, where: str, top: int) -> int:
    """``value`` as an integer 0..``top``; ParseError naming ``where`` otherwise (a float,
    a bool, a string, a number out of range).

    >>> uint(7, "x", 255)
    7
    >>> uint(7.0, "percent_used", 255)
    Traceback (most recent call last):
    ...
    rackgate.parsers.ParseError: percent_used is 7.0, not an integer 0 to 255
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        shown = "missing" if value is None else str(value)[:40]
        raise ParseError(f"{where} is {shown}, not an integer 0 to {top:,}")
    return int(value)


def counter(value: Any, where: str) -> int:
    """A 128-bit counter as nvme-cli prints it: an integer (up to 2.3) or a decimal string
    (from 2.4), ASCII digits without leading zeros.

    >>> counter("12", "media_errors"), counter(12, "media_errors")
    (12, 12)
    """
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value) or int(value) > U128:
            raise ParseError(f"{where} is {value[:40]!r}, not a decimal 128-bit count")
        return int(value)
    return uint(value, where, U128)


def critical_warning(value: Any, where: str) -> int:
    """The Critical Warning byte: an integer, or nvme-cli's object of ``value`` and its bits
    (which must agree with ``value``)."""
    if not isinstance(value, dict):
        return uint(value, where, U8)
    byte = uint(value.get("value"), f"{where}.value", U8)
    for name, bit in _CW_BITS.items():
        if name in value and uint(value[name], f"{where}.{name}", 1) != (byte >> bit) & 1:
            raise ParseError(f"{where}.{name} is {value[name]}, but bit {bit} of value "
                             f"{byte:#04x} is {(byte >> bit) & 1}: inconsistent output")
    return byte


def parse_nvme_smart_log(text: str) -> NvmeHealth:
    """nvme-cli's ``smart-log -o json`` output as an :class:`NvmeHealth`; ParseError for
    anything else."""
    fmt = "nvme smart-log JSON"
    doc = strict_document(text, fmt)
    missing = [k for k in ("critical_warning", "avail_spare", "spare_thresh", "percent_used",
                           "media_errors") if k not in doc]
    if missing:
        raise ParseError(f"{fmt}: no {', '.join(missing)} (not nvme-cli's smart-log output?)")
    kelvin = doc.get("temperature")
    temperature = None if kelvin is None else uint(kelvin, f"{fmt}: temperature", 65535)
    return NvmeHealth(
        critical_warning=critical_warning(doc["critical_warning"], f"{fmt}: critical_warning"),
        available_spare_pct=uint(doc["avail_spare"], f"{fmt}: avail_spare", U8),
        available_spare_threshold_pct=uint(doc["spare_thresh"], f"{fmt}: spare_thresh", U8),
        percentage_used_pct=uint(doc["percent_used"], f"{fmt}: percent_used", U8),
        media_errors=counter(doc["media_errors"], f"{fmt}: media_errors"),
        # kelvin to degrees Celsius as nvme-cli and smartctl print it (K - 273); 0: none
        temperature_c=temperature - 273 if temperature else None,
    )
