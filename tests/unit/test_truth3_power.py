"""Issue 29 (verdict truth, third pass), Redfish power: r2 and r7.

r2: a bay the BMC lists as ``Absent`` holds no supply (DMTF Resource.State: "not currently
present or detected ... an available location where a device can be installed"): supplies
are counted over the present bays, the empty ones named; a missing ``Status.State`` or
``Status.Health`` is an error unless the profile says how its BMC is read
(``missing_state`` / ``missing_health``, with a basis), HealthRollup stands in for a missing
Health, and Health Warning or Critical fails a supply whatever its State says.
r7: a vendor state (``Standby``) stays an error unless mapped, and the error says how.

The evidence is the healthy six-bay mockup of tests/fixtures/redfish (as the collector
gathers it) with the Status of some bays changed as each case says: an HPE Cray BMC's
supplies with Health and no State, a rectifier's State without Health, empty bays.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_real_formats_redfish_multipath import BAYS, PS, R, collected, hw, tree

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.cooling import judge_psu_redfish
from rackgate.model import Judgement, Status
from rackgate.parsers.redfish import parse_redfish_power

CHECK = REGISTRY["redundancy.psu_redfish"]
BASIS = "the BMC vendor's Redfish guide, power section: what its supplies publish"
H100 = load_profile("dgx-h100").model
DMTF_STATES = ["Enabled", "Disabled", "StandbyOffline", "StandbySpare", "InTest", "Starting",
               "Absent", "UnavailableOffline", "Deferring", "Quiesced", "Updating",
               "Qualified", "Degraded"]


def params(**given: Any) -> Any:
    """The check's params as a profile gives them (validated by the registry's model)."""
    return CHECK.params_model.model_validate(given)


def bays(status: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The healthy mockup with each named bay's Status replaced; an Absent bay loses its
    rating and metrics, as DMTF's rackmount1 Bay2 mockup shows an empty bay."""
    res = copy.deepcopy(tree("healthy"))
    for bay, st_ in status.items():
        key = f"{PS}/PowerSupplies/{bay}"
        res[key]["Status"] = st_
        if st_.get("State") == "Absent":
            for field in ("Metrics", "PowerCapacityWatts", "LineInputStatus"):
                res[key].pop(field, None)
            res.pop(f"{key}/Metrics")
    return res


def judge(res: dict[str, dict[str, Any]], count: int = 6, redundancy: str = "N+2",
          **given: Any) -> Judgement:
    return judge_psu_redfish(parse_redfish_power(collected(res)), params(**given), {},
                             hw(redundancy, count))


EMPTY_5_6 = {"Bay5": {"State": "Absent"}, "Bay6": {"State": "Absent"}}


# ------------------------------------------------------------------ r2: empty bays


def test_truth3_r2_empty_bays_are_not_counted_and_are_named():
    """Four supplies in a six-bay chassis, a profile that says four: a pass, the two empty
    bays named in the message and the details."""
    j = judge(bays(EMPTY_5_6), count=4)
    assert j.status is Status.PASS, j.message
    assert j.measured == 4 and j.details["supplies"] == 4
    assert "empty bays: Power Supply Bay5 (/redfish/v1/Chassis/1/PowerSubsystem/" \
           "PowerSupplies/Bay5), Power Supply Bay6" in j.message
    assert j.details["empty_bays"] == ", ".join(
        f"Power Supply {b} ({PS}/PowerSupplies/{b})" for b in ("Bay5", "Bay6"))


def test_truth3_r2_legacy_power_schema_empty_bays_are_not_counted():
    power = copy.deepcopy(tree("healthy")[f"{R}/Chassis/1/Power"])
    for member in power["PowerSupplies"][4:]:
        member["Status"] = {"State": "Absent"}
        for field in ("PowerInputWatts", "LastPowerOutputWatts", "PowerCapacityWatts"):
            del member[field]
    j = judge({f"{R}/Chassis/1/Power": power}, count=4)
    assert j.status is Status.PASS, j.message
    assert j.details["source"] == "Power" and "empty bays: Power Supply Bay5" in j.message


def test_truth3_r2_an_empty_bay_where_the_profile_counts_a_supply_fails():
    """The shipped dgx-h100 profile (six supplies, unchanged): two empty bays are two
    missing supplies, named."""
    j = judge_psu_redfish(parse_redfish_power(collected(bays(EMPTY_5_6))),
                          params(**H100.checks["redundancy.psu_redfish"].params), {},
                          H100.hardware)
    assert j.status is Status.FAIL, j.message
    assert "4 of 6 supplies present and healthy: 4 present, Power Supply Bay5" in j.message
    assert "are absent (empty bay)" in j.message


def test_truth3_r2_every_bay_empty_fails():
    j = judge(bays({b: {"State": "Absent"} for b in BAYS}), count=4)
    assert j.status is Status.FAIL and "0 of 4 supplies present" in j.message, j.message


