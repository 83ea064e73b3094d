"""Issue 14, GPU family: valid outputs of real machines that were refused or misjudged.

* ``dcgmi diag`` text of DCGM 3.3 and 4.x: the ``Successfully ran diagnostic for group.``
  line, the Metadata section, the ``+-----  Hardware  ---+`` category rows, DCGM 3.3's
  ``Pass - All`` and DCGM 4's per-GPU ``GPU3: Fail`` / ``Warning: GPU3`` rows;
* ``nvidia-smi nvlink -s`` printing ``NVML: Unable to retrieve NVLink information as all
  links are inActive`` for a GPU: a fault of that GPU, not unparseable output;
* ``nvidia-smi -q -d PERFORMANCE`` (a complete but filtered report): named as filtered,
  with the sections the health check lacks, not as truncated output.

Fixtures (tests/fixtures/topology, tests/fixtures/gpu) were written from DCGM's
dcgmi/Diag.cpp and nvidia-smi(1); their headers say so. The tables the property tests draw
are built here by the same layout rules (a 25-character name cell, a 46-character result
cell, messages cut every 45 characters).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.gpu.health import GpuHealthParams, judge_gpu_health
from rackgate.checks.gpu.topology import DcgmDiagParams, NvLinkParams, judge_dcgm, judge_nvlink
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.dcgm import parse_dcgm_diag
from rackgate.parsers.nvidia_smi import parse_nvidia_smi, parse_nvidia_smi_text
from rackgate.parsers.nvlink import parse_nvlink_status
from rackgate.profile import GpuSpec, Hardware

FIX = Path(__file__).parents[1] / "fixtures"
SRC = "a public document for the test"


def read(rel: str) -> str:
    """A fixture's tool output: after its '# ---' line, else without its '#' lines."""
    text = (FIX / rel).read_text(encoding="utf-8")
    if "\n# ---\n" in text:
        return text.partition("\n# ---\n")[2]
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


def hw(count: int = 8, nvlink: bool = False) -> Hardware:
    """``count`` H100; with ``nvlink``, 8 on NVSwitch with 18 links of 25 GB/s each way."""
    gpu = {"model": "NVIDIA H100 80GB HBM3", "count": count, "source": SRC}
    if nvlink:
        gpu |= {"nvlink_generation": 4, "nvlinks_per_gpu": 18, "nvlink_gb_s_per_gpu": 900,
                "nvlink_topology": {"kind": "nvswitch", "basis": SRC}}
    return Hardware(gpu=GpuSpec.model_validate(gpu))


def dcgm(text: str, count: int = 8, level: int = 2):
    d = parse_dcgm_diag(text)
    return d, judge_dcgm(d, DcgmDiagParams.model_validate({"level": level}), {}, hw(count))


def status_of(text: str, count: int = 8) -> Status:
    try:
        return dcgm(text, count)[1].status
    except ParseError:
        return Status.ERROR


# --- dcgmi diag text: DCGM 3.3 and 4.x ------------------------------------------------------

V33_OK = read("topology/dcgm-diag-r2-v3.3-text-healthy.txt")
V33_FAIL = read("topology/dcgm-diag-r2-v3.3-text-gpu3-memory-fail.txt")
V4_OK = read("topology/dcgm-diag-r2-v4-text-healthy.txt")
V4_FAIL = read("topology/dcgm-diag-r2-v4-text-gpu3-memory-fail.txt")
WHY = "Found 2 uncorrectable memory errors on GPU 3 during the memory test"


def test_dcgm_3_3_text_with_metadata_and_pass_all_rows_passes():
    d, j = dcgm(V33_OK)
    assert (d.form, d.version, d.complete) == ("text", "3.3.1", True)
    memory = [r for r in d.results if r.test == "GPU Memory"]
    assert [(r.category, r.gpus, r.status) for r in memory] == \
        [("Hardware", tuple(range(8)), "pass")]
    assert {r.category for r in d.results} == {"Deployment", "Integration", "Hardware"}
    assert j.status is Status.PASS, j.message


def test_dcgm_3_3_text_one_gpu_failing_fails_naming_gpu_and_test():
    d, j = dcgm(V33_FAIL)
    failed = [r for r in d.results if r.status == "fail"]
    assert [(r.test, r.gpus) for r in failed] == [("GPU Memory", (3,))]
    assert failed[0].warnings[0].startswith(WHY)
    assert j.status is Status.FAIL
    assert j.message.startswith(f"GPU Memory fails on GPU 3: {WHY}"), j.message


