"""Redfish parsers, the redundancy.psu_redfish and cooling.cdu judges, and the collector's
walk, over the mockup trees in tests/fixtures/redfish (read in-process, no HTTP)."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from degrade_helpers import BAD, NON_FINITE, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.cooling import (
    CHECKS,
    CduParams,
    PsuRedfishParams,
    cdu_command,
    judge_cdu,
    judge_psu_redfish,
    psu_command,
)
from rackgate.checks.shared.base import SECRET_FILE, CommandError
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.redfish import parse_redfish_cooling, parse_redfish_power
from rackgate.profile import Hardware, PsuSpec, Threshold
from rackgate.programs import redfish as collector

MOCKUPS = Path(__file__).parents[2] / "fixtures" / "redfish"
HW = Hardware(psu=PsuSpec(count=6, redundancy="N+2", watts_each=3300,
                          source="six 3.3 kW supplies, 4+2, as in the test mockups"))
LIMITS = {
    "supply_temp_c": Threshold(unit="C", ref=40, max_ratio=1.0, basis="a figure for the test"),
    "return_temp_c": Threshold(unit="C", ref=50, max_ratio=1.0, basis="a figure for the test"),
    "flow_lpm": Threshold(unit="L/min", ref=120, min_ratio=0.8, basis="a figure for the test"),
}


class DirFetcher:
    """Serves a sushy-static tree from disk, as the HTTP server in the live test does."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, path: str) -> dict[str, Any]:
        rel = path.removeprefix("/redfish/v1").strip("/")
        file = self.root / rel / "index.json"
        if not file.is_file():
            raise collector.CollectError(f"GET {path}: HTTP 404")
        doc: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
        return doc


def evidence(scenario: str, kind: str) -> str:
    fetch = DirFetcher(MOCKUPS / scenario)
    found = collector.walk_power(fetch, "1") if kind == "power" else \
        collector.walk_cooling(fetch, "1")
    return json.dumps({"collector": "rackgate.redfish", "kind": kind, "resources": found})


HEALTHY_POWER = evidence("healthy", "power")
HEALTHY_COOLING = evidence("healthy", "cooling")


# ------------------------------------------------------------ parsers


def test_power_record_prefers_power_subsystem():
    rec = parse_redfish_power(HEALTHY_POWER)
    assert rec.source == "PowerSubsystem"
    assert [s.name for s in rec.supplies] == [f"Power Supply Bay{n}" for n in range(1, 7)]
    assert {(s.state, s.health) for s in rec.supplies} == {("Enabled", "OK")}
    assert rec.supplies[0].input_watts == 1110 and rec.supplies[0].capacity_watts == 3300
    # both schemas' groups are kept: the legacy Power resource was read too
    assert {(g.mode, g.min_needed) for g in rec.redundancy} == {("NPlusM", 4), ("N+m", 4)}


def test_legacy_power_alone_gives_the_same_supplies():
    doc = json.loads(HEALTHY_POWER)
    legacy = doc["resources"]["/redfish/v1/Chassis/1/Power"]
    rec = parse_redfish_power(json.dumps(legacy))
    assert rec.source == "Power" and len(rec.supplies) == 6
    assert rec.supplies[5].input_watts == 1115 and rec.supplies[5].output_watts == 1045
    assert rec.redundancy[0].mode == "N+m"


def test_cooling_record_reads_connectors_and_detectors():
    rec = parse_redfish_cooling(HEALTHY_COOLING)
    assert [(c.name, c.health, c.health_rollup) for c in rec.cdus] == [("Rack CDU", "OK", "OK")]
    sec = next(c for c in rec.connectors if c.loop == "secondary")
    assert (sec.supply_temp_c, sec.return_temp_c, sec.flow_lpm, sec.supply_pressure_kpa,
            sec.return_pressure_kpa) == (32, 42, 150, 250, 180)
    assert {c.loop for c in rec.connectors} == {"primary", "secondary"}
    # the resources win over the group's summary entries that point at them
    assert sorted(d.name for d in rec.leak_detectors) == ["Drip Tray Leak Detector",
                                                          "Rack Manifold Leak Rope"]


