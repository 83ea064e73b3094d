"""Issue 28 finding 1: ``redundancy.psu_ipmi`` passed damaged listings. The SDR parser
skipped every line it could not read and the judge saw only what was read, so a PSU line
above critical passed when a cell of it was damaged, and one supply listed twice counted
as two. Now every line is accounted for (``IpmiSdr.unread``; the judge does not pass one
that could concern the supplies) and each sensor is one identity (its name and entity).

Listings: tests/fixtures/redundancy/ipmi-*.txt (hand-written from ipmitool's ``sdr elist``
layout, headers there), and the real ``sdr elist`` of Debian's ipmi_sim queried by
ipmitool 1.8.19 (tests/integration/test_ipmi_sim.py), which is the healthy fixture's
first three lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rackgate.checks.redundancy import PsuIpmiParams, judge_psu_ipmi
from rackgate.model import Judgement, Status
from rackgate.parsers import ParseError
from rackgate.parsers.ipmi import parse_ipmi_sdr
from rackgate.profile import Hardware, PsuSpec

FIX = Path(__file__).parents[1] / "fixtures" / "redundancy"
HW2 = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source="a profile for the unit tests"))


def read(name: str) -> str:
    text = (FIX / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


def judge(text: str) -> Judgement:
    try:
        sdr = parse_ipmi_sdr(text)
    except ParseError as exc:
        return Judgement(Status.ERROR, str(exc))
    return judge_psu_ipmi(sdr, PsuIpmiParams(), {}, HW2)


HEALTHY = read("ipmi-elist-healthy-2psu-redundant.txt")
CRITICAL = read("ipmi-elist-power-above-critical.txt")
CRITICAL_LINE = "PSU1 Power In    | 03h | ucr | 10.1 | 928 Watts"
LOST = read("ipmi-elist-redundancy-lost.txt")
TWICE = read("ipmi-elist-psu1-listed-twice.txt")
PSU1 = "PSU1 Status      | 01h | ok  | 10.1 | Presence detected"


def test_the_sources_are_judged_as_their_headers_say():
    """The control: the healthy listing (and the real ipmi_sim one) passes, the faulty
    ones fail; else every test below could pass by failing everything."""
    assert judge(HEALTHY).status is Status.PASS
    assert judge("\n".join(HEALTHY.splitlines()[:3]) + "\n").status is Status.PASS
    for faulty in (CRITICAL, LOST, TWICE):
        assert judge(faulty).status is Status.FAIL
    assert CRITICAL_LINE in CRITICAL and PSU1 in TWICE


def test_healthy_listings_with_other_lines_still_pass():
    """Lines of other sensors, tool chatter, CRLF endings and two supplies of one name on
    two entities (Dell's "Status", 10.1 and 10.2) are no reason to refuse a listing."""
    chatter = "Loading IANA PEN Registry...\nroot@host:~# ipmitool sdr elist\n"
    assert judge(chatter + HEALTHY + "Fan1 RPM | 30h | ok | 29.1 | 5040 RPM\n").status \
        is Status.PASS
    assert judge(HEALTHY.replace("\n", "\r\n")).status is Status.PASS
    dell = ("PS Redundancy,77h,ok,7.1,Fully Redundant\nStatus,85h,ok,10.1,Presence detected\n"
            "Status,86h,ok,10.2,Presence detected\n")
    j = judge(dell)
    assert j.status is Status.PASS and j.measured == 2, j.message


@pytest.mark.parametrize("status", ["uc", "ucr*", "", "UCR!", "crit"])
def test_sound2_1_a_critical_power_line_with_an_unread_status_never_passes(status):
    text = CRITICAL.replace("| ucr |", f"| {status} |")
    assert text != CRITICAL
    j = judge(text)
    assert j.status is Status.ERROR, j.message
    assert "line 3 of the listing cannot be read" in j.message and "PSU1 Power In" in j.message


@pytest.mark.parametrize("number", ["0x03", "003h", "03", "\u0660\u0663h"])
def test_sound2_1_a_sensor_number_in_another_notation_never_passes(number):
    j = judge(CRITICAL.replace("| 03h |", f"| {number} |"))
    assert j.status is Status.ERROR, j.message
    assert f"| {number} |" in j.message


@pytest.mark.parametrize("reading", ["+928", "9.28e2", "928."])
def test_sound2_1_a_critical_reading_in_another_notation_never_passes(reading):
    j = judge(CRITICAL.replace("| 928 Watts", f"| {reading} Watts"))
    assert j.status is Status.ERROR, j.message
    assert "PSU1 Power In" in j.message and "not a finite number of Watts" in j.message


@pytest.mark.parametrize(("old", "new"), [("| 03h |", "| 3h |"), ("| 928 Watts", "| 0928 Watts"),
                                          ("| 928 Watts", "| \u0669\u0662\u0668 Watts"),
                                          ("| 10.1 | 928", "| 010.1 | 928"),
                                          ("| 10.1 | 928", "| 10.01 | 928")])
def test_a_notation_no_tool_prints_is_not_read_as_the_number(old, new):
    """ipmitool prints "%02Xh", "%2d.%1d" and "%.Nf" in ASCII digits. The base read these as
    the number (and failed the listing on its critical status); they are damage all the
    same, and the same kind of damage elsewhere passed (above)."""
    text = CRITICAL.replace(old, new)
    assert text != CRITICAL
    assert judge(text).status is Status.ERROR


def test_sound2_1_a_six_column_row_never_passes():
    j = judge(CRITICAL.replace(CRITICAL_LINE, CRITICAL_LINE + " | Upper Critical"))
    assert j.status is Status.ERROR, j.message
    assert "line 3 of the listing cannot be read" in j.message


@pytest.mark.parametrize("entity", ["7", " 7 .1", "x.1"])
def test_sound2_1_redundancy_lost_with_an_unread_entity_never_passes(entity):
    text = LOST.replace("|  7.1 |", f"| {entity} |")
    assert text != LOST
    j = judge(text)
    assert j.status is Status.ERROR, j.message
    assert "PS Redundancy" in j.message and "cannot be read" in j.message


def test_sound2_1_psu1_twice_under_another_sensor_number_is_not_two_psus():
    j = judge(TWICE.replace(PSU1 + "\n" + PSU1, PSU1 + "\n" + PSU1.replace("01h", "06h")))
    assert j.status is Status.FAIL, j.message
    assert "1 PSU status sensor(s) (PSU1 Status (01h)), the profile expects 2" in j.message
    assert "PSU1 Status (01h) is listed 2 times (as PSU1 Status (01h), PSU1 Status (06h))" \
        in j.message


@pytest.mark.parametrize("at", ["\ufeff", "\u200b", "\x00"])
def test_sound2_1_psu1_twice_behind_a_byte_order_mark_is_not_two_psus(at):
    j = judge(TWICE.replace(PSU1 + "\n" + PSU1, PSU1 + "\n" + at + PSU1))
    assert j.status is Status.FAIL, j.message
    assert "1 PSU status sensor(s) (PSU1 Status (01h)), the profile expects 2" in j.message
    assert "line 2 of the listing cannot be read" in j.message


def test_sound2_1_a_byte_order_mark_at_the_start_of_the_text_never_hides_a_supply():
    j = judge("\ufeff" + TWICE)
    assert j.status is Status.FAIL and "line 1 of the listing cannot be read" in j.message, \
        j.message


def test_sound2_1_one_sensor_number_under_two_names_never_passes():
    """The second supply's line is the first one's sensor with another name."""
    text = HEALTHY.replace("PSU2 Status      | 02h |", "PSU2 Status      | 01h |")
    j = judge(text)
    assert j.status is Status.ERROR, j.message
    assert "sensor number 01h is listed for PSU1 Status (entity 10.1) and PSU2 Status " \
           "(entity 10.2)" in j.message


def test_sound2_1_freeipmi_one_name_on_two_records_is_not_two_psus():
    """FreeIPMI's record ID is no identity: without an entity, one name is one sensor."""
    text = read("ipmi-freeipmi-sensors-healthy-2psu.txt").replace("PSU2 Status", "PSU1 Status")
    j = judge(text)
    assert j.status is not Status.PASS, j.message
    assert "PSU1 Status (ID 4) is listed 2 times (as PSU1 Status (ID 4), PSU1 Status (ID 5))" \
        in j.message and "collect 'sdr elist'" in j.message


def test_sound2_1_a_damaged_row_of_a_third_supply_never_passes():
    """A supply the profile does not count is foreign hardware; a damaged row cannot hide
    it, nor its fault."""
    extra = "PSU3 Status      | 0x07 | ok  | 10.3 | Presence detected, Failure detected\n"
    j = judge(HEALTHY + extra)
    assert j.status is Status.ERROR, j.message
    assert "line 6 of the listing cannot be read ('PSU3 Status" in j.message


def test_sound2_1_a_carriage_return_inside_a_row_never_hides_its_fault():
    """Only '\\n' ends a line: a stray CR inside PSU2's row cut 'Failure detected' off it."""
    text = read("ipmi-elist-psu2-failure-detected.txt").replace(
        "Presence detected, Failure detected", "Presence detected,\r Failure detected")
    assert "\r" in text
    j = judge(text)
    assert j.status is not Status.PASS, j.message
    assert "PSU2 Status" in j.message


def test_sound2_1_a_damaged_state_of_a_verbose_block_never_passes():
    """A ``[state]`` item behind a byte-order mark ended the block's state list, and the
    parser skipped it: PSU2's failure was lost."""
    def block(n: int, states: str) -> str:
        return (f"Sensor ID              : PSU{n} Status (0x{n})\n"
                f" Entity ID             : 10.{n} (Power Supply)\n"
                " Sensor Type (Discrete): Power Supply (0x08)\n"
                f" States Asserted       : Power Supply\n{states}\n")
    ok = "                         [Presence detected]"
    healthy = block(1, ok) + "\n" + block(2, ok)
    assert judge(healthy).status is Status.PASS
    damaged = block(1, ok) + "\n" + block(2, ok + "\n\ufeff                         "
                                                  "[Failure detected]")
    j = judge(damaged)
    assert j.status is Status.ERROR, j.message
    assert "line 12 of the listing cannot be read" in j.message