def test_dcgm_4_text_with_per_gpu_rows_passes():
    d, j = dcgm(V4_OK)
    assert (d.form, d.version, d.complete) == ("text", "4.2.3", True)
    memory = [r for r in d.results if r.test == "memory"]
    assert [r.gpus for r in memory] == [(i,) for i in range(8)]
    assert [r.category for r in d.results if r.test == "pcie"] == ["Integration"] * 8
    assert j.status is Status.PASS, j.message


def test_dcgm_4_text_one_gpu_failing_fails_naming_gpu_and_test():
    d, j = dcgm(V4_FAIL)
    failed = [r for r in d.results if r.status == "fail"]
    assert [(r.test, r.gpus) for r in failed] == [("memory", (3,))]
    assert failed[0].warnings == (f"{WHY}. Drain the GPU and reset it or reboot the node.",)
    assert j.status is Status.FAIL
    assert j.message == f"memory fails on GPU 3: {WHY}. Drain the GPU and reset it or reboot " \
                        "the node.", j.message


# A builder for both layouts, to draw GPU counts, statuses and cuts from.
BORDER = "+---------------------------+------------------------------------------------+"
HEAD = [BORDER, "| Diagnostic                | Result                                         |",
        "+===========================+================================================+"]


def _row(name: str, info: str) -> str:
    return f"| {name:<25} | {info:<46} |"


def _wrapped(label: str, msg: str) -> list[str]:
    return [_row(label if i == 0 else "", msg[i:i + 45]) for i in range(0, len(msg), 45)]


def _section(name: str, bar: str) -> str:
    return f"{bar}-----  {name}  ".ljust(28, "-") + "+" + "-" * 48 + bar


def v4_table(count: int, faults: dict[tuple[str, int], str]) -> str:
    """DCGM 4 layout: global row, then 'GPUn: status' rows; faults[(test, gpu)] = status."""
    lines = ["Successfully ran diagnostic for group.", *HEAD, _section("Metadata", "|"),
             _row("DCGM Version", "4.1.1"), _row("GPU Device IDs Detected",
                                                 ", ".join(["2330"] * count))]
    for category, test, bar in (("Deployment", "software", "|"), ("Hardware", "memory", "+"),
                                ("Integration", "pcie", "+")):
        per_gpu = [faults.get((test, g), "Pass") for g in range(count)]
        overall = next(s for s in ("Fail", "Warn", "Pass", "Skip") if s in per_gpu)
        lines += [_section(category, bar), _row(test, overall)]
        for g, status in enumerate(per_gpu):
            lines.append(_row("", f"GPU{g}: {status}"))
            if status != "Pass":
                lines += _wrapped(f"Warning: GPU{g}", f"GPU {g} {test} check {status.lower()}ed "
                                                       "with an invented reason for the test")
    return "\n".join([*lines, BORDER]) + "\n"


def v33_table(count: int, faults: dict[tuple[str, int], str]) -> str:
    """DCGM 3.3 layout: 'Pass - All' or one row per status with its GPU list."""
    lines = ["Successfully ran diagnostic for group.", *HEAD, _section("Metadata", "|"),
             _row("DCGM Version", "3.3.8"), _row("Driver Version Detected", "535.183.01"),
             _row("GPU Device IDs Detected", ",".join(["2330"] * count)),
             _section("Deployment", "|"), _row("Denylist", "Pass")]
    for category, test in (("Integration", "PCIe"), ("Hardware", "GPU Memory")):
        lines.append(_section(category, "+"))
        per_gpu = [faults.get((test, g), "Pass") for g in range(count)]
        if set(per_gpu) == {"Pass"}:
            lines.append(_row(test, "Pass - All"))
            continue
        first = True
        for status in ("Pass", "Fail", "Warn", "Skip"):
            gpus = [g for g, s in enumerate(per_gpu) if s == status]
            if gpus:
                word = "GPUs" if len(gpus) > 1 else "GPU"
                lines.append(_row(test if first else "",
                                  f"{status} - {word}: {', '.join(map(str, gpus))}   "))
                first = False
        for g, status in enumerate(per_gpu):
            if status != "Pass":
                lines += _wrapped("Warning", f"GPU {g} {test} reported an invented {status} "
                                             "reason for this test")
    return "\n".join([*lines, _section("Stress", "+"), BORDER]) + "\n"


