"""Parser for IPMI sensor listings, and the power-supply sensors among them.

Formats, any mix of them in one text (IPMI v2.0 tables 42-2/42-3 for the discrete state
offsets, :mod:`~rackgate.parsers.ipmi.states`):

* 3 columns, ``ipmitool sdr``: ``name | reading | status``. For a discrete sensor the
  reading is ``0xNN``: Get Sensor Reading's byte 2, which some BMCs fill with the state
  bits 0-7 (``PSU2 Status | 0x03 | ok`` is then "Presence detected" + "Failure
  detected") and others leave 0x00 (IPMI leaves it unspecified for discrete sensors; the
  judge therefore takes no health from it); for an analog one ``928 Watts``.
* 5 columns, ``ipmitool sdr elist`` / ``sdr type "Power Supply"``:
  ``name | 02h | ok | 10.2 | Presence detected, Failure detected``: sensor number, status,
  entity ID, then the asserted states as text, joined with ", " ("AC out-of-range, but
  present" is one state: a part that starts lower-case continues the one before). A
  discrete sensor with an analog value (HP's Power Supply sensors) leads the list with it:
  ``Power Supply 2 | 07h | ok | 10.2 | 0 Watts, Presence detected, Failure detected``.
* ``-c`` CSV: ``name,02h,ok,10.2,states`` and, for analog sensors, ``name,928,Watts,ucr``.
* Verbose blocks (``sdr -v``, ``sensor get``): ``Sensor ID : PSU2 Status (0x2)`` and the
  ``States Asserted`` list of ``[state]`` lines; a block adds its states to the listing
  line of the same sensor.
* 10 columns, ``ipmitool sensor`` and ``ipmitool -c sensor``: a discrete sensor's state
  as the 2-byte mask ``0x0180`` (:mod:`~rackgate.parsers.ipmi.sensor`).
* FreeIPMI ``ipmi-sensors`` tables, ``ID | Name | Type | [State |] Reading | Units |
  [six thresholds |] Event``, ``|``- or ``,``-separated, with or without header
  (:mod:`~rackgate.parsers.ipmi.freeipmi`).

A state mask is decoded into ``states`` with the offset names of the sensor's kind, and
kept in ``state_mask``, which the judge reads. ipmitool's status column is ``ok``, ``ns``
(no reading), or the threshold a reading crossed (``nc``/``cr``/``nr``, ``unc``/``ucr``/
``unr``, ``lnc``/``lcr``/``lnr``). It is ``ok`` for a discrete PSU sensor even when "Failure
detected" is asserted (ipmitool issues 176 and 318): judge discrete sensors from their
states, never ``status``.

Every line is accounted for. A line that is no sensor line of these formats (a shell
prompt, ``Loading IANA PEN Registry...``, and equally a table row with a status, sensor
number or entity the tool never prints, six cells, a name longer than any SDR holds (64),
a unit or state longer than the tools' (40, 100), or a line holding a character no tool
prints: a control or format character (``parsers.damage``) such as a byte-order mark, or
a carriage return inside the line) is kept in ``unread`` with its number, ``owned`` when
it is a table row or inside a block (:class:`~rackgate.parsers.ipmi.model.UnreadLine`);
:func:`psu_unread` says which of them could concern the power supplies, and the judge
passes none of those. Only ``\\n`` ends a line (``\\r\\n`` too). Numbers are read only in
the notations the tools print (ASCII digits; ``%02Xh`` sensor numbers, ``%d.%d``
entities, ``0x%02x`` readings, ``%.Nf`` values). Output with no sensor line at all is a
ParseError quoting its first line. A reading in Watts that is no finite number as the
tools print it (``nan Watts``, 400 digits, ``+400``, ``4e2``), or other text with Watts
in it, is a ParseError naming the sensor.

>>> sdr = parse_ipmi_sdr("PSU2 Status | 02h | ok | 10.2 | Presence detected, Failure detected")
>>> s = sdr.sensors[0]
>>> s.name, s.sensor_number, s.states, psu_kind(s)
('PSU2 Status', 2, ('Presence detected', 'Failure detected'), 'psu')
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Literal

from rackgate.parsers import ParseError
from rackgate.parsers.damage import DAMAGE
from rackgate.parsers.ipmi import freeipmi
from rackgate.parsers.ipmi.model import (
    DECIMAL,
    WATTS_UNITS,
    IpmiSdr,
    IpmiSensor,
    UnreadLine,
    finite_watts,
)
from rackgate.parsers.ipmi.sensor import sensor_line
from rackgate.parsers.ipmi.states import (
    POWER_UNIT_STATES,
    PSU_STATES,
    REDUNDANCY_STATES,
    StateTable,
    state_names,
)

STATUSES = frozenset({"ok", "ns", "na", "nc", "cr", "nr", "unc", "ucr", "unr",
                      "lnc", "lcr", "lnr"})
PsuKind = Literal["psu", "redundancy", "power", "power_unit"]

# Names BMC vendors give power-supply sensors: "PSU1 Status", "PS2 Status", "Power Supply 1",
# "PS Redundancy", "Pwr Unit Redund"; "C1 P1I Bay 1" are the power bays of ipmitool issue 318.
_PSU_NAME = re.compile(r"\b(psu?\s*\d*|power\s*suppl(y|ies)|pwr\s*supply|p\d+i\s+bay)\b", re.I)
_POWER_UNIT_NAME = re.compile(r"\b(pwr|power)\s*unit\b", re.I)
_REDUNDANCY = re.compile(r"redund", re.I)
# sub-sensors of a PSU (fan, temperature, rail faults) are not the PSU's status sensor
_AUX_NAME = re.compile(r"fan|temp|therm|fault|volt|curr|\d+(\.\d+)?v\b|vco|rail|\bin\b|"
                       r"\bout\b|power\s*in|input|output", re.I)
# the notations ipmitool prints: "%02Xh", "%2d.%1d", "0x%02x"; any other is no sensor line
_SENSOR_NUMBER = re.compile(r"^([0-9a-f]{2})h$", re.I | re.ASCII)
_ENTITY = re.compile(r"^(?:0|[1-9][0-9]{0,2})\.(?:0|[1-9][0-9]{0,2})$", re.ASCII)
_ANY_WATTS = re.compile(r"^(\S+) watts$", re.I)  # "%s %s": the value, a space, "Watts"
_HEX = re.compile(r"^0x([0-9a-f]{2})$", re.I | re.ASCII)
_ANALOG = re.compile(DECIMAL.pattern + r"(?: \S.*)?", re.ASCII)  # "%s %s": "24 degrees C"
_VERBOSE_ID = re.compile(r"^\s*Sensor ID\s*:(.*)$", re.I)
_VERBOSE_NUMBER = re.compile(r"\(0x([0-9a-f]{1,2})\)$", re.I | re.ASCII)
_VERBOSE_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z ()]*):(.*)$")
_VERBOSE_WATTS = re.compile(r"(\S+)(?: \(\+/- [^)]*\))? Watts", re.I)
# the longest state name a tool prints is FreeIPMI's 72 ("AC lost/Power input lost (The
# power source for the power unit was lost)")
_MAX_NAME, _MAX_UNITS, _MAX_STATE = 64, 40, 100
# the words of a line that could concern the power supplies: a PSU's or a power unit's
# name, power, supply, redundancy, Watts
_POWER_WORDS = re.compile(r"\bps\s*[0-9]|psu|power|pwr|suppl|redund|watt", re.I)


def _reading(sensor: IpmiSensor, text: str) -> IpmiSensor:
    """Fill the reading fields from a 5-column state list such as '0 Watts, Presence detected'."""
    parts: list[str] = []
    for p in (p.strip() for p in text.split(",")):
        # ipmitool joins the states with ", " and starts each with a capital; a part that
        # starts lower-case continues the state before it ("AC out-of-range, but present")
        if p and p[0].islower() and parts:
            parts[-1] = f"{parts[-1]}, {p}"
        elif p:
            parts.append(p)
    watts = None
    if parts and (m := _ANY_WATTS.match(parts[0])):
        # ParseError for "nan Watts", "1e400 Watts", "+400 Watts": no reading ipmitool prints
        watts = finite_watts(m.group(1), sensor.name)
        parts = parts[1:]
    if any("watt" in p.lower() for p in parts):  # no state's name holds Watts
        raise ParseError(f"ipmitool sdr: sensor {sensor.name!r}: {text.strip()[:80]!r} is no "
                         "reading ipmitool prints ('<number> Watts' first, then the states)")
    unreadable = any(p.lower() in ("no reading", "not readable", "disabled") for p in parts)
    states = tuple(p for p in parts if p.lower() not in ("no reading", "not readable"))
    return replace(sensor, watts=watts, states=states, readable=not unreadable)


def _line(line: str) -> IpmiSensor | None:
    sep = "|" if "|" in line else ","
    cols = [c.strip() for c in line.split(sep)]
    if sep == "," and len(cols) > 5:  # the state list of the CSV form holds commas too
        cols = [*cols[:4], ", ".join(cols[4:])]
    if len(cols) == 3 and sep == "|" and cols[2].lower() in STATUSES and cols[0]:
        name, reading, status = cols
        s = IpmiSensor(name=name, status=status.lower())
        if m := _HEX.match(reading):
            return replace(s, state_bits=int(m.group(1), 16))
        if m := _ANY_WATTS.match(reading):
            return replace(s, watts=finite_watts(m.group(1), name))  # or ParseError
        low = reading.lower()
        if "watt" in low:
            raise ParseError(f"ipmitool sdr: sensor {name!r}: reading {reading[:80]!r} is no "
                             "'<number> Watts' as ipmitool prints it")
        if low in ("no reading", "disabled", "not readable"):
            return replace(s, readable=False)
        if not _ANALOG.fullmatch(reading):
            return None  # no reading ipmitool prints
        return replace(s, readable=status.lower() != "ns")
    if len(cols) == 5 and cols[0] and cols[2].lower() in STATUSES \
            and (m := _SENSOR_NUMBER.match(cols[1])) and _ENTITY.match(cols[3]):
        s = IpmiSensor(name=cols[0], status=cols[2].lower(), sensor_number=int(m.group(1), 16),
                       entity=cols[3])
        s = _reading(s, cols[4])
        return replace(s, readable=s.readable and s.status != "ns")
    if len(cols) == 4 and sep == "," and cols[0] and cols[3].lower() in STATUSES:
        s = IpmiSensor(name=cols[0], status=cols[3].lower(), units=cols[2] or None)
        if cols[1] == "" and cols[2] == "":  # "name,,,ns": no reading
            return replace(s, readable=False)
        if cols[2].lower() in WATTS_UNITS:
            return replace(s, watts=finite_watts(cols[1], cols[0]))  # or ParseError
        return s if DECIMAL.fullmatch(cols[1]) else None
    return None


def _verbose(lines: list[str], start: int,
             unread: list[UnreadLine]) -> tuple[IpmiSensor, int]:
    """Read one ``Sensor ID :`` block from ``lines[start]``; return it and the next index.
    Every line of the block is a ``Key : value`` field or a ``[state]`` item of a list;
    any other (a damaged one) goes to ``unread``, owned."""
    m = _VERBOSE_ID.match(lines[start])
    assert m is not None
    name, number = m.group(1).strip(), None
    if n := _VERBOSE_NUMBER.search(name):
        name, number = name[:n.start()].rstrip(), int(n.group(1), 16)
    s = IpmiSensor(name=name, status="", sensor_number=number)
    i, states = start + 1, None
    while i < len(lines) and lines[i].strip() and not _VERBOSE_ID.match(lines[i]):
        line, i = lines[i], i + 1
        fm = None if DAMAGE.search(line) else _VERBOSE_FIELD.match(line)
        if fm is None:
            if DAMAGE.search(line) or not _item(line):
                unread.append(UnreadLine(i, line, owned=True))
            continue  # an item of a list that is not read (Assertions Enabled, ...)
        key, value = " ".join(fm.group(1).lower().split()), fm.group(2).strip()
        if key == "entity id" and value:
            entity = value.split()[0]
            if _ENTITY.match(entity):
                s = replace(s, entity=entity)
            else:
                unread.append(UnreadLine(i, line, owned=True))
        elif key.startswith("sensor type"):
            s = replace(s, sensor_type=re.sub(r"\s*\(0x[0-9a-f]+\)$", "", value, flags=re.I))
        elif key == "sensor reading" and "watt" in value.lower():
            if (w := _VERBOSE_WATTS.fullmatch(value)) is None:
                raise ParseError(f"ipmitool sdr -v: sensor {name!r}: reading {value[:80]!r} is "
                                 "no '<number> [(+/- <n>)] Watts' as ipmitool prints it")
            s = replace(s, watts=finite_watts(w.group(1), name))
        elif key == "states asserted":
            states = []
            while i < len(lines) and _item(lines[i]) and not DAMAGE.search(lines[i]):
                states.append(lines[i].strip()[1:-1].strip())
                i += 1
    return replace(s, states=tuple(states) if states is not None else None), i


def _item(line: str) -> bool:
    """A ``[state]`` line of a verbose block's list."""
    item = line.strip()
    return len(item) >= 2 and item[0] == "[" and item[-1] == "]"


