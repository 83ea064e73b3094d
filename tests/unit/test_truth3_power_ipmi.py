"""Issue 29 (verdict truth, third pass), IPMI power: v2 and v3, FreeIPMI ``ipmi-sensors``
outputs that were refused.

v2: ``--comma-separated-output --no-header-output``: rows joined by ``,`` with no header.
v3: ``--output-sensor-thresholds``: the six threshold columns (Lower NR, Lower C, Lower NC,
Upper NC, Upper C, Upper NR) after Units, 13 columns with ``--output-sensor-state``, with or
without header, ``|`` or ``,`` (the form monitoring scripts collect).

Fixtures tests/fixtures/redundancy/ipmi-freeipmi-sensors-{csv-noheader,thresholds}-*.txt,
written from FreeIPMI's ipmi-sensors-simple-output.c (headers in the files). Every row of
these layouts is read or the listing is not passed: a row that fits no layout is an
unread line the judge reports, one listed twice an error.
"""

from __future__ import annotations

import re

import pytest
from degrade_helpers import degraded
from hypothesis import given, settings
from hypothesis import strategies as st
from test_real_formats_ipmi import BAD, FREEIPMI_PSU_FAULTS, judge, read, status

from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.ipmi import parse_ipmi_sdr, psu_sensors

CSV_NOHEADER = "ipmi-freeipmi-sensors-csv-noheader-healthy-2psu.txt"
THRESHOLDS = "ipmi-freeipmi-sensors-thresholds-healthy-2psu.txt"
THRESHOLDS_CSV = "ipmi-freeipmi-sensors-thresholds-csv-noheader-healthy-2psu.txt"
KINDS = {"PSU1 Status": "psu", "PSU2 Status": "psu", "PSU1 Power In": "power",
         "PS Redundancy": "redundancy"}


def _read_as(text: str) -> list[tuple[object, ...]]:
    """What the judge reads of each PSU sensor (the units' spelling aside)."""
    return [(k, s.name, s.record_id, s.states, s.watts, s.status, s.readable)
            for k, s in psu_sensors(parse_ipmi_sdr(text))]


def _drop_state(text: str) -> str:
    """The same table without the State column (``--output-sensor-thresholds`` alone)."""
    return re.sub(r" \| (?:State   |Nominal |Critical|Warning |N/A     ) (?=\| )", "", text)


# ------------------------------------------------------------------ v2


def test_truth3_v2_freeipmi_csv_without_header_passes():
    j = judge(read(CSV_NOHEADER))
    assert j.status is Status.PASS, j.message
    assert j.measured == 2 and j.details["input_power_max_w"] == 400
    assert {s.name: k for k, s in psu_sensors(parse_ipmi_sdr(read(CSV_NOHEADER)))} == KINDS


def test_truth3_v2_freeipmi_csv_without_header_reads_as_with_it():
    headed = read("ipmi-freeipmi-sensors-csv-healthy-2psu.txt")
    assert _read_as(read(CSV_NOHEADER)) == _read_as(headed)
    assert not parse_ipmi_sdr(read(CSV_NOHEADER)).unread


def test_truth3_v2_freeipmi_csv_without_header_failure_fails():
    j = judge(read("ipmi-freeipmi-sensors-csv-noheader-psu2-failure-detected.txt"))
    assert j.status is Status.FAIL, j.message
    assert "PSU2 Status (ID 5): Power Supply Failure detected" in j.message


def test_truth3_v2_an_event_holding_a_comma_stays_one_event():
    text = read(CSV_NOHEADER).replace(
        "5,PSU2 Status,Power Supply,N/A,N/A,'Presence detected'",
        "5,PSU2 Status,Power Supply,N/A,N/A,'Presence detected' "
        "'Power Supply input out-of-range, but present'")
    j = judge(text)
    assert j.status is Status.FAIL, j.message
    assert "PSU2 Status (ID 5): Power Supply input out-of-range, but present" in j.message


@pytest.mark.parametrize("damage", [
    ("5,PSU2 Status,Power Supply,N/A,N/A,", "5,PSU2 Status,Power Supply,N/A,"),  # a cell lost
    ("5,PSU2 Status,Power", "5x,PSU2 Status,Power"),  # an ID FreeIPMI never prints
    ("6,PSU1 Power In,Power Supply,400.00,W", "6,PSU1 Power In,Power Supply,4e2,W"),
])
def test_truth3_v2_a_row_that_fits_no_layout_is_never_passed(damage):
    text = read(CSV_NOHEADER).replace(*damage)
    assert text != read(CSV_NOHEADER)
    j = judge(text)
    assert j.status is Status.ERROR or j.status is Status.FAIL, j.message
    assert j.status is not Status.PASS


def test_truth3_v2_a_row_listed_twice_is_an_error():
    lines = read(CSV_NOHEADER).splitlines()
    j = judge("\n".join([*lines, lines[1]]))
    assert j.status is Status.ERROR, j.message
    assert "PSU2 Status (ID 5) is listed 2 times" in j.message


# ------------------------------------------------------------------ v3


@pytest.mark.parametrize("fixture", [THRESHOLDS, THRESHOLDS_CSV])
def test_truth3_v3_freeipmi_thresholds_passes(fixture):
    j = judge(read(fixture))
    assert j.status is Status.PASS, j.message
    assert j.measured == 2 and j.details["input_power_max_w"] == 400


