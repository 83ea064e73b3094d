"""redundancy.psu: the IPMI PSU sensors (ipmitool sdr in its list, verbose and CSV forms),
parsed and judged against the profile's PSU count and redundancy,
on the fixtures in tests/fixtures/redundancy."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from checks.redundancy.evidence import HW, SRC, read
from rackgate.checks.cooling import PsuRedfishParams, judge_psu_redfish
from rackgate.checks.redundancy import (
    PsuIpmiParams,
    judge_psu_ipmi,
    psu_ipmi_command,
)
from rackgate.checks.shared.base import SECRET_FILE, CommandError
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.ipmi import parse_ipmi_sdr, psu_sensors
from rackgate.parsers.redfish import parse_redfish_power
from rackgate.profile import Hardware, PsuSpec, Threshold


def psu(name: str, thresholds=None, hw: Hardware = HW):
    return judge_psu_ipmi(parse_ipmi_sdr(read(name)), PsuIpmiParams(),
                          thresholds or {}, hw)


# --- IPMI ---------------------------------------------------------------------------------


def test_ipmi_command_reads_the_password_from_a_file_never_argv():
    argv = psu_ipmi_command(PsuIpmiParams(), {"rackgate_bmc_host": "bmc-n01",
                                              "rackgate_bmc_port": 6230})
    assert argv[:3] == ["ipmitool", "-I", "lanplus"]
    assert argv[argv.index("-f") + 1] == SECRET_FILE  # the collector's private 0600 file
    assert "-E" not in argv and "-P" not in argv
    assert argv[argv.index("-H") + 1] == "bmc-n01" and argv[argv.index("-p") + 1] == "6230"
    assert argv[argv.index("-C") + 1] == "3"
    assert psu_ipmi_command(PsuIpmiParams(), {"rackgate_bmc_host": "b"})[6] == "623"


@pytest.mark.parametrize("hostvars", [{}, {"rackgate_bmc_host": "-oops"},
                                      {"rackgate_bmc_host": "b", "rackgate_bmc_port": 0},
                                      {"rackgate_bmc_host": "b", "rackgate_bmc_port": "623"}])
def test_ipmi_command_refuses_unusable_hostvars(hostvars):
    with pytest.raises(CommandError, match="rackgate_bmc_"):
        psu_ipmi_command(PsuIpmiParams(), hostvars)


def test_ipmi_healthy_passes():
    j = psu("ipmi-elist-healthy-2psu-redundant.txt")
    assert j.status is Status.PASS, j.message
    assert j.measured == 2 and "PSU1 Status" in j.message
    assert j.details["input_power_max_w"] == 400
    assert j.details["redundancy_sensors"] == "PS Redundancy (04h)"


def test_ipmi_parser_reads_states_number_entity_watts():
    sdr = parse_ipmi_sdr(read("ipmi-elist-psu2-failure-detected.txt"))
    kinds = {s.name: k for k, s in psu_sensors(sdr)}
    assert kinds == {"PSU1 Status": "psu", "PSU2 Status": "psu", "PSU1 Power In": "power",
                     "PS Redundancy": "redundancy"}
    psu2 = sdr.sensors[1]
    assert (psu2.sensor_number, psu2.entity, psu2.status) == (2, "10.2", "ok")
    assert psu2.states == ("Presence detected", "Failure detected")
    assert sdr.sensors[2].watts == 400


@pytest.mark.parametrize(("fixture", "named", "why"), [
    ("ipmi-elist-psu2-failure-detected.txt", "PSU2 Status", "Failure detected"),
    ("ipmi-elist-psu1-ac-lost.txt", "PSU1 Status", "AC lost"),
    ("ipmi-elist-psu2-predictive-failure.txt", "PSU2 Status", "Predictive failure"),
    ("ipmi-elist-redundancy-lost.txt", "PS Redundancy", "Redundancy Lost"),
    ("ipmi-elist-psu2-absent.txt", "PSU2 Status", "presence not asserted"),
    ("ipmi-elist-one-psu-sensor-only.txt", "PSU1 Status", "the profile expects 2"),
    ("ipmi-elist-power-above-critical.txt", "PSU1 Power In", "critical threshold"),
    ("ipmi-sdr-3col-psu2-failure-bit.txt", "PSU2 Status", "Failure detected (reading 0x03)"),
    ("ipmi-sdr-psu-not-readable.txt", "PSU2 Status", "not readable"),
])
def test_ipmi_each_fault_fails_and_names_the_sensor(fixture, named, why):
    j = psu(fixture)
    assert j.status is Status.FAIL
    assert named in j.message and why in j.message


def test_ipmi_redundancy_lost_is_only_a_warning_without_expected_redundancy():
    hw = Hardware(psu=PsuSpec(count=2, redundancy="none", source=SRC))
    j = psu("ipmi-elist-redundancy-lost.txt", hw=hw)
    assert j.status is Status.WARN and "Redundancy Lost" in j.message


def test_ipmi_input_power_threshold_from_the_profile():
    cap = {"input_power": Threshold(unit="W", ref=1000, max_ratio=0.35,
                                    basis="a 1 kW PSU at 35% load for the test")}
    j = psu("ipmi-elist-healthy-2psu-redundant.txt", cap)
    assert j.status is Status.FAIL
    assert "PSU1 Power In (03h) input power 400 W misses <= 350 W" in j.message


def test_ipmi_verbose_block_adds_states_to_the_listing_line():
    sdr = parse_ipmi_sdr("PS Redund        | 0x00              | ok\n\n"
                         "Sensor ID              : PS Redund (0x2)\n"
                         " Entity ID             : 21.1 (Power Management)\n"
                         " Sensor Type (Discrete): Power Unit (0x09)\n"
                         " States Asserted       : Power Unit\n"
                         "                         [Redundancy Lost]\n")
    assert len(sdr.sensors) == 1
    s = sdr.sensors[0]
    assert (s.state_bits, s.states, s.sensor_type) == (0, ("Redundancy Lost",), "Power Unit")


def test_ipmi_csv_forms():
    sdr = parse_ipmi_sdr("PSU2 Status,02h,ok,10.2,Presence detected, Failure detected\n"
                         "PSU1 Power In,928,Watts,ucr\n")
    assert sdr.sensors[0].states == ("Presence detected", "Failure detected")
    assert (sdr.sensors[1].watts, sdr.sensors[1].status) == (928.0, "ucr")


@pytest.mark.parametrize("text", ["", "Loading IANA PEN Registry...\n", "a,b\nc | d\n"])
def test_ipmi_no_sensor_is_a_parse_error(text):
    with pytest.raises(ParseError, match="no sensor line"):
        parse_ipmi_sdr(text)


@given(st.text(max_size=400))
@settings(max_examples=300)
def test_ipmi_parser_gives_a_record_or_parse_error(text):
    with contextlib.suppress(ParseError):
        parse_ipmi_sdr(text)


@given(st.data())
def test_ipmi_a_deleted_psu_line_never_passes(data):
    lines = read("ipmi-elist-healthy-2psu-redundant.txt").splitlines()
    psu_lines = [i for i, line in enumerate(lines) if " Status " in line]
    drop = data.draw(st.sampled_from(psu_lines))
    j = judge_psu_ipmi(parse_ipmi_sdr("\n".join(lines[:drop] + lines[drop + 1:])),
                       PsuIpmiParams(), {}, HW)
    assert j.status is Status.FAIL


# ------------------------------------------------------------ degraded evidence (issue 11)
# Healthy sources: tests/fixtures/redundancy/ipmi-elist-healthy-2psu-redundant.txt (hand-
# written from ipmitool's sdr elist layout) and the healthy Redfish mockup
# (tests/fixtures/redfish/healthy, written by generate.py from DMTF's schemas).

FIX = Path(__file__).parents[3] / "fixtures"
HW2 = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source=SRC))
HW6 = Hardware(psu=PsuSpec(count=6, redundancy="N+2", source=SRC))
_ipmi = (FIX / "redundancy" / "ipmi-elist-healthy-2psu-redundant.txt").read_text(
    encoding="utf-8")
IPMI = "\n".join(line for line in _ipmi.splitlines() if not line.startswith("#")) + "\n"


# The judge reads the PSU status, power and redundancy lines. A cut after PSU2's status line
# leaves two healthy supplies: the power reading (no threshold here) and the redundancy
# sensor are not required (the demo's ipmi_sim has none), so cuts are drawn before that.
IPMI_END = IPMI.index("\n", IPMI.index("PSU2 Status"))


def _redfish_power() -> str:
    root = FIX / "redfish" / "healthy"
    found = {"/redfish/v1/" + p.parent.relative_to(root).as_posix():
             json.loads(p.read_text(encoding="utf-8"))
             for p in sorted(root.rglob("index.json"))
             if p.parent.relative_to(root).as_posix().startswith("Chassis")}
    return json.dumps({"collector": "rackgate.redfish", "kind": "power",
                       "resources": found}, indent=1) + "\n"


REDFISH = _redfish_power()
READ_NUMBERS = ("PowerInputWatts|LastPowerOutputWatts|PowerCapacityWatts|MinNumNeeded|"
                "MaxNumSupported|MinNeededInGroup|MaxSupportedInGroup|Reading|"
                "Members@odata.count")


def ipmi(text: str) -> Status:
    return outcome(parse_ipmi_sdr, lambda r: judge_psu_ipmi(r, PsuIpmiParams(), {}, HW2), text)


def redfish(text: str) -> Status:
    return outcome(parse_redfish_power,
                   lambda r: judge_psu_redfish(r, PsuRedfishParams(), {}, HW6), text)


class TestDegradedPsu:
    """Issue 11, power family, property tests: degraded IPMI and Redfish power evidence never
    passes and never raises anything but ParseError (degrade_helpers says how it is
    degraded)."""

    def test_the_healthy_sources_pass(self):
        assert ipmi(IPMI) is Status.PASS
        assert ipmi(IPMI[:IPMI_END]) is Status.PASS  # the judged part alone is complete
        assert redfish(REDFISH) is Status.PASS

    @settings(max_examples=120, deadline=None)
    @given(degraded(IPMI, numbers=r"\| (400) Watts",
                    lines=r"^(PSU1 Status|PSU2 Status|PSU1 Power In|PS Redundancy) ", end=IPMI_END))
    def test_degraded_ipmi_never_passes(self, text):
        assert ipmi(text) in BAD

    @settings(max_examples=120, deadline=None)
    @given(degraded(REDFISH, numbers=rf'"(?:{READ_NUMBERS})": (-?[0-9.]+)', lines=r"\S",
                    end=len(REDFISH.rstrip())))
    def test_degraded_redfish_power_never_passes(self, text):
        assert redfish(text) in BAD

    @settings(max_examples=100, deadline=None)
    @given(st.sampled_from(["nan", "NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 400]),
           st.sampled_from(["PowerInputWatts", "MinNumNeeded", "Members@odata.count",
                            "PowerCapacityWatts"]))
    def test_non_finite_redfish_numbers_anywhere_are_parse_errors(self, token, key):
        """Every occurrence of the key at once, as a BMC with a broken sensor layer would."""
        text = re.sub(rf'("{key}": )(-?[0-9.]+)', rf"\g<1>{token}", REDFISH)
        assert text != REDFISH
        assert redfish(text) is Status.ERROR