TESTS = {v4_table: ("software", "memory", "pcie"), v33_table: ("PCIe", "GPU Memory")}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([v4_table, v33_table]), st.integers(min_value=1, max_value=8))
def test_dcgm_text_any_healthy_table_passes(build, count):
    d, j = dcgm(build(count, {}), count)
    assert j.status is Status.PASS, j.message
    assert {g for r in d.results for g in r.gpus} == set(range(count))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([v4_table, v33_table]), st.integers(min_value=1, max_value=8),
       st.data())
def test_dcgm_text_any_failing_or_warning_gpu_is_named(build, count, data):
    test = data.draw(st.sampled_from(TESTS[build]))
    gpu = data.draw(st.integers(min_value=0, max_value=count - 1))
    status = data.draw(st.sampled_from(["Fail", "Warn"]))
    j = dcgm(build(count, {(test, gpu): status}), count)[1]
    assert j.status is (Status.FAIL if status == "Fail" else Status.WARN), j.message
    assert f"{test} {status.lower()}s on GPU {gpu}" in j.message, j.message


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=8), st.data())
def test_dcgm_4_text_skipped_gpu_is_no_pass_for_it(count, data):
    gpu = data.draw(st.integers(min_value=0, max_value=count - 1))
    d, j = dcgm(v4_table(count, {("memory", gpu): "Skip"}), count)
    skipped = [r for r in d.results if r.status == "skip"]
    assert [(r.test, r.gpus) for r in skipped] == [("memory", (gpu,))]
    assert j.measured == 3 * count - 1  # the skipped result is not counted as a pass
    everything = {(t, g): "Skip" for t in TESTS[v4_table] for g in range(count)}
    assert dcgm(v4_table(count, everything), count)[1].status is Status.ERROR


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([V4_OK, V33_OK]), st.data())
def test_dcgm_text_cut_before_its_last_border_never_passes(text, data):
    end = text.rstrip().rindex("\n")  # the closing border is the last line
    cut = data.draw(st.integers(min_value=0, max_value=end - 1))
    assert status_of(text[:cut]) is not Status.PASS


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([V4_OK, V33_OK]).flatmap(
    lambda text: degraded(text, numbers=None, lines=r"Pass|-----  [A-Z]|Device IDs",
                          end=len(text.rstrip()))))
def test_dcgm_text_duplicated_or_cut_never_passes(text):
    assert outcome(parse_dcgm_diag, lambda d: judge_dcgm(d, DcgmDiagParams(), {}, hw()),
                   text) in BAD


def test_dcgm_4_text_gpu_missing_from_a_test_is_noticed():
    text = V4_OK.replace(_row("", "GPU7: Pass") + "\n" + _section("Integration", "+"),
                         _section("Integration", "+"))
    assert text != V4_OK
    j = dcgm(text)[1]
    assert j.status is Status.ERROR and "memory has no result for GPU 7" in j.message


def test_dcgm_3_3_pass_all_counts_the_detected_gpus():
    """'Pass - All' means every GPU DCGM detected: 7 device IDs are 7 GPUs, not 8."""
    text = V33_OK.replace(_row("GPU Device IDs Detected", ",".join(["2330"] * 8)),
                          _row("GPU Device IDs Detected", ",".join(["2330"] * 7)))
    assert text != V33_OK
    j = dcgm(text)[1]
    assert j.status is Status.FAIL and "no result for [7]" in j.message


@pytest.mark.parametrize("text, match", [
    ("Successfully ran diagnostic for group.\nSuccessfully ran diagnostic for group.\n"
     + "\n".join(HEAD), "not a '| name | result |' row"),
    ("\n".join([*HEAD, _section("Metadata", "|"), _row("", "3.3.1")]), "Metadata row"),
    ("\n".join([*HEAD, _section("Hardware", "+"), _row("memory", "Pass"),
                _row("", "GPU0: Maybe")]), "GPU0: Maybe"),
    ("\n".join([*HEAD, _section("Hardware", "+"), _row("memory", "Fail"),
                _row("", "GPU0: Pass"), _row("Warning: GPU2", "x")]), "no GPU2 result"),
])
def test_dcgm_text_malformed_names_what_is_wrong(text, match):
    with pytest.raises(ParseError, match=match):
        parse_dcgm_diag(text)


# --- nvidia-smi nvlink -s: a GPU with every link down -----------------------------------------

NVL_DOWN = read("topology/nvlink-gpu6-all-links-inactive.txt")
NVL_OK = read("topology/nvlink-h100-18links-healthy.txt")
NVML_ALL_DOWN = "NVML: Unable to retrieve NVLink information as all links are inActive"


