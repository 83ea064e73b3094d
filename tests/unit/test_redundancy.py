"""redundancy.* checks: IPMI PSU sensors, multipath -ll, /proc/net/bonding (parsers + judges)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.redundancy import (
    BondingParams,
    MultipathParams,
    PsuIpmiParams,
    bonding_command,
    judge_bonding,
    judge_multipath,
    judge_psu_ipmi,
    psu_ipmi_command,
)
from rackgate.checks.shared.base import SECRET_FILE, CommandError
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.bonding import parse_bonding
from rackgate.parsers.ipmi import parse_ipmi_sdr, psu_sensors
from rackgate.parsers.multipath import parse_multipath_ll
from rackgate.profile import Hardware, PsuSpec, StorageSpec, Threshold

FIXTURES = Path(__file__).parents[1] / "fixtures" / "redundancy"
SRC = "a profile written for the unit tests"
HW = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source=SRC),
              storage=StorageSpec(multipath_paths_per_lun=2, source=SRC))
BONDS = BondingParams(bonds=[
    {"name": "bond0", "mode": "802.3ad", "members": ["ens1f0", "ens1f1"]},
    {"name": "bond1", "mode": "active-backup", "members": ["eno1", "eno2"]},
])


def read(name: str) -> str:
    """The tool output of a fixture, without its '#' header (read here, not through the
    fixture_text fixture: hypothesis tests may not take function-scoped fixtures)."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


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


# --- multipath ----------------------------------------------------------------------------

MP2 = MultipathParams(lun_count=2)  # the fixtures' two LUNs, mpatha and mpathb

def mp(name: str, per_lun: int = 2, params: MultipathParams = MP2):
    hw = Hardware(storage=StorageSpec(multipath_paths_per_lun=per_lun, source=SRC))
    return judge_multipath(parse_multipath_ll(read(name)), params, {}, hw)


def test_multipath_parser_reads_maps_groups_paths():
    topo = parse_multipath_ll(read("multipath-healthy-2maps-2paths.txt"))
    m = topo.maps[0]
    assert (m.name, m.wwid, m.dm_device, m.vendor, m.product) == \
        ("mpatha", "3600a098038303053453f463045727a31", "dm-0", "NETAPP", "LUN C-Mode")
    assert [(g.policy, g.prio, g.status) for g in m.groups] == \
        [("service-time 0", 50, "active"), ("service-time 0", 10, "enabled")]
    p = m.paths[1]
    assert (p.hctl, p.device, p.major_minor, p.dm_state, p.path_state, p.online_state,
            p.group) == ("2:0:0:1", "sdd", "8:48", "active", "ready", "running", 1)


@pytest.mark.parametrize(("fixture", "params"), [
    ("multipath-healthy-2maps-2paths.txt", MP2),
    ("multipath-wwid-as-alias-healthy.txt",
     MultipathParams(wwids=["3600a098038303053453f463045727a31"]))])
def test_multipath_healthy_passes(fixture, params):
    j = mp(fixture, params=params)
    assert j.status is Status.PASS, j.message
    assert j.measured == 2


@pytest.mark.parametrize(("fixture", "words"), [
    ("multipath-mpathb-path-failed-faulty.txt", ["mpathb", "sde", "failed faulty offline"]),
    ("multipath-mpatha-single-path.txt", ["mpatha", "1/2 healthy paths"]),
    ("multipath-no-maps.txt", ["no multipath map"]),
])
def test_multipath_each_fault_fails_and_names_map_and_device(fixture, words):
    j = mp(fixture)
    assert j.status is Status.FAIL
    assert all(w in j.message for w in words), j.message


def test_multipath_old_bracket_format():
    topo = parse_multipath_ll("mpath0 (3600508b4000156d70001200000b0000) dm-0 HP,HSV200\n"
                              "[size=10G][features=1 queue_if_no_path][hwhandler=0]\n"
                              "\\_ round-robin 0 [prio=1][active]\n"
                              " \\_ 0:0:0:1 sda 8:0   [active][ready]\n"
                              "\\_ round-robin 0 [prio=1][enabled]\n"
                              " \\_ 1:0:0:1 sdb 8:16  [failed][faulty]\n")
    paths = topo.maps[0].paths
    assert [(p.device, p.dm_state, p.path_state, p.healthy) for p in paths] == \
        [("sda", "active", "ready", True), ("sdb", "failed", "faulty", False)]
    assert topo.maps[0].groups[1].status == "enabled"


def test_multipath_unknown_line_in_a_map_is_a_parse_error():
    with pytest.raises(ParseError, match="line 2: not a map"):
        parse_multipath_ll("mpatha (3600a) dm-2 X,Y\nsomething else entirely\n")