def test_header_lines_before_json_are_skipped():
    rec = parse_redfish_cooling("# fixture header\n# more\n" + HEALTHY_COOLING)
    assert len(rec.leak_detectors) == 2


def test_concatenated_resources_are_read_as_one_document():
    res = json.loads(HEALTHY_POWER)["resources"]
    bays = [res[f"/redfish/v1/Chassis/1/PowerSubsystem/PowerSupplies/Bay{n}"] for n in (1, 2)]
    rec = parse_redfish_power("\n".join(json.dumps(b) for b in bays))
    assert [s.id.rsplit("/", 1)[1] for s in rec.supplies] == ["Bay1", "Bay2"]


@pytest.mark.parametrize(("text", "match"), [
    ("", "empty"),
    ("Unauthorized", "no line starts with"),
    ('{"Id": 1', "not valid JSON"),
    ("[1, 2]", "no line starts with"),
    ('{"@odata.id": "/x"} [1, 2]', "a top-level value is a list, not a Redfish resource"),
    ('{"foo": 1}', "neither @odata.type nor @odata.id"),
    ('{"collector": "rackgate.redfish"}', "no 'resources' object"),
    ('{"@odata.type": "#Thermal.v1_7_0.Thermal", "@odata.id": "/t"}',
     r"no Power, PowerSubsystem or PowerSupply resource \(found: Thermal\)"),
    ('{"@odata.type": "#PowerSupply.v1_6_0.PowerSupply", "Status": {"State": 3}}',
     r"Status\.State is not a string \(got 3\)"),
])
def test_power_parse_errors_name_what_is_wrong(text, match):
    with pytest.raises(ParseError, match=match):
        parse_redfish_power(text)


def test_cooling_parse_error_names_the_types_found():
    with pytest.raises(ParseError, match=r"no CoolingUnit.*\(found: CoolingLoop\)"):
        parse_redfish_cooling('{"@odata.type": "#CoolingLoop.v1_1_0.CoolingLoop"}')
    with pytest.raises(ParseError, match=r"FlowLitersPerMinute\.Reading is not a number"):
        parse_redfish_cooling('{"@odata.type": "#CoolantConnector.v1_3_0.CoolantConnector", '
                              '"FlowLitersPerMinute": {"Reading": "fast"}}')


# ------------------------------------------------------------ judges


def test_healthy_psus_pass():
    j = judge_psu_redfish(parse_redfish_power(HEALTHY_POWER), PsuRedfishParams(), {}, HW)
    assert j.status is Status.PASS, j.message
    assert j.measured == 6 and j.expected == "6 present and healthy (N+2)"
    assert j.details["input_watts"] == pytest.approx(sum(1110 + i for i in range(6)))


def test_absent_psu_fails_naming_it():
    j = judge_psu_redfish(parse_redfish_power(evidence("psu-absent", "power")),
                          PsuRedfishParams(), {}, HW)
    assert j.status is Status.FAIL
    assert "Power Supply Bay6" in j.message and "is absent" in j.message
    assert "5 of 6 supplies present and healthy" in j.message
    assert "redundancy lost" in j.message


def test_absent_psu_with_redundancy_degraded_fails_even_when_the_count_is_met():
    """Five supplies present where the profile counts five: the empty bay is named, not
    counted (issue 29), but this BMC reports its redundancy groups in Warning."""
    hw = Hardware(psu=PsuSpec(count=5, redundancy="N+1", source="five supplies, 4+1 spec"))
    j = judge_psu_redfish(parse_redfish_power(evidence("psu-absent", "power")),
                          PsuRedfishParams(), {}, hw)
    assert j.status is Status.FAIL and "Bay6" in j.message
    assert "redundancy lost" in j.message and "empty bay: Power Supply Bay6" in j.message


