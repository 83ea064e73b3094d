"""Issue 11, cooling family, property tests: degraded CDU evidence never passes and never
raises anything but ParseError (degrade_helpers says how it is degraded).

Healthy source: the CDU of the healthy Redfish mockup (tests/fixtures/redfish/healthy,
written by generate.py from DMTF's schemas), as the collector gathers it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from degrade_helpers import BAD, NON_FINITE, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.cooling import CduParams, judge_cdu
from rackgate.model import Status
from rackgate.parsers.redfish import parse_redfish_cooling
from rackgate.profile import Threshold

ROOT = Path(__file__).parents[1] / "fixtures" / "redfish" / "healthy"
LIMITS = {
    "supply_temp_c": Threshold(unit="C", ref=40, max_ratio=1.0, basis="a figure for the test"),
    "return_temp_c": Threshold(unit="C", ref=50, max_ratio=1.0, basis="a figure for the test"),
    "flow_lpm": Threshold(unit="L/min", ref=120, min_ratio=0.8, basis="a figure for the test"),
}


def _cooling() -> str:
    cdu = ROOT / "ThermalEquipment" / "CDUs" / "1"
    found = {"/redfish/v1/" + p.parent.relative_to(ROOT).as_posix():
             json.loads(p.read_text(encoding="utf-8")) for p in sorted(cdu.rglob("index.json"))}
    return json.dumps({"collector": "rackgate.redfish", "kind": "cooling",
                       "resources": found}, indent=1) + "\n"


COOLING = _cooling()


def cdu(text: str) -> Status:
    return outcome(parse_redfish_cooling, lambda r: judge_cdu(r, CduParams(), LIMITS), text)


def test_the_healthy_source_passes():
    assert cdu(COOLING) is Status.PASS


@settings(max_examples=120, deadline=None)
@given(degraded(COOLING, numbers=r'"(?:Reading|Members@odata\.count)": (-?[0-9.]+)',
                lines=r"\S", end=len(COOLING.rstrip())))
def test_degraded_cooling_never_passes(text):
    assert cdu(text) in BAD


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["SupplyTemperatureCelsius", "ReturnTemperatureCelsius",
                        "FlowLitersPerMinute"]),
       st.one_of(st.floats(max_value=-0.01, allow_nan=False, allow_infinity=False,
                           min_value=-1e12),
                 st.floats(min_value=1e4 + 1, max_value=1e300)))
def test_physically_impossible_readings_never_pass(field, value):
    """Coolant below freezing, above boiling, or flowing faster than any CDU's pipes carry
    (the bounds and their basis: checks/cooling.py, above CduParams)."""
    doc = json.loads(COOLING)
    key = "/redfish/v1/ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1"
    doc["resources"][key][field] = {"Reading": value}
    assert cdu(json.dumps(doc)) in BAD


def test_every_non_finite_token_is_a_parse_error():
    for token in NON_FINITE:
        text = re.sub(r'("FlowLitersPerMinute": \{\n\s*"Reading": )(-?[0-9.]+)',
                      rf"\g<1>{token}", COOLING)
        assert text != COOLING and cdu(text) is Status.ERROR, token
