"""The redundancy parsers and judges over real outputs published by others (../shared/corpus).

Each file's header says whether it shows a DEGRADED system (or a TRANSITIONAL one that is
"not yet healthy"): those must never pass; the others must pass against a profile that
expects what the file shows (2 PSUs N+1; 2 paths per LUN; the bond's own mode and slaves).
"""

from __future__ import annotations

import pytest

from conftest import CorpusFile, corpus_params
from rackgate.checks.redundancy import (
    BondingParams,
    MultipathParams,
    PsuIpmiParams,
    judge_bonding,
    judge_multipath,
    judge_psu_ipmi,
)
from rackgate.model import Status
from rackgate.parsers.bonding import parse_bonding
from rackgate.parsers.ipmi import parse_ipmi_sdr, psu_sensors
from rackgate.parsers.multipath import parse_multipath_ll
from rackgate.profile import Hardware, PsuSpec, StorageSpec

SRC = "the corpus conformance test profile"
HW = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source=SRC),
              storage=StorageSpec(multipath_paths_per_lun=2, source=SRC))


def not_healthy(f: CorpusFile) -> bool:
    head = f.header.upper()
    return f.degraded or "TRANSITIONAL" in head or "NOT YET HEALTHY" in head


def expect(f: CorpusFile, status: Status, message: str) -> None:
    if not_healthy(f):
        assert status is Status.FAIL, f"{f.path.name} is degraded but judged {status.label}: " \
                                      f"{message}"
    else:
        assert status is Status.PASS, f"{f.path.name} is healthy but judged {status.label}: " \
                                      f"{message}"


@pytest.mark.parametrize("f", corpus_params("ipmi"))
def test_ipmi_corpus(f: CorpusFile) -> None:
    sdr = parse_ipmi_sdr(f.body)
    j = judge_psu_ipmi(sdr, PsuIpmiParams(), {}, HW)
    status_sensors = [s for k, s in psu_sensors(sdr) if k == "psu"]
    if not not_healthy(f) and all(s.states is None for s in status_sensors):
        # only the 3-column 'ipmitool sdr' form: its 0xNN is not the sensor's states (IPMI
        # leaves that byte unspecified for discrete sensors), so health cannot be shown
        assert j.status is Status.ERROR, f"{f.path.name}: {j.status.label}: {j.message}"
        assert "collect 'sdr elist'" in j.message
        return
    expect(f, j.status, j.message)


@pytest.mark.parametrize("f", corpus_params("multipath-bonding", "multipath-ll-*"))
def test_multipath_corpus(f: CorpusFile) -> None:
    topo = parse_multipath_ll(f.body)
    assert topo.maps, f"{f.path.name}: no map parsed"
    # the profile expects the LUNs the file shows (a lost LUN is the judge's other test)
    j = judge_multipath(topo, MultipathParams(wwids=[m.wwid for m in topo.maps]), {}, HW)
    if not topo.checkers_run and not not_healthy(f):
        # 'multipath -l' (no path checker ran): at best "checker not run", never a pass
        assert j.status is Status.WARN and "multipath -ll" in j.message, \
            f"{f.path.name}: {j.status.label}: {j.message}"
        return
    expect(f, j.status, j.message)


@pytest.mark.parametrize("f", corpus_params("multipath-bonding", "proc-net-bonding-*"))
def test_bonding_corpus(f: CorpusFile) -> None:
    report = parse_bonding(f.body)
    assert len(report.bonds) == 1, f"{f.path.name}: expected one bond"
    b = report.bonds[0]
    params = BondingParams(bonds=[{"name": "bond0", "mode": b.mode,
                                   "members": [s.interface for s in b.slaves]}])
    j = judge_bonding(report, params, {}, HW)
    expect(f, j.status, j.message)
