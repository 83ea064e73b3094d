"""Issue 11, cooling family: cooling.cdu gives an ACCEPT only from complete, finite,
physically plausible, positively healthy evidence.

Inputs are derived here from the project's healthy Redfish mockup (tests/fixtures/redfish/
healthy, written by generate.py from DMTF's schemas, see SOURCES.md) by editing one value
or one resource per test.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from rackgate.checks.cooling import CduParams, judge_cdu
from rackgate.model import Judgement, Status
from rackgate.parsers import ParseError
from rackgate.parsers.redfish import parse_redfish_cooling
from rackgate.profile import Threshold

ROOT = Path(__file__).parents[1] / "fixtures" / "redfish" / "healthy"
CDU = "/redfish/v1/ThermalEquipment/CDUs/1"
SEC = f"{CDU}/SecondaryCoolantConnectors"
LD = f"{CDU}/LeakDetection/LeakDetectors"
LIMITS = {
    "supply_temp_c": Threshold(unit="C", ref=40, max_ratio=1.0, basis="a figure for the test"),
    "return_temp_c": Threshold(unit="C", ref=50, max_ratio=1.0, basis="a figure for the test"),
    "flow_lpm": Threshold(unit="L/min", ref=120, min_ratio=0.8, basis="a figure for the test"),
}


def healthy_cooling() -> dict[str, dict[str, Any]]:
    """The healthy mockup's CDU resources, as the collector would gather them."""
    found = {}
    for path in sorted((ROOT / "ThermalEquipment" / "CDUs" / "1").rglob("index.json")):
        rel = path.parent.relative_to(ROOT).as_posix()
        found["/redfish/v1/" + rel] = json.loads(path.read_text(encoding="utf-8"))
    return found


def text(resources: dict[str, dict[str, Any]]) -> str:
    return json.dumps({"collector": "rackgate.redfish", "kind": "cooling",
                       "resources": resources})


def judge(body: str, params: CduParams | None = None) -> Judgement:
    return judge_cdu(parse_redfish_cooling(body), params or CduParams(), LIMITS, None)


def test_healthy_cdu_still_passes():
    """The control: without it every test below could pass by failing everything."""
    assert judge(text(healthy_cooling())).status is Status.PASS


# --- finding 4: non-finite and impossible figures ---------------------------------------------

@pytest.mark.parametrize("value", ["Infinity", "NaN", "1e400", "-Infinity"])
def test_sound_4_cdu_non_finite_flow_is_refused_naming_the_field(value):
    body = text(healthy_cooling()).replace('"FlowLitersPerMinute": {"Reading": 150.0}',
                                           f'"FlowLitersPerMinute": {{"Reading": {value}}}')
    assert value in body
    with pytest.raises(ParseError, match=r"SecondaryCoolantConnectors/1\.FlowLitersPerMinute"
                                         r"\.Reading is .*not a finite number"):
        parse_redfish_cooling(body)


@pytest.mark.parametrize(("field", "value", "words"), [
    ("FlowLitersPerMinute", 1e9, "coolant flow 1,000,000,000 L/min is outside the physically "
                                 "plausible 0 to 10,000 L/min"),
    ("SupplyTemperatureCelsius", -1.0, "supply temperature -1 C is outside the physically "
                                       "plausible 0 to 100 C"),
    ("ReturnTemperatureCelsius", 350.0, "return temperature 350 C is outside"),
])
def test_sound_4_cdu_impossible_reading_is_an_error(field, value, words):
    res = healthy_cooling()
    res[f"{SEC}/1"][field] = {"Reading": value}
    j = judge(text(res))
    assert j.status is Status.ERROR, j.message
    assert f"connector Secondary loop connection {words}" in j.message


def test_cdu_glycol_loop_may_lower_the_freezing_point():
    res = healthy_cooling()
    res[f"{SEC}/1"]["SupplyTemperatureCelsius"] = {"Reading": -1.0}
    j = judge(text(res), CduParams(coolant_freezing_point_c=-10))
    assert j.status is Status.PASS, j.message


# --- finding 2 (states): allow-lists for the CDU and its connectors ---------------------------

def test_sound_2_cdu_state_other_than_enabled_fails():
    res = healthy_cooling()
    res[CDU]["Status"]["State"] = "UnavailableOffline"
    j = judge(text(res))
    assert j.status is Status.FAIL, j.message
    assert "CDU Rack CDU is UnavailableOffline (present but cannot be used)" in j.message


def test_sound_2_connector_without_status_is_not_healthy():
    res = healthy_cooling()
    del res[f"{SEC}/1"]["Status"]
    j = judge(text(res))
    assert j.status is Status.ERROR, j.message
    assert "connector Secondary loop connection reports no Status.State" in j.message


# --- finding 14: the expected set -------------------------------------------------------------

def test_sound_14_every_judged_connector_must_report_every_reading():
    res = healthy_cooling()
    second = copy.deepcopy(res[f"{SEC}/1"])
    second["@odata.id"], second["Id"], second["Name"] = f"{SEC}/2", "2", "Secondary loop B"
    del second["FlowLitersPerMinute"]
    res[f"{SEC}/2"] = second
    res[SEC]["Members"].append({"@odata.id": f"{SEC}/2"})
    res[SEC]["Members@odata.count"] = 2
    j = judge(text(res))
    assert j.status is Status.ERROR, j.message
    assert f"connector Secondary loop B ({SEC}/2): no coolant flow reading" in j.message


def test_sound_14_a_cdu_other_than_the_one_asked_for_is_an_error():
    j = judge(text(healthy_cooling()), CduParams(cdu="2"))
    assert j.status is Status.ERROR, j.message
    assert f"CoolingUnit {CDU} is not the CDU asked for (2)" in j.message


def test_sound_14_a_leak_detector_missing_from_its_collection_is_noticed():
    res = healthy_cooling()
    del res[f"{LD}/Manifold"]  # the group summary still says OK for it
    with pytest.raises(ParseError, match=r"lists member '.*LeakDetectors/Manifold', which is "
                                         r"not in the evidence"):
        parse_redfish_cooling(text(res))