def test_no_redundancy_group_is_a_warning_when_redundancy_is_expected():
    doc = json.loads(HEALTHY_POWER)["resources"]["/redfish/v1/Chassis/1/Power"]
    del doc["Redundancy"]
    j = judge_psu_redfish(parse_redfish_power(json.dumps(doc)), PsuRedfishParams(), {}, HW)
    assert j.status is Status.WARN and "N+2 cannot be confirmed" in j.message


def test_no_supply_at_all_is_an_error_not_a_pass():
    j = judge_psu_redfish(parse_redfish_power(
        '{"@odata.type": "#PowerSubsystem.v1_1_3.PowerSubsystem", "@odata.id": "/ps"}'),
        PsuRedfishParams(), {}, HW)
    assert j.status is Status.ERROR and "no power supply" in j.message


def test_psu_check_skips_without_psu_in_profile():
    check = next(c for c in CHECKS if c.name == "redundancy.psu_redfish")
    assert check.applies(Hardware()) == "the profile has no power supplies"
    assert check.applies(HW) is None


def test_healthy_cdu_passes_with_figures():
    j = judge_cdu(parse_redfish_cooling(HEALTHY_COOLING), CduParams(), LIMITS, HW)
    assert j.status is Status.PASS, j.message
    assert j.measured == 32 and j.unit == "C" and j.expected.startswith("<= 40 C")
    assert j.details["flow_lpm"] == 150 and j.details["return_temp_c"] == 42


def test_leak_fails():
    j = judge_cdu(parse_redfish_cooling(evidence("leak", "cooling")), CduParams(), LIMITS, HW)
    assert j.status is Status.FAIL
    assert "LEAK: detector Drip Tray Leak Detector reports Critical" in j.message


def test_low_flow_fails_with_value_and_bound():
    j = judge_cdu(parse_redfish_cooling(evidence("flow-low", "cooling")), CduParams(), LIMITS,
                  HW)
    assert j.status is Status.FAIL
    assert "coolant flow 40 L/min misses >= 96 L/min" in j.message


def test_primary_loop_can_be_judged_instead():
    j = judge_cdu(parse_redfish_cooling(evidence("flow-low", "cooling")),
                  CduParams(loop="primary"), LIMITS, HW)
    assert j.status is Status.PASS and j.details["flow_lpm"] == 180


def test_a_leak_is_a_fail_even_without_readings():
    text = ('{"@odata.type": "#LeakDetector.v1_2_0.LeakDetector", "@odata.id": "/d", '
            '"Name": "Tray", "DetectorState": "Warning"}')
    j = judge_cdu(parse_redfish_cooling(text), CduParams(), LIMITS, HW)
    assert j.status is Status.FAIL and j.message.startswith("LEAK: detector Tray")
    assert "no supply temperature reading" in j.message  # reported, not hidden


def test_missing_readings_are_an_error():
    doc = json.loads(HEALTHY_COOLING)
    sec = doc["resources"]["/redfish/v1/ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1"]
    del sec["FlowLitersPerMinute"]
    j = judge_cdu(parse_redfish_cooling(json.dumps(doc)), CduParams(), LIMITS, HW)
    assert j.status is Status.ERROR and "no coolant flow reading" in j.message


def test_cdu_health_rollup_critical_fails():
    doc = json.loads(HEALTHY_COOLING)
    doc["resources"]["/redfish/v1/ThermalEquipment/CDUs/1"]["Status"]["HealthRollup"] = \
        "Critical"
    j = judge_cdu(parse_redfish_cooling(json.dumps(doc)), CduParams(), LIMITS, HW)
    assert j.status is Status.FAIL and "rollup Critical" in j.message


# ------------------------------------------------------------ commands and collector


