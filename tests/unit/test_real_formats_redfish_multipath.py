"""Issue 14, valid outputs of real machines: Redfish power supplies and ``multipath -ll``.

Redfish fixtures: the power-only mockup trees in tests/fixtures/redfish (written by
generate.py from DMTF's schemas and DSP0266; SOURCES.md says which case each shows):
a PowerSupplies collection returned with ``$expand`` (each member a whole PowerSupply),
supplies in ``StandbySpare`` and in the vendor state ``Standby``, and ``PowerCapacityWatts``
given as a string. multipath fixtures: tests/fixtures/redundancy/multipath-wwid-with-spaces-
*.txt, written from multipath-tools' libmultipath/print.c (headers in the files): maps with no
alias, named by a WWID that holds a run of spaces.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.cooling import PsuRedfishParams, judge_psu_redfish
from rackgate.checks.redundancy import MultipathParams, judge_multipath
from rackgate.model import Judgement, Status
from rackgate.parsers import ParseError
from rackgate.parsers.multipath import parse_multipath_ll
from rackgate.parsers.redfish import parse_redfish_power
from rackgate.profile import Hardware, PsuSpec, StorageSpec
from rackgate.programs import redfish as collector

FIX = Path(__file__).parents[1] / "fixtures"
MOCKUPS = FIX / "redfish"
SRC = "a profile written for the unit tests"
R = "/redfish/v1"
PS = f"{R}/Chassis/1/PowerSubsystem"
BAYS = [f"Bay{n}" for n in range(1, 7)]


def hw(redundancy: str = "N+2", count: int = 6) -> Hardware:
    return Hardware(psu=PsuSpec(count=count, redundancy=redundancy,  # type: ignore[arg-type]
                                watts_each=3300, source=SRC))


class DirFetcher:
    """Serves a sushy-static tree from disk and counts the requests."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: list[str] = []

    def get(self, path: str) -> dict[str, Any]:
        self.paths.append(path)
        file = self.root / path.removeprefix(R).strip("/") / "index.json"
        if not file.is_file():
            raise collector.CollectError(f"GET {path}: HTTP 404")
        doc: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
        return doc


def tree(scenario: str) -> dict[str, dict[str, Any]]:
    """The resources the collector gathers from ``scenario`` (its walk, no HTTP)."""
    return collector.walk_power(DirFetcher(MOCKUPS / scenario), "1")


def collected(resources: dict[str, dict[str, Any]]) -> str:
    return json.dumps({"collector": "rackgate.redfish", "kind": "power", "resources": resources})


def raw(scenario: str, *paths: str) -> str:
    """Resources one after the other, as a BMC returns them (e.g. one curl per URI)."""
    root = MOCKUPS / scenario
    return "\n".join((root / p.removeprefix(R).strip("/") / "index.json").read_text(
        encoding="utf-8") for p in paths)


def judge(text: str, hardware: Hardware | None = None,
          params: PsuRedfishParams | None = None) -> Judgement:
    return judge_psu_redfish(parse_redfish_power(text), params or PsuRedfishParams(), {},
                             hardware or hw())


# ------------------------------------------------ Redfish: $expand-ed PowerSupplyCollection


def test_redfish_expanded_power_supply_collection_is_read_and_passes():
    rec = parse_redfish_power(collected(tree("psu-collection-expanded")))
    assert rec.source == "PowerSubsystem"
    assert [s.name for s in rec.supplies] == [f"Power Supply {b}" for b in BAYS]
    assert [s.input_watts for s in rec.supplies] == [1110 + i for i in range(6)]
    j = judge(collected(tree("psu-collection-expanded")))
    assert j.status is Status.PASS, j.message


