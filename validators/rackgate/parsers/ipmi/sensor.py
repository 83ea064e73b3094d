"""One line of ``ipmitool sensor`` (``sensor list``), or of ``ipmitool -c sensor``.

Ten columns, ``|``- or ``,``-separated: name | reading | unit | status | lnr | lcr | lnc |
unc | ucr | unr (ipmitool lib/ipmi_sensor.c):

* a discrete sensor (``ipmi_sensor_print_fc_discrete``) prints ``| 0x%-8x | discrete |
  0x%02x%02x``: its reading byte, then Get Sensor Reading's response bytes 4 and 5 (IPMI
  v2.0 35.14), the asserted-state mask: the first two hex digits are offsets 0-7, the
  last two offsets 8-14 and a reserved bit 7 that BMCs return as 1. ``0x0180`` asserts
  offset 0 only; ``0x0300`` offsets 0 and 1. An unreadable one prints ``na | discrete |
  na``. The thresholds are all ``na``.
* a threshold sensor (``dump_sensor_fc_thredshold``) prints its reading ``%-10.3f`` (always
  three decimals), its unit and ipmitool's threshold status (``ok``, ``nc``, ``cr``, ``nr``),
  then the six thresholds (``%-10.3f`` or ``na``); unreadable: ``na | <unit> | na``.
* a discrete sensor that also has an analog reading (HP's Power Supply sensors) prints
  only that reading, as ``%.0f`` when it is whole, the unit and a constant ``ok``: "don't
  show discrete component". Its states are not in the listing (``states_hidden``).

A 10-column line with a ``discrete`` unit or a status word whose other cells fit none of
these is a ParseError quoting it; any other line is not this format (None).

>>> s = sensor_line("PSU2 Status      | 0x0        | discrete   | 0x0380| na        "
...                 "| na        | na        | na        | na        | na        ")
>>> s.name, s.state_mask, s.mask_text
('PSU2 Status', 3, '0x0380')
"""

from __future__ import annotations

import math
import re

from rackgate.parsers import ParseError
from rackgate.parsers.ipmi.model import DECIMAL, WATTS_UNITS, IpmiSensor, finite_watts, refuse

TOOL = "ipmitool sensor"
_COLUMNS = 10
_MASK = re.compile(r"^0x([0-9a-f]{2})([0-9a-f]{2})$", re.I)
_HEX = re.compile(r"^0x[0-9a-f]+$", re.I | re.ASCII)
_NUMBER = DECIMAL  # "%-10.3f"; "%.0f" for the analog reading of a discrete sensor
_THRESHOLD_STATUS = frozenset({"ok", "nc", "cr", "nr", "unc", "ucr", "unr", "lnc", "lcr",
                               "lnr"})


def _refuse(line: str, why: str) -> ParseError:
    return refuse(TOOL, line, why)


def _threshold_value(text: str) -> bool:
    if text.lower() == "na" or _HEX.match(text):
        return True
    try:
        return _NUMBER.fullmatch(text) is not None and math.isfinite(float(text))
    except ValueError:
        return False


def sensor_line(line: str) -> IpmiSensor | None:
    """The sensor of one ``ipmitool sensor`` line, None for a line of another width."""
    sep = "|" if "|" in line else ","
    cols = [c.strip() for c in line.split(sep)]
    if len(cols) != _COLUMNS or not cols[0]:
        return None
    name, reading, unit, status, *thresholds = cols
    if unit.lower() != "discrete" and status.lower() not in _THRESHOLD_STATUS | {"na"}:
        return None  # ten cells of something else
    if bad := [t for t in thresholds if not _threshold_value(t)]:
        raise _refuse(line, f"threshold {bad[0][:40]!r} is neither 'na' nor a number")
    if unit.lower() == "discrete":
        return _discrete(line, name, reading, status)
    watts = unit.lower() in WATTS_UNITS
    if reading.lower() == "na":
        if status.lower() != "na":
            raise _refuse(line, f"no reading, yet status {status!r}")
        return IpmiSensor(name=name, status="na", units=unit, threshold=True, readable=False)
    if status.lower() not in _THRESHOLD_STATUS:
        raise _refuse(line, f"status {status[:40]!r} is no threshold status "
                            f"({', '.join(sorted(_THRESHOLD_STATUS))})")
    if _HEX.match(reading):  # a threshold sensor without an analog conversion
        return IpmiSensor(name=name, status=status.lower(), units=unit, threshold=True,
                          readable=not watts)
    value = finite_watts(reading, name, TOOL) if watts else None
    if not watts and not _NUMBER.fullmatch(reading):
        raise _refuse(line, f"reading {reading[:40]!r} is not a number")
    if "." not in reading and status.lower() == "ok" \
            and all(t.lower() == "na" for t in thresholds):
        # "%.0f" of a discrete sensor's analog value: its states are not printed
        return IpmiSensor(name=name, status="ok", units=unit, watts=value, threshold=False,
                          states_hidden=True)
    return IpmiSensor(name=name, status=status.lower(), units=unit, watts=value, threshold=True)


def _discrete(line: str, name: str, reading: str, status: str) -> IpmiSensor:
    if reading.lower() == "na" or status.lower() == "na":
        if (reading.lower(), status.lower()) != ("na", "na"):
            raise _refuse(line, "a discrete sensor with a reading but no state, or a state "
                                "but no reading")
        return IpmiSensor(name=name, status="na", units="discrete", threshold=False,
                          readable=False)
    if not _HEX.match(reading):
        raise _refuse(line, f"reading {reading[:40]!r} of a discrete sensor is not 0xNN")
    m = _MASK.match(status)
    if m is None:
        raise _refuse(line, f"state {status[:40]!r} of a discrete sensor is not the 2-byte "
                            "mask 0xHHHH")
    low, high = int(m.group(1), 16), int(m.group(2), 16) & 0x7F  # bit 7: reserved
    return IpmiSensor(name=name, status="ok", units="discrete", threshold=False,
                      state_mask=low | high << 8, mask_text=status)