@pytest.mark.parametrize("health", ["Warning", "Critical"])
def test_truth3_r2_a_failed_supply_beside_empty_bays_fails(health):
    j = judge(bays({**EMPTY_5_6, "Bay2": {"State": "Enabled", "Health": health}}), count=4)
    assert j.status is Status.FAIL, j.message
    assert f"Power Supply Bay2 is Enabled, health {health}" in j.message
    assert "empty bays: Power Supply Bay5" in j.message


def test_truth3_r2_more_present_supplies_than_the_profile_counts_still_fail():
    j = judge(bays({"Bay6": {"State": "Absent"}}), count=4)
    assert j.status is Status.FAIL, j.message
    assert "the BMC lists 5 supplies, the profile expects 4" in j.message


@pytest.mark.parametrize("health", ["Warning", "Critical"])
def test_truth3_r2_an_empty_bay_the_bmc_flags_is_reported_never_passed(health):
    j = judge(bays({**EMPTY_5_6, "Bay6": {"State": "Absent", "Health": health}}), count=4)
    assert j.status is Status.WARN, j.message
    assert f"Power Supply Bay6 (/redfish/v1/Chassis/1/PowerSubsystem/PowerSupplies/Bay6) is " \
           f"an empty bay, yet the BMC reports health {health}" in j.message


def test_truth3_r2_an_empty_bay_with_a_health_on_no_list_is_an_error():
    j = judge(bays({**EMPTY_5_6, "Bay6": {"State": "Absent", "Health": "Fine"}}), count=4)
    assert j.status is Status.ERROR and "'Fine'" in j.message, j.message


# ------------------------------------------------------- r2: a missing State or Health

NO_STATE = {b: {"Health": "OK"} for b in BAYS}  # as some HPE Cray BMCs publish supplies
NO_HEALTH = {b: {"State": "Enabled"} for b in BAYS}  # as rectifiers publish them
ASSUME_ENABLED = {"missing_state": {"read_as": "Enabled", "basis": BASIS}}
ASSUME_OK = {"missing_health": {"read_as": "OK", "basis": BASIS}}


def test_truth3_r2_health_without_state_is_an_error_that_says_how_to_describe_it():
    j = judge(bays(NO_STATE))
    assert j.status is Status.ERROR, j.message
    assert "Power Supply Bay1 reports Health OK but no Status.State" in j.message
    assert "params.missing_state: {read_as: Enabled, basis:" in j.message


def test_truth3_r2_health_without_state_passes_where_the_profile_says_so():
    j = judge(bays(NO_STATE), **ASSUME_ENABLED)
    assert j.status is Status.PASS, j.message
    assert j.measured == 6 and "Health OK read as Enabled (" + BASIS in j.message


@pytest.mark.parametrize("health", ["Warning", "Critical"])
@pytest.mark.parametrize("rule", [{}, ASSUME_ENABLED, ASSUME_OK])
def test_truth3_r2_warning_or_critical_health_without_state_fails(health, rule):
    """Health Warning or Critical fails a supply whatever its State says, or lacks."""
    j = judge(bays({**NO_STATE, "Bay3": {"Health": health}}), **rule)
    assert j.status is Status.FAIL, j.message
    assert f"Power Supply Bay3 reports no Status.State, health {health}" in j.message


def test_truth3_r2_state_without_health_is_an_error_that_says_how_to_describe_it():
    j = judge(bays(NO_HEALTH))
    assert j.status is Status.ERROR, j.message
    assert "Power Supply Bay1 is Enabled but reports no Status.Health" in j.message
    assert "params.missing_health: {read_as: OK, basis:" in j.message


def test_truth3_r2_state_without_health_passes_where_the_profile_says_so():
    j = judge(bays(NO_HEALTH), **ASSUME_OK)
    assert j.status is Status.PASS, j.message
    assert "Enabled read as Health OK (" + BASIS in j.message


@pytest.mark.parametrize("state", ["UnavailableOffline", "Disabled", "StandbyOffline"])
def test_truth3_r2_a_rectifier_not_enabled_fails_under_the_rule(state):
    j = judge(bays({**NO_HEALTH, "Bay4": {"State": state}}), **ASSUME_OK)
    assert j.status is Status.FAIL and f"Power Supply Bay4 is {state}" in j.message, j.message


def test_truth3_r2_a_spare_without_health_is_no_pass_under_the_rule():
    """The rule reads an Enabled supply only: a spare's health shows it can take over."""
    j = judge(bays({**NO_HEALTH, "Bay6": {"State": "StandbySpare"}}), **ASSUME_OK)
    assert j.status is Status.ERROR, j.message
    assert "Power Supply Bay6 is StandbySpare but reports no Status.Health" in j.message


def test_truth3_r2_neither_state_nor_health_is_an_error_whatever_the_rules():
    j = judge(bays({**NO_HEALTH, "Bay2": {}}), **ASSUME_ENABLED, **ASSUME_OK)
    assert j.status is Status.ERROR, j.message
    assert "Power Supply Bay2 reports no Status.State" in j.message