def test_nvlink_all_links_inactive_is_a_fault_of_that_gpu():
    s = parse_nvlink_status(NVL_DOWN)
    assert [g.index for g in s.gpus] == list(range(8))
    assert s.gpus[6].links == () and s.gpus[6].all_links_inactive
    j = judge_nvlink(s, NvLinkParams(), {}, hw(nvlink=True))
    assert j.status is Status.FAIL
    assert j.message == "GPU 6: no active NVLink (all links inactive)", j.message
    assert j.measured == 7 * 18


def _all_down(gpus: set[int]) -> str:
    out, skip = [], False
    for line in NVL_OK.splitlines():
        if line.startswith("GPU "):
            index = int(line.split()[1].rstrip(":"))
            skip = index in gpus
            out.append(line)
            if skip:
                out.append(NVML_ALL_DOWN)
        elif not skip:
            out.append(line)
    return "\n".join(out) + "\n"


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=7), min_size=1),
       st.sampled_from([NVML_ALL_DOWN, NVML_ALL_DOWN.lower(), "\t" + NVML_ALL_DOWN]))
def test_nvlink_any_gpu_with_all_links_down_fails_naming_it(gpus, spelling):
    text = _all_down(gpus).replace(NVML_ALL_DOWN, spelling)
    j = judge_nvlink(parse_nvlink_status(text), NvLinkParams(), {}, hw(nvlink=True))
    assert j.status is Status.FAIL
    for g in gpus:
        assert f"GPU {g}: no active NVLink (all links inactive)" in j.message
    assert "lists 0 links" not in j.message


@pytest.mark.parametrize("text, match", [
    (NVML_ALL_DOWN + "\n", "before any 'GPU n:'"),
    ("GPU 0: X (UUID: GPU-1)\n\t Link 0: 25 GB/s\n" + NVML_ALL_DOWN + "\n", "lists links"),
    ("GPU 0: X (UUID: GPU-1)\n" + NVML_ALL_DOWN + "\n\t Link 0: 25 GB/s\n", "all links are"),
    ("GPU 0: X (UUID: GPU-1)\n" + NVML_ALL_DOWN + "\n" + NVML_ALL_DOWN + "\n", "twice"),
])
def test_nvlink_all_links_inactive_out_of_place_is_refused(text, match):
    with pytest.raises(ParseError, match=match):
        parse_nvlink_status(text)


# --- nvidia-smi -q -d <SECTIONS>: a complete but filtered report -------------------------------

FILTERED = ["gpu/h100-2gpu-filtered-d-performance.txt",
            "gpu/h100-2gpu-filtered-d-performance-clock.txt",
            "gpu/h100-2gpu-filtered-d-performance.xml"]


@pytest.mark.parametrize("name", FILTERED)
def test_nvidia_smi_filtered_report_names_the_missing_sections(name):
    with pytest.raises(ParseError) as exc:
        parse_nvidia_smi(read(name))
    message = str(exc.value)
    assert "truncated" not in message, message
    assert "-d" in message and "full report" in message, message
    for section in ("Product Name", "PCI", "ECC Errors", "Processes"):
        assert f"'{section}'" in message, message
    assert "Clocks Event Reasons" in message  # what it does show
    assert "'Clocks Event Reasons'," not in message.split("shows")[0]  # ... is not missing


def test_nvidia_smi_filtered_report_cut_short_still_says_truncated():
    with pytest.raises(ParseError, match="truncated"):
        parse_nvidia_smi_text(read("gpu/h100-2gpu-filtered-d-performance-truncated.txt"))


FULL = read("gpu/h100-2gpu-healthy.txt")


# each GPU block: from the end of its 'GPU <bus id>' line to the start of its 'Processes'
BLOCKS = [(FULL.index("\n", m + 1), FULL.index("Processes", m))
          for m in (i for i in range(len(FULL)) if FULL.startswith("\nGPU 0000", i))]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(BLOCKS), st.data())
def test_nvidia_smi_full_report_cut_inside_a_gpu_says_truncated(block, data):
    cut = data.draw(st.integers(min_value=block[0], max_value=block[1] - 1))
    with pytest.raises(ParseError, match="truncated"):
        parse_nvidia_smi_text(FULL[:cut])


def test_nvidia_smi_full_text_report_still_passes():
    q = parse_nvidia_smi_text(FULL)
    hardware = Hardware(gpu=GpuSpec(model="NVIDIA H100 80GB HBM3", count=2, memory_mib=81559,
                                    source=SRC))
    assert judge_gpu_health(q, GpuHealthParams(), {}, hardware).status is Status.PASS
