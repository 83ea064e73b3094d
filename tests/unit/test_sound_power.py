"""Issue 11, power family: redundancy.psu_ipmi and redundancy.psu_redfish give an ACCEPT only
from complete, finite, positively healthy evidence.

IPMI fixtures: tests/fixtures/redundancy/ipmi-*.txt, written by hand from ipmitool's
``sdr elist`` layout and its state strings (include/ipmitool/ipmi_sel.h
sensor_specific_event_types), each header says which fault it shows. Redfish inputs are
derived here from the project's mockup trees (tests/fixtures/redfish, see SOURCES.md) by
editing one resource.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rackgate.checks.cooling import PsuRedfishParams, judge_psu_redfish
from rackgate.checks.redundancy import PsuIpmiParams, judge_psu_ipmi
from rackgate.model import Judgement, Status
from rackgate.parsers import ParseError
from rackgate.parsers.ipmi import parse_ipmi_sdr
from rackgate.parsers.redfish import parse_redfish_power
from rackgate.profile import Hardware, PsuSpec

FIXTURES = Path(__file__).parents[1] / "fixtures"
SRC = "a profile written for the unit tests"
HW2 = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source=SRC))
HW6 = Hardware(psu=PsuSpec(count=6, redundancy="N+2", source=SRC))
PS = "/redfish/v1/Chassis/1/PowerSubsystem"


def ipmi_text(name: str) -> str:
    text = (FIXTURES / "redundancy" / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def ipmi(name: str, hw: Hardware = HW2) -> Judgement:
    return judge_psu_ipmi(parse_ipmi_sdr(ipmi_text(name)), PsuIpmiParams(), {}, hw)


def healthy_power() -> dict[str, dict[str, Any]]:
    """The healthy mockup's power resources, as the collector would gather them."""
    root = FIXTURES / "redfish" / "healthy"
    found = {}
    for path in sorted(root.rglob("index.json")):
        rel = path.parent.relative_to(root).as_posix()
        if rel.startswith("Chassis"):
            found["/redfish/v1/" + rel] = json.loads(path.read_text(encoding="utf-8"))
    return found


def collected(resources: dict[str, dict[str, Any]]) -> str:
    return json.dumps({"collector": "rackgate.redfish", "kind": "power", "resources": resources})


def redfish(text: str, hw: Hardware = HW6) -> Judgement:
    return judge_psu_redfish(parse_redfish_power(text), PsuRedfishParams(), {}, hw)


def test_healthy_inputs_still_pass():
    """The control: without it every test below could pass by failing everything."""
    assert ipmi("ipmi-elist-healthy-2psu-redundant.txt").status is Status.PASS
    assert redfish(collected(healthy_power())).status is Status.PASS


# --- finding 2: PSU fault states pass --------------------------------------------------------

@pytest.mark.parametrize(("fixture", "state"), [
    ("ipmi-elist-psu2-config-error.txt", "Config Error"),
    ("ipmi-elist-psu2-config-error-vendor-mismatch.txt", "Config Error"),
    ("ipmi-elist-psu2-inactive.txt", "Power Supply Inactive"),
])
def test_sound_2_ipmi_config_error_and_inactive_fail(fixture, state):
    j = ipmi(fixture)
    assert j.status is Status.FAIL, j.message
    assert "PSU2 Status (02h)" in j.message and state in j.message


def test_sound_2_ipmi_ac_out_of_range_is_a_fail_not_a_warning():
    """Offset 05h as the 0xNN bit 5 (0x21: the reading of an "ok" power bay in ipmitool
    issue 318) was only a warning, which does not block an ACCEPT."""
    text = ipmi_text("ipmi-sdr-3col-psu2-failure-bit.txt").replace("| 0x03 ", "| 0x21 ")
    j = judge_psu_ipmi(parse_ipmi_sdr(text), PsuIpmiParams(), {}, HW2)
    assert j.status is Status.FAIL, j.message
    assert "PSU2 Status: AC out-of-range, but present (reading 0x21)" in j.message


def test_ipmi_state_with_a_comma_is_one_state():
    """ipmitool joins states with ', ' and 'AC out-of-range, but present' holds one."""
    sdr = parse_ipmi_sdr(ipmi_text("ipmi-elist-psu2-ac-out-of-range.txt"))
    assert sdr.sensors[1].states == ("Presence detected", "AC out-of-range, but present")
    j = ipmi("ipmi-elist-psu2-ac-out-of-range.txt")
    assert j.status is Status.FAIL, j.message
    assert "PSU2 Status (02h): AC out-of-range, but present" in j.message


