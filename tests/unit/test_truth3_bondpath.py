"""Issue 29 (verdict truth, third pass), items r4 and v1: multipath listings without checker
states, and 802.3ad members in no aggregator.

r4: ``multipath -l`` runs no path checker (multipath(8); multipath-tools ``multipath/main.c``
asks for no ``DI_CHECKER``), so ``libmultipath/print.c`` prints ``undef`` as every path's
checker state. Such a listing is "checker not run": a ``warn`` saying to collect with
``multipath -ll`` (the check's command), never a pass, and a failed, offline or missing
path still fails. In a listing whose checkers ran, a path left ``undef`` is not healthy, as
before. Fixtures: tests/fixtures/redundancy/multipath-l-*.txt (headers name the sources).

v1: the bonding driver prints ``Aggregator ID: N/A`` for a slave whose port is in no
aggregator and ``bond <name> has no active aggregator`` in place of the active aggregator's
block (``drivers/net/bonding/bond_procfs.c``); both were refused as unparseable. They are
findings: the bond fails, naming the members. Fixtures:
tests/fixtures/redundancy/bonding-lacp-member-not-aggregated.txt and
bonding-lacp-no-active-aggregator.txt (headers name the sources).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.redundancy import (
    BondingParams,
    MultipathParams,
    judge_bonding,
    judge_multipath,
)
from rackgate.model import Judgement, Status
from rackgate.parsers import ParseError
from rackgate.parsers.bonding import parse_bonding
from rackgate.parsers.multipath import parse_multipath_ll
from rackgate.profile import Hardware, StorageSpec

FIX = Path(__file__).parents[1] / "fixtures" / "redundancy"
HW = Hardware(storage=StorageSpec(multipath_paths_per_lun=2,
                                  source="two paths per LUN: a figure for the unit tests"))
TWO = MultipathParams(lun_count=2)
BONDS = BondingParams(bonds=[
    {"name": "bond0", "mode": "802.3ad", "members": ["ens1f0", "ens1f1"]},
    {"name": "bond1", "mode": "active-backup", "members": ["eno1", "eno2"]},
])


def text(name: str) -> str:
    """A fixture's output: its lines without the '#' header."""
    lines = (FIX / name).read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("#")) + "\n"


def judged(parse, judge, output: str) -> Judgement:
    """The judgement of ``output``; a ParseError is an ``error`` (as judge_evidence makes
    it), so a test fails on a refused output by its status, not by an exception."""
    try:
        record = parse(output)
    except ParseError as exc:
        return Judgement(Status.ERROR, f"unparseable: {exc}")
    result: Judgement = judge(record)
    return result


def multipath(output: str, params: MultipathParams = TWO) -> Judgement:
    return judged(parse_multipath_ll, lambda t: judge_multipath(t, params, {}, HW), output)


def bonding(output: str, params: BondingParams = BONDS) -> Judgement:
    return judged(parse_bonding, lambda r: judge_bonding(r, params, {}, Hardware()), output)


MP_L = text("multipath-l-healthy-checker-not-run.txt")
MP_LL = text("multipath-healthy-2maps-2paths.txt")
NOT_AGGREGATED = text("bonding-lacp-member-not-aggregated.txt")
NO_ACTIVE = text("bonding-lacp-no-active-aggregator.txt")
BOND_HEALTHY = text("bonding-healthy-lacp-and-active-backup.txt")


# --- r4: multipath -l ---------------------------------------------------------------------

def test_truth3_r4_multipath_l_healthy_is_checker_not_run_warning():
    j = multipath(MP_L)
    assert j.status is Status.WARN, j.message
    assert "checker not run" in j.message and "multipath -ll" in j.message, j.message
    assert j.measured == 2.0 and j.details["checker"] == "not run"


def test_truth3_r4_multipath_l_healthy_with_wwids_warns_not_passes():
    wwids = [m.wwid for m in parse_multipath_ll(MP_L).maps]
    j = multipath(MP_L, MultipathParams(wwids=wwids))
    assert j.status is Status.WARN, j.message