def test_redfish_expanded_collection_alone_as_the_bmc_returns_it():
    """The collection with its members inline is the whole evidence of the supplies."""
    text = raw("psu-collection-expanded", PS, f"{PS}/PowerSupplies")
    rec = parse_redfish_power(text)
    assert [(s.id, s.state, s.health, s.capacity_watts) for s in rec.supplies] == [
        (f"{PS}/PowerSupplies/{b}", "Enabled", "OK", 3300) for b in BAYS]
    assert judge(text).status is Status.PASS


def test_redfish_collector_takes_expanded_members_as_given():
    """Read once: a second GET of a member could differ from the copy in the collection."""
    fetch = DirFetcher(MOCKUPS / "psu-collection-expanded")
    found = collector.walk_power(fetch, "1")
    assert not [p for p in fetch.paths if re.fullmatch(rf"{PS}/PowerSupplies/Bay\d", p)]
    assert f"{PS}/PowerSupplies/Bay1/Metrics" in fetch.paths
    assert parse_redfish_power(collected(found)).supplies[0].input_watts == 1110


def test_redfish_expanded_member_contradicting_its_own_resource_is_a_parse_error():
    res = tree("psu-collection-expanded")
    bay2 = f"{PS}/PowerSupplies/Bay2"
    res[bay2] = copy.deepcopy(res[bay2]) | {"Status": {"State": "Absent"}}
    with pytest.raises(ParseError, match=re.escape(bay2) + ".*differ"):
        parse_redfish_power(collected(res))


def test_redfish_expanded_collection_miscounted_is_still_a_parse_error():
    res = tree("psu-collection-expanded")
    res[f"{PS}/PowerSupplies"]["Members"].pop()
    with pytest.raises(ParseError, match="counts 6 members but lists 5"):
        parse_redfish_power(collected(res))


def test_redfish_expanded_collection_bay3_offline_fails():
    for text in (collected(tree("psu-collection-expanded-bay3-offline")),
                 raw("psu-collection-expanded-bay3-offline", PS, f"{PS}/PowerSupplies")):
        j = judge(text)
        assert j.status is Status.FAIL, j.message
        assert "Power Supply Bay3" in j.message and "UnavailableOffline" in j.message


# ------------------------------------------------ Redfish: StandbySpare and vendor states


def test_redfish_standby_spares_within_the_profiles_redundancy_pass():
    """4+2: two hot spares (StandbySpare, Health OK, redundancy group OK) are the '+2'."""
    j = judge(collected(tree("psu-standby-spare")), hw("N+2"))
    assert j.status is Status.PASS, j.message
    assert "2 StandbySpare" in j.message and j.measured == 6


@pytest.mark.parametrize("redundancy", ["N+1", "none"])
def test_redfish_more_spares_than_the_profile_allows_fail(redundancy):
    j = judge(collected(tree("psu-standby-spare")), hw(redundancy))
    assert j.status is Status.FAIL, j.message
    assert "StandbySpare" in j.message and "Power Supply Bay5" in j.message


def test_redfish_standby_spare_with_critical_health_fails():
    j = judge(collected(tree("psu-standby-spare-bay6-critical")), hw("N+2"))
    assert j.status is Status.FAIL, j.message
    assert "Power Supply Bay6" in j.message and "Critical" in j.message


def test_redfish_standby_spare_without_a_redundancy_group_is_not_a_pass():
    res = tree("psu-standby-spare")
    res[PS]["PowerSupplyRedundancy"] = []
    res[f"{R}/Chassis/1/Power"]["Redundancy"] = []
    j = judge(collected(res), hw("N+2"))
    assert j.status is Status.ERROR, j.message
    assert "Power Supply Bay5" in j.message and "redundancy group" in j.message


def test_redfish_standby_offline_is_no_spare():
    """StandbyOffline awaits an external action: no automatic failover, so not a spare."""
    res = tree("psu-standby-spare")
    res[f"{PS}/PowerSupplies/Bay6"]["Status"]["State"] = "StandbyOffline"
    j = judge(collected(res), hw("N+2"))
    assert j.status is Status.FAIL and "StandbyOffline" in j.message


