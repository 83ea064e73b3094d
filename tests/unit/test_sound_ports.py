"""Issue 11, fabric ports family: fabric.ports, fabric.roce_lossless and redundancy.bonding
judge every expected item once, and their parsers raise only ParseError.

Inputs are derived here from the project's hand-written fixtures (tests/fixtures/infiniband,
SOURCES.md and headers there: ibstat.c / devinfo.c / iblinkinfo.c / iproute2 dcb layouts;
tests/fixtures/redundancy/bonding-*.txt: the kernel's bond_procfs.c layout) by editing one
line or block.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rackgate.checks.fabric.ports import LosslessParams, PortsParams, judge_lossless, judge_ports
from rackgate.checks.redundancy import BondingParams, judge_bonding
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.bonding import parse_bonding
from rackgate.parsers.dcb import parse_dcb_pfc, parse_dcb_sections
from rackgate.parsers.infiniband import parse_ibstat, parse_ibv_devinfo
from rackgate.parsers.infiniband.iblinkinfo import parse_iblinkinfo_ports
from rackgate.profile import Hardware, NicSpec

FIX = Path(__file__).parents[1] / "fixtures"
SRC = "DGX H100/H200 User Guide, Table 1 (test copy)"
DGX = Hardware(nics=[
    NicSpec(role="compute", count=8, rate_gbps=400, link_layer="InfiniBand", source=SRC),
    NicSpec(role="storage", count=4, rate_gbps=400, link_layer="Ethernet", source=SRC)])
ROCE = LosslessParams(interfaces=["eth2"])
BONDS = BondingParams(bonds=[
    {"name": "bond0", "mode": "802.3ad", "members": ["ens1f0", "ens1f1"]},
    {"name": "bond1", "mode": "active-backup", "members": ["eno1", "eno2"]},
])


def ib(name: str) -> str:
    return (FIX / "infiniband" / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


def dcb(name: str) -> str:
    return (FIX / "infiniband" / name).read_text(encoding="utf-8").strip()


def probe(*sections: tuple[str, str]) -> str:
    """fabric.roce_lossless's probe output: a marker line, then dcb's JSON, per section."""
    return "".join(f"### rackgate-dcb dev={dev} what={what} rc=0\n{dcb(name)}\n"
                   for dev, what, name in ((d, w, n) for d, (w, n) in sections))


PFC_OK = ("pfc", "dcb-pfc-prio3-only.json")
APP_OK = ("app", "dcb-app-dscp26-to-prio3.json")


def bonding(name: str) -> str:
    text = (FIX / "redundancy" / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def test_healthy_inputs_still_pass():
    """The control: without it every test below could pass by failing everything."""
    assert judge_ports(parse_ibstat(ib("ibstat-8x-ndr-healthy.txt")), PortsParams(), {},
                       DGX).status is Status.PASS
    assert judge_lossless(parse_dcb_sections(probe(("eth2", PFC_OK), ("eth2", APP_OK))), ROCE,
                          {}).status is Status.PASS
    assert judge_bonding(parse_bonding(bonding("bonding-healthy-lacp-and-active-backup.txt")),
                         BONDS, {}, DGX).status is Status.PASS


# --- finding 5: fabric.roce_lossless passes on half its evidence ------------------------------

@pytest.mark.parametrize(("given", "missing"), [((APP_OK,), "pfc"), ((PFC_OK,), "app")])
def test_sound_5_roce_lossless_with_one_dcb_section_is_an_error(given, missing):
    text = probe(*(("eth2", s) for s in given))
    j = judge_lossless(parse_dcb_sections(text), ROCE, {})
    assert j.status is Status.ERROR, j.message
    assert f"eth2: 0 'dcb {missing}' sections, expected exactly 1" in j.message


def test_sound_5_roce_lossless_repeated_section_is_an_error_not_the_last_word():
    text = probe(("eth2", ("pfc", "dcb-pfc-prio3-and-4.json")), ("eth2", PFC_OK),
                 ("eth2", APP_OK))
    j = judge_lossless(parse_dcb_sections(text), ROCE, {})
    assert j.status is Status.ERROR, j.message
    assert "eth2: 2 'dcb pfc' sections, expected exactly 1 (duplicated output?)" in j.message


def test_sound_5_roce_lossless_foreign_interface_is_an_error():
    text = probe(("eth2", PFC_OK), ("eth2", APP_OK), ("eth7", PFC_OK), ("eth7", APP_OK))
    j = judge_lossless(parse_dcb_sections(text), ROCE, {})
    assert j.status is Status.ERROR, j.message
    assert "eth7: dcb output for an interface not in params.interfaces (eth2)" in j.message


# --- finding 9: parsers raise only ParseError -------------------------------------------------

def test_sound_9_dcb_priority_key_with_a_superscript_digit_is_a_parse_error():
    with pytest.raises(ParseError, match="prio_pfc"):
        parse_dcb_pfc('{"prio_pfc": {"\u00b2": true}}')


def test_sound_9_dcb_deeply_nested_json_is_a_parse_error():
    with pytest.raises(ParseError, match="nested too deeply"):
        parse_dcb_pfc("[" * 100_000)


def test_sound_9_ibv_devinfo_speed_with_two_dots_is_a_parse_error():
    text = ib("ibv_devinfo-v-ndr-mlx5_3-down.txt").replace("100.0 Gbps (128)",
                                                          "100.0.0 Gbps (128)", 1)
    with pytest.raises(ParseError, match=r"mlx5_0 port 1: active_speed '100\.0\.0'"):
        parse_ibv_devinfo(text)


def test_sound_9_iblinkinfo_speed_with_two_dots_is_no_figure():
    line = ('0x946dae0300a00000 "leaf01" 12 1[  ] ==( 4X 26.5.625 Gbps Active/  LinkUp)==>  '
            '0x946dae0300a00001 2 11[  ] "leaf02" ( )')
    [port] = parse_iblinkinfo_ports(line).ports
    # kept as text, never read as a number: fabric.links judges it an error (no lane rate)
    assert port.speed_gbps is None and port.speed_text == "26.5.625 Gbps"


def test_sound_9_ibstat_port_number_beyond_python_ints_is_a_parse_error():
    text = ib("ibstat-8x-ndr-healthy.txt").replace("\tPort 1:", "\tPort " + "1" * 5000 + ":", 1)
    with pytest.raises(ParseError):
        parse_ibstat(text)


def test_sound_9_bonding_count_with_a_superscript_digit_is_a_record_or_parse_error():
    """'²'.isdigit() is True but int('²') raises ValueError."""
    text = bonding("bonding-healthy-lacp-and-active-backup.txt").replace(
        "Link Failure Count: 0", "Link Failure Count: \u00b2", 1)
    try:
        report = parse_bonding(text)
    except ParseError:
        return
    assert report.bonds[0].slaves[0].link_failure_count is None


# --- finding 4: non-finite figures are refused naming the field ------------------------------

@pytest.mark.parametrize("rate", ["nan", "inf", "1e400", "Infinity"])
def test_sound_4_ibstat_non_finite_rate_is_refused(rate):
    text = ib("ibstat-8x-ndr-healthy.txt").replace("\t\tRate: 400", f"\t\tRate: {rate}", 1)
    with pytest.raises(ParseError, match=f"CA 'mlx5_0' .*port 1: Rate '{rate}' is not a finite"):
        parse_ibstat(text)


# --- finding 14: counting ---------------------------------------------------------------------

def test_sound_14_ibstat_a_duplicated_port_block_is_not_a_second_port():
    """mlx5_11 gone and mlx5_10's port block printed twice: still '8 ports up' by count."""
    blocks = ib("ibstat-8x-ndr-healthy.txt").split("CA '")
    kept = [b for b in blocks if not b.startswith("mlx5_11'")]
    i = next(n for n, b in enumerate(kept) if b.startswith("mlx5_10'"))
    kept[i] = kept[i].rstrip("\n") + "\n" + kept[i][kept[i].index("\tPort 1:"):]
    text = "CA '".join(kept)
    with pytest.raises(ParseError, match=r"CA 'mlx5_10' .* lists port 1 twice"):
        parse_ibstat(text)


