"""Issue 11, GPU family: gpu.health, gpu.nvlink, gpu.dcgm_diag and topology.gpu_nic_affinity
know the GPUs they expect (by count and index), count each once, and their parsers raise
only ParseError.

Inputs are derived here from the project's hand-written fixtures (tests/fixtures/gpu:
nvidia-smi -q -x per nvsmi_device_v12.dtd; tests/fixtures/topology: nvidia-smi topo -m and
nvlink -s layouts, dcgmi diag -j per SOURCES.md) by editing one value, line or element.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

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
from rackgate.parsers import ParseError
from rackgate.parsers.dcgm import parse_dcgm_diag
from rackgate.parsers.nvidia_smi import parse_nvidia_smi_xml
from rackgate.parsers.nvlink import parse_nvlink_status
from rackgate.parsers.topology import parse_topo_matrix
from rackgate.profile import GpuSpec, Hardware, NicSpec

FIX = Path(__file__).parents[1] / "fixtures"
H100 = load_profile("dgx-h100").model.hardware
SRC = "a public document for the test"
HW = Hardware(
    gpu=GpuSpec(model="NVIDIA H100 80GB HBM3", count=8, nvlink_generation=4,
                nvlinks_per_gpu=18, nvlink_gb_s_per_gpu=900, source=SRC,
                nvlink_topology={"kind": "nvswitch", "basis": SRC}),
    nics=[NicSpec(role="compute", count=8, rate_gbps=400, link_layer="InfiniBand",
                  source=SRC)])


def fixture(path: str) -> str:
    text = (FIX / path).read_text(encoding="utf-8")
    return text.partition("\n# ---\n")[2] if "\n# ---\n" in text else text


def dcgm_doc() -> dict:  # type: ignore[type-arg]
    return json.loads(fixture("topology/dcgm-diag-r2-pass.json"))


def dcgm(doc: dict) -> Status:  # type: ignore[type-arg]
    return judge_dcgm(parse_dcgm_diag(json.dumps(doc)), DcgmDiagParams(), {}, HW).status


def test_healthy_inputs_still_pass():
    """The control: without it every test below could pass by failing everything."""
    xml = fixture("gpu/h100-8gpu-healthy.xml")
    assert judge_gpu_health(parse_nvidia_smi_xml(xml), GpuHealthParams(), {},
                            H100).status is Status.PASS
    assert judge_affinity(parse_topo_matrix(fixture("topology/topo-8gpu-8nic-pix-healthy.txt")),
                          AffinityParams(), {}, HW).status is Status.PASS
    assert judge_nvlink(parse_nvlink_status(fixture("topology/nvlink-h100-18links-healthy.txt")),
                        NvLinkParams(), {}, HW).status is Status.PASS
    assert dcgm(dcgm_doc()) is Status.PASS


# --- finding 9: one node's output can leave the rack with no report ---------------------------

def test_sound_9_nvidia_smi_number_too_long_for_a_float_is_a_parse_error():
    xml = fixture("gpu/h100-8gpu-healthy.xml").replace(
        "<attached_gpus>8</attached_gpus>", f"<attached_gpus>{'9' * 400}</attached_gpus>")
    with pytest.raises(ParseError, match=r"attached_gpus is .* not a finite number"):
        parse_nvidia_smi_xml(xml)


def test_sound_9_nvidia_smi_deeply_nested_xml_is_a_parse_error():
    xml = ("<nvidia_smi_log><gpu id=\"00000000:18:00.0\">" + "<a>" * 5000 + "</a>" * 5000
           + "</gpu></nvidia_smi_log>")
    with pytest.raises(ParseError, match="nested deeper than"):
        parse_nvidia_smi_xml(xml)


def test_sound_9_topo_nul_byte_in_the_header_is_a_parse_error():
    text = fixture("topology/topo-8gpu-8nic-pix-healthy.txt").replace(
        "\tCPU Affinity", "\t\x00\tCPU Affinity", 1)  # a cell holding one NUL byte
    with pytest.raises(ParseError, match="NUL byte"):
        parse_topo_matrix(text)


def test_sound_9_dcgm_deeply_nested_json_is_a_parse_error():
    with pytest.raises(ParseError, match="nested too deeply"):
        parse_dcgm_diag('{"DCGM Diagnostic": ' + "[" * 100_000)


def test_sound_9_dcgm_text_gpu_list_beyond_python_ints_is_a_parse_error():
    table = ("+---------+--------+\n| Diagnostic | Result |\n+=====+=====+\n"
             "|-----  Hardware  ----+-------|\n"
             f"| GPU Memory | Pass - GPUs: {'9' * 5000} |\n+---------+--------+\n")
    with pytest.raises(ParseError):
        parse_dcgm_diag(table)


# --- finding 4: non-finite and impossible figures ---------------------------------------------

def test_sound_4_nvlink_speed_too_long_for_a_float_is_refused():
    text = fixture("topology/nvlink-h100-18links-healthy.txt").replace(
        "Link 0: 26.562 GB/s", f"Link 0: {'9' * 400} GB/s", 1)
    with pytest.raises(ParseError, match="line 2"):
        parse_nvlink_status(text)


def test_sound_4_nvlink_speed_far_above_nominal_is_an_error():
    text = fixture("topology/nvlink-h100-18links-healthy.txt").replace(
        "Link 0: 26.562 GB/s", "Link 0: 9999 GB/s", 1)
    j = judge_nvlink(parse_nvlink_status(text), NvLinkParams(), {}, HW)
    assert j.status is Status.ERROR, j.message
    assert "GPU 0 links 0 (9,999 GB/s) read above 2 x the nominal 25 GB/s" in j.message


# --- finding 2 (allow-lists): health is shown, not assumed from a missing section -------------

def test_sound_2_nvidia_smi_gpu_without_clock_event_reasons_is_not_healthy():
    xml = fixture("gpu/h100-8gpu-healthy.xml")
    text = re.sub(r"<clocks_event_reasons>.*?</clocks_event_reasons>", "", xml, count=1,
                  flags=re.S)
    assert text != xml
    j = judge_gpu_health(parse_nvidia_smi_xml(text), GpuHealthParams(), {}, H100)
    assert j.status is Status.ERROR, j.message
    assert "GPU 0: no clock event (throttle) reasons reported" in j.message


def test_sound_2_nvidia_smi_gpu_without_persistence_mode_is_not_healthy():
    xml = fixture("gpu/h100-8gpu-healthy.xml")
    text = xml.replace("<persistence_mode>Enabled</persistence_mode>", "", 1)
    j = judge_gpu_health(parse_nvidia_smi_xml(text), GpuHealthParams(), {}, H100)
    assert j.status is Status.ERROR, j.message
    assert "GPU 0: persistence mode not reported" in j.message


# --- finding 14: counting and the expected set ------------------------------------------------

def test_sound_14_nvidia_smi_a_duplicated_gpu_is_not_an_eighth_gpu():
    xml = fixture("gpu/h100-8gpu-healthy.xml")
    parts = re.split(r"(?=    <gpu id=)", xml)
    last = parts[-1]
    tail = last[last.index("</gpu>") + len("</gpu>"):]
    parts[-1] = parts[-2] + tail.lstrip("\n")  # GPU 7's element replaced by GPU 6's again
    j = judge_gpu_health(parse_nvidia_smi_xml("".join(parts)), GpuHealthParams(), {}, H100)
    assert j.status is Status.ERROR, j.message
    assert "PCI bus id 00000000:BA:00.0 is listed for 2 GPUs: duplicated output" in j.message


def test_sound_14_nvidia_smi_a_duplicated_element_is_refused():
    xml = fixture("gpu/h100-8gpu-healthy.xml")
    first = re.search(r"( *<product_name>.*</product_name>\n)", xml)
    assert first is not None
    text = xml.replace(first.group(1), first.group(1) * 2, 1)
    with pytest.raises(ParseError, match="product_name appears 2 times in one block"):
        parse_nvidia_smi_xml(text)


def test_sound_14_topo_gpu_labels_must_be_the_expected_indices():
    text = fixture("topology/topo-8gpu-8nic-pix-healthy.txt").replace("GPU7", "GPU8")
    j = judge_affinity(parse_topo_matrix(text), AffinityParams(), {}, HW)
    assert j.status is Status.FAIL, j.message
    assert "the matrix shows GPUs GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU8, expected " \
           "GPU0 to GPU7" in j.message


def _memory(doc: dict) -> list:  # type: ignore[type-arg]
    cats = doc["DCGM Diagnostic"]["test_categories"]
    test = next(t for c in cats for t in c["tests"] if t["name"] == "memory")
    return test["results"]  # type: ignore[no-any-return]


def test_sound_14_dcgm_a_gpu_missing_from_one_test_is_noticed():
    doc = dcgm_doc()
    results = _memory(doc)
    results[:] = [r for r in results if r["entity_id"] != 7]
    j = judge_dcgm(parse_dcgm_diag(json.dumps(doc)), DcgmDiagParams(), {}, HW)
    assert j.status is Status.ERROR, j.message
    assert "memory has no result for GPU 7: not every GPU was tested" in j.message


def test_sound_14_dcgm_a_duplicated_result_is_an_error():
    doc = dcgm_doc()
    results = _memory(doc)
    results.append(dict(results[3]))
    j = judge_dcgm(parse_dcgm_diag(json.dumps(doc)), DcgmDiagParams(), {}, HW)
    assert j.status is Status.ERROR, j.message
    assert "memory lists GPU 3 in more than one result" in j.message


def test_sound_14_dcgm_a_foreign_gpu_is_not_the_missing_one():
    text = json.dumps(dcgm_doc()).replace('"entity_id": 7', '"entity_id": 8')
    j = judge_dcgm(parse_dcgm_diag(text), DcgmDiagParams(), {}, HW)
    assert j.status is Status.FAIL, j.message
    assert "DCGM reports GPUs [8], which the profile's 8 GPUs (0-7) do not include" in j.message
    assert "no result for [7]" in j.message


def test_sound_14_dcgm_results_naming_no_gpu_are_no_evidence_for_the_gpus():
    doc = dcgm_doc()
    for cat in doc["DCGM Diagnostic"]["test_categories"]:
        for test in cat["tests"]:
            test["results"] = [{"status": "Pass"}]
    j = judge_dcgm(parse_dcgm_diag(json.dumps(doc)), DcgmDiagParams(), {}, HW)
    assert j.status is Status.ERROR, j.message
    assert "no DCGM result names a GPU: no evidence that the 8 GPUs were tested" in j.message
