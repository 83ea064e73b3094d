"""The fabric checks' parsers on real outputs published by others (../shared/corpus/
infiniband, read at test time): ``ibnetdiscover -p`` listings (parsers.infiniband.ibnetdiscover) and
iblinkinfo listings (parsers.infiniband.iblinkinfo). Every file parses, or is refused with a
ParseError saying why; what each file's header and body show is read as such, and the
judges do not pass what these listings do not prove (a listing cut short or contradicting
itself)."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import CORPUS, CorpusFile, corpus_files, corpus_params
from rackgate.checks.fabric.as_built import judge_as_built
from rackgate.checks.fabric.links import judge_links
from rackgate.checks.fabric.query import FabricQueryParams
from rackgate.fabric.plan import plan_from_document
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.infiniband.iblinkinfo import parse_iblinkinfo_ports
from rackgate.parsers.infiniband.ibnetdiscover import parse_ibnetdiscover_ports

NEEDS_CORPUS = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no corpus at {CORPUS}")


def corpus(name: str) -> CorpusFile:
    (f,) = corpus_files("infiniband", name)
    return f


def plan(doc: dict[str, Any]) -> Any:
    return plan_from_document({"schema": "rackgate.fabric/1", "name": "corpus", **doc}, "test")


@pytest.mark.parametrize("f", corpus_params("infiniband", "ibnetdiscover-p-*.txt"))
def test_every_published_ports_listing_parses(f: CorpusFile) -> None:
    d = parse_ibnetdiscover_ports(f.body)
    assert d.links, f"{f.path.name}: no link read"
    assert len(d.ports) == len([ln for ln in f.body.splitlines() if ln.strip()])


@pytest.mark.parametrize("f", corpus_params("infiniband", "iblinkinfo-*.txt"))
def test_every_published_iblinkinfo_parses_or_is_refused_for_its_lost_headers(
        f: CorpusFile) -> None:
    if "grep" in f.header:  # the publisher filtered it: its CA:/Switch: headers are gone
        with pytest.raises(ParseError, match=r"line 1: a port line before any CA:/Switch: "
                                             r"header \(output filtered, by grep\?\)"):
            parse_iblinkinfo_ports(f.body)
    else:
        info = parse_iblinkinfo_ports(f.body)
        assert len(info.ports) == len([ln for ln in f.body.splitlines() if "==(" in ln])


@NEEDS_CORPUS
def test_the_edr_ports_listing_reads_links_and_unlinked_ports_as_printed() -> None:
    d = parse_ibnetdiscover_ports(corpus("ibnetdiscover-p-edr-fixture.txt").body)
    assert [(str(k.a), str(k.b), k.width, k.speed, k.both_ends) for k in d.links] == [
        ('"o0001 HCA-1"[1]', '"ib-i1l1s01"[10]', "4x", "EDR", True),
        ('"o0002 HCA-1"[1]', '"ib-i1l1s01"[11]', "4x", "EDR", True),
        ('"p0001 HCA-1"[1]', '"ib-i4l1s01"[35]', "4x", "EDR", True),
        ('"ib-i1l1s01"[1]', '"ib-i1l2s01"[1]', "4x", "EDR", False)]  # cut: one end only
    k = d.links[0]
    assert (k.a.kind, k.a.lid, k.a.guid, k.b.kind, k.b.lid, k.b.guid) == (
        "CA", 134, "0x7cfe9003003b4bde", "SW", 1719, "0x7cfe9003009ce5b0")
    alone = [(str(p.end), p.width, p.speed) for p in d.ports if p.peer is None]
    assert alone == [('"ib-i4l1s01"[37]', "4x", "???"), ('"ib-i7l2s01"[80]', "4x", "SDR")]


@NEEDS_CORPUS
def test_the_hdr_ports_listing_keeps_the_blanks_and_its_contradiction() -> None:
    d = parse_ibnetdiscover_ports(corpus("ibnetdiscover-p-hdr-fixture.txt").body)
    descs = {p.end.desc for p in d.ports}
    assert {"5FB0406-spine-IB01 ", " 5FB0406-spine-IB02 ", " 5FB0406-spine-IB03 ",
            "Infiniscale-IV Mellanox Technologies", "worker20 mlx5_3"} <= descs
    assert sorted(d.switches.values()) == [
        "5FB0405-leaf-IB01", "5FB0406-spine-IB01", "5FB0406-spine-IB02", "5FB0406-spine-IB03",
        "Infiniscale-IV Mellanox Technologies"]
    assert {p.speed for p in d.ports} == {"HDR", "SDR", "QDR"}
    # as published, the Aggregation Node's port 1 is printed linked to two switches
    agg = [k for k in d.links if "0x946dae0300630bfe" in (k.a.guid, k.b.guid)]
    assert sorted(str(k.b if k.a.guid == "0x946dae0300630bfe" else k.a) for k in agg) == [
        '"5FB0405-leaf-IB01"[81]', '"5FB0406-spine-IB03"[81]']
    # 80 external ports: port 81 is the switch's own SHARP aggregation node
    p = plan({"speed": "HDR", "switches": [
        {"name": "5FB0405-leaf-IB01", "role": "leaf", "ports": 80},
        {"name": "5FB0406-spine-IB03", "role": "spine", "ports": 80}],
        "nodes": [{"host": "worker20", "hca": "mlx5_3", "switch": "5FB0405-leaf-IB01",
                   "switch_port": 79, "cable": "L1/79"}]})
    v = judge_as_built(d, FabricQueryParams(), {}, p)  # worker20's cable is as planned
    assert [(f.status, f.message, f.hosts) for f in v.findings] == [(
        Status.ERROR, 'ibnetdiscover -p contradicts itself: "Mellanox Technologies Aggregation '
        'Node"[1] is printed linked to "5FB0405-leaf-IB01"[81] (line 1) and to '
        '"5FB0406-spine-IB03"[81] (line 5): a damaged listing, the cables of that port are '
        "not judged", frozenset())]  # a spine's port: the whole fabric


@NEEDS_CORPUS
def test_the_edr_iblinkinfo_reads_every_port_and_is_not_passed_cut_short() -> None:
    info = parse_iblinkinfo_ports(corpus("iblinkinfo-edr-sb7700-ports-down-polling.txt").body)
    assert not info.line_mode and len(info.ports) == 20
    sw = [p for p in info.ports if p.name == "MF0;SB7700:MSB7700/U1"]
    assert len(sw) == 18 and {p.guid for p in sw} == {"0x506b4b0300820910"}
    assert sum(p.state == "Down" and p.physical_state == "Polling" and p.peer is None
               for p in sw) == 16
    up = [(p.name, p.guid, p.port, p.width, p.speed_gbps, str(p.peer)) for p in info.ports
          if p.up]
    assert up == [
        ("n02 HCA-1", "0xec0d9a03003d62be", 1, "4X", 25.78125, '"MF0;SB7700:MSB7700/U1"[17]'),
        ("mgt mlx5_0", "0x248a070300928186", 1, "4X", 25.78125,
         '"MF0;SB7700:MSB7700/U1"[36]'),
        ("MF0;SB7700:MSB7700/U1", "0x506b4b0300820910", 17, "4X", 25.78125,
         '"n02 HCA-1"[1]'),
        ("MF0;SB7700:MSB7700/U1", "0x506b4b0300820910", 18, "4X", 25.78125,
         '"n01 HCA-1"[1]')]
    sb = "MF0;SB7700:MSB7700/U1"
    p = plan({"speed": "EDR", "switches": [{"name": sb, "role": "leaf", "ports": 36}],
              "nodes": [{"host": h, "hca": "HCA-1", "switch": sb, "switch_port": n,
                         "cable": f"C{n}"} for h, n in (("n02", 17), ("n01", 18))]})
    v = judge_links(info, FabricQueryParams(), {}, p)
    assert [(f.status, f.message, f.hosts) for f in v.findings] == [(
        Status.ERROR, f'cable C18: "n01 HCA-1"[1] <-> "{sb}"[18] is printed at one end only: '
        f'"{sb}"[18] is linked to "n01 HCA-1"[1], but "n01 HCA-1"[1] is not listed: its two '
        f"ends disagree; at {sb}", frozenset({"n01"}))]
