"""FreeIPMI ``ipmi-sensors`` tables (ipmi-sensors(8); ipmi-sensors-simple-output.c).

A header names the columns: ``ID | Name | Type | Reading | Units | Event`` by default;
``--output-sensor-state`` adds ``State`` after Type (Nominal, Warning, Critical or N/A:
FreeIPMI's own reading of the event bitmask), ``--output-sensor-thresholds`` six threshold
columns, ``--no-sensor-type-output`` drops Type, ``--quiet-readings`` Reading and Units,
``--comma-separated-output`` joins the cells with ``,`` instead of `` | ``. The six
threshold columns (``Lower NR | Lower C | Lower NC | Upper NC | Upper C | Upper NR``, in
that order) follow Units, each ``%.2f`` or N/A (a discrete sensor's are all N/A); with
State too a row has 13 cells. Without a header (``--no-header-output``) a row's layout is
taken from its cells: with or without State, with or without the thresholds, ``|`` or
``,`` (the layouts that keep Type, Reading and Units: the ones scripts collect); a row that
fits none of them, or more than one, is not read. SDR-cache options do not change the
table.

ID is the SDR record ID. A threshold sensor's Reading is ``%.2f`` or N/A with its Units
(``W``, or ``Watts`` with ``--non-abbreviated-units``); a discrete one reads ``N/A | N/A``
unless a workaround flag prints an analog value. Event is each asserted state quoted and
separated by a space (``'Presence detected' 'Power Supply Failure detected'``), ``'OK'``
when none is asserted, ``N/A`` or ``Unknown`` when the sensor could not be read, or the
16-bit event bitmask (``0003h``, bit n = offset n) with ``--output-event-bitmask``. A
threshold sensor's events are threshold crossings ("At or Above (>=) Upper Critical
Threshold"), read here into ipmitool's status words (``ucr``).

A row with fewer or more cells than its header is a ParseError quoting it; so is an ID
that is no number as FreeIPMI prints it (``%u``), a State on no list or a threshold that is
neither ``%.2f`` nor N/A.

>>> cols = header("ID | Name | Type | Reading | Units | Event")
>>> s = row("5  | PSU2 Status | Power Supply | N/A | N/A | 'Presence detected'", *cols)
>>> s.label, s.states, s.sensor_type
('PSU2 Status (ID 5)', ('Presence detected',), 'Power Supply')
>>> headerless("5,PSU2 Status,Power Supply,Nominal,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,'OK'")[1][6]
'Lower NR'
"""

from __future__ import annotations

import re
from dataclasses import replace

from rackgate.parsers import ParseError
from rackgate.parsers.ipmi.model import (
    DECIMAL,
    WATTS_UNITS,
    IpmiSensor,
    finite_watts,
    refuse,
)

TOOL = "ipmi-sensors"
THRESHOLDS = ("Lower NR", "Lower C", "Lower NC", "Upper NC", "Upper C", "Upper NR")
COLUMNS = ("ID", "Name", "Type", "State", "Reading", "Units", *THRESHOLDS, "Event")
ANALYSED = frozenset({"Nominal", "Warning", "Critical", "N/A"})
# the layouts of a row printed without header: [State], [the six thresholds]
_HEADERLESS = tuple(("ID", "Name", "Type", *(("State",) if state else ()), "Reading", "Units",
                     *(THRESHOLDS if thresholds else ()), "Event")
                    for state in (False, True) for thresholds in (False, True))
# "%u": ASCII digits, no leading zero; an SDR record ID is two bytes (IPMI 2.0, 33.1), so at
# most five digits, and one over 65535 is refused after the match
_ID = re.compile(r"0|[1-9][0-9]{0,4}", re.ASCII)
_MAX_RECORD_ID = 0xFFFF
_QUOTED = re.compile(r"^'[^']*'(?: '[^']*')*$")
_EVENT = re.compile(r"^('.*'|N/A|Unknown|[0-9A-F]{4}h)$")
_BITMASK = re.compile(r"^([0-9A-F]{4})h$")
_CROSSING = re.compile(r"^At or (?:Below|Above) \([<>]=\) (Lower|Upper) "
                       r"(Non-Critical|Critical|Non-Recoverable) Threshold$", re.I)
_CODE = {"non-critical": "nc", "critical": "cr", "non-recoverable": "nr"}
_RANK = {"nc": 1, "cr": 2, "nr": 3}

Layout = tuple[str, tuple[str, ...]]