def test_truth3_r2_health_rollup_stands_in_for_a_missing_health():
    """HealthRollup is the health of the supply and its dependents: OK there is OK."""
    ok = judge(bays({b: {"State": "Enabled", "HealthRollup": "OK"} for b in BAYS}))
    assert ok.status is Status.PASS, ok.message
    assert "HealthRollup OK" in ok.message
    bad = judge(bays({b: {"State": "Enabled", "HealthRollup": "Critical" if b == "Bay2"
                          else "OK"} for b in BAYS}), **ASSUME_OK)
    assert bad.status is Status.FAIL and "Power Supply Bay2 is Enabled, health Critical" \
        in bad.message, bad.message


@pytest.mark.parametrize("given", [
    {"missing_state": {"read_as": "Enabled", "basis": ""}},  # a basis is required
    {"missing_state": {"read_as": "StandbySpare", "basis": BASIS}},  # Enabled only
    {"missing_health": {"read_as": "Warning", "basis": BASIS}},  # OK only
    {"missing_health": {"basis": BASIS}},
])
def test_truth3_r2_the_rules_are_validated(given):
    with pytest.raises(ValueError):
        params(**given)


def test_truth3_r2_shipped_profiles_keep_the_strict_default():
    for name in ("dgx-h100", "demo"):
        p = load_profile(name).model.checks["redundancy.psu_redfish"].params
        assert "missing_state" not in p and "missing_health" not in p, name
    j = judge_psu_redfish(parse_redfish_power(collected(bays(NO_STATE))),
                          params(**H100.checks["redundancy.psu_redfish"].params), {},
                          H100.hardware)
    assert j.status is Status.ERROR, j.message


STATUS_VALUES = st.fixed_dictionaries({}, optional={
    "State": st.sampled_from([*DMTF_STATES, "Standby"]),
    "Health": st.sampled_from(["OK", "Warning", "Critical"]),
    "HealthRollup": st.sampled_from(["OK", "Warning", "Critical"])})


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(BAYS), STATUS_VALUES, min_size=1),
       st.sampled_from([{}, ASSUME_ENABLED, ASSUME_OK, {**ASSUME_ENABLED, **ASSUME_OK}]),
       st.integers(2, 6))
def test_truth3_r2_a_warning_or_critical_supply_never_passes(status, rule, count):
    """Whatever the States, rules and count: a bay whose Health or HealthRollup is Warning
    or Critical is never passed, and a supply (a bay not Absent) so flagged fails."""
    j = judge(bays(status), count=count, redundancy="N+1", **rule)
    flagged = [b for b, s in status.items()
               if {s.get("Health"), s.get("HealthRollup")} & {"Warning", "Critical"}]
    if flagged:
        assert j.status is not Status.PASS, (status, j.message)
    if any(status[b].get("State") != "Absent" for b in flagged):
        assert j.status is Status.FAIL, (status, j.message)


# ------------------------------------------------------------------ r7: vendor states


def test_truth3_r7_a_vendor_state_error_says_how_to_map_it():
    """The error names the profile key and an example value; following it works."""
    res = tree("psu-vendor-standby")
    j = judge(res)
    assert j.status is Status.ERROR, j.message
    m = re.search(r"map it in the profile: checks: (\{redundancy\.psu_redfish: .*?\}\}\}\}\})",
                  j.message)
    assert m is not None, j.message
    example = yaml.safe_load(m.group(1))
    rule = example["redundancy.psu_redfish"]["params"]["vendor_states"]
    assert rule == {"Standby": {"means": "StandbySpare", "basis": "<the BMC document that "
                                                                   "says so>"}}
    rule["Standby"]["basis"] = BASIS
    assert judge(res, vendor_states=rule).status is Status.PASS


@pytest.mark.parametrize("health", ["Warning", "Critical"])
def test_truth3_r7_a_vendor_state_with_a_failing_health_fails(health):
    res = tree("psu-vendor-standby")
    res[f"{PS}/PowerSupplies/Bay6"]["Status"]["Health"] = health
    j = judge(res)
    assert j.status is Status.FAIL, j.message
    assert f"Power Supply Bay6 reports Health {health}" in j.message
    assert "vendor_states" in j.message


def test_truth3_r2_health_ok_with_a_failing_rollup_fails():
    j = judge(bays({"Bay3": {"State": "Enabled", "Health": "OK", "HealthRollup": "Warning"}}))
    assert j.status is Status.FAIL, j.message
    assert "Power Supply Bay3 reports HealthRollup Warning" in j.message


def test_truth3_r7_an_unmapped_vendor_state_stays_an_error():
    res = tree("psu-vendor-standby")
    other = {"Offline": {"means": "StandbySpare", "basis": BASIS}}
    j = judge(res, vendor_states=other)
    assert j.status is Status.ERROR and "'Standby'" in j.message, j.message