def _merge(sensors: list[IpmiSensor], block: IpmiSensor) -> None:
    """Add a verbose block's facts to the one earlier listing line of the same sensor."""
    same = [k for k, s in enumerate(sensors) if s.name == block.name
            and (s.sensor_number is None or block.sensor_number is None
                 or s.sensor_number == block.sensor_number)]
    if len(same) != 1:
        sensors.append(block)
        return
    k = same[0]
    old = sensors[k]
    states = tuple(dict.fromkeys((old.states or ()) + (block.states or ()))) \
        if old.states is not None or block.states is not None else None
    sensors[k] = replace(old, sensor_number=old.sensor_number if old.sensor_number is not None
                         else block.sensor_number, entity=old.entity or block.entity,
                         sensor_type=block.sensor_type or old.sensor_type, states=states,
                         watts=old.watts if old.watts is not None else block.watts)


def parse_ipmi_sdr(text: str) -> IpmiSdr:
    """Parse IPMI sensor listings (any mix of the forms above); ParseError when none."""
    lines = text.replace("\r\n", "\n").split("\n")
    sensors: list[IpmiSensor] = []
    unread: list[UnreadLine] = []
    table: freeipmi.Layout | None = None  # the FreeIPMI header the rows below follow
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            table = None
            continue
        if DAMAGE.search(line):
            unread.append(UnreadLine(i, line, owned=table is not None or _row(line)))
            continue
        if _VERBOSE_ID.match(line):
            at = i
            block, i = _verbose(lines, i - 1, unread)
            if _implausible(block):
                unread.append(UnreadLine(at, line, owned=True))
            else:
                _merge(sensors, block)
            continue
        if layout := freeipmi.header(line):
            table = layout
            continue
        if table is not None and table[0] in line:
            sensor: IpmiSensor | None = freeipmi.row(line, *table)
        else:
            sensor = _line(line) or sensor_line(line)
        if sensor is None and (layout := freeipmi.headerless(line)):
            sensor = freeipmi.row(line, *layout)
        if sensor is not None and not _implausible(sensor):
            sensors.append(sensor)
        else:
            unread.append(UnreadLine(i, line, owned=table is not None or _row(line)))
    if not sensors:
        first = unread[0].text.strip() if unread else ""
        raise ParseError("IPMI listing: no sensor line (ipmitool 'sdr', 'sdr elist', 'sensor', "
                         "their CSV forms, 'Sensor ID :' blocks, or a FreeIPMI 'ipmi-sensors' "
                         f"table) in {len(lines)} line(s) of output; the first: "
                         f"{first[:160]!r}")
    return IpmiSdr(tuple(_decoded(s) for s in sensors), tuple(unread))


