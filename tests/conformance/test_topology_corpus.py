"""Topology, NVLink and DCGM parsers on real outputs published by others (../shared/corpus).

Every file must parse, or fail with a ParseError that says what is wrong; no file whose
header notes a fault (FAILED, elided, 'should flag') may be judged pass, and the files
noted healthy must pass against a profile built from what their header says.
"""

from __future__ import annotations

import re

import pytest

from conftest import CorpusFile, corpus_params
from rackgate.checks.gpu.topology import (
    AffinityParams,
    DcgmDiagParams,
    NvLinkParams,
    judge_affinity,
    judge_dcgm,
    judge_nvlink,
)
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.dcgm import parse_dcgm_diag
from rackgate.parsers.nvlink import parse_nvlink_status
from rackgate.parsers.topology import parse_topo_matrix
from rackgate.profile import GpuSpec, Hardware, NicSpec

SRC = "the corpus file's own header"


def faulty(f: CorpusFile) -> bool:
    head = f.header.lower()
    return f.degraded or any(w in head for w in ("failed", "elided", "should flag", "fragment"))


def healthy(f: CorpusFile) -> bool:
    return "healthy" in f.header.lower() and not faulty(f)


def hardware(gpus: int, links: int | None = None, nics: int = 1) -> Hardware:
    """The node the header describes: its GPU count, NVSwitch, its per-link count."""
    gb_s = None if links is None else links * 25.0 * 2  # 25 GB/s each way: NVLink 3 and 4
    return Hardware(
        gpu=GpuSpec(model="from the header", count=gpus, nvlink_generation=4 if links else None,
                    nvlinks_per_gpu=links, nvlink_gb_s_per_gpu=gb_s,
                    nvlink_topology={"kind": "nvswitch", "basis": SRC} if links else None,
                    source=SRC),
        nics=[NicSpec(role="compute", count=nics, rate_gbps=200, link_layer="InfiniBand",
                      source=SRC)])


@pytest.mark.parametrize("f", corpus_params("nvidia-smi", "topo-m-*"))
def test_topo_matrix_corpus(f: CorpusFile) -> None:
    m = parse_topo_matrix(f.body)
    gpus = len(m.gpus)
    assert gpus >= 1 and all(d.numa_affinity is not None for d in m.gpus)
    bonds = {m.link(a.label, b.label).nvlinks for a in m.gpus for b in m.gpus if a != b}
    links = max(bonds) if bonds else None
    j = judge_affinity(m, AffinityParams(), {}, hardware(gpus, links or None))
    # every corpus node shows at least one GPU without a NIC behind its own PCIe switch, or
    # no NIC at all: none may pass as rail-aligned
    assert j.status is not Status.PASS, j.message
    if m.nics:
        assert j.status is Status.WARN and "nearest compute NIC" in j.message
        assert all(n.startswith("mlx5_") for n in m.nic_legend.values())
    else:
        assert j.status is Status.FAIL and "shows 0 compute NICs" in j.message


@pytest.mark.parametrize("f", corpus_params("nvidia-smi", "nvlink-status-*"))
def test_nvlink_status_corpus(f: CorpusFile) -> None:
    try:
        s = parse_nvlink_status(f.body)
    except ParseError as exc:
        assert faulty(f), f"a file its header does not mark faulty was refused: {exc}"
        assert "elided" in str(exc)
        return
    counts = {len(g.links) for g in s.gpus}
    assert len(counts) == 1
    j = judge_nvlink(s, NvLinkParams(), {}, hardware(8, counts.pop()))
    if healthy(f):
        assert j.status is Status.PASS, j.message
    else:
        assert j.status is not Status.PASS, j.message


@pytest.mark.parametrize("f", corpus_params("dcgm"))
def test_dcgm_diag_corpus(f: CorpusFile) -> None:
    d = parse_dcgm_diag(f.body)
    gpus = {g for r in d.results for g in r.gpus}
    level = int(m.group(1)) if (m := re.search(r"-r ([1-4])", f.header)) else 2
    j = judge_dcgm(d, DcgmDiagParams.model_validate({"level": level}), {},
                   hardware(max(len(gpus), 1)))
    if faulty(f):
        assert j.status is Status.FAIL, j.message
        named = re.search(r"GPU (\d+)", f.header)
        assert named is not None and f"GPU {named.group(1)}" in j.message
    elif healthy(f):
        assert d.form == "json"
        assert j.status is Status.PASS, j.message
        assert j.details["skipped"] >= 1  # the EUD test: skipped, not counted as a pass
