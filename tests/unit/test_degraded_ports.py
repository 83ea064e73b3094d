"""Issue 11, fabric ports family, property tests: degraded ibstat, dcb and bonding evidence
never passes, and no port parser raises anything but ParseError (degrade_helpers says how
the evidence is degraded).

Healthy sources, all hand-written from the tools' published layouts (headers and
SOURCES.md there): tests/fixtures/infiniband/ibstat-8x-ndr-healthy.txt, the dcb fixtures
dcb-pfc-prio3-only.json and dcb-app-dscp26-to-prio3.json in the probe's section format,
tests/fixtures/redundancy/bonding-healthy-lacp-and-active-backup.txt. ibv_devinfo and
iblinkinfo feed no check's verdict, so only their parsers are held to ParseError, from
tests/fixtures/infiniband/ibv_devinfo-v-ndr-mlx5_3-down.txt and an iblinkinfo listing in
iblinkinfo.c's layout.
"""

from __future__ import annotations

from pathlib import Path

from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings

from rackgate.checks.fabric.ports import LosslessParams, PortsParams, judge_lossless, judge_ports
from rackgate.checks.redundancy import BondingParams, judge_bonding
from rackgate.model import Judgement, Status
from rackgate.parsers.bonding import parse_bonding
from rackgate.parsers.dcb import parse_dcb_sections
from rackgate.parsers.infiniband import parse_ibstat, parse_ibv_devinfo
from rackgate.parsers.infiniband.iblinkinfo import parse_iblinkinfo_ports
from rackgate.profile import Hardware, NicSpec

FIX = Path(__file__).parents[1] / "fixtures"
SRC = "DGX H100/H200 User Guide, Table 1 (test copy)"
DGX = Hardware(nics=[
    NicSpec(role="compute", count=8, rate_gbps=400, link_layer="InfiniBand", source=SRC),
    NicSpec(role="storage", count=4, rate_gbps=400, link_layer="Ethernet", source=SRC)])
BONDS = BondingParams(bonds=[
    {"name": "bond0", "mode": "802.3ad", "members": ["ens1f0", "ens1f1"]},
    {"name": "bond1", "mode": "active-backup", "members": ["eno1", "eno2"]},
])


def _after_header(path: str) -> str:
    return (FIX / path).read_text(encoding="utf-8").partition("\n# ---\n")[2]


IBSTAT = _after_header("infiniband/ibstat-8x-ndr-healthy.txt")
DEVINFO = _after_header("infiniband/ibv_devinfo-v-ndr-mlx5_3-down.txt")
LINKINFO = ("Switch: 0x0002c90300001111 leaf01:\n"
            "           7    1[  ] ==( 4X      53.125 Gbps Active/  LinkUp)==>      12    1[  ]"
            ' "node01 mlx5_0" ( )\n'
            "           7    2[  ] ==( 4X      53.125 Gbps Active/  LinkUp)==>      13    1[  ]"
            ' "node02 mlx5_0" ( )\n')
DCB = "".join(f"### rackgate-dcb dev=eth2 what={what} rc=0\n"
              f"{(FIX / 'infiniband' / name).read_text(encoding='utf-8').strip()}\n"
              for what, name in (("pfc", "dcb-pfc-prio3-only.json"),
                                 ("app", "dcb-app-dscp26-to-prio3.json")))
_bond = (FIX / "redundancy" / "bonding-healthy-lacp-and-active-backup.txt").read_text(
    encoding="utf-8")
BONDING = "\n".join(line for line in _bond.splitlines() if not line.startswith("#")) + "\n"
# bond1's last judged line is eno2's Link Failure Count; its HW address and queue ID follow
BONDING_END = BONDING.index("\n", BONDING.index("Link Failure Count", BONDING.index(
    "Slave Interface: eno2")))


def ports(text: str) -> Status:
    return outcome(parse_ibstat, lambda r: judge_ports(r, PortsParams(), {}, DGX), text)


def lossless(text: str) -> Status:
    return outcome(parse_dcb_sections,
                   lambda r: judge_lossless(r, LosslessParams(interfaces=["eth2"]), {}), text)


def bonding(text: str) -> Status:
    return outcome(parse_bonding, lambda r: judge_bonding(r, BONDS, {}, DGX), text)


def parsed(parse):  # type: ignore[no-untyped-def]
    """A parser whose record is not judged: only 'a record or a ParseError' is asked."""
    return lambda text: outcome(parse, lambda r: Judgement(Status.FAIL, "not judged"), text)


def test_the_healthy_sources_pass():
    assert ports(IBSTAT) is Status.PASS
    assert lossless(DCB) is Status.PASS
    assert bonding(BONDING) is Status.PASS
    assert bonding(BONDING[:BONDING_END]) is Status.PASS  # the judged part alone
    assert parse_ibv_devinfo(DEVINFO) and parse_iblinkinfo_ports(LINKINFO)


@settings(max_examples=120, deadline=None)
@given(degraded(IBSTAT, numbers=r"(?:Rate|Base lid|SM lid|Number of ports): ([0-9]+)",
                lines=r"\S", end=len(IBSTAT.rstrip())))
def test_degraded_ibstat_never_passes(text):
    assert ports(text) in BAD


@settings(max_examples=100, deadline=None)
@given(degraded(DCB, numbers=r"(?:rc=|\[)([0-9]+)", lines=r"\S", end=len(DCB.rstrip())))
def test_degraded_dcb_never_passes(text):
    assert lossless(text) in BAD


@settings(max_examples=120, deadline=None)
@given(degraded(BONDING, numbers=r"(?:Aggregator ID|Link Failure Count|Speed): ([0-9]+)",
                lines=r"^\s*(?:Bonding Mode|MII Status|Slave Interface|Aggregator ID|"
                      r"Partner Mac Address|system mac address|Currently Active Slave):",
                end=BONDING_END))
def test_degraded_bonding_never_passes(text):
    assert bonding(text) in BAD


@settings(max_examples=80, deadline=None)
@given(degraded(DEVINFO, numbers=r"(?:active_speed|active_mtu|port):\s+([0-9.]+)",
                lines=r"\S", end=len(DEVINFO.rstrip())))
def test_degraded_ibv_devinfo_is_a_record_or_a_parse_error(text):
    parsed(parse_ibv_devinfo)(text)


@settings(max_examples=80, deadline=None)
@given(degraded(LINKINFO, numbers=r"([0-9][0-9.]*) Gbps|^ +([0-9]+) ", lines=r"\S",
                end=len(LINKINFO.rstrip())))
def test_degraded_iblinkinfo_is_a_record_or_a_parse_error(text):
    parsed(parse_iblinkinfo_ports)(text)