def _implausible(s: IpmiSensor) -> bool:
    """A name, unit or state no tool prints: an SDR's ID string is at most 16 bytes
    (FreeIPMI may prefix the entity's name), ipmitool's unit two unit names of at most 19
    characters, a state name at most 72."""
    return len(s.name) > _MAX_NAME or len(s.units or "") > _MAX_UNITS \
        or len(s.sensor_type or "") > _MAX_NAME or any(len(x) > _MAX_STATE
                                                        for x in s.states or ())


def _row(line: str) -> bool:
    """A row of a table: three or more ``|`` cells, or four or more ``,`` cells."""
    return line.count("|") >= 2 or line.count(",") >= 3


def psu_unread(sdr: IpmiSdr) -> list[UnreadLine]:
    """The unread lines that could concern the power supplies: a table row or a line of a
    block (any sensor's, a power supply's among them, whatever it says), or one that names
    a power supply, a power unit, power, redundancy or Watts."""
    return [u for u in sdr.unread if u.owned or _POWER_WORDS.search(u.text)]


_MASK_TABLES: dict[PsuKind, StateTable] = {"psu": PSU_STATES, "power_unit": POWER_UNIT_STATES,
                                           "redundancy": REDUNDANCY_STATES}


def _decoded(s: IpmiSensor) -> IpmiSensor:
    """A state mask's offsets named after the sensor's kind (the judge reads the mask)."""
    if s.state_mask is None or s.states is not None:
        return s
    table = _MASK_TABLES.get(psu_kind(s) or "power")
    return s if table is None else replace(s, states=state_names(table, s.state_mask))