def test_commands_take_the_url_from_the_inventory():
    argv = psu_command(PsuRedfishParams(), {"rackgate_bmc_url": "https://bmc1/",
                                            "rackgate_bmc_chassis": "GPU_Board"})
    assert argv == ["python3", "-m", "rackgate.programs.redfish", "--user", "admin",
                    "--password-file", SECRET_FILE, "--base-url", "https://bmc1",
                    "--chassis", "GPU_Board", "--timeout", "10", "power"]
    assert cdu_command(CduParams(cdu="2"), {"rackgate_cdu_url": "http://cdu"})[-5:] == \
        ["--cdu", "2", "--timeout", "10", "cooling"]


@pytest.mark.parametrize("hostvars", [
    {}, {"rackgate_bmc_url": "bmc1"},
    {"rackgate_bmc_url": "https://b", "rackgate_bmc_chassis": "a/b"}])
def test_unusable_bmc_url_is_refused(hostvars):
    with pytest.raises(CommandError, match="rackgate_bmc"):
        psu_command(PsuRedfishParams(), hostvars)


def test_collector_needs_credentials_in_the_environment(monkeypatch, capsys):
    monkeypatch.delenv("RACKGATE_BMC_USER", raising=False)
    assert collector.main(["--base-url", "http://x", "power"]) == 2
    assert "RACKGATE_BMC_USER" in capsys.readouterr().err


def test_collector_prints_one_document_or_names_the_failure(monkeypatch, capsys):
    monkeypatch.setenv("RACKGATE_BMC_USER", "u")
    monkeypatch.setenv("RACKGATE_BMC_PASSWORD", "p")
    assert collector.main(["--base-url", "http://x", "cooling"],
                          lambda *a: DirFetcher(MOCKUPS / "leak")) == 0
    out = capsys.readouterr().out
    assert parse_redfish_cooling(out).leak_detectors
    assert collector.main(["--base-url", "http://x", "--chassis", "9", "power"],
                          lambda *a: DirFetcher(MOCKUPS / "healthy")) == 1
    assert "GET /redfish/v1/Chassis/9: HTTP 404" in capsys.readouterr().err


# ------------------------------------------------------------ properties

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["@odata.type", "@odata.id", "Status", "State", "Health", "Reading",
                         "PowerSupplies", "Members", "DetectorState", "LeakDetectorGroups",
                         "Detectors", "FlowLitersPerMinute", "Name", "resources",
                         "collector", "Redundancy"]) | st.text(max_size=5),
        inner, max_size=5),
    max_leaves=20)
TYPES = st.sampled_from(["#Power.v1_7_3.Power", "#PowerSubsystem.v1_1_3.PowerSubsystem",
                         "#PowerSupply.v1_6_0.PowerSupply", "#CoolingUnit.v1_5_0.CoolingUnit",
                         "#CoolantConnector.v1_3_0.CoolantConnector",
                         "#LeakDetection.v1_2_0.LeakDetection",
                         "#LeakDetector.v1_2_0.LeakDetector"])


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_is_a_record_or_a_parse_error(text):
    for parse in (parse_redfish_power, parse_redfish_cooling):
        with contextlib.suppress(ParseError):
            parse(text)


@settings(max_examples=300, deadline=None)
@given(TYPES, st.dictionaries(st.sampled_from([
    "Status", "PowerSupplies", "Redundancy", "PowerSupplyRedundancy", "Metrics", "Name",
    "DetectorState", "LeakDetectorGroups", "SupplyTemperatureCelsius", "FlowLitersPerMinute",
    "PowerCapacityWatts"]), JSONISH, max_size=4))
def test_arbitrary_typed_resources_are_a_record_or_a_parse_error(odata_type, body):
    text = json.dumps({"@odata.type": odata_type, **body})
    for parse in (parse_redfish_power, parse_redfish_cooling):
        with contextlib.suppress(ParseError):
            parse(text)


@settings(max_examples=200, deadline=None)
@given(JSONISH)
def test_arbitrary_json_is_a_record_or_a_parse_error(value):
    for parse in (parse_redfish_power, parse_redfish_cooling):
        with contextlib.suppress(ParseError):
            parse(json.dumps(value))


