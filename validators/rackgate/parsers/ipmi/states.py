"""The IPMI discrete states a power-supply sensor can assert, by offset, with the names the
tools print for them.

IPMI v2.0 Table 42-3 gives the sensor-specific offsets of sensor type 08h (Power Supply)
and 09h (Power Unit); Table 42-2 the generic discrete event type 0Bh (redundancy). A
sensor's asserted states are a 15-bit mask, bit n = offset n (Get Sensor Reading response
bytes 4 and 5, section 35.14; bit 7 of byte 5 is reserved, "returned as 1b"). The names:
ipmitool's sensor_specific_event_types / generic_event_types (include/ipmitool/ipmi_sel.h),
the specification's own wording, and FreeIPMI's short and long tables
(libfreeipmi/spec/ipmi-sensor-and-event-code-tables-spec.c). The first name of each offset
is the one findings use when only a mask was shown.

>>> offset_of(PSU_STATES, "Power Supply Failure detected"), offset_of(PSU_STATES, "Fai1ure")
(1, None)
>>> state_names(PSU_STATES, 0b11)
('Presence detected', 'Failure detected')
"""

from __future__ import annotations

from collections.abc import Mapping

StateTable = Mapping[int, tuple[str, ...]]

PSU_STATES: StateTable = {
    0: ("Presence detected",),
    1: ("Failure detected", "Power Supply Failure detected"),
    2: ("Predictive failure",),
    3: ("Power Supply AC lost", "Power Supply input lost (AC/DC)"),
    4: ("AC lost or out-of-range", "Power Supply input lost or out-of-range"),
    5: ("AC out-of-range, but present", "Power Supply input out-of-range, but present"),
    # ipmitool prints "Config Error"; its SEL decoder adds ": Vendor Mismatch", ": Revision
    # Mismatch", ... from event data 3: any "Config Error: <detail>" is this offset too
    6: ("Config Error", "Configuration error"),
    # errata: "Power Supply Inactive (in standby state)": present but carrying no load
    7: ("Power Supply Inactive", "Power Supply Inactive (in standby state)"),
}
PSU_HEALTHY = frozenset({0})  # present, nothing else asserted

# Every Power Unit offset is a power-delivery event: a healthy power unit asserts none.
POWER_UNIT_STATES: StateTable = {
    0: ("Power off/down", "Power Off / Power Down", "Power Off/Power Down"),
    1: ("Power cycle",),
    2: ("240VA power down", "240VA Power Down"),
    3: ("Interlock power down", "Interlock Power Down"),
    4: ("AC lost", "AC lost / Power input lost", "AC lost/Power input lost",
        "AC lost/Power input lost (The power source for the power unit was lost)"),
    5: ("Soft-power control failure", "Soft Power Control Failure",
        "Soft Power Control Failure (unit did not respond to request to turn on)"),
    6: ("Failure detected", "Power Unit Failure detected"),
    7: ("Predictive failure",),
}
POWER_UNIT_HEALTHY: frozenset[int] = frozenset()

REDUNDANCY_STATES: StateTable = {
    0: ("Fully Redundant", 'Fully Redundant (formerly "Redundancy Regained")'),
    1: ("Redundancy Lost",),
    2: ("Redundancy Degraded",),
    3: ("Non-Redundant: Sufficient from Redundant",
        "Non-redundant: Sufficient Resources from Redundant"),
    4: ("Non-Redundant: Sufficient from Insufficient",
        "Non-redundant: Sufficient Resources from Insufficient Resources"),
    5: ("Non-Redundant: Insufficient Resources", "Non-redundant: Insufficient Resources"),
    6: ("Redundancy Degraded from Fully Redundant",),
    7: ("Redundancy Degraded from Non-Redundant", "Redundancy Degraded from Non-redundant"),
}
REDUNDANCY_HEALTHY = frozenset({0})


def _norm(text: str) -> str:
    # FreeIPMI writes "Non-redundant:Insufficient Resources", the others ": " with a space
    return " ".join(text.replace(":", ": ").split()).lower()


def offset_of(table: StateTable, state: str) -> int | None:
    """The offset whose name ``state`` is (case and spacing aside), or None: on no list."""
    low = _norm(state)
    for offset, names in table.items():
        if any(low == _norm(n) for n in names):
            return offset
    if table is PSU_STATES and low.startswith("config error: "):
        return 6
    return None


def state_names(table: StateTable, mask: int) -> tuple[str, ...]:
    """The names of the offsets ``mask`` asserts; an offset the table lacks as ``offset NNh``."""
    return tuple(table[o][0] if o in table else f"offset {o:02X}h"
                 for o in range(16) if mask >> o & 1)