def test_redfish_vendor_standby_is_parsed_and_reported_as_an_unknown_state():
    text = collected(tree("psu-vendor-standby"))
    assert parse_redfish_power(text).supplies[5].state == "Standby"
    j = judge(text)
    assert j.status is Status.ERROR, j.message
    assert "Power Supply Bay6" in j.message and "'Standby'" in j.message
    assert "vendor_states" in j.message


def test_redfish_vendor_state_mapped_by_the_profile_is_judged_as_mapped():
    text = collected(tree("psu-vendor-standby"))
    basis = "the BMC vendor's manual: Standby is a hot spare that takes load on failover"
    spare = PsuRedfishParams(vendor_states={"Standby": {"means": "StandbySpare",
                                                        "basis": basis}})
    j = judge(text, hw("N+2"), spare)
    assert j.status is Status.PASS, j.message
    assert "Standby" in j.message
    offline = PsuRedfishParams(vendor_states={"Standby": {"means": "StandbyOffline",
                                                          "basis": basis}})
    assert judge(text, hw("N+2"), offline).status is Status.FAIL


@pytest.mark.parametrize("mapping", [
    {"Enabled": {"means": "StandbySpare", "basis": "x"}},  # a DMTF value is not remapped
    {"Standby": {"means": "Ready", "basis": "x"}},  # only to a DMTF value
    {"Standby": {"means": "StandbySpare", "basis": ""}},  # and with a basis
])
def test_redfish_vendor_state_mapping_is_validated(mapping):
    with pytest.raises(ValueError):
        PsuRedfishParams(vendor_states=mapping)


STATES = ["Enabled", "Disabled", "StandbyOffline", "StandbySpare", "InTest", "Starting",
          "Absent", "UnavailableOffline", "Deferring", "Quiesced", "Updating", "Qualified",
          "Degraded"]


@pytest.mark.parametrize("mode", ["none", "N+1", "N+2", "N+N"])
def test_redfish_every_documented_supply_state_and_health_is_judged_by_the_allow_list(mode):
    """Enabled/OK passes; StandbySpare/OK passes in a redundant set (one spare here);
    every other DMTF state, a vendor value, a missing one and any other health never."""
    base = tree("healthy")
    for state in [*STATES, "Standby", "enabled", None]:
        for health in ["OK", "Warning", "Critical", "ok", None]:
            res = copy.deepcopy(base)
            res[f"{PS}/PowerSupplies/Bay3"]["Status"] = {"State": state, "Health": health}
            j = judge(collected(res), hw(mode))
            healthy = health == "OK" and (state == "Enabled" or (state == "StandbySpare"
                                          and mode != "none"))
            assert (j.status is Status.PASS) == healthy, (state, health, j.message)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(BAYS), st.one_of(st.none(), st.text(max_size=12)),
       st.one_of(st.none(), st.text(max_size=8)),
       st.sampled_from(["none", "N+1", "N+2", "N+N"]))
def test_redfish_any_other_supply_state_text_never_passes(bay, state, health, mode):
    res = tree("healthy")
    res[f"{PS}/PowerSupplies/{bay}"]["Status"] = {"State": state, "Health": health}
    j = judge(collected(res), hw(mode))
    if j.status is Status.PASS:
        assert health == "OK" and state in ("Enabled", "StandbySpare"), j.message


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(BAYS), max_size=6), st.sampled_from(["none", "N+1", "N+2",
                                                                      "N+N"]))
def test_redfish_spares_pass_only_up_to_the_profiles_spare_count(spares, mode):
    res = tree("healthy")
    for bay in spares:
        res[f"{PS}/PowerSupplies/{bay}"]["Status"]["State"] = "StandbySpare"
    allowed = {"none": 0, "N+1": 1, "N+2": 2, "N+N": 3}[mode]
    j = judge(collected(res), hw(mode))
    assert (j.status is Status.PASS) == (len(spares) <= allowed), (spares, mode, j.message)