@pytest.mark.parametrize(("fixture", "sensor", "text"), [
    ("ipmi-elist-psu2-garbled-state.txt", "PSU2 Status (02h)", "'Fai1ure detected'"),
    ("ipmi-elist-redundancy-garbled-state.txt", "PS Redundancy (04h)", "'Redundancy Lozt'"),
])
def test_sound_2_ipmi_unknown_state_text_is_an_error_naming_sensor_and_text(fixture, sensor,
                                                                              text):
    j = ipmi(fixture)
    assert j.status is Status.ERROR, j.message
    assert f"{sensor}: state {text} is not one ipmitool prints" in j.message


def test_sound_2_ipmi_redundancy_sensor_without_a_state_is_not_redundancy():
    j = ipmi("ipmi-elist-redundancy-no-state.txt")
    assert j.status is Status.ERROR, j.message
    assert "PS Redundancy (04h): asserts no redundancy state" in j.message


def test_sound_2_ipmi_power_unit_power_cycle_is_not_healthy():
    j = ipmi("ipmi-elist-power-unit-power-cycle.txt")
    assert j.status is Status.FAIL, j.message
    assert "Pwr Unit Status (05h): Power cycle" in j.message


@pytest.mark.parametrize("fixture", ["ipmi-sdr-3col-psu-readings-0x00.txt",
                                     "ipmi-sdr-3col-psu-readings-0x01.txt"])
def test_sound_2_ipmi_three_column_reading_never_shows_health(fixture):
    j = ipmi(fixture)
    assert j.status is Status.ERROR, j.message
    assert "PSU1 Status: reading 0x0" in j.message and "collect 'sdr elist'" in j.message


def test_sound_2_redfish_redundancy_group_without_status_is_not_redundancy():
    for status in ({}, {"State": "Enabled"}):
        res = healthy_power()
        res[PS]["PowerSupplyRedundancy"][0]["Status"] = status
        res["/redfish/v1/Chassis/1/Power"]["Redundancy"][0]["Status"] = status
        j = redfish(collected(res))
        assert j.status is Status.ERROR, (status, j.message)
        assert "redundancy group PowerSupplyRedundancy 0 (NPlusM)" in j.message


@pytest.mark.parametrize("state", ["StandbyOffline", "Qualified", "Enabeld"])
def test_redfish_supply_state_other_than_enabled_never_passes(state):
    """Each documented state other than Enabled is a fail with its reason; an undocumented
    one is an error (the base already failed these; kept so the allow-list stays one)."""
    res = healthy_power()
    res[f"{PS}/PowerSupplies/Bay3"]["Status"]["State"] = state
    j = redfish(collected(res), Hardware(psu=PsuSpec(count=6, redundancy="N+1",
                                                     source=SRC)))
    assert j.status is (Status.ERROR if state == "Enabeld" else Status.FAIL), j.message
    assert "Power Supply Bay3" in j.message and state in j.message


# --- finding 4: non-finite and impossible figures ---------------------------------------------

@pytest.mark.parametrize("watts", ["9" * 400, "nan", "inf"])
def test_sound_4_ipmi_non_finite_watts_are_refused(watts):
    healthy = ipmi_text("ipmi-elist-healthy-2psu-redundant.txt")
    text = healthy.replace("| 400 Watts", f"| {watts} Watts") if watts[0] == "9" else \
        healthy.replace("PSU1 Power In    | 03h | ok  | 10.1 | 400 Watts",
                        f"PSU1 Power In,{watts},Watts,ok")
    assert text != healthy
    with pytest.raises(ParseError, match=r"PSU1 Power In.*not a finite number of Watts"):
        parse_ipmi_sdr(text)


def test_sound_4_ipmi_impossible_input_power_is_an_error():
    text = ipmi_text("ipmi-elist-healthy-2psu-redundant.txt").replace("| 400 Watts",
                                                                     "| 9000000 Watts")
    j = judge_psu_ipmi(parse_ipmi_sdr(text), PsuIpmiParams(), {}, HW2)
    assert j.status is Status.ERROR, j.message
    assert "PSU1 Power In (03h): 9,000,000 W is implausible" in j.message


def test_sound_4_redfish_impossible_input_power_is_an_error():
    res = healthy_power()
    res[f"{PS}/PowerSupplies/Bay2/Metrics"]["InputPowerWatts"]["Reading"] = 5e9
    j = redfish(collected(res), Hardware(psu=PsuSpec(count=6, redundancy="N+2",
                                                     watts_each=3300, source=SRC)))
    assert j.status is Status.ERROR, j.message
    assert "Power Supply Bay2: input power 5,000,000,000 W is outside 0 to 4,950 W" in j.message


