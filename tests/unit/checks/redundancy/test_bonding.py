"""redundancy.bonding: /proc/net/bonding parsed and judged against the profile's bonds, on the
fixtures in tests/fixtures/redundancy."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from checks.redundancy.evidence import HW, read
from rackgate.checks.redundancy import (
    BondingParams,
    bonding_command,
    judge_bonding,
)
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.bonding import parse_bonding
from rackgate.profile import Hardware, NicSpec

BONDS = BondingParams(bonds=[
    {"name": "bond0", "mode": "802.3ad", "members": ["ens1f0", "ens1f1"]},
    {"name": "bond1", "mode": "active-backup", "members": ["eno1", "eno2"]},
])


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


# ------------------------------------------------------------ degraded evidence (issue 11)
# Healthy source: tests/fixtures/redundancy/bonding-healthy-lacp-and-active-backup.txt
# (hand-written from the published layout, header there).

FIX = Path(__file__).parents[3] / "fixtures"
SRC = "DGX_IB_AND_STORAGE H100/H200 User Guide, Table 1 (test copy)"
DGX_IB_AND_STORAGE = Hardware(nics=[
    NicSpec(role="compute", count=8, rate_gbps=400, link_layer="InfiniBand", source=SRC),
    NicSpec(role="storage", count=4, rate_gbps=400, link_layer="Ethernet", source=SRC)])
_bond = (FIX / "redundancy" / "bonding-healthy-lacp-and-active-backup.txt").read_text(
    encoding="utf-8")
BONDING = "\n".join(line for line in _bond.splitlines() if not line.startswith("#")) + "\n"


# bond1's last judged line is eno2's Link Failure Count; its HW address and queue ID follow
BONDING_END = BONDING.index("\n", BONDING.index("Link Failure Count", BONDING.index(
    "Slave Interface: eno2")))


def bonding_outcome(text: str) -> Status:
    return outcome(parse_bonding, lambda r: judge_bonding(r, BONDS, {}, DGX_IB_AND_STORAGE), text)


class TestDegradedBonding:
    """Issue 11, redundancy.bonding: degraded bonding evidence never passes and never raises
    anything but ParseError (degrade_helpers says how it is degraded)."""

    def test_the_healthy_source_passes(self):
        assert bonding_outcome(BONDING) is Status.PASS
        assert bonding_outcome(BONDING[:BONDING_END]) is Status.PASS  # the judged part alone

    @settings(max_examples=120, deadline=None)
    @given(degraded(BONDING, numbers=r"(?:Aggregator ID|Link Failure Count|Speed): ([0-9]+)",
                    lines=r"^\s*(?:Bonding Mode|MII Status|Slave Interface|Aggregator ID|"
                          r"Partner Mac Address|system mac address|Currently Active Slave):",
                    end=BONDING_END))
    def test_degraded_bonding_never_passes(self, text):
        assert bonding_outcome(text) in BAD
