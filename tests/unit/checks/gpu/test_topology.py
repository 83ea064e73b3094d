"""Topology, NVLink and DCGM diag: parsers and judges on the fixtures in tests/fixtures/topology.

The fixtures were written by the developers from the published formats (see each file's
'#' header, and SOURCES.md for the JSON files).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.gpu.topology import (
    CHECKS,
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

FIX = Path(__file__).parents[3] / "fixtures" / "topology"
SRC = "a public document for the test"


def body(name: str) -> str:
    """The tool output of a fixture: what follows its '# ---' header line."""
    text = (FIX / name).read_text(encoding="utf-8")
    return text.partition("\n# ---\n")[2] if "\n# ---\n" in text else text


def hw(count: int = 8, links: int | None = 18, gb_s: float | None = 900, nvswitch: bool = True,
       gen: int | None = 4, nics: int = 8) -> Hardware:
    return Hardware(
        gpu=GpuSpec(model="NVIDIA H100 80GB HBM3", count=count, nvlink_generation=gen,
                    nvlinks_per_gpu=links, nvlink_gb_s_per_gpu=gb_s,
                    nvlink_topology={"kind": "nvswitch", "basis": SRC} if nvswitch else None,
                    source=SRC),
        nics=[NicSpec(role="compute", count=nics, rate_gbps=400, link_layer="InfiniBand",
                      source=SRC)] if nics else [])


CHECK = {c.name: c for c in CHECKS}


def test_checks_declare_commands_and_scope():
    assert set(CHECK) == {"topology.gpu_nic_affinity", "gpu.nvlink", "gpu.dcgm_diag"}
    assert CHECK["topology.gpu_nic_affinity"].command(AffinityParams(), {}) == \
        ["nvidia-smi", "topo", "-m"]
    assert CHECK["gpu.nvlink"].command(NvLinkParams(), {}) == ["nvidia-smi", "nvlink", "-s"]
    assert CHECK["gpu.dcgm_diag"].command(DcgmDiagParams(level=3), {}) == \
        ["dcgmi", "diag", "-r", "3", "-j"]
    assert all(c.scope == "node" and not c.metrics for c in CHECKS)
    assert CHECK["gpu.dcgm_diag"].timeout_s(DcgmDiagParams()) == 900
    assert CHECK["gpu.dcgm_diag"].timeout_s(DcgmDiagParams(level=4, timeout_s=60)) == 60


def test_params_refuse_unknown_keys():
    for model in (AffinityParams, NvLinkParams, DcgmDiagParams):
        with pytest.raises(ValueError, match="extra"):
            model.model_validate({"bogus": 1})
    with pytest.raises(ValueError):
        DcgmDiagParams.model_validate({"level": 5})


def test_applies_skips_without_gpu_or_compute_nics():
    no_gpu = Hardware()
    for c in CHECKS:
        assert c.applies(no_gpu) is not None
    no_fabric = hw(nics=0, links=None, gb_s=None, gen=None, nvswitch=False)
    assert "compute NICs" in (CHECK["topology.gpu_nic_affinity"].applies(no_fabric) or "")
    # a profile that states its NVLink topology has it judged, compute NICs or none
    assert CHECK["topology.gpu_nic_affinity"].applies(hw(nics=0)) is None
    no_nvlink = hw(links=None, gb_s=None, gen=None, nvswitch=False)
    assert "nvlinks_per_gpu" in (CHECK["gpu.nvlink"].applies(no_nvlink) or "")
    assert all(c.applies(hw()) is None for c in CHECKS)


# --- topology ------------------------------------------------------------------------------

def affinity(name: str, hardware: Hardware | None = None, **params: object):
    m = parse_topo_matrix(body(name))
    return judge_affinity(m, AffinityParams.model_validate(params), {}, hardware or hw())


def test_topo_healthy_parses_every_cell():
    m = parse_topo_matrix(body("topo-8gpu-8nic-pix-healthy.txt"))
    assert [d.label for d in m.gpus] == [f"GPU{i}" for i in range(8)]
    assert m.nic_name("NIC7") == "mlx5_7"
    assert str(m.link("GPU3", "NIC3")) == "PIX" and m.link("GPU0", "GPU5").nvlinks == 18
    assert (m.gpus[5].cpu_affinity, m.gpus[5].numa_affinity, m.gpus[5].gpu_numa_id) == \
        ("56-111,168-223", "1", "N/A")


@pytest.mark.parametrize("name, links", [("topo-8gpu-8nic-pix-healthy.txt", 18),
                                         ("topo-spaces-mlx5-columns-no-legend-healthy.txt", 12)])
def test_topo_healthy_passes(name, links):
    j = affinity(name, hw(links=links))
    assert j.status is Status.PASS, j.message
    assert j.measured == 8 and "NVLink" in j.message


def test_topo_compute_nics_by_rdma_name_or_label():
    j = affinity("topo-8gpu-8nic-pix-healthy.txt", hw(nics=4),
                 compute_nics=["mlx5_0", "mlx5_1", "NIC4", "NIC5"])
    assert j.status is Status.WARN  # GPUs 2, 3, 6, 7 now reach a compute NIC only at NODE
    assert "GPU2's nearest compute NIC mlx5_0 (NIC0) is at NODE" in j.message
    j = affinity("topo-8gpu-8nic-pix-healthy.txt", compute_nics=["mlx5_9"])
    assert j.status is Status.FAIL and "compute NICs mlx5_9 are not in the matrix" in j.message


def test_topo_nic_at_node_warns():
    j = affinity("topo-gpu1-nic-node.txt")
    assert j.status is Status.WARN
    assert "GPU1's nearest compute NIC mlx5_0 (NIC0) is at NODE" in j.message


def test_topo_nic_across_sockets_fails_naming_gpu_nic_and_link():
    j = affinity("topo-gpu3-nic-sys.txt", hw(count=4, links=None, gb_s=None, nvswitch=False,
                                             gen=None, nics=2))
    assert j.status is Status.FAIL
    assert "GPU3's nearest compute NIC mlx5_0 (NIC0) is at SYS" in j.message
    assert "GPU2's nearest compute NIC mlx5_0 (NIC0) is at NODE" in j.message  # worst first
    assert j.message.index("GPU3") < j.message.index("GPU2") and j.measured == 2


def test_topo_missing_nvlink_pair_fails_naming_pairs():
    j = affinity("topo-missing-nvlink-pair.txt")
    assert j.status is Status.FAIL
    assert "GPU pairs without NV18: GPU0-GPU6 NV17, GPU2-GPU5 SYS" in j.message
    # a profile that states no NVLink topology (nor NVLink figures) does not judge NVLink;
    # explicit pair lists are judged in test_real_formats_profiles.py
    j = affinity("topo-missing-nvlink-pair.txt", hw(nvswitch=False, links=None, gb_s=None,
                                                    gen=None))
    assert j.status is Status.PASS and "NV" not in j.message


def test_topo_missing_gpu_fails_on_count():
    j = affinity("topo-7gpus-gpu7-missing.txt")
    assert j.status is Status.FAIL and "shows 7 GPUs, the profile expects 8" in j.message


def test_topo_no_nics_visible_fails():
    text = body("topo-8gpu-8nic-pix-healthy.txt")
    m = parse_topo_matrix(text)
    gpu_only = "\n".join("\t".join(line.split("\t")[:9] + line.split("\t")[17:])
                         for line in text.split("\n\nLegend")[0].split("\n")[:9])
    j = judge_affinity(parse_topo_matrix(gpu_only), AffinityParams(), {}, hw())
    assert j.status is Status.FAIL and "shows 0 compute NICs, the profile expects 8" in j.message
    assert len(m.nics) == 8


@pytest.mark.parametrize("text, match", [
    ("", "no header row naming GPU0"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0\n", "no row for GPU1"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0\nGPU1\tNV4\n", "row GPU1 has 1 cells"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tQPI\t0\nGPU1\tNV4\t X\t0\n", "GPU0/GPU1 is 'QPI'"),
    ("\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPIX\t0\t0\nNIC0\tPIX\t X\n"
     "\nNIC Legend:\n\n", None),
    ("\tGPU0\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPIX\tPIX\t0\t0\n"
     "NIC0\tPIX\t X \tPIX\nNIC1\tPIX\tPIX\t X\n\nNIC Legend:\n\n  NIC0: mlx5_0\n",
     "names no device for NIC1"),
])
def test_topo_malformed_names_what_is_wrong(text, match):
    if match is None:
        assert parse_topo_matrix(text).nic_name("NIC0") == "NIC0"
        return
    with pytest.raises(ParseError, match=match):
        parse_topo_matrix(text)


# --- nvlink --------------------------------------------------------------------------------

def nvlink(name: str, hardware: Hardware | None = None):
    return judge_nvlink(parse_nvlink_status(body(name)), NvLinkParams(), {}, hardware or hw())


@pytest.mark.parametrize("name, hardware", [
    ("nvlink-h100-18links-healthy.txt", hw()),
    ("nvlink-a100-12links-healthy.txt", hw(links=12, gb_s=600, gen=3)),
])
def test_nvlink_healthy_passes(name, hardware):
    j = nvlink(name, hardware)
    assert j.status is Status.PASS, j.message
    assert ">= 25 GB/s each way" in j.message
    assert j.measured == 8 * (hardware.gpu.nvlinks_per_gpu or 0)


def test_nvlink_inactive_link_fails_naming_gpu_and_link():
    j = nvlink("nvlink-gpu5-link7-inactive.txt")
    assert j.status is Status.FAIL and j.message == "GPU 5 links 7 are inactive"


def test_nvlink_slow_link_fails_with_speed_and_floor():
    j = nvlink("nvlink-gpu2-link3-slow.txt")
    assert j.status is Status.FAIL
    assert j.message == "GPU 2 links 3 (13.28 GB/s) are below 25 GB/s"


def test_nvlink_missing_gpu_fails():
    j = nvlink("nvlink-7gpus-listed.txt")
    assert j.status is Status.FAIL and "lists 7 GPUs, the profile expects 8" in j.message


def test_nvlink_wrong_link_count_fails():
    j = nvlink("nvlink-a100-12links-healthy.txt", hw(links=12, gb_s=900))
    assert j.status is Status.FAIL and "below 37.5 GB/s" in j.message
    j = nvlink("nvlink-a100-12links-healthy.txt")
    assert j.status is Status.FAIL and "GPU 0 lists 12 links, expected 18" in j.message


@pytest.mark.parametrize("text, match", [
    ("", "no 'GPU n:' line"),
    ("\t Link 0: 25 GB/s\n", "before any 'GPU n:'"),
    ("GPU 0: X (UUID: GPU-1)\n\t Link 0: 25 GB/s\n...\n", "'...' is neither"),
    ("GPU 0: X (UUID: GPU-1)\nGPU 2: X (UUID: GPU-3)\n", "GPU 1 is missing"),
    ("GPU 0: X (UUID: GPU-1)\n\t Link 0: 25 GB/s\n\t Link 2: 25 GB/s\n", "links are missing"),
    ("GPU 0: X (UUID: GPU-1)\n\t Link 0: 25 GB\n", "neither"),
])
def test_nvlink_malformed_names_what_is_wrong(text, match):
    with pytest.raises(ParseError, match=match):
        parse_nvlink_status(text)


# --- dcgm ----------------------------------------------------------------------------------

def dcgm(name: str, level: int = 2):
    d = parse_dcgm_diag(body(name))
    return judge_dcgm(d, DcgmDiagParams.model_validate({"level": level}), {}, hw())


@pytest.mark.parametrize("name", ["dcgm-diag-r2-pass.json", "dcgm-diag-r2-v3-gpu-ids-pass.json"])
def test_dcgm_healthy_passes(name):
    j = dcgm(name)
    assert j.status is Status.PASS, j.message


def test_dcgm_memory_fail_names_test_and_gpu():
    j = dcgm("dcgm-diag-r2-memory-fail.json")
    assert j.status is Status.FAIL
    assert j.message.startswith("memory fails on GPU 3: Pending page retirements")


def test_dcgm_warn_warns():
    j = dcgm("dcgm-diag-r2-pcie-warn.json")
    assert j.status is Status.WARN and "pcie warns on GPU 6" in j.message


def test_dcgm_all_skip_is_error():
    j = dcgm("dcgm-diag-r1-all-skip.json", level=1)
    assert j.status is Status.ERROR and "no evidence of health" in j.message


def test_dcgm_fewer_gpus_than_profile_fails():
    d = parse_dcgm_diag(body("dcgm-diag-r2-pass.json"))
    j = judge_dcgm(d, DcgmDiagParams(), {}, hw(count=16))
    assert j.status is Status.FAIL and "the profile expects 16" in j.message


def test_dcgm_text_table_complete_and_cut():
    table = ("+---------+--------+\n| Diagnostic | Result |\n+=====+=====+\n"
             "|-----  Hardware  ----+-------|\n"
             "| GPU Memory | Pass - GPUs: 0, 1, 2, 3, 4, 5, 6, 7 |\n"
             "+---------+--------+\n")
    j = judge_dcgm(parse_dcgm_diag(table), DcgmDiagParams(), {}, hw())
    assert j.status is Status.PASS, j.message
    cut = table.rsplit("+", 2)[0].rsplit("\n", 1)[0]
    j = judge_dcgm(parse_dcgm_diag(cut), DcgmDiagParams(), {}, hw())
    assert j.status is Status.ERROR and "cut before its end" in j.message


@pytest.mark.parametrize("text, match", [
    ("", "empty"),
    ("Error: unable to connect to host engine", "neither the JSON form"),
    ('{"DCGM Diagnostic": {"test_categories": [', "not valid JSON"),
    ('{"foo": 1}', "no 'DCGM Diagnostic'"),
    ('{"DCGM Diagnostic": {"test_categories": [{"tests": [{"results": [{"status": "Ok"}]}]}]}}',
     "status is 'Ok'"),
    ("| GPU Memory | Maybe |\n", "is not 'Pass'"),
])
def test_dcgm_malformed_names_what_is_wrong(text, match):
    with pytest.raises(ParseError, match=match):
        parse_dcgm_diag(text)


# --- properties ----------------------------------------------------------------------------

PARSERS = [parse_topo_matrix, parse_nvlink_status, parse_dcgm_diag]
LINKISH = st.text(alphabet=st.sampled_from(list("GPUNIC0123 \t\n|:+-XSYODEHBPVAfinty{}\"")),
                  max_size=300)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=400), LINKISH), st.sampled_from(PARSERS))
def test_arbitrary_text_is_a_record_or_a_parse_error(text, parse):
    with contextlib.suppress(ParseError):
        parse(text)


def _judged(parse, judge, params, hardware, text):
    try:
        return judge(parse(text), params, {}, hardware).status
    except ParseError:
        return Status.ERROR


TOPO = body("topo-8gpu-8nic-pix-healthy.txt")
NVL = body("nvlink-h100-18links-healthy.txt")
DCGM = body("dcgm-diag-r2-pass.json")
# the last cell each judge reads: the matrix ends with NIC7/NIC7 (' X '), the status with
# GPU 7 Link 17
TOPO_END = TOPO[:TOPO.index("\n\nLegend")].rindex(" X") + len(" X")
NVL_END = NVL.rstrip("\n").rindex("GB/s") + len("GB/s")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_truncated_output_never_passes(data):
    cut = data.draw(st.integers(min_value=0, max_value=TOPO_END - 1))
    assert _judged(parse_topo_matrix, judge_affinity, AffinityParams(), hw(),
                   TOPO[:cut]) is not Status.PASS
    cut = data.draw(st.integers(min_value=0, max_value=NVL_END - 1))
    assert _judged(parse_nvlink_status, judge_nvlink, NvLinkParams(), hw(),
                   NVL[:cut]) is not Status.PASS
    cut = data.draw(st.integers(min_value=0, max_value=len(DCGM.rstrip()) - 1))
    assert _judged(parse_dcgm_diag, judge_dcgm, DcgmDiagParams(), hw(),
                   DCGM[:cut]) is not Status.PASS


def test_untruncated_fixtures_pass():
    assert _judged(parse_topo_matrix, judge_affinity, AffinityParams(), hw(),
                   TOPO) is Status.PASS
    assert _judged(parse_nvlink_status, judge_nvlink, NvLinkParams(), hw(),
                   NVL[:NVL_END]) is Status.PASS


def test_nvlink_topology_is_judged_on_a_node_without_compute_nics():
    """hgx-h200 and aws-g5-48xlarge state no compute NICs: the GPUs' NVLink is still judged
    against the profile, and the NIC part is left out, saying so."""
    healthy = affinity("topo-8gpu-8nic-pix-healthy.txt", hw(nics=0))
    assert healthy.status is Status.PASS, healthy.message
    assert "no compute NICs" in healthy.message and "NVSwitch" in healthy.message
    missing = affinity("topo-missing-nvlink-pair.txt", hw(nics=0))
    assert missing.status is Status.FAIL and "without NV18" in missing.message


# ------------------------------------------------------------ degraded evidence (issue 11)
# Healthy sources, hand-written from the tools' published layouts (headers and SOURCES.md
# there): tests/fixtures/topology/nvlink-h100-18links-healthy.txt,
# topo-8gpu-8nic-pix-healthy.txt and dcgm-diag-r2-pass.json.

HW = hw()  # eight H100 on NVSwitch, 18 links of 50 GB/s each, eight NDR NICs


def nvlink_outcome(text: str) -> Status:
    return outcome(parse_nvlink_status, lambda r: judge_nvlink(r, NvLinkParams(), {}, HW), text)


def topo_outcome(text: str) -> Status:
    return outcome(parse_topo_matrix, lambda r: judge_affinity(r, AffinityParams(), {}, HW),
                   text)


def dcgm_outcome(text: str) -> Status:
    return outcome(parse_dcgm_diag, lambda r: judge_dcgm(r, DcgmDiagParams(), {}, HW), text)


class TestDegradedTopology:
    """Issue 11, gpu topology: degraded nvlink, topo and DCGM evidence never passes and never
    raises anything but ParseError (degrade_helpers says how it is degraded)."""

    def test_the_healthy_sources_pass(self):
        assert nvlink_outcome(NVL) is Status.PASS
        assert topo_outcome(TOPO) is Status.PASS
        assert dcgm_outcome(DCGM) is Status.PASS

    @settings(max_examples=100, deadline=None)
    @given(degraded(NVL, numbers=r"Link [0-9]+: ([0-9.]+) GB/s", lines=r"^\s*(?:GPU|Link) ",
                    end=NVL.rstrip("\n").rindex("GB/s") + len("GB/s")))
    def test_degraded_nvlink_never_passes(self, text):
        assert nvlink_outcome(text) in BAD

    @settings(max_examples=100, deadline=None)
    @given(degraded(TOPO, numbers=r"NV([0-9]+)", lines=r"^(?:GPU|NIC)[0-9]+\t", end=TOPO_END))
    def test_degraded_topo_never_passes(self, text):
        assert topo_outcome(text) in BAD

    @settings(max_examples=100, deadline=None)
    @given(degraded(DCGM, numbers=r'"entity_id": ([0-9]+)', lines=r"\S", end=len(DCGM.rstrip())))
    def test_degraded_dcgm_never_passes(self, text):
        assert dcgm_outcome(text) in BAD
