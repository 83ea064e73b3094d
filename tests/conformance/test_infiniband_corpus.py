"""Conformance: every infiniband/ corpus file (../shared/corpus, read at test time) parses
(ibstat, ibv_devinfo, and fabric.ports' other readers: ibstatus, rdma link),
or is refused with a clear ParseError; files whose header says DEGRADED, or notes ports
down or a failure, are judged degraded against the hardware their own header declares."""

from __future__ import annotations

import pytest

from conftest import CorpusFile, corpus_params
from rackgate.checks.fabric.ports import PortsParams, judge_ports
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.infiniband import (
    ibstat_from_devinfo,
    parse_ibstat,
    parse_ibstatus,
    parse_ibv_devinfo,
    parse_rdma_link,
)
from rackgate.profile import Hardware, NicSpec

SRC = "the corpus file's own '# note:' header"


def nic(role: str, count: int, rate: float, ll: str) -> NicSpec:
    return NicSpec(role=role, count=count, rate_gbps=rate, link_layer=ll,  # type: ignore[arg-type]
                   source=SRC)


# The hardware each file's header declares (NicSpecs built from its '# note:' lines), and
# the params that make the judge look at the ports the note calls down.
DECLARED: dict[str, tuple[Hardware, PortsParams]] = {
    # 9 x MT4126: mlx5_0 Ethernet 200, mlx5_1..8 InfiniBand 200 (HDR), all active
    "ibstat-a100-9x-mt4126-200g.txt": (Hardware(nics=[
        nic("compute", 8, 200, "InfiniBand"), nic("storage", 1, 200, "Ethernet")]),
        PortsParams()),
    # 8 x CX-6 VF InfiniBand 200; ibpanic on mlx5_8
    "ibstat-a100-azure-cx6vf-ibpanic-mlx5_8.txt": (Hardware(nics=[
        nic("compute", 8, 200, "InfiniBand")]), PortsParams()),
    "ibstat-cx4-mt4115-edr-single-port.txt": (Hardware(nics=[
        nic("compute", 1, 100, "InfiniBand")]), PortsParams()),
    # 8 x CX-7 IB 400 healthy + 4 x CX-6 Dx Ethernet (3 down): the storage ports are judged
    "ibstat-h100-8xcx7-ib-ndr-3-eth-ports-down.txt": (Hardware(nics=[
        nic("compute", 8, 400, "InfiniBand"), nic("storage", 4, 100, "Ethernet")]),
        PortsParams(other_roles=["storage"])),
    "ibstat-h100-roce-2-cx7-ports-down.txt": (Hardware(nics=[
        nic("compute", 8, 400, "Ethernet"), nic("storage", 4, 100, "Ethernet")]),
        PortsParams()),
    "ibstat-h100-roce-all-active.txt": (Hardware(nics=[
        nic("compute", 8, 400, "Ethernet"), nic("storage", 4, 100, "Ethernet")]),
        PortsParams()),
    # 2 x dual-port CX-3 InfiniBand (FDR era); ibv_devinfo without -v reports no rate, so
    # the ports that are up are judged on their state alone (unconfirmed_rate: warn)
    "ibv_devinfo-2x-cx3-dualport-port2-down.txt": (Hardware(nics=[
        nic("compute", 4, 56, "InfiniBand")]), PortsParams(unconfirmed_rate="warn")),
}


def says_degraded(f: CorpusFile) -> bool:
    """DEGRADED in the header, or a note of ports down / a failed run."""
    head = f.header.lower()
    return f.degraded or any(w in head for w in ("ports down", "port_down", "failure case"))


@pytest.mark.parametrize("f", corpus_params("infiniband"))
def test_corpus_file_parses_or_is_refused_clearly(f: CorpusFile) -> None:
    name = f.path.name
    if name.startswith(("ibstatus", "rdma")):  # fabric.ports' other readers (issue 29)
        parse = parse_ibstatus if name.startswith("ibstatus") else parse_rdma_link
        assert parse(f.body).cas, f"{name}: no device parsed"
    elif name.startswith("ibstat"):
        record = parse_ibstat(f.body)
        assert record.cas, f"{name}: no CA parsed"
    elif name.startswith("ibv_devinfo"):
        assert parse_ibv_devinfo(f.body)
    else:
        # another family (iblinkinfo and ibnetdiscover: read by parsers.infiniband.iblinkinfo
        # and parsers.infiniband.ibnetdiscover in test_fabric_formats.py; ibdiagnet): ibstat's
        # parser must refuse it with a message naming the line, never read it as zero CAs
        with pytest.raises(ParseError, match=r"ibstat: line \d+"):
            parse_ibstat(f.body)


@pytest.mark.parametrize("f", corpus_params("infiniband", "ib[sv]*") +
                         corpus_params("infiniband", "rdma*"))
def test_corpus_file_is_judged_as_its_header_says(f: CorpusFile) -> None:
    name = f.path.name
    if name not in DECLARED:
        pytest.skip(f"{name}: no declared hardware recorded for this file yet")
    hw, params = DECLARED[name]
    if name.startswith("ibv_devinfo"):
        record = ibstat_from_devinfo(parse_ibv_devinfo(f.body))
    elif name.startswith(("ibstatus", "rdma")):
        record = (parse_ibstatus if name.startswith("ibstatus") else parse_rdma_link)(f.body)
    else:
        record = parse_ibstat(f.body)
    j = judge_ports(record, params, {}, hw)
    if says_degraded(f):
        assert j.status > Status.PASS, f"{name} is degraded but judged {j.status.label}"
        assert j.status in (Status.WARN, Status.FAIL), j.message
    else:
        assert j.status is Status.PASS, f"{name}: {j.message}"
