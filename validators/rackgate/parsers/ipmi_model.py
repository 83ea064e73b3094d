"""The record every IPMI sensor listing parses to (:mod:`rackgate.parsers.ipmi` says which).

One :class:`IpmiSensor` per listed sensor; a field the format does not carry is None
(empty). Health comes from the discrete states: ``states`` (text, as printed) and
``state_mask`` (bit n = IPMI offset n, from a format that prints the mask itself); the
3-column ``ipmitool sdr`` ``0xNN`` reading is ``state_bits`` and shows faults, never health.

>>> IpmiSensor("PSU2 Status", "ok", sensor_number=2).label
'PSU2 Status (02h)'
>>> IpmiSensor("PSU2 Status", "ok", record_id=5).label
'PSU2 Status (ID 5)'
"""

from __future__ import annotations

import math
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


@dataclass(frozen=True)
class IpmiSdr:
    sensors: tuple[IpmiSensor, ...]


WATTS_UNITS = frozenset({"watts", "watt", "w"})


def refuse(tool: str, line: str, why: str) -> ParseError:
    """The ParseError for a line of ``tool``'s listing that does not fit its format."""
    return ParseError(f"{tool}: line {line.strip()[:160]!r}: {why}")


def finite_watts(text: str, sensor: str, tool: str = "ipmitool sdr") -> float:
    """A finite number of Watts, or ParseError naming the sensor and the text."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ParseError(f"{tool}: sensor {sensor!r}: reading {text[:40]!r} is not a "
                         "finite number of Watts")
    return value
