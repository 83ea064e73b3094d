"""Conformance: the Redfish parsers and judges on DMTF's published mockups
(../shared/corpus/redfish, read at test time; skipped when the corpus is absent).

Each file holds one Redfish resource. Power and cooling resources must parse; any other
resource (Thermal, ThermalEquipment, CoolingLoop, Pump...) must be refused by both parsers
with a ParseError that names the type found. Degraded resources (an absent or unhealthy
supply, lost redundancy, a CDU whose health is not OK) must be judged `fail`.
"""

from __future__ import annotations

import json

import pytest

from conftest import CorpusFile, corpus_files, corpus_params
from rackgate.checks.cooling import CduParams, PsuRedfishParams, judge_cdu, judge_psu_redfish
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.redfish import (
    parse_redfish_cooling,
    parse_redfish_power,
    resource_type,
    resources,
)
from rackgate.profile import Hardware, PsuSpec, Threshold

POWER = {"Power", "PowerSubsystem", "PowerSupply"}
COOLING = {"CoolingUnit", "CoolantConnector", "LeakDetection", "LeakDetector"}
WIDE = {  # loose bands: the corpus tests the states, not DMTF's invented figures
    "supply_temp_c": Threshold(unit="C", ref=100, max_ratio=1.0, basis="a loose test band"),
    "return_temp_c": Threshold(unit="C", ref=100, max_ratio=1.0, basis="a loose test band"),
    "flow_lpm": Threshold(unit="L/min", ref=1, min_ratio=0.001, basis="a loose test band"),
}
# what the headers' notes say each file shows; a file missing from the corpus is not an error
EXPECTED = {
    "rackmount1-psu-bay2-absent.txt": (Status.FAIL, "is absent"),
    "rackmount1-psu-bay1.txt": (Status.FAIL, "health Warning"),
    "rackmount1-powersubsystem-redundancy-offline.txt": (Status.FAIL, "UnavailableOffline"),
    "rackmount1-chassis-power-1psu-warning.txt": (Status.FAIL, "health Warning"),
    "tower-chassis-power-2psu-redundancy.txt": (Status.FAIL, "Power Supply Bay 1 is Enabled"),
    "cooling-unit-cdu1-pump-failed.txt": (Status.FAIL, "rollup Critical"),
    "cooling-unit-cdu1-leakdetection.txt": (Status.ERROR, "no CoolingUnit"),
    "cooling-unit-cdu1-leakdetector-moisture.txt": (Status.ERROR, "no CoolingUnit"),
}


def _types(f: CorpusFile) -> set[str]:
    return {resource_type(r) for r in resources(f.body).values()}


def _judge(f: CorpusFile):
    types = _types(f)
    if types & POWER:
        rec = parse_redfish_power(f.body)
        hw = Hardware(psu=PsuSpec(count=max(1, len(rec.supplies)),
                                  redundancy="N+1" if rec.redundancy else "none",
                                  source="as many supplies as the mockup lists"))
        return judge_psu_redfish(rec, PsuRedfishParams(), {}, hw)
    return judge_cdu(parse_redfish_cooling(f.body), CduParams(loop="all"), WIDE, Hardware())


@pytest.mark.parametrize("f", corpus_params("redfish"))
def test_parses_or_is_refused_clearly(f: CorpusFile):
    json.loads(f.body)  # the corpus file itself is one JSON resource
    types = _types(f)
    if types & (POWER | COOLING):
        _judge(f)
        return
    for parse in (parse_redfish_power, parse_redfish_cooling):
        with pytest.raises(ParseError, match=r"\(found: " + "|".join(sorted(types))):
            parse(f.body)


@pytest.mark.parametrize("f", corpus_params("redfish"))
def test_degraded_is_judged_degraded(f: CorpusFile):
    types = _types(f)
    if not types & (POWER | COOLING):
        pytest.skip(f"not a power or cooling resource ({', '.join(sorted(types))})")
    j = _judge(f)
    if f.degraded:
        assert j.status is Status.FAIL, j.message
    expected = EXPECTED.get(f.path.name)
    if expected is not None:
        assert j.status is expected[0], j.message
        assert expected[1] in j.message


def test_power_figures_from_the_tower_mockup():
    files = corpus_files("redfish", "tower-chassis-power-*")
    if not files:
        pytest.skip("no tower power mockup in the corpus")
    rec = parse_redfish_power(files[0].body)
    assert [(s.name, s.state, s.health) for s in rec.supplies] == [
        ("Power Supply Bay 1", "Enabled", "Warning"), ("Power Supply Bay 2", "Enabled", "OK")]
    assert rec.supplies[0].output_watts == 463 and rec.supplies[0].capacity_watts == 1100
    assert [(g.mode, g.min_needed, g.max_supported, g.health) for g in rec.redundancy] == [
        ("N+m", 1, 2, "OK")]


def test_rackmount1_bay2_is_an_empty_bay_not_a_supply():
    """DMTF's rackmount1 chassis, its two PowerSupply resources read together: Bay2 is
    Absent (an empty bay, named, not counted), Bay1 Enabled with Health Warning (a failure);
    with Bay1's Health OK, a profile of one supply passes and names the empty bay."""
    files = corpus_files("redfish", "rackmount1-psu-bay*")
    if len(files) != 2:
        pytest.skip("no rackmount1 PSU mockups in the corpus")
    text = "\n".join(f.body for f in files)
    one = Hardware(psu=PsuSpec(count=1, redundancy="none", source="one supply, one empty bay"))
    j = judge_psu_redfish(parse_redfish_power(text), PsuRedfishParams(), {}, one)
    assert j.status is Status.FAIL and "Power Supply Bay 1 is Enabled, health Warning" \
        in j.message, j.message
    assert j.details["empty_bays"] == "Power Supply Bay 2 " \
        "(/redfish/v1/Chassis/1U/PowerSubsystem/PowerSupplies/Bay2)"
    doc = json.loads(files[0].body)
    doc["Status"] = {"State": "Enabled", "Health": "OK"}
    healthy = json.dumps(doc) + "\n" + files[1].body
    j = judge_psu_redfish(parse_redfish_power(healthy), PsuRedfishParams(), {}, one)
    assert j.status is Status.PASS, j.message
    assert "empty bay: Power Supply Bay 2" in j.message
    two = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source="two supplies"))
    j = judge_psu_redfish(parse_redfish_power(healthy), PsuRedfishParams(), {}, two)
    assert j.status is Status.FAIL and "is absent (empty bay)" in j.message, j.message