# --- finding 9: one node's output can leave the rack with no report ---------------------------

def test_sound_9_ipmi_verbose_reading_with_two_dots_is_a_record_or_a_parse_error():
    """float('4.0.0') raised ValueError out of the parser."""
    text = ("PSU1 Power In    | 03h | ok  | 10.1 | 400 Watts\n\n"
            "Sensor ID              : PSU1 Power In (0x3)\n"
            " Sensor Reading        : 4.0.0 (+/- 0) Watts\n")
    try:
        sdr = parse_ipmi_sdr(text)
    except ParseError:
        return
    assert sdr.sensors[0].watts == 400


@pytest.mark.parametrize(("field", "value"), [("MinNumNeeded", "NaN"),
                                              ("MinNumNeeded", "1" + "0" * 400),
                                              ("MaxNumSupported", "Infinity")])
def test_sound_9_redfish_non_finite_integer_is_a_parse_error(field, value):
    res = healthy_power()
    del res[PS]  # judged from the legacy Power resource alone
    text = collected(res).replace('"MinNumNeeded": 4', f'"{field}": {value}', 1) \
        if field == "MinNumNeeded" else \
        collected(res).replace('"MaxNumSupported": 6', f'"{field}": {value}', 1)
    with pytest.raises(ParseError, match=f"Redundancy\\[0\\]\\.{field}"):
        parse_redfish_power(text)


# --- finding 14: counting ---------------------------------------------------------------------

def test_sound_14_ipmi_a_duplicated_psu_line_is_not_a_second_psu():
    j = ipmi("ipmi-elist-psu1-listed-twice.txt")
    assert j.status is Status.FAIL, j.message
    assert "1 PSU status sensor(s) (PSU1 Status (01h)), the profile expects 2" in j.message
    assert "PSU1 Status (01h) is listed 2 times: duplicated output" in j.message


def test_sound_14_redfish_a_duplicated_legacy_member_is_not_a_second_supply():
    res = healthy_power()
    del res[PS]
    del res[f"{PS}/PowerSupplies"]
    for bay in range(1, 7):
        del res[f"{PS}/PowerSupplies/Bay{bay}"]
        del res[f"{PS}/PowerSupplies/Bay{bay}/Metrics"]
    legacy = res["/redfish/v1/Chassis/1/Power"]
    legacy["PowerSupplies"][5] = legacy["PowerSupplies"][4]  # Bay5 twice, Bay6 gone
    with pytest.raises(ParseError, match=r"lists @odata\.id .*PowerSupplies/4 twice"):
        parse_redfish_power(collected(res))


def test_sound_14_redfish_a_supply_missing_from_its_collection_is_noticed():
    res = healthy_power()
    del res[f"{PS}/PowerSupplies/Bay6"]
    del res[f"{PS}/PowerSupplies/Bay6/Metrics"]
    with pytest.raises(ParseError, match=r"lists member '.*Bay6', which is not in the evidence"):
        redfish(collected(res), Hardware(psu=PsuSpec(count=5, redundancy="N+1", source=SRC)))


def test_sound_14_redfish_a_repeated_key_is_refused_not_overwritten():
    res = healthy_power()
    text = collected(res)
    bad = text.replace('"Name": "Power Supply Bay2", "Status": {"State": "Enabled", '
                       '"Health": "OK"}',
                       '"Name": "Power Supply Bay2", "Status": {"State": "Enabled", '
                       '"Health": "Critical"}, "Status": {"State": "Enabled", "Health": "OK"}',
                       1)
    assert bad != text
    with pytest.raises(ParseError, match="key 'Status' appears twice"):
        parse_redfish_power(bad)


def test_sound_14_a_supply_the_profile_does_not_count_is_foreign():
    """Exactly hardware.psu.count supplies: more healthy ones than the profile counts are a
    different chassis (or another node's BMC), a failure like a missing one."""
    hw1 = Hardware(psu=PsuSpec(count=1, redundancy="none", source=SRC))
    j = ipmi("ipmi-elist-healthy-2psu-redundant.txt", hw1)
    assert j.status is Status.FAIL and "2 PSU status sensor(s)" in j.message, j.message
    assert "the profile expects 1" in j.message
    j = redfish(collected(healthy_power()), HW2)
    assert j.status is Status.FAIL, j.message
    assert "the BMC lists 6 supplies, the profile expects 2" in j.message