DETECTOR_KEYS = [k for k in json.loads(HEALTHY_COOLING)["resources"]
                 if "/LeakDetectors/" in k]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(DETECTOR_KEYS),
       st.one_of(st.none(), st.text().filter(lambda s: s != "OK")))
def test_any_detector_state_but_ok_is_never_a_pass(key, state):
    doc = json.loads(HEALTHY_COOLING)
    doc["resources"][key]["DetectorState"] = state
    try:
        rec = parse_redfish_cooling(json.dumps(doc))
    except ParseError:
        return
    assert judge_cdu(rec, CduParams(), LIMITS, HW).status is Status.FAIL


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=1), st.text().filter(lambda s: s != "OK"))
def test_a_group_summary_not_ok_is_never_a_pass(which, state):
    doc = json.loads(HEALTHY_COOLING)
    res = doc["resources"]
    for key in DETECTOR_KEYS:  # only the LeakDetection summary remains
        del res[key]
    del res["/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors"]  # a whole one
    group = res["/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection"]["LeakDetectorGroups"][0]
    group["Detectors"][which]["DetectorState"] = state
    assert judge_cdu(parse_redfish_cooling(json.dumps(doc)), CduParams(), LIMITS,
                     HW).status is Status.FAIL


# ------------------------------------------------------------ degraded evidence (issue 11)
# The CDU of the healthy mockup as the collector gathers it, indented so each reading is a
# line of its own; degrade_helpers says how it is degraded.


def _degradable_cooling() -> str:
    cdu = MOCKUPS / "healthy" / "ThermalEquipment" / "CDUs" / "1"
    found = {"/redfish/v1/" + p.parent.relative_to(MOCKUPS / "healthy").as_posix():
             json.loads(p.read_text(encoding="utf-8")) for p in sorted(cdu.rglob("index.json"))}
    return json.dumps({"collector": "rackgate.redfish", "kind": "cooling",
                       "resources": found}, indent=1) + "\n"


DEGRADABLE_COOLING = _degradable_cooling()


def _cdu_outcome(text: str) -> Status:
    return outcome(parse_redfish_cooling, lambda r: judge_cdu(r, CduParams(), LIMITS), text)


class TestDegradedCdu:
    """Degraded CDU evidence never passes and never raises anything but ParseError."""

    def test_the_healthy_source_passes(self):
        assert _cdu_outcome(DEGRADABLE_COOLING) is Status.PASS

    @settings(max_examples=120, deadline=None)
    @given(degraded(DEGRADABLE_COOLING,
                    numbers=r'"(?:Reading|Members@odata\.count)": (-?[0-9.]+)',
                    lines=r"\S", end=len(DEGRADABLE_COOLING.rstrip())))
    def test_degraded_cooling_never_passes(self, text):
        assert _cdu_outcome(text) in BAD

    @settings(max_examples=60, deadline=None)
    @given(st.sampled_from(["SupplyTemperatureCelsius", "ReturnTemperatureCelsius",
                            "FlowLitersPerMinute"]),
           st.one_of(st.floats(max_value=-0.01, allow_nan=False, allow_infinity=False,
                               min_value=-1e12),
                     st.floats(min_value=1e4 + 1, max_value=1e300)))
    def test_physically_impossible_readings_never_pass(self, field, value):
        """Coolant below freezing, above boiling, or flowing faster than any CDU's pipes carry
        (the bounds and their basis: checks/cooling.py, above CduParams)."""
        doc = json.loads(DEGRADABLE_COOLING)
        key = "/redfish/v1/ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1"
        doc["resources"][key][field] = {"Reading": value}
        assert _cdu_outcome(json.dumps(doc)) in BAD

    def test_every_non_finite_token_is_a_parse_error(self):
        for token in NON_FINITE:
            text = re.sub(r'("FlowLitersPerMinute": \{\n\s*"Reading": )(-?[0-9.]+)',
                          rf"\g<1>{token}", DEGRADABLE_COOLING)
            assert text != DEGRADABLE_COOLING and _cdu_outcome(text) is Status.ERROR, token