# ------------------------------------------------ Redfish: PowerCapacityWatts as a string


def test_redfish_capacity_given_as_a_string_is_read_in_both_schemas():
    res = tree("psu-capacity-string")
    rec = parse_redfish_power(collected(res))
    assert [s.capacity_watts for s in rec.supplies] == [3300.0] * 6
    legacy = parse_redfish_power(json.dumps(res[f"{R}/Chassis/1/Power"]))
    assert legacy.source == "Power" and [s.capacity_watts for s in legacy.supplies] == [3300.0] * 6
    assert judge(collected(res)).status is Status.PASS


def test_redfish_capacity_not_a_number_is_a_parse_error_naming_it():
    with pytest.raises(ParseError, match=r"Bay2.*PowerCapacityWatts.*'N/A'"):
        parse_redfish_power(collected(tree("psu-capacity-not-a-number")))


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.integers(0, 20_000).map(str),
                 st.decimals(0, 20_000, places=2, allow_nan=False).map(str)),
       st.sampled_from(["PowerSupply", "Power"]))
def test_redfish_any_numeric_capacity_string_parses_to_its_value(value, schema):
    res = tree("psu-capacity-string")
    if schema == "PowerSupply":
        res[f"{PS}/PowerSupplies/Bay4"]["PowerCapacityWatts"] = value
        text = collected(res)
    else:
        res[f"{R}/Chassis/1/Power"]["PowerSupplies"][3]["PowerCapacityWatts"] = value
        text = json.dumps(res[f"{R}/Chassis/1/Power"])
    assert parse_redfish_power(text).supplies[3].capacity_watts == float(value)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.sampled_from(["NaN", "nan", "inf", "-Infinity", "-3300", "3300W", "",
                                  " ", "3,300", "0x0ce4", "1e400", "N/A", "true"]),
                 st.text(max_size=8).filter(lambda s: not re.fullmatch(r"\d+(\.\d+)?", s)),
                 st.sampled_from([-1, -3300.5])),
       st.sampled_from(["PowerSupply", "Power"]))
def test_redfish_any_bad_capacity_is_a_parse_error_naming_the_value(value, schema):
    res = tree("psu-capacity-string")
    if schema == "PowerSupply":
        res[f"{PS}/PowerSupplies/Bay4"]["PowerCapacityWatts"] = value
        text = collected(res)
    else:
        res[f"{R}/Chassis/1/Power"]["PowerSupplies"][3]["PowerCapacityWatts"] = value
        text = json.dumps(res[f"{R}/Chassis/1/Power"])
    with pytest.raises(ParseError, match=r"PowerCapacityWatts") as exc:
        parse_redfish_power(text)
    assert repr(value)[:20] in str(exc.value) or str(value)[:20] in str(exc.value)


# ------------------------------------------------ multipath -ll: WWID names with spaces


