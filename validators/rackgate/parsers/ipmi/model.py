"""The record every IPMI sensor listing parses to (:mod:`rackgate.parsers.ipmi` says which).

One :class:`IpmiSensor` per listed sensor; a field the format does not carry is None
(empty). Health comes from the discrete states: ``states`` (text, as printed) and
``state_mask`` (bit n = IPMI offset n, from a format that prints the mask itself); the
3-column ``ipmitool sdr`` ``0xNN`` reading is ``state_bits`` and shows faults, never health.

A sensor's ``identity`` is what tells it from every other sensor of the listing: its name
(spacing, case and Unicode compatibility forms aside) and the entity it sits on, where the
format shows one (Dell names both supplies "Status", on entities 10.1 and 10.2). The sensor
number, and FreeIPMI's record ID, are not: a line copied with another number is the same
sensor twice. Every line the parser could not read is kept as an :class:`UnreadLine`.

>>> IpmiSensor("PSU2 Status", "ok", sensor_number=2).label
'PSU2 Status (02h)'
>>> IpmiSensor("PSU2 Status", "ok", record_id=5).label
'PSU2 Status (ID 5)'
>>> IpmiSensor("psu2  status", "ok", entity="10.2").identity
('psu2 status', '10.2')
>>> finite_watts("400.50", "PSU1 Power In"), DECIMAL.fullmatch("0400")
(400.5, None)
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass

from rackgate.parsers import ParseError


@dataclass(frozen=True)
class IpmiSensor:
    """One sensor as a tool listed it; fields a format does not carry are None/empty."""

    name: str
    status: str  # the tool's status word ("ok", "cr", "ns"...); "" where it prints none
    sensor_number: int | None = None
    record_id: int | None = None  # FreeIPMI's ID column (the SDR record, not the sensor)
    entity: str | None = None  # "10.2": entity ID 10 (power supply), instance 2
    sensor_type: str | None = None  # "Power Supply", from a verbose block or FreeIPMI's Type
    states: tuple[str, ...] | None = None  # asserted states as text; None = not shown
    state_mask: int | None = None  # asserted offsets as printed by the tool (bit n: offset n)
    mask_text: str | None = None  # that mask as printed: "0x0380", "0003h"
    state_bits: int | None = None  # the 3-column 0xNN reading of a discrete sensor
    watts: float | None = None
    units: str | None = None  # the unit column where the format has one ("Watts", "W")
    threshold: bool | None = None  # a threshold sensor (its health is its reading); None: ?
    states_hidden: bool = False  # discrete, but the format prints only its analog reading
    analysed: str | None = None  # FreeIPMI --output-sensor-state: Nominal/Warning/Critical
    readable: bool = True

    @property
    def label(self) -> str:
        """The name, plus the number, record or entity that tells same-named sensors apart."""
        if self.sensor_number is not None:
            return f"{self.name} ({self.sensor_number:02X}h)"
        if self.record_id is not None:
            return f"{self.name} (ID {self.record_id})"
        return f"{self.name} (entity {self.entity})" if self.entity else self.name

    @property
    def identity(self) -> tuple[str, str | None]:
        """The name as a key (NFKC, case-folded, runs of spaces as one) and the entity."""
        name = " ".join(unicodedata.normalize("NFKC", self.name).split()).casefold()
        return name, self.entity


@dataclass(frozen=True)
class UnreadLine:
    """A line of the listing that is no sensor line of any format the parser reads.

    ``owned``: the line is in the parser's own territory (a table row: three or more
    ``|`` cells, or four or more ``,`` cells; a line inside a ``Sensor ID :`` block or a
    FreeIPMI table), so it may be any sensor's, a power supply's included.
    """

    number: int  # 1-based, in the text as given
    text: str
    owned: bool


@dataclass(frozen=True)
class IpmiSdr:
    sensors: tuple[IpmiSensor, ...]
    unread: tuple[UnreadLine, ...] = ()


WATTS_UNITS = frozenset({"watts", "watt", "w"})


def refuse(tool: str, line: str, why: str) -> ParseError:
    """The ParseError for a line of ``tool``'s listing that does not fit its format."""
    return ParseError(f"{tool}: line {line.strip()[:160]!r}: {why}")


# The tools print readings with printf's %.Nf: ASCII digits, an optional '-', no '+', no
# exponent, no leading zero (ipmitool's "%.*f", FreeIPMI's "%.2f").
DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?", re.ASCII)


def finite_watts(text: str, sensor: str, tool: str = "ipmitool sdr") -> float:
    """A finite number of Watts as the tools print it (:data:`DECIMAL`, at most 32
    characters), or ParseError naming the sensor and the text ("nan", 400 digits, "+400",
    "4e2", "0400", Arabic-Indic digits)."""
    # "%.3f" of any reading a sensor gives is short: 400 digits, or 400.00999...9, are damage
    value = float(text) if len(text) <= 32 and DECIMAL.fullmatch(text) else math.nan
    if not math.isfinite(value):
        raise ParseError(f"{tool}: sensor {sensor!r}: reading {text[:40]!r} is not a "
                         "finite number of Watts as the tool prints it")
    return value
