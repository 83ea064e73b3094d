"""Issue 14, IPMI power evidence as real machines print it: redundancy.psu_ipmi judges the
states of every power-supply sensor from the IPMI offsets they stand for, in each listing.

Formats (fixtures tests/fixtures/redundancy/ipmi-*.txt, each header says where its format
comes from; the values are invented):

* ``ipmitool sdr elist`` of an HP iLO, whose Power Supply (08h) sensors carry their input
  Watts ahead of the states: ``Power Supply 2 | 07h | ok | 10.2 | 0 Watts, Presence
  detected, Failure detected`` (ipmitool lib/ipmi_sdr.c, ipmi_sdr_print_sensor_fc);
* ``ipmitool sensor`` (and ``-c``), 10 columns, the state of a discrete sensor as the
  2-byte asserted-state mask ``0x0180`` (lib/ipmi_sensor.c, ipmi_sensor_print_fc_discrete);
* FreeIPMI ``ipmi-sensors`` tables, ``ID | Name | Type | [State |] Reading | Units |
  Event``, also ``--comma-separated-output`` (ipmi-sensors-simple-output.c).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.redundancy import PsuIpmiParams, judge_psu_ipmi
from rackgate.model import Judgement, Status
from rackgate.parsers import ParseError
from rackgate.parsers.ipmi import parse_ipmi_sdr, psu_sensors
from rackgate.profile import Hardware, PsuSpec

FIX = Path(__file__).parents[1] / "fixtures" / "redundancy"
SRC = "a profile written for the unit tests"
HW1 = Hardware(psu=PsuSpec(count=1, redundancy="none", source=SRC))
HW2 = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source=SRC))
HW3 = Hardware(psu=PsuSpec(count=3, redundancy="N+1", source=SRC))


def read(name: str) -> str:
    text = (FIX / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


def judge(text: str, hw: Hardware = HW2) -> Judgement:
    return judge_psu_ipmi(parse_ipmi_sdr(text), PsuIpmiParams(), {}, hw)


def status(text: str) -> Status:
    return outcome(parse_ipmi_sdr, lambda r: judge_psu_ipmi(r, PsuIpmiParams(), {}, HW2), text)


# ipmitool's names for the Power Supply (08h) offsets 1-7 (include/ipmitool/ipmi_sel.h) and
# FreeIPMI's short ones (ipmi_sensor_type_power_supply_short): every one is a fault
IPMITOOL_PSU_FAULTS = ("Failure detected", "Predictive failure", "Power Supply AC lost",
                       "AC lost or out-of-range", "AC out-of-range, but present",
                       "Config Error", "Power Supply Inactive")
FREEIPMI_PSU_FAULTS = ("Power Supply Failure detected", "Predictive Failure",
                       "Power Supply input lost (AC/DC)",
                       "Power Supply input lost or out-of-range",
                       "Power Supply input out-of-range, but present", "Configuration error",
                       "Power Supply Inactive")
FREEIPMI_REDUNDANCY_FAULTS = ("Redundancy Lost", "Redundancy Degraded",
                              "Non-redundant:Sufficient Resources from Redundant",
                              "Non-redundant:Sufficient Resources from Insufficient Resources",
                              "Non-redundant:Insufficient Resources",
                              "Redundancy Degraded from Fully Redundant",
                              "Redundancy Degraded from Non-redundant")


# --- ipmitool sdr elist, HP iLO: a PSU status sensor that reads Watts ---------------------

def test_elist_hp_ilo_psu_sensor_with_watts_is_a_healthy_status_sensor():
    j = judge(read("ipmi-elist-hp-ilo-psu-watts-healthy.txt"))
    assert j.status is Status.PASS, j.message
    assert j.measured == 2
    assert j.details["psu_sensors"] == "Power Supply 1 (06h), Power Supply 2 (07h)"
    assert j.details["input_power_max_w"] == 330


def test_elist_hp_ilo_failure_detected_is_the_reason_not_the_count():
    j = judge(read("ipmi-elist-hp-ilo-psu2-watts-failure-detected.txt"))
    assert j.status is Status.FAIL, j.message
    assert "Power Supply 2 (07h): Failure detected" in j.message
    assert "PSU status sensor(s)" not in j.message  # both supplies were found


@pytest.mark.parametrize(("hw", "found"), [(HW1, "2 PSU status sensor(s)"),
                                           (HW3, "2 PSU status sensor(s)")])
def test_elist_hp_ilo_each_psu_counts_once_against_the_profile(hw, found):
    """A supply that is both a status sensor and a Watts reading is one supply: the judge
    finds 2, which a 1- or 3-PSU profile does not expect."""
    j = judge(read("ipmi-elist-hp-ilo-psu-watts-healthy.txt"), hw)
    assert j.status is Status.FAIL and found in j.message, j.message


def _hp_line(n: int, watts: int, states: list[str]) -> str:
    return f"Power Supply {n}   | {5 + n:02X}h | ok  | 10.{n} | " + ", ".join(
        [f"{watts} Watts", *states])


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 3000))
def test_elist_hp_ilo_any_present_psu_with_any_watts_passes(w1, w2):
    text = "\n".join([_hp_line(1, w1, ["Presence detected"]),
                      _hp_line(2, w2, ["Presence detected"]),
                      "Power Supplies   | 08h | ok  | 10.0 | Fully Redundant"])
    assert status(text) is Status.PASS


@settings(max_examples=120, deadline=None)
@given(st.integers(1, 2), st.integers(0, 3000),
       st.lists(st.sampled_from(IPMITOOL_PSU_FAULTS), min_size=0, max_size=3, unique=True),
       st.booleans())
def test_elist_hp_ilo_an_injected_fault_never_passes(which, watts, faults, present):
    if present and not faults:
        faults = ["Failure detected"]
    states = (["Presence detected"] if present else []) + faults
    lines = [_hp_line(n, watts if n == which else 330,
                      states if n == which else ["Presence detected"]) for n in (1, 2)]
    assert status("\n".join(lines)) in BAD


# --- ipmitool sensor: 10 columns, the discrete state as a 2-byte mask ---------------------

def test_ipmitool_sensor_healthy_passes():
    j = judge(read("ipmi-sensor-healthy-2psu-redundant.txt"))
    assert j.status is Status.PASS, j.message
    assert j.measured == 2 and j.details["input_power_max_w"] == 400
    assert j.details["redundancy_sensors"] == "PS Redundancy"


def test_ipmitool_sensor_failure_mask_fails_naming_sensor_and_state():
    j = judge(read("ipmi-sensor-psu2-failure-mask-0x0380.txt"))
    assert j.status is Status.FAIL, j.message
    assert re.search(r"PSU2 Status: Failure detected \(state mask 0x0380\)", j.message), \
        j.message


@pytest.mark.parametrize(("mask", "offsets"), [("0x0100", {0}), ("0x0180", {0}),
                                               ("0x0300", {0, 1}), ("0x0001", {8}),
                                               ("0x0000", set()), ("0x8000", {7})])
def test_ipmitool_sensor_mask_is_byte_4_then_byte_5(mask, offsets):
    """``0x%02x%02x`` of Get Sensor Reading bytes 4 (offsets 0-7) and 5 (offsets 8-14, bit
    7 reserved): 0x0100 is offset 0, not offset 8."""
    line = (f"PSU2 Status      | 0x0        | discrete   | {mask}| na        | na        "
            "| na        | na        | na        | na        ")
    (s,) = parse_ipmi_sdr(line).sensors
    assert s.state_mask is not None
    assert {o for o in range(16) if s.state_mask >> o & 1} == offsets


def test_ipmitool_sensor_offset_8_on_a_psu_is_an_error_naming_it():
    text = read("ipmi-sensor-healthy-2psu-redundant.txt").replace("0x0180|", "0x0101|")
    j = judge(text)
    assert j.status is Status.ERROR, j.message
    assert "PSU2 Status" in j.message and "offset 8" in j.message


def test_ipmitool_sensor_csv_form():
    """``ipmitool -c sensor``: the same fields joined by ',' (ipmi_sensor.c csv_output)."""
    rows = [",".join(c.strip() for c in line.split("|"))
            for line in read("ipmi-sensor-psu2-failure-mask-0x0380.txt").splitlines()]
    assert rows[1] == "PSU2 Status,0x0,discrete,0x0380,na,na,na,na,na,na"
    j = judge("\n".join(rows))
    assert j.status is Status.FAIL and "PSU2 Status: Failure detected" in j.message, j.message
    healthy = [",".join(c.strip() for c in line.split("|"))
               for line in read("ipmi-sensor-healthy-2psu-redundant.txt").splitlines()]
    assert judge("\n".join(healthy)).status is Status.PASS


def test_ipmitool_sensor_power_beyond_critical_fails():
    text = read("ipmi-sensor-healthy-2psu-redundant.txt").replace(
        "| 400.000    | Watts      | ok    |", "| 950.000    | Watts      | cr    |")
    j = judge(text)
    assert j.status is Status.FAIL and "PSU1 Power In: 950 W" in j.message, j.message


def test_ipmitool_sensor_hp_watts_sensor_hides_its_states():
    """ipmi_sensor_print_fc_discrete prints only the Watts of a discrete sensor that has an
    analog reading ("don't show discrete component"), with a constant 'ok': its states are
    not in the listing, so the supply cannot be judged from it."""
    na6 = "| na        " * 6
    text = "\n".join([f"Power Supply 1   | 330        | Watts      | ok    {na6}",
                      f"Power Supply 2   | 0          | Watts      | ok    {na6}"])
    j = judge(text)
    assert j.status is Status.ERROR, j.message
    assert "Power Supply 2" in j.message and "sdr elist" in j.message


def _sensor_line(name: str, mask: int, csv: bool, pad: int) -> str:
    cells = [name, "0x0", "discrete", f"0x{mask & 0xff:02x}{mask >> 8:02x}", *["na"] * 6]
    if csv:
        return ",".join(cells)
    return " | ".join(c.ljust(pad) for c in cells)


@settings(max_examples=100, deadline=None)
@given(st.booleans(), st.integers(0, 18), st.booleans(), st.booleans())
def test_ipmitool_sensor_any_healthy_variant_passes(csv, pad, reserved1, reserved2):
    masks = [0x0001 | (0x8000 if r else 0) for r in (reserved1, reserved2)]
    text = "\n".join([_sensor_line("PSU1 Status", masks[0], csv, pad),
                      _sensor_line("PSU2 Status", masks[1], csv, pad),
                      _sensor_line("PS Redundancy", 0x0001, csv, pad)])
    assert status(text) is Status.PASS


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["PSU1 Status", "PSU2 Status", "PS Redundancy"]),
       st.integers(0, 0x7fff), st.booleans(), st.integers(0, 18))
def test_ipmitool_sensor_any_other_mask_never_passes(target, mask, csv, pad):
    if mask in (0x0001,):
        mask = 0x0003  # the one healthy mask (reserved bit 15 aside) is drawn elsewhere
    lines = [_sensor_line(n, mask if n == target else 0x0001, csv, pad)
             for n in ("PSU1 Status", "PSU2 Status", "PS Redundancy")]
    assert status("\n".join(lines)) in BAD


IPMITOOL_SENSOR = read("ipmi-sensor-healthy-2psu-redundant.txt")
IPMITOOL_SENSOR_END = IPMITOOL_SENSOR.index("\n", IPMITOOL_SENSOR.index("PSU2 Status"))


def test_ipmitool_sensor_the_judged_part_alone_passes():
    assert status(IPMITOOL_SENSOR[:IPMITOOL_SENSOR_END]) is Status.PASS


@settings(max_examples=100, deadline=None)
@given(degraded(IPMITOOL_SENSOR, numbers=r"\| (400\.000) ",
                lines=r"^(PSU1 Status|PSU2 Status|PSU1 Power In|PS Redundancy) ",
                end=len(IPMITOOL_SENSOR[:IPMITOOL_SENSOR_END].rstrip())))
def test_ipmitool_sensor_degraded_never_passes(text):
    assert status(text) in BAD


# --- FreeIPMI ipmi-sensors --------------------------------------------------------------

@pytest.mark.parametrize("fixture", ["ipmi-freeipmi-sensors-healthy-2psu.txt",
                                     "ipmi-freeipmi-sensors-state-healthy-2psu.txt",
                                     "ipmi-freeipmi-sensors-csv-healthy-2psu.txt"])
def test_freeipmi_sensors_healthy_passes(fixture):
    j = judge(read(fixture))
    assert j.status is Status.PASS, j.message
    assert j.measured == 2 and j.details["input_power_max_w"] == 400
    kinds = {s.name: k for k, s in psu_sensors(parse_ipmi_sdr(read(fixture)))}
    assert kinds == {"PSU1 Status": "psu", "PSU2 Status": "psu", "PSU1 Power In": "power",
                     "PS Redundancy": "redundancy"}


@pytest.mark.parametrize("fixture", ["ipmi-freeipmi-sensors-healthy-2psu.txt",
                                     "ipmi-freeipmi-sensors-state-healthy-2psu.txt",
                                     "ipmi-freeipmi-sensors-psu2-failure-detected.txt"])
def test_freeipmi_sensors_without_header_reads_the_same(fixture):
    """``--no-header-output``: the default layout (and the one with State) from the cells."""
    text = read(fixture)
    body = text.split("\n", 1)[1]
    assert body.startswith("4  | PSU1 Status")
    assert judge(body).status is judge(text).status


@pytest.mark.parametrize(("fixture", "sensor", "state"), [
    ("ipmi-freeipmi-sensors-psu2-failure-detected.txt", "PSU2 Status (ID 5)",
     "Power Supply Failure detected"),
    ("ipmi-freeipmi-sensors-state-psu1-input-lost.txt", "PSU1 Status (ID 4)",
     "Power Supply input lost (AC/DC)"),
    ("ipmi-freeipmi-sensors-csv-psu2-ac-out-of-range.txt", "PSU2 Status (ID 5)",
     "Power Supply input out-of-range, but present"),
])
def test_freeipmi_sensors_fault_fails_naming_sensor_and_state(fixture, sensor, state):
    j = judge(read(fixture))
    assert j.status is Status.FAIL, j.message
    assert f"{sensor}: {state}" in j.message, j.message


def test_freeipmi_nominal_state_column_does_not_hide_a_failure():
    text = read("ipmi-freeipmi-sensors-state-healthy-2psu.txt").replace(
        "| 'Presence detected'\n5", "| 'Presence detected' 'Power Supply Failure detected'\n5")
    assert "Nominal  | N/A        | N/A   | 'Presence detected' 'Power Supply Failure" in text
    j = judge(text)
    assert j.status is Status.FAIL, j.message
    assert "PSU1 Status (ID 4): Power Supply Failure detected" in j.message


def test_freeipmi_critical_state_column_is_not_healthy():
    text = read("ipmi-freeipmi-sensors-state-healthy-2psu.txt").replace(
        "| Nominal  | N/A        | N/A   | 'Presence detected'\n5",
        "| Critical | N/A        | N/A   | 'Presence detected'\n5")
    j = judge(text)
    assert j.status is Status.FAIL and "PSU1 Status (ID 4)" in j.message, j.message
    assert "Critical" in j.message


@pytest.mark.parametrize(("event", "expected", "why"), [
    ("'At or Above (>=) Upper Critical Threshold'", Status.FAIL, "critical threshold (status ucr)"),
    ("'At or Above (>=) Upper Non-Critical Threshold'", Status.WARN, "(status unc)"),
    ("Unknown", Status.FAIL, "not readable (status Unknown)"),
])
def test_freeipmi_threshold_events_of_the_power_reading(event, expected, why):
    text = read("ipmi-freeipmi-sensors-healthy-2psu.txt").replace(
        "| 400.00     | W     | 'OK'", f"| 400.00     | W     | {event}")
    j = judge(text)
    assert j.status is expected and "PSU1 Power In (ID 6)" in j.message and why in j.message, \
        j.message


def test_freeipmi_unrecognized_event_is_an_error_quoting_it():
    text = read("ipmi-freeipmi-sensors-healthy-2psu.txt").replace(
        "'Presence detected'\n5", "'Presence detected' 'Unrecognized Event = 0100h'\n5")
    j = judge(text)
    assert j.status is Status.ERROR, j.message
    assert "PSU1 Status (ID 4)" in j.message and "'Unrecognized Event = 0100h'" in j.message


def test_freeipmi_event_bitmask_is_the_offsets():
    """``--output-event-bitmask``: the event column is the 16-bit mask, bit n offset n."""
    text = re.sub(r"'Presence detected'$", "0001h", read("ipmi-freeipmi-sensors-healthy-2psu.txt"),
                  flags=re.M).replace("'Fully Redundant'", "0001h")
    assert judge(text).status is Status.PASS
    j = judge(text.replace("| 0001h\n5", "| 0003h\n5"))
    assert j.status is Status.FAIL, j.message
    assert "PSU1 Status (ID 4): Failure detected (state mask 0003h)" in j.message


@pytest.mark.parametrize("cut", ["| 'Presence detected\n", "| N/A        | N/A\n"])
def test_freeipmi_a_damaged_row_is_a_parse_error_quoting_it(cut):
    text = read("ipmi-freeipmi-sensors-healthy-2psu.txt").replace(
        "| N/A        | N/A   | 'Presence detected'\n5", cut + "5", 1)
    with pytest.raises(ParseError, match="PSU1 Status"):
        parse_ipmi_sdr(text)


def _freeipmi(rows: list[tuple[str, str, str]], csv: bool, state: bool) -> str:
    head = ["ID", "Name", "Type", *(["State"] if state else []), "Reading", "Units", "Event"]
    out = [("," if csv else " | ").join(head)]
    for rid, (name, typ, event) in enumerate(rows, start=3):
        cells = [str(rid), name, typ, *(["Nominal"] if state else []), "N/A", "N/A", event]
        out.append(("," if csv else " | ").join(cells))
    return "\n".join(out)


FREEIPMI_HEALTHY = [("PSU1 Status", "Power Supply", "'Presence detected'"),
                    ("PSU2 Status", "Power Supply", "'Presence detected'"),
                    ("PS Redundancy", "Power Supply", "'Fully Redundant'")]


@settings(max_examples=60, deadline=None)
@given(st.booleans(), st.booleans(), st.randoms(use_true_random=False))
def test_freeipmi_any_healthy_variant_passes(csv, state, rnd):
    rows = list(FREEIPMI_HEALTHY)
    rnd.shuffle(rows)
    assert status(_freeipmi(rows, csv, state)) is Status.PASS


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2), st.booleans(), st.booleans(), st.data())
def test_freeipmi_an_injected_event_never_passes(row, csv, state, data):
    rows = list(FREEIPMI_HEALTHY)
    name, typ, _ = rows[row]
    if row < 2:
        faults = data.draw(st.lists(st.sampled_from(FREEIPMI_PSU_FAULTS), max_size=3,
                                    unique=True))
        present = data.draw(st.booleans()) if faults else False
        events = (["Presence detected"] if present else []) + faults
    else:
        events = data.draw(st.lists(st.sampled_from(FREEIPMI_REDUNDANCY_FAULTS), min_size=1,
                                    max_size=2, unique=True))
    rows[row] = (name, typ, " ".join(f"'{e}'" for e in events) or "'OK'")
    assert status(_freeipmi(rows, csv, state)) in BAD


FREEIPMI = read("ipmi-freeipmi-sensors-healthy-2psu.txt")
FREEIPMI_END = FREEIPMI.index("\n", FREEIPMI.index("PSU2 Status"))


@settings(max_examples=100, deadline=None)
@given(degraded(FREEIPMI, numbers=r"\| (400\.00) ",
                lines=r"^\d+ +\| (PSU1 Status|PSU2 Status|PSU1 Power In|PS Redundancy) ",
                end=FREEIPMI_END))
def test_freeipmi_degraded_never_passes(text):
    assert status(text) in BAD



@pytest.mark.parametrize("record_id", ["65536", "9" * 100_001])
def test_freeipmi_record_id_past_two_bytes_is_a_parse_error(record_id):
    """An SDR record ID is two bytes: a longer one is damaged output, refused as a
    ParseError (a 100,001-digit ID once reached int() and raised ValueError; the fuzz
    test found it)."""
    text = re.sub(r"^4 ", f"{record_id} ", FREEIPMI, count=1, flags=re.M)
    assert text != FREEIPMI
    with pytest.raises(ParseError):
        parse_ipmi_sdr(text)

# --- formats on no list -------------------------------------------------------------------

@pytest.mark.parametrize("text", ["PSU1 Status: Presence detected\nPSU2 Status: Presence detected",
                                  "Sensor | Value\nPSU1 Status | present"])
def test_an_unknown_format_is_a_parse_error_quoting_the_line(text):
    with pytest.raises(ParseError) as e:
        parse_ipmi_sdr(text)
    assert repr(text.splitlines()[0]) in str(e.value)


def test_ipmitool_sensor_line_order_does_not_matter():
    lines = read("ipmi-sensor-healthy-2psu-redundant.txt").splitlines()
    random.Random(14).shuffle(lines)
    assert judge("\n".join(lines)).status is Status.PASS