def test_sound_14_bonding_a_duplicated_slave_block_is_not_the_last_word():
    text = bonding("bonding-active-backup-member-down.txt")
    eno2 = text[text.index("Slave Interface: eno2"):]
    text = text + "\n\n" + eno2.replace("MII Status: down", "MII Status: up")
    with pytest.raises(ParseError, match="bond1 lists slave eno2 twice"):
        parse_bonding(text)


def test_sound_14_bonding_a_repeated_line_in_one_block_is_refused():
    text = bonding("bonding-active-backup-member-down.txt").replace(
        "MII Status: down", "MII Status: down\nMII Status: up", 1)
    with pytest.raises(ParseError, match="'MII Status' given twice in slave eno2's block"):
        parse_bonding(text)


def test_sound_14_bonding_a_duplicated_bond_section_is_refused():
    text = bonding("bonding-healthy-lacp-and-active-backup.txt")
    bond1 = text[text.index("==> /proc/net/bonding/bond1 <=="):]
    with pytest.raises(ParseError, match="bond1 appears twice"):
        parse_bonding(text + "\n" + bond1)


def test_sound_14_bonding_a_foreign_member_fails():
    text = bonding("bonding-healthy-lacp-and-active-backup.txt")
    eno2 = text[text.index("Slave Interface: eno2"):]
    text = text + "\n\n" + eno2.replace("eno2", "eno3")
    j = judge_bonding(parse_bonding(text), BONDS, {}, DGX)
    assert j.status is Status.FAIL, j.message
    assert "bond1: eno3 enslaved but not an expected member (eno1, eno2)" in j.message