def header(line: str) -> Layout | None:
    """The separator and column names of a header line, or None if it is none."""
    for sep in ("|", ","):
        cols = tuple(c.strip() for c in line.split(sep))
        if len(cols) >= 3 and cols[:2] == ("ID", "Name") and cols[-1] == "Event" \
                and all(c in COLUMNS for c in cols):
            return sep, cols
    return None


def _number_or_na(cell: str) -> bool:
    return cell == "N/A" or DECIMAL.fullmatch(cell) is not None


def _fits(cells: dict[str, str]) -> bool:
    """Cells as FreeIPMI prints them: a ``%u`` ID, a State on the list, a Reading and the
    thresholds ``%.2f`` or N/A, units without a quote, an event list."""
    return bool(_ID.fullmatch(cells["ID"]) and _EVENT.match(cells["Event"])
                and cells.get("State", "N/A") in ANALYSED and "'" not in cells["Units"]
                and all(_number_or_na(cells[c]) for c in ("Reading", *THRESHOLDS)
                        if c in cells))


def headerless(line: str) -> Layout | None:
    """The layout of a row printed without header (``--no-header-output``): the one of
    :data:`_HEADERLESS`, ``|`` or ``,`` separated, that its cells fit; None when none or
    more than one does."""
    found = []
    for sep in ("|", ","):
        for cols in _HEADERLESS:
            try:
                cells = _cells(line, sep, cols)
            except ParseError:
                continue
            if _fits(cells):
                found.append((sep, cols))
    return found[0] if len(found) == 1 else None


def _refuse(line: str, why: str) -> ParseError:
    return refuse(TOOL, line, why)


def _cells(line: str, sep: str, cols: tuple[str, ...]) -> dict[str, str]:
    raw = line.split(sep)
    if sep == "," and len(raw) > len(cols) and cols[-1] == "Event":
        # the event text is not quoted apart from its own quotes: "...-range, but present'"
        raw = [*raw[:len(cols) - 1], ",".join(raw[len(cols) - 1:])]
    if len(raw) != len(cols):
        raise _refuse(line, f"{len(raw)} cell(s), the header names {len(cols)} "
                            f"({' | '.join(cols)})")
    return dict(zip(cols, (c.strip() for c in raw), strict=True))


def row(line: str, sep: str, cols: tuple[str, ...]) -> IpmiSensor:
    """The sensor of one table row (see the module docstring for the cells)."""
    f = _cells(line, sep, cols)
    if not _ID.fullmatch(f["ID"]) or int(f["ID"]) > _MAX_RECORD_ID:
        raise _refuse(line, f"ID {f['ID'][:20]!r} is not a record number (0-65535)")
    analysed = f.get("State")
    if analysed is not None and analysed not in ANALYSED:
        raise _refuse(line, f"State {analysed[:20]!r} is not one of {', '.join(sorted(ANALYSED))}")
    if bad := [c for c in THRESHOLDS if c in f and not _number_or_na(f[c])]:
        raise _refuse(line, f"threshold {bad[0]} {f[bad[0]][:20]!r} is neither '%.2f' nor N/A")
    name, event = f["Name"], f["Event"]
    reading, units = f.get("Reading"), f.get("Units")
    s = IpmiSensor(name=name, status="", record_id=int(f["ID"]), sensor_type=f.get("Type"),
                   units=units, analysed=analysed)
    analog = units not in (None, "N/A")
    watts = None
    if reading is not None and reading != "N/A" and units is not None \
            and units.lower() in WATTS_UNITS:
        watts = finite_watts(reading, name, TOOL)
    if event in ("N/A", "Unknown") or (analog and reading == "N/A"):
        return replace(s, status=event if event == "Unknown" else "N/A", threshold=analog,
                       watts=None, readable=False)
    if m := _BITMASK.match(event):
        return replace(s, status="ok", threshold=False, watts=watts,
                        state_mask=int(m.group(1), 16) & 0x7FFF, mask_text=event)
    events = [e.strip("'") for e in event.split("' '")] if _QUOTED.match(event) else [event]
    crossings = [c for e in events if (c := _CROSSING.match(e))]
    if (events == ["OK"] and analog) or (crossings and len(crossings) == len(events)):
        codes = [m.group(1)[0].lower() + _CODE[m.group(2).lower()] for m in crossings]
        status = max(codes, key=lambda c: _RANK[c[1:]]) if codes else "ok"
        return replace(s, status=status, threshold=True, watts=watts)
    states = () if events == ["OK"] else tuple(events)
    return replace(s, status="ok", threshold=False, watts=watts, states=states)