def test_truth3_r4_multipath_l_failed_path_still_fails():
    j = multipath(text("multipath-l-path-failed-checker-not-run.txt"))
    assert j.status is Status.FAIL, j.message
    assert "sde (2:0:0:2) failed undef running" in j.message, j.message
    assert "checker not run" in j.message, j.message


@pytest.mark.parametrize("damage", [
    ("2:0:0:2 sde 8:64 active undef running", "2:0:0:2 sde 8:64 active undef offline"),
    ("2:0:0:1 sdd 8:48 active undef running", "2:0:0:1 sdd 8:48 failed undef running"),
], ids=["offline", "failed"])
def test_truth3_r4_multipath_l_unusable_path_fails(damage):
    j = multipath(MP_L.replace(*damage))
    assert j.status is Status.FAIL, j.message
    assert damage[1].split()[1] in j.message, j.message


def test_truth3_r4_multipath_l_missing_path_or_lun_fails():
    one_path = re.sub(r"`-\+- policy='service-time 0' prio=0 status=enabled\n  `- 2:0:0:2 "
                      r"sde 8:64 active undef running\n", "", MP_L)
    assert "sde" not in one_path
    j = multipath(one_path)
    assert j.status is Status.FAIL and "mpathb" in j.message and "1/2" in j.message, j.message
    j = multipath(MP_L, MultipathParams(lun_count=3))
    assert j.status is Status.FAIL, j.message


def test_truth3_r4_multipath_ll_undef_among_checked_paths_still_fails():
    """Where the checkers ran (other paths have states), a path left 'undef' is not healthy:
    the old strictness of multipath -ll."""
    mixed = MP_LL.replace("2:0:0:2 sde 8:64 active ready running",
                          "2:0:0:2 sde 8:64 active undef running")
    assert mixed != MP_LL
    j = multipath(mixed)
    assert j.status is Status.FAIL and "sde" in j.message, j.message
    assert multipath(MP_LL).status is Status.PASS  # the control


_PATH = re.compile(r"(active|failed) undef (running|offline)")


@settings(max_examples=60, deadline=None)
@given(states=st.lists(st.tuples(st.sampled_from(["active", "failed"]),
                                 st.sampled_from(["running", "offline", "transport-offline"])),
                       min_size=4, max_size=4))
def test_truth3_r4_a_listing_without_checkers_never_passes(states):
    """Whatever device-mapper and the SCSI layer say, a listing whose every checker state
    is 'undef' is never a pass; it warns only when every path is active and running."""
    it = iter(states)
    out = _PATH.sub(lambda m: "{} undef {}".format(*next(it)), MP_L)
    j = multipath(out)
    healthy = all(s == ("active", "running") for s in states)
    assert j.status is (Status.WARN if healthy else Status.FAIL), (states, j.message)


# --- v1: bonding Aggregator ID: N/A -----------------------------------------------------------

def test_truth3_v1_bonding_member_in_no_aggregator_fails_naming_it():
    j = bonding(NOT_AGGREGATED)
    assert j.status is Status.FAIL, j.message
    assert "bond0: member ens1f1 is in no aggregator ('Aggregator ID: N/A')" in j.message, \
        j.message
    assert "ens1f0" not in j.message and "bond1" not in j.message, j.message


def test_truth3_v1_bonding_no_active_aggregator_fails_naming_both_members():
    j = bonding(NO_ACTIVE)
    assert j.status is Status.FAIL, j.message
    assert "bond0: no active aggregator" in j.message, j.message
    assert "members ens1f0, ens1f1 are in no aggregator" in j.message, j.message


def test_truth3_v1_bonding_na_is_read_as_a_finding():
    bond = parse_bonding(NOT_AGGREGATED).bonds[0]
    by_name = {s.interface: s for s in bond.slaves}
    assert by_name["ens1f1"].no_aggregator and by_name["ens1f1"].aggregator_id is None
    assert not by_name["ens1f0"].no_aggregator and by_name["ens1f0"].aggregator_id == 1
    assert bond.active_aggregator_id == 1 and not bond.no_active_aggregator
    none = parse_bonding(NO_ACTIVE).bonds[0]
    assert none.no_active_aggregator and none.active_aggregator_id is None