def mp(name: str) -> str:
    text = (FIX / "redundancy" / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


MP_HW = Hardware(storage=StorageSpec(multipath_paths_per_lun=2, source=SRC))
IET = ["1IET     00080001", "1IET     00080002"]


def test_multipath_map_named_by_a_wwid_with_spaces_is_read():
    topo = parse_multipath_ll(mp("multipath-wwid-with-spaces-healthy.txt"))
    assert [(m.name, m.wwid, m.dm_device, m.vendor, m.product) for m in topo.maps] == [
        (IET[0], IET[0], "dm-0", "IET", "VIRTUAL-DISK"),
        (IET[1], IET[1], "dm-1", "IET", "VIRTUAL-DISK")]
    assert [[p.device for p in m.paths] for m in topo.maps] == [["sdb", "sdd"], ["sdc", "sde"]]


@pytest.mark.parametrize("params", [{"wwids": IET}, {"lun_count": 2}])
def test_multipath_wwid_with_spaces_healthy_passes(params):
    topo = parse_multipath_ll(mp("multipath-wwid-with-spaces-healthy.txt"))
    j = judge_multipath(topo, MultipathParams(**params), {}, MP_HW)
    assert j.status is Status.PASS, j.message


def test_multipath_wwid_with_spaces_failed_path_fails_naming_the_map():
    topo = parse_multipath_ll(mp("multipath-wwid-with-spaces-path-failed-faulty.txt"))
    for params in (MultipathParams(wwids=IET), MultipathParams(lun_count=2)):
        j = judge_multipath(topo, params, {}, MP_HW)
        assert j.status is Status.FAIL, j.message
        assert "'1IET     00080001'" in j.message and "sdd (4:0:0:1) failed faulty" in j.message


def test_multipath_topology_lines_before_any_readable_map_line_are_a_parse_error():
    """A map line the parser cannot read must never make its paths vanish."""
    text = mp("multipath-wwid-with-spaces-healthy.txt").replace(" dm-0 ", " dm-x ")
    with pytest.raises(ParseError, match=r"line 2: .*before any map line"):
        parse_multipath_ll(text)


WORD = st.text("0123456789ABCDEFabcdef_.-:", min_size=1, max_size=10)
WWID = st.builds(lambda words, gaps: "".join(w + " " * g for w, g in zip(words[:-1], gaps,
                                                                         strict=False))
                 + words[-1], st.lists(WORD, min_size=2, max_size=4),
                 st.lists(st.integers(1, 6), min_size=3, max_size=3))
PRODUCT = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 _.-]{0,14}[A-Za-z0-9]", fullmatch=True)


def _map(name: str, wwid: str, minor: int, vendor: str, product: str, states: list[str],
         aliased: bool) -> str:
    head = f"{name} ({wwid})" if aliased else wwid
    lines = [f"{head} dm-{minor} {vendor},{product}",
             "size=100G features='0' hwhandler='0' wp=rw"]
    for i, state in enumerate(states):
        last = i + 1 == len(states)
        lines += [f"{'`' if last else '|'}-+- policy='service-time 0' prio=1 status=enabled",
                  f"{' ' if last else '|'} `- {minor}:0:{i}:1 sd{chr(97 + minor)}{i} "
                  f"8:{16 * i} {state}"]
    return "\n".join(lines)


@settings(max_examples=150, deadline=None)
@given(WWID, st.booleans(), st.integers(0, 20), st.sampled_from(["IET", "LIO-ORG", "NETAPP"]),
       PRODUCT)
def test_multipath_any_wwid_with_spaces_parses_to_its_fields(wwid, aliased, minor, vendor,
                                                              product):
    text = _map("mpatha", wwid, minor, vendor, product, ["active ready running"] * 2, aliased)
    (m,) = parse_multipath_ll(text).maps
    assert (m.name, m.wwid, m.dm_device, m.vendor, m.product) == (
        "mpatha" if aliased else wwid, wwid, f"dm-{minor}", vendor, product)
    assert judge_multipath(parse_multipath_ll(text), MultipathParams(wwids=[wwid]), {},
                           MP_HW).status is Status.PASS


@settings(max_examples=150, deadline=None)
@given(WWID, st.booleans(), st.integers(0, 1),
       st.sampled_from(["failed faulty running", "failed faulty offline",
                        "active faulty running", "failed ready running",
                        "active shaky running", "active ready offline"]))
def test_multipath_any_failed_path_under_a_spaced_wwid_never_passes(wwid, aliased, bad, state):
    states = ["active ready running"] * 2
    states[bad] = state
    topo = parse_multipath_ll(_map("mpatha", wwid, 3, "IET", "VIRTUAL-DISK", states, aliased))
    for params in (MultipathParams(wwids=[wwid]), MultipathParams(lun_count=1)):
        assert judge_multipath(topo, params, {}, MP_HW).status is Status.FAIL
