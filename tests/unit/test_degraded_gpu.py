"""Issue 11, GPU family, property tests: degraded nvidia-smi, nvlink, topo and DCGM evidence
never passes and never raises anything but ParseError (degrade_helpers says how it is
degraded).

Healthy sources, hand-written from the tools' published layouts (headers and SOURCES.md
there): tests/fixtures/gpu/h100-8gpu-healthy.xml and h100-2gpu-healthy.txt,
tests/fixtures/topology/nvlink-h100-18links-healthy.txt, topo-8gpu-8nic-pix-healthy.txt and
dcgm-diag-r2-pass.json.
"""

from __future__ import annotations

from pathlib import Path

from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings

from rackgate.checks import load_profile
from rackgate.checks.gpu.health import GpuHealthParams, judge_gpu_health
from rackgate.checks.gpu.topology import (
    AffinityParams,
    DcgmDiagParams,
    NvLinkParams,
    judge_affinity,
    judge_dcgm,
    judge_nvlink,
)
from rackgate.model import Status
from rackgate.parsers.dcgm import parse_dcgm_diag
from rackgate.parsers.nvidia_smi import parse_nvidia_smi_text, parse_nvidia_smi_xml
from rackgate.parsers.nvlink import parse_nvlink_status
from rackgate.parsers.topology import parse_topo_matrix
from rackgate.profile import GpuSpec, Hardware, NicSpec

FIX = Path(__file__).parents[1] / "fixtures"
SRC = "a public document for the test"
H100 = load_profile("dgx-h100").model.hardware
H100_TWO = Hardware(gpu=GpuSpec(model="NVIDIA H100 80GB HBM3", count=2, memory_mib=81559,
                                source="a test: two H100 as in the text fixture"))
HW = Hardware(
    gpu=GpuSpec(model="NVIDIA H100 80GB HBM3", count=8, nvlink_generation=4,
                nvlinks_per_gpu=18, nvlink_gb_s_per_gpu=900, source=SRC,
                nvlink_topology={"kind": "nvswitch", "basis": SRC}),
    nics=[NicSpec(role="compute", count=8, rate_gbps=400, link_layer="InfiniBand",
                  source=SRC)])


def _read(path: str) -> str:
    text = (FIX / path).read_text(encoding="utf-8")
    if "\n# ---\n" in text:
        return text.partition("\n# ---\n")[2]
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


XML = _read("gpu/h100-8gpu-healthy.xml")
TEXT = _read("gpu/h100-2gpu-healthy.txt")
NVL = _read("topology/nvlink-h100-18links-healthy.txt")
TOPO = _read("topology/topo-8gpu-8nic-pix-healthy.txt")
DCGM = _read("topology/dcgm-diag-r2-pass.json")

XML_TAGS = ("attached_gpus|minor_number|max_link_gen|current_link_gen|max_link_width|"
            "current_link_width|total|sram_correctable|sram_uncorrectable_parity|"
            "sram_uncorrectable_secded|dram_correctable|dram_uncorrectable|remapped_row_corr|"
            "remapped_row_unc|gpu_temp|power_draw|current_power_limit|default_power_limit|"
            "max_power_limit")
XML_LINES = (rf"<(?:{XML_TAGS}|product_name|persistence_mode|current_ecc|reset_required|"
             r"drain_and_reset_recommended|clocks_event_reason_\w+|remapped_row_\w+|uuid|"
             r"pci_bus_id|gpu id=)[ >]")
TEXT_LABELS = (r"Attached GPUs|Minor Number|Max|Current|Total|SRAM [\w -]+?|DRAM \w+|"
               r"Correctable Error|Uncorrectable Error|GPU Current Temp|Power Draw|"
               r"Current Power Limit|Default Power Limit|Max Power Limit")
TEXT_LINES = r"^\s*\S.*:"  # every 'Label : value' line: a key twice in one section is refused
# the matrix ends at NIC7/NIC7 (' X'); the legend under it is not judged
TOPO_END = TOPO[:TOPO.index("\n\nLegend")].rindex(" X") + len(" X")


def xml(text: str) -> Status:
    return outcome(parse_nvidia_smi_xml,
                   lambda r: judge_gpu_health(r, GpuHealthParams(), {}, H100), text)


def text_form(text: str) -> Status:
    return outcome(parse_nvidia_smi_text,
                   lambda r: judge_gpu_health(r, GpuHealthParams(), {}, H100_TWO), text)


def nvlink(text: str) -> Status:
    return outcome(parse_nvlink_status, lambda r: judge_nvlink(r, NvLinkParams(), {}, HW), text)


def topo(text: str) -> Status:
    return outcome(parse_topo_matrix, lambda r: judge_affinity(r, AffinityParams(), {}, HW),
                   text)


def dcgm(text: str) -> Status:
    return outcome(parse_dcgm_diag, lambda r: judge_dcgm(r, DcgmDiagParams(), {}, HW), text)


def test_the_healthy_sources_pass():
    assert xml(XML) is Status.PASS
    assert text_form(TEXT) is Status.PASS
    assert nvlink(NVL) is Status.PASS
    assert topo(TOPO) is Status.PASS
    assert dcgm(DCGM) is Status.PASS


@settings(max_examples=120, deadline=None)
@given(degraded(XML, numbers=rf"<(?:{XML_TAGS})>(-?[0-9.]+)", lines=XML_LINES,
                end=len(XML.rstrip())))
def test_degraded_nvidia_smi_xml_never_passes(text):
    assert xml(text) in BAD


@settings(max_examples=120, deadline=None)
@given(degraded(TEXT, numbers=rf"^\s*(?:{TEXT_LABELS})\s*: (-?[0-9.]+)", lines=TEXT_LINES,
                end=TEXT.rindex("Processes") + len("Processes")))
def test_degraded_nvidia_smi_text_never_passes(text):
    assert text_form(text) in BAD


@settings(max_examples=100, deadline=None)
@given(degraded(NVL, numbers=r"Link [0-9]+: ([0-9.]+) GB/s", lines=r"^\s*(?:GPU|Link) ",
                end=NVL.rstrip("\n").rindex("GB/s") + len("GB/s")))
def test_degraded_nvlink_never_passes(text):
    assert nvlink(text) in BAD


@settings(max_examples=100, deadline=None)
@given(degraded(TOPO, numbers=r"NV([0-9]+)", lines=r"^(?:GPU|NIC)[0-9]+\t", end=TOPO_END))
def test_degraded_topo_never_passes(text):
    assert topo(text) in BAD


@settings(max_examples=100, deadline=None)
@given(degraded(DCGM, numbers=r'"entity_id": ([0-9]+)', lines=r"\S", end=len(DCGM.rstrip())))
def test_degraded_dcgm_never_passes(text):
    assert dcgm(text) in BAD