@pytest.mark.parametrize("variant", ["no header", "no State", "no header, no State"])
def test_truth3_v3_freeipmi_thresholds_every_layout_reads_the_same(variant):
    text = read(THRESHOLDS)
    if "no State" in variant:
        text = _drop_state(text)
        assert "| Lower NR" in text and "State" not in text and "Nominal" not in text
    if "no header" in variant:
        text = text.split("\n", 1)[1]
        assert text.startswith("4  | PSU1 Status")
    assert _read_as(text) == _read_as(read(THRESHOLDS))
    assert judge(text).status is Status.PASS
    assert not parse_ipmi_sdr(text).unread


def test_truth3_v3_thresholds_csv_reads_as_the_table():
    assert _read_as(read(THRESHOLDS_CSV)) == _read_as(read(THRESHOLDS))


@pytest.mark.parametrize(("fixture", "expected"), [
    ("ipmi-freeipmi-sensors-thresholds-noheader-psu2-absent.txt",
     "PSU2 Status (ID 5): presence not asserted"),
    ("ipmi-freeipmi-sensors-thresholds-csv-noheader-psu1-power-above-critical.txt",
     "PSU1 Power In (ID 6): 1,250 W is beyond the BMC's critical threshold (status ucr)"),
])
def test_truth3_v3_freeipmi_thresholds_degraded_fails(fixture, expected):
    j = judge(read(fixture))
    assert j.status is Status.FAIL, j.message
    assert expected in j.message


def test_truth3_v3_a_threshold_that_is_no_number_is_refused():
    """With a header, a damaged row is a ParseError quoting it (as every FreeIPMI table
    row); without one, the row fits no layout and is reported, never passed."""
    text = read(THRESHOLDS).replace("| 1100.00    |", "| 11OO.00    |")
    with pytest.raises(ParseError, match=r"threshold Upper NC '11OO\.00'"):
        parse_ipmi_sdr(text)
    headless = read(THRESHOLDS_CSV).replace(",1100.00,", ",1100.0O,")
    j = judge(headless)
    assert j.status is Status.ERROR, j.message
    assert "PSU1 Power In" in j.message and "cannot be read" in j.message


# ------------------------------------------------------------------ properties

ROWS = [(4, "PSU1 Status", "N/A", "N/A", ("N/A",) * 6, "'Presence detected'"),
        (5, "PSU2 Status", "N/A", "N/A", ("N/A",) * 6, "'Presence detected'"),
        (6, "PSU1 Power In", "400.00", "W", ("N/A", "N/A", "N/A", "1100.00", "1200.00", "N/A"),
         "'OK'"),
        (7, "PS Redundancy", "N/A", "N/A", ("N/A",) * 6, "'Fully Redundant'")]


def _table(rows: list[tuple[int, str, str, str, tuple[str, ...], str]], csv: bool,
           header: bool, state: bool, thresholds: bool) -> str:
    """A FreeIPMI table in one of its layouts (ipmi-sensors-simple-output.c)."""
    sep = "," if csv else " | "
    head = ["ID", "Name", "Type", *(["State"] if state else []), "Reading", "Units",
            *(["Lower NR", "Lower C", "Lower NC", "Upper NC", "Upper C", "Upper NR"]
              if thresholds else []), "Event"]
    out = [sep.join(head)] if header else []
    for rid, name, reading, units, thr, event in rows:
        out.append(sep.join([str(rid), name, "Power Supply", *(["Nominal"] if state else []),
                             reading, units, *(thr if thresholds else ()), event]))
    return "\n".join(out) + "\n"


LAYOUTS = st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans())


@settings(max_examples=60, deadline=None)
@given(LAYOUTS, st.randoms(use_true_random=False))
def test_truth3_v3_any_healthy_layout_passes(layout, rnd):
    rows = list(ROWS)
    rnd.shuffle(rows)
    assert status(_table(rows, *layout)) is Status.PASS


@settings(max_examples=120, deadline=None)
@given(LAYOUTS, st.integers(0, 1), st.lists(st.sampled_from(FREEIPMI_PSU_FAULTS), min_size=1,
                                            max_size=3, unique=True), st.booleans())
def test_truth3_v3_an_injected_fault_never_passes(layout, row, faults, present):
    rows = list(ROWS)
    rid, name, reading, units, thr, _ = rows[row]
    events = (["Presence detected"] if present else []) + faults
    rows[row] = (rid, name, reading, units, thr, " ".join(f"'{e}'" for e in events))
    assert status(_table(rows, *layout)) in BAD


@settings(max_examples=60, deadline=None)
@given(LAYOUTS, st.integers(0, 3))
def test_truth3_v3_a_row_lost_or_doubled_never_passes(layout, row):
    rows = list(ROWS)
    lost = rows[:row] + rows[row + 1:]
    doubled = [*rows, rows[row]]
    if row < 2:  # a supply's status sensor; the power and redundancy sensors are optional
        assert status(_table(lost, *layout)) in BAD
    assert status(_table(doubled, *layout)) in BAD


_READ = r"^[0-9]+ *[,|] *(PSU1 Status|PSU2 Status|PSU1 Power In|PS Redundancy) *[,|]"


@pytest.mark.parametrize("fixture", [CSV_NOHEADER, THRESHOLDS, THRESHOLDS_CSV])
def test_truth3_v3_degraded_never_passes(fixture):
    """Issue 11's degradations (a line the judge reads printed twice, the text cut before
    its last one, the input power not finite) of each new layout."""
    text = read(fixture)
    end = text.index("\n", text.index("PSU2 Status"))

    @settings(max_examples=60, deadline=None)
    @given(degraded(text, numbers=r"[,|] *(400\.00) *[,|]", lines=_READ, end=end))
    def run(mutant: str) -> None:
        assert status(mutant) in BAD

    run()
