"""Issue 14, profiles that say what the hardware is: the NVLink topology a profile states
(NVSwitch all-to-all, explicit pairs such as DGX-1's hybrid cube-mesh or a bridged pair of
PCIe cards, none) judged against ``nvidia-smi topo -m``, and the PCIe width and generation
a profile states judged against ``nvidia-smi -q -x``.

Fixtures, hand-written from the tools' published layouts (see each file's header):
tests/fixtures/topology/topo-dgx1-v100-hybrid-cube-mesh-healthy.txt and its twin
topo-dgx1-v100-cube-mesh-gpu0-gpu4-nvlink-missing.txt, topo-2x-rtx-a6000-nvlink-bridge-
healthy.txt and its twin topo-2x-rtx-a6000-nvlink-bridge-missing.txt;
tests/fixtures/gpu/a10g-8gpu-x8-slots-healthy.xml and its twin
a10g-8gpu-gpu5-x4-of-x8-slot.xml, and the older h100-pcie-x8-downtrained.xml; the NIC
PCIe probe's tests/fixtures/topology/nic-pcie-dgx-h100-12-ports-gen5-x16-healthy.txt and
its twin nic-pcie-mlx5-4-x8-downtrained.txt.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import load_profile
from rackgate.checks.gpu.health import GpuHealthParams, judge_gpu_health
from rackgate.checks.gpu.topology import AffinityParams, judge_affinity
from rackgate.hardware import GpuSpec, Hardware, NicSpec, PcieLink
from rackgate.model import Status
from rackgate.parsers.nvidia_smi import parse_nvidia_smi_xml
from rackgate.parsers.topology import parse_topo_matrix
from rackgate.profile import available_profiles

FIX = Path(__file__).parents[1] / "fixtures"
SRC = "a public document for the test"

# NVIDIA DGX-1 with Tesla V100 whitepaper, "DGX-1 NVLink Network Topology": two fully
# joined quads and GPUn-GPU(n+4); 6 links per GPU (the fixture's header says more)
DGX1_PAIRS = [(0, 1, 1), (0, 2, 1), (0, 3, 2), (0, 4, 2), (1, 2, 2), (1, 3, 1), (1, 5, 2),
              (2, 3, 2), (2, 6, 1), (3, 7, 1), (4, 5, 1), (4, 6, 1), (4, 7, 2), (5, 6, 2),
              (5, 7, 1), (6, 7, 2)]
CUBE = "topology/topo-dgx1-v100-hybrid-cube-mesh-healthy.txt"
CUBE_BROKEN = "topology/topo-dgx1-v100-cube-mesh-gpu0-gpu4-nvlink-missing.txt"
BRIDGE = "topology/topo-2x-rtx-a6000-nvlink-bridge-healthy.txt"
BRIDGE_MISSING = "topology/topo-2x-rtx-a6000-nvlink-bridge-missing.txt"
A10G = "gpu/a10g-8gpu-x8-slots-healthy.xml"
A10G_X4 = "gpu/a10g-8gpu-gpu5-x4-of-x8-slot.xml"


def read(name: str) -> str:
    text = (FIX / name).read_text(encoding="utf-8")
    return text.partition("\n# ---\n")[2] if "\n# ---\n" in text else text


def dgx1(pairs: list[tuple[int, int, int]] = DGX1_PAIRS, **gpu: object) -> Hardware:
    spec = {"model": "Tesla V100-SXM2-32GB", "count": 8, "nvlink_generation": 2,
            "nvlinks_per_gpu": 6, "nvlink_gb_s_per_gpu": 300, "source": SRC,
            "nvlink_topology": {"kind": "pairs", "name": "hybrid-cube-mesh",
                                "pairs": pairs, "basis": "DGX-1 V100 whitepaper figure"}}
    return Hardware(gpu=GpuSpec.model_validate({**spec, **gpu}),
                    nics=[NicSpec(role="compute", count=4, rate_gbps=100,
                                  link_layer="InfiniBand", source=SRC)])


def a6000(topology: dict[str, object] | None = None, links: int | None = 4) -> Hardware:
    topo = topology or {"kind": "pairs", "name": "nvlink-bridge", "pairs": [[0, 1, 4]],
                        "basis": "one NVLink bridge joins the two cards"}
    return Hardware(gpu=GpuSpec.model_validate({
        "model": "NVIDIA RTX A6000", "count": 2, "nvlinks_per_gpu": links, "source": SRC,
        "nvlink_topology": topo}),
        nics=[NicSpec(role="compute", count=1, rate_gbps=100, link_layer="Ethernet",
                      source=SRC)])


def affinity(text: str, hw: Hardware):
    return judge_affinity(parse_topo_matrix(text), AffinityParams(), {}, hw)


def set_cell(text: str, a: int, b: int, value: str) -> str:
    """The matrix with cells GPUa/GPUb and GPUb/GPUa both set to ``value``."""
    lines = text.split("\n")
    header = lines[0].split("\t")
    for row, col in ((a, b), (b, a)):
        i = next(n for n, line in enumerate(lines) if line.startswith(f"GPU{row}\t"))
        cells = lines[i].split("\t")
        cells[header.index(f"GPU{col}")] = value
        lines[i] = "\t".join(cells)
    return "\n".join(lines)


# --- nvidia-smi topo -m against the profile's NVLink topology ------------------------------

def test_topo_dgx1_hybrid_cube_mesh_passes_with_its_pair_list():
    j = affinity(read(CUBE), dgx1())
    assert j.status is Status.PASS, j.message
    assert "16 NVLink pairs of the profile's hybrid-cube-mesh" in j.message


def test_topo_dgx1_cube_mesh_with_a_pair_missing_fails_naming_it():
    j = affinity(read(CUBE_BROKEN), dgx1())
    assert j.status is Status.FAIL
    assert "GPU0-GPU4 SYS (expected NV2)" in j.message


def test_topo_a6000_bridged_pair_passes_and_a_missing_bridge_fails():
    j = affinity(read(BRIDGE), a6000())
    assert j.status is Status.PASS, j.message
    j = affinity(read(BRIDGE_MISSING), a6000())
    assert j.status is Status.FAIL and "GPU0-GPU1 PXB (expected NV4)" in j.message


def test_topo_nvlink_the_profile_does_not_describe_fails():
    none = {"kind": "none", "basis": "PCIe cards, no bridge fitted"}
    j = affinity(read(BRIDGE), a6000(none, links=None))
    assert j.status is Status.FAIL
    assert "NVLink the profile does not describe: GPU0-GPU1 NV4" in j.message
    j = affinity(read(BRIDGE_MISSING), a6000(none, links=None))
    assert j.status is Status.PASS, j.message


def test_topo_cube_mesh_is_not_an_nvswitch_node():
    nvswitch = {"kind": "nvswitch", "basis": "wrongly said to be an NVSwitch node"}
    j = affinity(read(CUBE), dgx1(nvlink_topology=nvswitch))
    assert j.status is Status.FAIL and "GPU pairs without NV6: GPU0-GPU1 NV1" in j.message


def test_topo_asymmetric_nvlink_cell_is_an_error():
    lines = read(BRIDGE).split("\n")
    lines[2] = lines[2].replace("NV4", "NV2")  # GPU1's row only
    j = affinity("\n".join(lines), a6000())
    assert j.status is Status.ERROR and "GPU0-GPU1 NV4 but GPU1-GPU0 NV2" in j.message


@settings(max_examples=60, deadline=None)
@given(pair=st.sampled_from(DGX1_PAIRS), cell=st.sampled_from(["SYS", "NODE", "PIX", "NV1",
                                                                 "NV2", "NV3", "NV12"]))
def test_topo_any_cube_mesh_pair_changed_never_passes(pair, cell):
    a, b, links = pair
    if cell == f"NV{links}":
        return
    j = affinity(set_cell(read(CUBE), a, b, cell), dgx1())
    assert j.status is Status.FAIL and f"GPU{a}-GPU{b} {cell} (expected NV{links})" in j.message


NON_PAIRS = [(a, b) for a in range(8) for b in range(a + 1, 8)
             if (a, b) not in {(x, y) for x, y, _ in DGX1_PAIRS}]


@settings(max_examples=30, deadline=None)
@given(pair=st.sampled_from(NON_PAIRS), links=st.integers(1, 18))
def test_topo_any_foreign_nvlink_pair_never_passes(pair, links):
    a, b = pair
    j = affinity(set_cell(read(CUBE), a, b, f"NV{links}"), dgx1())
    assert j.status is Status.FAIL
    assert f"NVLink the profile does not describe: GPU{a}-GPU{b} NV{links}" in j.message


@settings(max_examples=30, deadline=None)
@given(flip=st.lists(st.booleans(), min_size=16, max_size=16), spaces=st.booleans())
def test_topo_any_healthy_variant_of_the_cube_mesh_passes(flip, spaces):
    # the profile may list a pair either way round; the matrix may lose its tabs
    pairs = [(b, a, n) if f else (a, b, n) for (a, b, n), f in zip(DGX1_PAIRS, flip,
                                                                    strict=True)]
    text = read(CUBE)
    if spaces:
        text = re.sub(r"\t", "   ", text)
    j = affinity(text, dgx1(pairs))
    assert j.status is Status.PASS, j.message


# --- the profile's NVLink and PCIe blocks refuse what cannot be ----------------------------

@pytest.mark.parametrize("change, match", [
    ({"nvswitch": True}, "nvswitch is replaced by nvlink_topology"),
    ({"nvlink_topology": None}, "states NVLink figures but not how the GPUs are joined"),
    ({"pairs": DGX1_PAIRS[1:]}, "GPU0 5, GPU1 5 links, but nvlinks_per_gpu is 6"),
    ({"pairs": [*DGX1_PAIRS, (7, 8, 1)]}, "names GPU8; the node has GPU0 to GPU7"),
    ({"pairs": [*DGX1_PAIRS, (1, 0, 1)]}, "GPU0-GPU1 is listed twice"),
    ({"pairs": [(0, 0, 6)]}, "two different GPU indexes"),
    ({"nvlink_topology": {"kind": "none", "basis": "no NVLink on these cards"}},
     "kind none, but nvlinks_per_gpu is 6"),
    ({"nvlink_topology": {"kind": "nvswitch", "basis": "all-to-all"}, "nvlinks_per_gpu": None,
      "nvlink_generation": None}, "kind nvswitch needs nvlinks_per_gpu"),
    ({"pcie": {"basis": "a basis without a figure"}}, "needs width, generation or both"),
    ({"pcie": {"width": 12, "basis": "not a PCIe width"}}, "width"),
])
def test_gpu_block_refuses_a_topology_or_link_that_cannot_be(change, match):
    spec = {"model": "Tesla V100-SXM2-32GB", "count": 8, "nvlink_generation": 2,
            "nvlinks_per_gpu": 6, "source": SRC,
            "nvlink_topology": {"kind": "pairs", "pairs": DGX1_PAIRS, "basis": "whitepaper"}}
    if "pairs" in change:
        spec["nvlink_topology"] = {"kind": "pairs", "pairs": change.pop("pairs"),
                                   "basis": "whitepaper"}
    with pytest.raises(ValueError, match=match):
        GpuSpec.model_validate({**spec, **change})


# --- nvidia-smi -q -x against the profile's PCIe link --------------------------------------

def health(name: str, hw: Hardware, **params: object):
    q = parse_nvidia_smi_xml((FIX / name).read_text(encoding="utf-8"))
    return judge_gpu_health(q, GpuHealthParams.model_validate(params), {}, hw)


G5 = load_profile("aws-g5-48xlarge").model.hardware


def with_pcie(hw: Hardware, **link: object) -> Hardware:
    assert hw.gpu is not None
    gpu = hw.gpu.model_copy(update={"pcie": PcieLink.model_validate(
        {"basis": "a slot figure for the test", **link})})
    return hw.model_copy(update={"gpu": gpu})


def test_health_a10g_at_x8_passes_where_the_profile_says_x8():
    j = health(A10G, G5)
    assert j.status is Status.PASS, j.message


def test_health_a10g_at_x8_without_a_profile_width_is_judged_against_the_device_max():
    assert G5.gpu is not None
    no_pcie = G5.model_copy(update={"gpu": G5.gpu.model_copy(update={"pcie": None})})
    j = health(A10G, no_pcie)
    assert j.status is Status.FAIL and "PCIe link x8, max x16 (down-trained link)" in j.message


def test_health_a10g_x4_in_an_x8_slot_fails_naming_the_gpu():
    j = health(A10G_X4, G5)
    assert j.status is Status.FAIL
    assert "GPU 5: PCIe link x4, the profile expects x8 (down-trained link)" in j.message
    assert "GPU 0" not in j.message


def test_health_h100_at_x8_fails_where_the_dgx_profile_says_x16():
    j = health("gpu/h100-pcie-x8-downtrained.xml", load_profile("dgx-h100").model.hardware)
    assert j.status is Status.FAIL
    assert "GPU 2: PCIe link x8, the profile expects x16 (down-trained link)" in j.message


def test_health_a10g_wider_than_the_profile_says_fails():
    j = health(A10G, with_pcie(G5, width=4))
    assert j.status is Status.FAIL and "PCIe link x8, the profile expects x4" in j.message
    assert "wider" in j.message


def test_health_generation_is_judged_against_the_profile():
    # the link can reach only gen 4 (GPU and slot): a gen-5 profile fails at any load
    j = health(A10G, with_pcie(G5, width=8, generation=5))
    assert j.status is Status.FAIL and "max gen 4, below the profile's gen 5" in j.message
    # current above the profile's generation: not the node the profile describes
    j = health(A10G, with_pcie(G5, width=8, generation=3))
    assert j.status is Status.FAIL and "PCIe gen 4, the profile expects gen 3" in j.message
    j = health(A10G, with_pcie(G5, width=8, generation=4))
    assert j.status is Status.PASS, j.message


def test_health_generation_below_the_profile_warns_at_idle_and_fails_under_load():
    text = (FIX / A10G).read_text(encoding="utf-8").replace(
        "<current_link_gen>4</current_link_gen>", "<current_link_gen>1</current_link_gen>")
    q = parse_nvidia_smi_xml(text)
    hw = with_pcie(G5, width=8, generation=4)
    j = judge_gpu_health(q, GpuHealthParams(), {}, hw)
    assert j.status is Status.WARN and "PCIe gen 1, the profile expects gen 4" in j.message
    j = judge_gpu_health(q, GpuHealthParams(require_max_gen=True), {}, hw)
    assert j.status is Status.FAIL


def test_health_profile_width_without_link_evidence_is_an_error():
    text = re.sub(r"\s*<current_link_width>8x</current_link_width>", "",
                  (FIX / A10G).read_text(encoding="utf-8"))
    j = judge_gpu_health(parse_nvidia_smi_xml(text), GpuHealthParams(), {}, G5)
    assert j.status is Status.ERROR
    assert "PCIe link width not reported; the profile expects x8" in j.message


@settings(max_examples=40, deadline=None)
@given(gpu=st.integers(0, 7), width=st.sampled_from([1, 2, 4, 16, 32]))
def test_health_any_gpu_off_its_slot_width_never_passes(gpu, width):
    text = (FIX / A10G).read_text(encoding="utf-8")
    marks = [m.start() for m in re.finditer("<current_link_width>8x", text)]
    at = marks[gpu]
    text = text[:at] + f"<current_link_width>{width}x" + text[at + len("<current_link_"
                                                                      "width>8x"):]
    j = judge_gpu_health(parse_nvidia_smi_xml(text), GpuHealthParams(), {}, G5)
    assert j.status is Status.FAIL
    assert f"GPU {gpu}: PCIe link x{width}, the profile expects x8" in j.message


# --- the shipped profiles say what their hardware is ---------------------------------------

# name: (topology kind, pcie width, pcie generation)
SHIPPED = {"dgx-a100": ("nvswitch", 16, 4), "dgx-h100": ("nvswitch", 16, 5),
           "hgx-h200": ("nvswitch", 16, 5), "aws-g5-48xlarge": ("none", 8, None)}


@pytest.mark.parametrize("name", available_profiles())
def test_every_shipped_gpu_profile_states_topology_and_pcie_with_a_basis(name):
    gpu = load_profile(name).model.hardware.gpu
    if gpu is None:
        assert name == "demo"
        return
    assert gpu.nvlink_topology is not None and gpu.pcie is not None
    assert len(gpu.nvlink_topology.basis.split()) >= 8, name
    assert len(gpu.pcie.basis.split()) >= 8 and re.search(r"\d", gpu.pcie.basis), name
    assert (gpu.nvlink_topology.kind, gpu.pcie.width, gpu.pcie.generation) == SHIPPED[name]


def test_the_pcie_cloud_profile_is_the_x8_worked_example():
    p = load_profile("aws-g5-48xlarge")
    gpu = p.model.hardware.gpu
    assert gpu is not None and (gpu.model, gpu.count) == ("NVIDIA A10G", 8)
    assert gpu.nvlink_topology is not None and gpu.nvlink_topology.kind == "none"
    assert gpu.expected_nvlink_pairs() == {}
    assert gpu.pcie is not None and "x16" in gpu.pcie.basis  # the card's own width, cited


FOUR_A6000 = "topology/topo-4x-rtx-a6000-two-bridges-healthy.txt"
FOUR_A6000_MISSING = "topology/topo-4x-rtx-a6000-gpu2-gpu3-bridge-missing.txt"


def four_a6000() -> Hardware:
    return Hardware(gpu=GpuSpec.model_validate({
        "model": "NVIDIA RTX A6000", "count": 4, "nvlinks_per_gpu": 4, "source": SRC,
        "nvlink_topology": {"kind": "pairs", "name": "nvlink-bridge",
                            "pairs": [[0, 1, 4], [2, 3, 4]],
                            "basis": "two NVLink bridges, one per pair of cards"}}),
        nics=[NicSpec(role="compute", count=2, rate_gbps=100, link_layer="Ethernet",
                      source=SRC)])


def test_topo_four_a6000_in_two_bridged_pairs_pass_and_a_missing_bridge_fails():
    """The shape the old rule (NVLink between every GPU pair once a generation is set)
    failed: bridged pairs, and PCIe between the pairs."""
    j = affinity(read(FOUR_A6000), four_a6000())
    assert j.status is Status.PASS, j.message
    assert "exactly the 2 NVLink pairs of the profile's nvlink-bridge" in j.message
    j = affinity(read(FOUR_A6000_MISSING), four_a6000())
    assert j.status is Status.FAIL
    assert "GPU2-GPU3 NODE (expected NV4)" in j.message