@given(st.text(max_size=400))
@settings(max_examples=300)
def test_multipath_parser_gives_a_record_or_parse_error(text):
    with contextlib.suppress(ParseError):
        parse_multipath_ll(text)


@given(st.data())
def test_multipath_a_deleted_path_never_passes(data):
    lines = read("multipath-healthy-2maps-2paths.txt").splitlines()
    path_lines = [i for i, line in enumerate(lines) if " active ready " in line]
    drop = data.draw(st.sampled_from(path_lines))
    topo = parse_multipath_ll("\n".join(lines[:drop] + lines[drop + 1:]))
    assert judge_multipath(topo, MP2, {}, HW).status is Status.FAIL


# --- bonding ------------------------------------------------------------------------------

def bond(name: str, params: BondingParams = BONDS):
    return judge_bonding(parse_bonding(read(name)), params, {}, HW)


def test_bonding_command_is_the_fixed_loop():
    argv = bonding_command(BondingParams(), {})
    assert argv[:2] == ["sh", "-c"] and "/proc/net/bonding/*" in argv[2]


def test_bonding_parser_splits_bonds_and_reads_lacp():
    r = parse_bonding(read("bonding-healthy-lacp-and-active-backup.txt"))
    assert [(b.name, b.mode) for b in r.bonds] == [("bond0", "802.3ad"),
                                                   ("bond1", "active-backup")]
    b0, b1 = r.bonds
    assert (b0.active_aggregator_id, b0.partner_mac) == (1, "44:38:39:ff:00:01")
    s = b0.slaves[1]
    assert (s.interface, s.mii_status, s.speed_mbps, s.duplex, s.link_failure_count,
            s.aggregator_id, s.partner_mac) == ("ens1f1", "up", 100000, "full", 0, 1,
                                                "44:38:39:ff:00:01")
    assert b1.active_slave == "eno1" and [x.interface for x in b1.slaves] == ["eno1", "eno2"]


def test_bonding_healthy_passes():
    j = bond("bonding-healthy-lacp-and-active-backup.txt")
    assert j.status is Status.PASS, j.message


@pytest.mark.parametrize(("fixture", "words"), [
    ("bonding-lacp-member-down.txt", ["bond0", "ens1f1 MII status down",
                                      "outside the active aggregator 1"]),
    ("bonding-lacp-no-partner.txt", ["bond0", "no LACP partner"]),
    ("bonding-active-backup-member-down.txt", ["bond1", "eno2 MII status down",
                                               "link failures 5"]),
    ("bonding-wrong-mode-round-robin.txt", ["bond0", "mode balance-rr", "expected 802.3ad"]),
    ("bonding-none.txt", ["bond0: no such bond", "bond1: no such bond"]),
])
def test_bonding_each_fault_fails_and_names_bond_and_member(fixture, words):
    j = bond(fixture)
    assert j.status is Status.FAIL
    assert all(w in j.message for w in words), j.message


def test_bonding_none_expected_none_found_passes():
    j = bond("bonding-none.txt", BondingParams())
    assert j.status is Status.PASS and j.message == "no bonds expected, none found"


def test_bonding_missing_member_fails():
    params = BondingParams(bonds=[{"name": "bond1", "mode": "active-backup",
                                   "members": ["eno1", "eno3"]}])
    r = parse_bonding("==> /proc/net/bonding/bond1 <==\nBonding Mode: fault-tolerance "
                      "(active-backup)\nMII Status: up\n\nSlave Interface: eno1\nMII Status: up\n")
    j = judge_bonding(r, params, {}, HW)
    assert j.status is Status.FAIL and "eno3 is not enslaved" in j.message


def test_bonding_without_mode_is_a_parse_error():
    with pytest.raises(ParseError, match="bond7 has no 'Bonding Mode:'"):
        parse_bonding("==> /proc/net/bonding/bond7 <==\nMII Status: up\n")


@given(st.text(max_size=400))
@settings(max_examples=300)
def test_bonding_parser_gives_a_record_or_parse_error(text):
    with contextlib.suppress(ParseError):
        parse_bonding(text)


@given(st.data())
def test_bonding_a_deleted_slave_block_never_passes(data):
    text = read("bonding-healthy-lacp-and-active-backup.txt")
    blocks = text.split("\n\nSlave Interface: ")
    drop = data.draw(st.integers(min_value=1, max_value=len(blocks) - 1))
    kept = blocks[:drop] + blocks[drop + 1:]
    # the block after the dropped one may carry the next bond's header: keep it
    tail = blocks[drop].split("==> ", 1)
    if len(tail) == 2:
        kept[drop - 1] += "\n==> " + tail[1]
    j = judge_bonding(parse_bonding("\n\nSlave Interface: ".join(kept)), BONDS, {}, HW)
    assert j.status is Status.FAIL
