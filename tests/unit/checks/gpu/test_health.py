"""gpu.health: the nvidia-smi parsers (XML and text) and the judge, on tests/fixtures/gpu."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rackgate.checks import load_profile
from rackgate.checks.gpu.health import (
    GpuHealthParams,
    gpu_applies,
    gpu_health_command,
    judge_gpu_health,
)
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.nvidia_smi import (
    parse_nvidia_smi,
    parse_nvidia_smi_text,
    parse_nvidia_smi_xml,
)
from rackgate.profile import GpuSpec, Hardware

H100 = load_profile("dgx-h100").model.hardware
A100_ONE = Hardware(gpu=GpuSpec(model="NVIDIA A100-SXM4-80GB", count=1,
                                source="a test: one A100 as in the fixture"))
H100_TWO = Hardware(gpu=GpuSpec(model="NVIDIA H100 80GB HBM3", count=2, memory_mib=81559,
                                source="a test: two H100 as in the text fixture"))


def judge(text: str, hw: Hardware = H100, **params: object):
    return judge_gpu_health(parse_nvidia_smi_xml(text), GpuHealthParams(**params), {}, hw)


# what every driver prints for an idle GPU (the judge errors when the section is missing)
IDLE = ("<clocks_event_reasons><clocks_event_reason_gpu_idle>Active"
        "</clocks_event_reason_gpu_idle></clocks_event_reasons>")


def strip_header(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def test_command_and_applies():
    assert gpu_health_command(GpuHealthParams(), {}) == ["nvidia-smi", "-q", "-x"]
    assert gpu_applies(Hardware()) == "the profile expects no GPU"
    assert gpu_applies(H100) is None


def test_params_refuse_unknown_keys_and_reasons():
    with pytest.raises(ValueError, match="extra"):
        GpuHealthParams.model_validate({"allowed_throttle_reason": ["gpu_idle"]})
    with pytest.raises(ValueError):
        GpuHealthParams.model_validate({"allowed_throttle_reasons": ["hw_slowdwn"]})


def test_healthy_xml_parses_every_field(fixture_text):
    q = parse_nvidia_smi_xml(fixture_text("gpu/h100-8gpu-healthy.xml"))
    assert (q.format, q.driver_version, q.cuda_version, q.attached_gpus) == \
        ("xml", "535.183.01", "12.2", 8)
    g = q.gpus[3]
    assert (g.index, g.pci_bus_id, g.minor_number) == (3, "00000000:5D:00.0", 3)
    assert g.product_name == "NVIDIA H100 80GB HBM3" and g.fb_memory_total_mib == 81559
    assert g.serial == "1650000000003" and g.uuid.startswith("GPU-")
    assert g.vbios_version == "96.00.74.00.01"
    assert g.persistence_mode_enabled and g.ecc_mode_enabled
    assert (g.ecc.volatile_uncorrectable, g.ecc.aggregate_correctable) == (0, 0)
    assert g.retired_pages_single_bit is None and g.retired_pages_pending is None  # N/A
    assert (g.remapped_rows_uncorrectable, g.remapped_rows_pending) == (0, False)
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) == \
        (5, 5, 16, 16)
    assert g.clock_event_reasons_active == ("gpu_idle",)
    assert (g.power_draw_w, g.power_limit_w, g.power_limit_default_w) == (70.12, 700.0, 700.0)
    assert g.temperature_gpu_c == 31.0 and g.reset_required is False


def test_healthy_node_passes_and_records_versions(fixture_text):
    j = judge(fixture_text("gpu/h100-8gpu-healthy.xml"))
    assert j.status is Status.PASS, j.message
    assert j.message == "8 x NVIDIA H100 80GB HBM3, driver 535.183.01: healthy"
    assert j.details["driver_version"] == "535.183.01"
    assert j.details["vbios_versions"] == "96.00.74.00.01"
    assert "serial 1650000000007" in str(j.details["gpu7"])


@pytest.mark.parametrize(("fixture", "status", "message"), [
    ("h100-ecc-uncorrectable.xml", Status.FAIL,
     "GPU 3: 2 uncorrectable ECC error(s) (volatile); fail: GPU 3: 2 uncorrectable ECC "
     "error(s) (aggregate)"),
    ("h100-remap-pending.xml", Status.FAIL, "GPU 5: row remapping pending (reset the GPU)"),
    ("h100-remap-failure.xml", Status.FAIL,
     "GPU 6: row remapping failure occurred (replace the GPU)"),
    ("h100-pcie-x8-downtrained.xml", Status.FAIL,
     "GPU 2: PCIe link x8, the profile expects x16 (down-trained link)"),
    ("h100-pcie-gen1-idle.xml", Status.WARN,
     "GPU 4: PCIe gen 1, the profile expects gen 5 (may be idle power saving)"),
    ("h100-hw-slowdown.xml", Status.FAIL,
     "GPU 0: clock event reasons active: hw_slowdown, hw_thermal_slowdown"),
    ("h100-7-of-8-gpus.xml", Status.FAIL, "found 7 GPU(s), expected 8 x NVIDIA H100 80GB HBM3"),
    ("h100-persistence-disabled.xml", Status.FAIL,
     "GPU 0, 1, 2, 3, 4, 5, 6, 7: persistence mode Disabled"),
    ("h100-power-limit-lowered.xml", Status.WARN,
     "GPU 1: power limit 400 W, below the default 700 W"),
    ("h100-reset-required.xml", Status.FAIL, "GPU 7: GPU reset required"),
])
def test_each_fault_is_judged_and_named(fixture_text, fixture, status, message):
    j = judge(fixture_text(f"gpu/{fixture}"))
    assert j.status is status, j.message
    assert f"{status.label}: {message}" in j.message
    assert j.details["finding1"].startswith(status.label)


def test_gen_below_max_fails_when_required(fixture_text):
    j = judge(fixture_text("gpu/h100-pcie-gen1-idle.xml"), require_max_gen=True)
    assert j.status is Status.FAIL


def test_persistence_is_a_warning_when_not_required(fixture_text):
    j = judge(fixture_text("gpu/h100-persistence-disabled.xml"), require_persistence=False)
    assert j.status is Status.WARN


def test_allowed_reasons_come_from_params(fixture_text):
    text = fixture_text("gpu/h100-hw-slowdown.xml")
    j = judge(text, allowed_throttle_reasons=["gpu_idle", "hw_slowdown", "hw_thermal_slowdown"])
    assert j.status is Status.PASS
    j = judge(fixture_text("gpu/h100-8gpu-healthy.xml"), allowed_throttle_reasons=[])
    assert j.status is Status.FAIL and "gpu_idle" in j.message


def test_every_finding_is_listed_worst_first(fixture_text):
    text = fixture_text("gpu/h100-7-of-8-gpus.xml").replace(
        "<current_power_limit>700.00 W", "<current_power_limit>500.00 W", 1).replace(
        "<current_link_width>16x", "<current_link_width>4x", 1)
    j = judge(text)
    assert j.status is Status.FAIL
    assert j.message.index("fail: found 7 GPU(s)") < j.message.index("warn: GPU 0: power limit")
    assert "fail: GPU 0: PCIe link x4" in j.message
    assert {j.details[k] for k in ("finding1", "finding2", "finding3")} >= \
        {"warn: GPU 0: power limit 500 W, below the default 700 W"}


def test_wrong_model_and_memory_fail(fixture_text):
    hw = Hardware(gpu=GpuSpec(model="NVIDIA H200", count=8, memory_mib=143771,
                              source="a test: the H200 profile's figures"))
    j = judge(fixture_text("gpu/h100-8gpu-healthy.xml"), hw)
    assert "is 'NVIDIA H100 80GB HBM3', expected 'NVIDIA H200'" in j.message
    assert "FB memory 81559 MiB, expected 143771 MiB" in j.message


def test_attached_count_mismatch_fails(fixture_text):
    text = fixture_text("gpu/h100-8gpu-healthy.xml").replace(
        "<attached_gpus>8<", "<attached_gpus>9<")
    j = judge(text)
    assert j.status is Status.FAIL and "counts 9 attached GPU(s) but reports 8" in j.message


def test_legacy_element_names(fixture_text):
    q = parse_nvidia_smi_xml(fixture_text("gpu/a100-driver470-sw-thermal-slowdown.xml"))
    g = q.gpus[0]
    assert g.clock_event_reasons_active == ("sw_power_cap", "sw_thermal_slowdown")
    assert (g.power_limit_w, g.power_draw_w) == (400.0, 395.2)
    assert (g.ecc.volatile_correctable, g.ecc.aggregate_correctable) == (3, 12)
    assert g.ecc.volatile_uncorrectable == 0
    assert (g.retired_pages_single_bit, g.retired_pages_pending) == (0, False)
    j = judge_gpu_health(q, GpuHealthParams(), {}, A100_ONE)
    assert j.status is Status.FAIL
    assert j.message.endswith("fail: GPU 0: clock event reasons active: sw_thermal_slowdown")


def test_na_reads_as_none_and_does_not_fail():
    q = parse_nvidia_smi_xml(
        "<nvidia_smi_log><attached_gpus>1</attached_gpus><gpu id='00000000:07:00.0'>"
        "<product_name>NVIDIA A100-SXM4-80GB</product_name><persistence_mode>Enabled"
        "</persistence_mode><ecc_mode><current_ecc>Enabled</current_ecc></ecc_mode>"
        "<fb_memory_usage><total>[N/A]</total></fb_memory_usage><remapped_rows>N/A"
        "</remapped_rows><temperature><gpu_temp>N/A</gpu_temp></temperature>"
        "<gpu_power_readings><power_draw>N/A</power_draw></gpu_power_readings>"
        f"{IDLE}</gpu></nvidia_smi_log>")
    g = q.gpus[0]
    assert g.fb_memory_total_mib is None and g.remapped_rows_pending is None
    assert g.temperature_gpu_c is None and g.ecc.volatile_uncorrectable is None
    assert q.driver_version is None
    assert judge_gpu_health(q, GpuHealthParams(), {}, A100_ONE).status is Status.PASS


def test_ecc_disabled_fails_unless_not_required():
    xml = ("<nvidia_smi_log><gpu id='0000:07:00.0'><product_name>NVIDIA A100-SXM4-80GB"
           "</product_name><persistence_mode>Enabled</persistence_mode><ecc_mode>"
           f"<current_ecc>Disabled</current_ecc></ecc_mode>{IDLE}</gpu></nvidia_smi_log>")
    q = parse_nvidia_smi_xml(xml)
    assert "ECC mode Disabled" in judge_gpu_health(q, GpuHealthParams(), {}, A100_ONE).message
    j = judge_gpu_health(q, GpuHealthParams(require_ecc=False), {}, A100_ONE)
    assert j.status is Status.PASS


def test_device_errors_before_the_xml_fail():
    q = parse_nvidia_smi_xml(
        "Unable to determine the device handle for GPU 0000:9A:00.0: Unknown Error\n"
        "<nvidia_smi_log><attached_gpus>0</attached_gpus></nvidia_smi_log>")
    assert q.device_errors and q.gpus == ()
    j = judge_gpu_health(q, GpuHealthParams(), {}, A100_ONE)
    assert j.status is Status.FAIL and "Unable to determine the device handle" in j.message


@pytest.mark.parametrize(("text", "match"), [
    ("", "no line starts with '<'"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver\n",
     "no line starts with '<'"),
    ("<html><body>no</body></html>", r"root element is <html>"),
    ("<nvidia_smi_log><gpu id='x'>", "not well-formed"),
    ("<nvidia_smi_log><gpu id='x'><serial>1</serial></gpu></nvidia_smi_log>",
     r"GPU 0 \(x\) has no product name"),
    ("<nvidia_smi_log><gpu id='x'><product_name>A</product_name><fb_memory_usage><total>"
     "lots</total></fb_memory_usage></gpu></nvidia_smi_log>",
     r"fb_memory_usage/total is 'lots', expected a number of MiB"),
    ("<nvidia_smi_log><gpu id='x'><product_name>A</product_name><persistence_mode>Maybe"
     "</persistence_mode></gpu></nvidia_smi_log>", "expected Yes/No"),
    ('<!DOCTYPE x [<!ENTITY a "b">]><nvidia_smi_log/>', "entity declarations"),
])
def test_malformed_xml_names_what_is_wrong(text, match):
    with pytest.raises(ParseError, match=match):
        parse_nvidia_smi_xml(text)


def test_truncated_fixture_is_a_parse_error(fixture_text):
    with pytest.raises(ParseError, match=r"not well-formed at line \d+ .*\(truncated output\?\)"):
        parse_nvidia_smi_xml(fixture_text("gpu/h100-truncated.xml"))


def test_crlf_xml(fixture_text):
    text = fixture_text("gpu/h100-8gpu-healthy.xml").replace("\n", "\r\n")
    assert judge(text).status is Status.PASS


# -- the text form (nvidia-smi -q) ------------------------------------------------------------

def test_text_parser_gives_the_same_record(fixture_text):
    q = parse_nvidia_smi_text(fixture_text("gpu/h100-2gpu-healthy.txt"))
    assert (q.format, q.driver_version, q.attached_gpus, len(q.gpus)) == \
        ("text", "535.183.01", 2, 2)
    g0, g1 = q.gpus
    assert (g0.pci_bus_id, g0.serial, g0.minor_number) == ("00000000:18:00.0", "1650000000000", 0)
    assert (g0.pcie_gen_max, g0.pcie_width_current, g0.fb_memory_total_mib) == (5, 16, 81559)
    assert g0.clock_event_reasons_active == ("gpu_idle",)
    assert g0.retired_pages_pending is None and g0.remapped_rows_pending is False
    assert g1.ecc.aggregate_uncorrectable == 0 and g1.power_limit_w == 700.0
    j = judge_gpu_health(q, GpuHealthParams(), {}, H100_TWO)
    assert j.status is Status.PASS, j.message


def test_text_faults_and_crlf(fixture_text):
    text = fixture_text("gpu/h100-2gpu-healthy.txt")
    bad = text.replace("Pending                           : No", "Pending : Yes", 1)
    bad = bad.replace("HW Slowdown                       : Not Active",
                      "HW Slowdown                       : Active", 1)
    bad = bad.replace("DRAM Uncorrectable            : 0", "DRAM Uncorrectable            : 4",
                      1).replace("\n", "\r\n")
    j = judge_gpu_health(parse_nvidia_smi_text(bad), GpuHealthParams(), {}, H100_TWO)
    assert j.status is Status.FAIL
    for part in ("GPU 0: row remapping pending", "GPU 0: clock event reasons active: hw_slowdown",
                 "GPU 0: 4 uncorrectable ECC error(s) (volatile)"):
        assert part in j.message


def test_text_truncated_inside_a_gpu_is_a_parse_error(fixture_text):
    text = fixture_text("gpu/h100-2gpu-healthy.txt")
    cut = text[: text.index("    Remapped Rows", text.index("GPU 00000000:2A:00.0"))]
    with pytest.raises(ParseError, match=r"GPU 1 of 2 announced \(00000000:2A:00.0\) ends "
                                         "before its 'Processes' section: truncated"):
        parse_nvidia_smi_text(cut)


@pytest.mark.parametrize(("text", "match"), [
    ("", "no 'Attached GPUs' line"),
    ("==============NVSMI LOG==============\n\nTimestamp : x\n", "no 'Attached GPUs' line"),
    ("Attached GPUs : 1\n    Product Name : X\n", "belongs to no GPU"),
])
def test_malformed_text_names_what_is_wrong(text, match):
    with pytest.raises(ParseError, match=match):
        parse_nvidia_smi_text(text)


def test_either_form_is_recognised(fixture_text):
    assert parse_nvidia_smi(fixture_text("gpu/h100-2gpu-healthy.txt")).format == "text"
    assert parse_nvidia_smi(fixture_text("gpu/h100-8gpu-healthy.xml")).format == "xml"


# -- properties ------------------------------------------------------------------------------

@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_any_text_parses_or_raises_parse_error(text):
    for parse in (parse_nvidia_smi_xml, parse_nvidia_smi_text, parse_nvidia_smi):
        with contextlib.suppress(ParseError):
            parse(text)


_TAGS = st.sampled_from(["nvidia_smi_log", "gpu", "product_name", "attached_gpus",
                         "fb_memory_usage", "total", "persistence_mode", "remapped_rows",
                         "remapped_row_pending", "clocks_event_reasons", "ecc_errors",
                         "volatile", "dram_uncorrectable"])


@st.composite
def _xml_trees(draw, depth=0):
    tag = draw(_TAGS)
    if depth > 3 or draw(st.booleans()):
        body = draw(st.sampled_from(["", "N/A", "0", "Yes", "12 MiB", "x", "Active", "-1"]))
    else:
        body = "".join(draw(st.lists(_xml_trees(depth + 1), max_size=4)))
    return f"<{tag}>{body}</{tag}>"


@settings(max_examples=200)
@given(_xml_trees())
def test_any_xml_shape_parses_or_raises_parse_error(xml):
    with contextlib.suppress(ParseError):
        parse_nvidia_smi_xml(xml)


@pytest.fixture(scope="module")
def healthy_xml():
    from pathlib import Path
    return (Path(__file__).parents[3] / "fixtures/gpu/h100-8gpu-healthy.xml").read_text()


@pytest.fixture(scope="module")
def healthy_txt():
    from pathlib import Path
    return (Path(__file__).parents[3] / "fixtures/gpu/h100-2gpu-healthy.txt").read_text()


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_xml_truncated_before_the_root_closes_is_a_parse_error(healthy_xml, data):
    end = healthy_xml.rindex("</nvidia_smi_log>") + len("</nvidia_smi_log>") - 1
    cut = data.draw(st.integers(0, end))
    with pytest.raises(ParseError):
        parse_nvidia_smi_xml(healthy_xml[:cut])


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mangled_text_never_passes_with_missing_data(healthy_txt, data):
    """Cut anywhere, or drop lines: a parse error, or a judgement that does not pass,
    unless every line the judge reads survived."""
    lines = healthy_txt.splitlines(keepends=True)
    if data.draw(st.booleans()):
        mangled = healthy_txt[: data.draw(st.integers(0, len(healthy_txt) - 1))]
    else:
        drop = set(data.draw(st.lists(st.integers(0, len(lines) - 1), min_size=1, max_size=6)))
        mangled = "".join(line for i, line in enumerate(lines) if i not in drop)
    try:
        q = parse_nvidia_smi_text(mangled)
    except ParseError:
        return
    j = judge_gpu_health(q, GpuHealthParams(), {}, H100_TWO)
    if j.status is Status.PASS:
        # passing needs both GPUs with the model, memory and processes line intact
        assert len(q.gpus) == 2
        assert all(g.product_name == "NVIDIA H100 80GB HBM3" for g in q.gpus)
        assert all(g.fb_memory_total_mib == 81559 for g in q.gpus)
        assert len(re.findall(r"(?m)^    Processes", mangled)) == 2


# ------------------------------------------------------------ degraded evidence (issue 11)
# Healthy sources, hand-written from the tool's published layouts (headers there):
# tests/fixtures/gpu/h100-8gpu-healthy.xml and h100-2gpu-healthy.txt.

FIX = Path(__file__).parents[3] / "fixtures"


def _read(path: str) -> str:
    text = (FIX / path).read_text(encoding="utf-8")
    if "\n# ---\n" in text:
        return text.partition("\n# ---\n")[2]
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


XML = _read("gpu/h100-8gpu-healthy.xml")
TEXT = _read("gpu/h100-2gpu-healthy.txt")
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


def xml_outcome(text: str) -> Status:
    return outcome(parse_nvidia_smi_xml,
                   lambda r: judge_gpu_health(r, GpuHealthParams(), {}, H100), text)


def text_outcome(text: str) -> Status:
    return outcome(parse_nvidia_smi_text,
                   lambda r: judge_gpu_health(r, GpuHealthParams(), {}, H100_TWO), text)


class TestDegradedNvidiaSmi:
    """Issue 11, gpu.health: degraded nvidia-smi XML and text never pass and never raise anything
    but ParseError (degrade_helpers says how they are degraded)."""

    def test_the_healthy_sources_pass(self):
        assert xml_outcome(XML) is Status.PASS
        assert text_outcome(TEXT) is Status.PASS

    @settings(max_examples=120, deadline=None)
    @given(degraded(XML, numbers=rf"<(?:{XML_TAGS})>(-?[0-9.]+)", lines=XML_LINES,
                    end=len(XML.rstrip())))
    def test_degraded_nvidia_smi_xml_never_passes(self, text):
        assert xml_outcome(text) in BAD

    @settings(max_examples=120, deadline=None)
    @given(degraded(TEXT, numbers=rf"^\s*(?:{TEXT_LABELS})\s*: (-?[0-9.]+)", lines=TEXT_LINES,
                    end=TEXT.rindex("Processes") + len("Processes")))
    def test_degraded_nvidia_smi_text_never_passes(self, text):
        assert text_outcome(text) in BAD