def test_truth3_v1_bonding_all_members_in_the_active_aggregator_still_pass():
    j = bonding(BOND_HEALTHY)
    assert j.status is Status.PASS, j.message


def test_truth3_v1_bonding_na_in_the_checks_two_reads_fails():
    """The check's own evidence: two timed reads, the member outside any aggregator in the
    second."""
    two = ("### rackgate-bonding read=1 uptime_s=100.00\n" + BOND_HEALTHY
           + "### rackgate-bonding read=2 uptime_s=105.02\n" + NOT_AGGREGATED
           + "### rackgate-bonding done\n")
    j = bonding(two)
    assert j.status is Status.FAIL and "member ens1f1 is in no aggregator" in j.message, \
        j.message


@settings(max_examples=40, deadline=None)
@given(which=st.sets(st.sampled_from(["ens1f0", "ens1f1"]), min_size=1))
def test_truth3_v1_any_member_in_no_aggregator_fails(which):
    """Each member of the healthy 802.3ad bond whose aggregator line becomes 'N/A' (its churn
    and LACP PDU lines dropped, as the kernel prints it) is named in a fail."""
    out = BOND_HEALTHY
    for member in which:
        block = re.compile(rf"(Slave Interface: {member}\n(?:.+\n)*?)Aggregator ID: 1\n"
                           r"(?:(?:Actor|Partner) Churn.*\n|(?:Actor|Partner) Churned.*\n|"
                           r"details .*\n|    .*\n)*")
        out, n = block.subn(r"\1Aggregator ID: N/A\n", out)
        assert n == 1, member
    j = bonding(out)
    assert j.status is Status.FAIL, j.message
    for member in which:
        assert member in j.message, j.message


@pytest.mark.parametrize("damage", [
    ("Aggregator ID: N/A", "Aggregator ID: n/a"),
    ("Aggregator ID: N/A", "Aggregator ID: N/A N/A"),
    ("Aggregator ID: N/A", "Aggregator ID: N/A\nAggregator ID: N/A"),
], ids=["case", "trailing", "twice"])
def test_truth3_v1_damaged_na_lines_are_refused(damage):
    with pytest.raises(ParseError):
        parse_bonding(NOT_AGGREGATED.replace(*damage))


@pytest.mark.parametrize("damage", [
    ("bond bond0 has no active aggregator", "bond bond7 has no active aggregator"),
    ("bond bond0 has no active aggregator",
     "bond bond0 has no active aggregator\nbond bond0 has no active aggregator"),
    ("bond bond0 has no active aggregator",
     "bond bond0 has no active aggregator\nActive Aggregator Info:\n\tAggregator ID: 1"),
    ("Slave queue ID: 0\nAggregator ID: N/A\n\nSlave Interface: ens1f1",
     "Slave queue ID: 0\nbond bond0 has no active aggregator\n\nSlave Interface: ens1f1"),
], ids=["other-bond", "twice", "with-aggregator-info", "in-a-slave-block"])
def test_truth3_v1_damaged_no_active_aggregator_lines_are_refused(damage):
    assert damage[0] in NO_ACTIVE
    with pytest.raises(ParseError):
        parse_bonding(NO_ACTIVE.replace(*damage))


def test_truth3_v1_bonding_na_in_the_first_read_fails():
    """A member outside any aggregator in the first read and aggregated in the second was
    (re)negotiating during the check: it fails as a member down in the first read does."""
    two = ("### rackgate-bonding read=1 uptime_s=100.00\n" + NOT_AGGREGATED
           + "### rackgate-bonding read=2 uptime_s=105.02\n" + BOND_HEALTHY
           + "### rackgate-bonding done\n")
    j = bonding(two)
    assert j.status is Status.FAIL, j.message
    assert "member ens1f1 is in no aggregator in the first read" in j.message, j.message
    again = two.replace(NOT_AGGREGATED, BOND_HEALTHY)
    assert bonding(again).status is Status.PASS  # the control: two healthy reads