def psu_kind(s: IpmiSensor) -> PsuKind | None:
    """What a sensor says about the power supplies, or None when it is not a PSU sensor.

    ``psu``: a PSU's status sensor (IPMI sensor type 08h offsets), whatever unit its
    reading has (HP's carry Watts); ``redundancy``; ``power`` (a PSU's input Watts, from a
    sensor that shows no discrete state); ``power_unit`` (sensor type 09h). Entity 10 is
    "power supply". A threshold sensor in another unit (a PSU's temperature, current) and
    a sensor of another known type are none of them.
    """
    states = " ".join(s.states or ())
    typ = (s.sensor_type or "").lower()
    on_psu_entity = bool(s.entity and s.entity.split(".")[0] == "10")
    psu_named = bool(_PSU_NAME.search(s.name))
    power_unit = typ == "power unit" or bool(_POWER_UNIT_NAME.search(s.name))
    if _REDUNDANCY.search(s.name) or _REDUNDANCY.search(states):
        named = psu_named or on_psu_entity or power_unit or typ == "power supply"
        return "redundancy" if named else None  # not "Fan Redundancy"
    discrete = bool(s.states) or s.state_mask is not None or s.states_hidden
    if not discrete and (s.watts is not None or (s.units or "").lower() in WATTS_UNITS):
        return "power" if psu_named or on_psu_entity or typ == "power supply" else None
    if s.threshold:
        return None
    if power_unit:
        return "power_unit"
    if typ and typ != "power supply":
        return None
    if typ == "power supply" or on_psu_entity:
        return None if _AUX_NAME.search(s.name) else "psu"
    if psu_named and not _AUX_NAME.search(s.name):
        return "psu"
    return None


def psu_sensors(sdr: IpmiSdr) -> list[tuple[PsuKind, IpmiSensor]]:
    """The power-supply sensors of a listing, with their kind, in listing order."""
    return [(k, s) for s in sdr.sensors if (k := psu_kind(s)) is not None]


__all__ = ["IpmiSdr", "IpmiSensor", "PsuKind", "UnreadLine", "parse_ipmi_sdr", "psu_kind",
           "psu_sensors", "psu_unread"]
