"""Issue 29, item t5: GPU copy bandwidth from NVIDIA's nvbandwidth (checks/gpu/nvbandwidth.py,
parsers/nvbandwidth*.py), judged per cell against per-model floors in the shipped profiles.

Fixtures: tests/fixtures/nvbandwidth (written from nvbandwidth's printing code, each with a
header or SOURCES.md saying so). The checks are reached through the registry and the shipped
profiles, as a site's run reaches them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings

from rackgate.checks import REGISTRY, load_profile
from rackgate.model import Judgement, Status
from rackgate.parsers import ParseError
from rackgate.placement.evidence import judge_evidence
from rackgate.profile import GpuSpec, Hardware, Profile
from rackgate.store.evidence import Evidence

FIX = Path(__file__).parents[3] / "fixtures" / "nvbandwidth"
H2D, D2H, D2D = ("nvbandwidth.host_to_device", "nvbandwidth.device_to_host",
                 "nvbandwidth.device_to_device")


def read(name: str) -> str:
    text = (FIX / name).read_text(encoding="utf-8")
    return text.partition("\n# ---\n")[2] if "\n# ---\n" in text else text


def site(name: str) -> Profile:
    """Shipped profile ``name`` as a site that built nvbandwidth into its node image runs
    it: the three checks enabled (they ship disabled: no role installs the tool)."""
    return load_profile(name).with_overrides(
        {"checks": {c: {"enabled": True} for c in (H2D, D2H, D2D)}},
        "a site whose node image has nvbandwidth")


def check(name: str) -> Any:
    assert name in REGISTRY, f"no check {name} in the registry"
    return REGISTRY[name]


def judged(name: str, text: str, profile: Profile | str = "dgx-h100",
           **params: Any) -> Judgement:
    """``text`` parsed and judged by check ``name`` as ``profile`` configures it, with
    ``params`` over the profile's (json_output False for the text fixtures)."""
    c = check(name)
    p = site(profile) if isinstance(profile, str) else profile
    section = p.check(name)
    assert section is not None and section.enabled, f"{p.name} does not enable {name}"
    model = c.params_model.model_validate({**section.params, **params})
    return c.judge(c.parse(text), model, section.thresholds, p.model.hardware)


def text_judged(name: str, fixture: str, profile: Profile | str = "dgx-h100") -> Judgement:
    return judged(name, read(fixture), profile, json_output=False)


# ---- healthy captures pass with the profile that says what the machine is ----

def test_truth3_t5_h2d_and_d2h_healthy_h100_pass():
    h2d = text_judged(H2D, "h2d-8xh100-v0.8-healthy.txt")
    d2h = text_judged(D2H, "d2h-8xh100-v0.8-healthy.txt")
    assert (h2d.status, d2h.status) == (Status.PASS, Status.PASS), (h2d.message, d2h.message)
    assert h2d.unit == "GB/s" and 54 < h2d.measured < 56 and h2d.better == "higher"
    assert h2d.expected == ">= 40.95 GB/s (0.65 x 63 GB/s)"
    assert h2d.details["nvbandwidth_version"] == "v0.8"  # the version line is recorded
    assert h2d.details["driver_version"] == "550.54.15"


def test_truth3_t5_d2d_healthy_h100_text_and_json_pass():
    text = text_judged(D2D, "d2d-8xh100-v0.8-read-write-healthy.txt")
    js = judged(D2D, read("d2d-8xh100-v0.8-read-write-healthy.json"))
    for j in (text, js):
        assert j.status is Status.PASS, j.message
        assert 388 < j.measured < 393 and "of 112 copies" in j.message  # 2 x 8 x 7 cells
    assert js.details["device_to_device_memcpy_write_ce_sum_gb_s"] > 21000
    assert judged(H2D, read("h2d-8xh100-v0.8-healthy.json")).status is Status.PASS


def test_truth3_t5_v04_layout_passes_with_a_profile_for_its_machine():
    """nvbandwidth 0.4's layout (NOTE at the top, unpadded labels) on two A100 PCIe cards in
    Gen4 x16 slots: passes with dgx-a100's host floors and a GPU block that says what the
    machine is; the same capture against dgx-a100 as shipped (8 GPUs) fails."""
    two = site("dgx-a100").with_overrides({"hardware": {"gpu": {
        "model": "NVIDIA A100 80GB PCIe", "count": 2, "nvlink_generation": None,
        "nvlinks_per_gpu": None, "nvlink_gb_s_per_gpu": None,
        "nvlink_topology": {"kind": "none", "basis": "two PCIe cards without a bridge"}}}},
        "a test site with two A100 PCIe cards")
    good = text_judged(H2D, "h2d-2xa100-pcie-v0.4-healthy.txt", two)
    assert good.status is Status.PASS, good.message
    assert good.details["nvbandwidth_version"] == "v0.4"
    shipped = text_judged(H2D, "h2d-2xa100-pcie-v0.4-healthy.txt", "dgx-a100")
    assert shipped.status is Status.FAIL and "2 GPU(s), the profile expects 8" in shipped.message


# ---- degraded captures of the same kind fail, naming the GPU or pair ----

def test_truth3_t5_h2d_gpu_at_x8_fails_naming_it():
    j = text_judged(H2D, "h2d-8xh100-gpu5-x8-degraded.txt")
    assert j.status is Status.FAIL and j.measured == 27.41
    assert "host_to_device_memcpy_ce GPU 5 27.41 GB/s misses >= 40.95 GB/s" in j.message


def test_truth3_t5_d2d_pair_without_peer_access_fails_naming_both_ways():
    j = text_judged(D2D, "d2d-8xh100-gpu2-gpu3-no-peer-access.txt")
    assert j.status is Status.FAIL
    for pair in ("GPU 2 -> GPU 3", "GPU 3 -> GPU 2", "GPU 2 <- GPU 3"):
        assert f"{pair}: N/A, no peer access" in j.message


def test_truth3_t5_d2d_gpu_on_half_its_links_fails():
    j = text_judged(D2D, "d2d-8xh100-gpu6-half-links-degraded.txt")
    assert j.status is Status.FAIL and j.measured < 200
    assert "GPU 6" in j.message and j.details["finding1"].startswith("fail: ")


def test_truth3_t5_waived_testcases_fail():
    j = text_judged(D2D, "d2d-8xh100-v0.8-waived.txt")
    assert j.status is Status.FAIL
    assert "waived device_to_device_memcpy_read_ce" in j.message
    assert "waived device_to_device_memcpy_write_ce" in j.message


def test_truth3_t5_a_testcase_the_tool_reports_as_error_is_an_error():
    j = judged(D2D, read("d2d-8xh100-v0.8-write-error.json"))
    assert j.status is Status.ERROR
    assert "reported an error for device_to_device_memcpy_write_ce" in j.message


def test_truth3_t5_a_missing_gpu_fails():
    j = text_judged(H2D, "h2d-7xh100-gpu7-missing.txt")
    assert j.status is Status.FAIL
    assert "lists 7 GPU(s), the profile expects 8" in j.message
    assert "a 1 x 7 matrix, 1 x 8 expected" in j.message


# ---- implausible figures and evidence that does not match the command: error ----

def test_truth3_t5_figure_above_the_physical_link_is_an_error_not_a_pass():
    j = text_judged(H2D, "h2d-8xh100-gpu2-above-link.txt")
    assert j.status is Status.ERROR
    assert "GPU 2 99.87 GB/s is above the 63.02 GB/s the profile's link carries (PCIe Gen5 " \
        "x16): implausible evidence" in j.message


def test_truth3_t5_either_the_threshold_limit_or_the_hardware_link_bounds_a_figure():
    """Without the hardware block's PCIe link the threshold's physical limit bounds the
    figures; an override that drops the limit (with its basis) still cannot let a figure
    above what the profile's PCIe Gen5 x16 link carries pass."""
    no_link = site("dgx-h100").with_overrides(
        {"hardware": {"gpu": {"pcie": None}}}, "a test without the GPU's PCIe block")
    j = text_judged(H2D, "h2d-8xh100-gpu2-above-link.txt", no_link)
    assert j.status is Status.ERROR
    assert "GPU 2 99.87 GB/s is above the 63 GB/s physical limit" in j.message
    loose = site("dgx-h100").with_overrides({"checks": {H2D: {"thresholds": {
        "copy_bw": {"limit": False, "basis": "a site's floor without a physical ceiling, "
                                             "for a test: ref 63 GB/s x 0.65"}}}}}, "test")
    j = text_judged(H2D, "h2d-8xh100-gpu2-above-link.txt", loose)
    assert j.status is Status.ERROR
    assert "above the 63.02 GB/s the profile's link carries (PCIe Gen5 x16)" in j.message


@pytest.mark.parametrize(("check_name", "fixture", "why"), [
    (H2D, "d2h-8xh100-v0.8-healthy.txt",
     "testcase device_to_host_memcpy_ce is in the evidence, the command did not ask for it"),
    (D2H, "h2d-8xh100-v0.8-healthy.txt",
     "no result for testcase device_to_host_memcpy_ce, which the command asked for"),
    (H2D, "d2d-8xh100-v0.8-read-write-healthy.txt", "did not ask for it"),
])
def test_truth3_t5_testcases_other_than_asked_are_an_error(check_name, fixture, why):
    j = text_judged(check_name, fixture)
    assert j.status is Status.ERROR and why in j.message, j.message


def test_truth3_t5_a_testcase_asked_for_and_missing_or_repeated_is_an_error():
    text = read("d2d-8xh100-v0.8-read-write-healthy.txt")
    only_read = text[:text.index("Running device_to_device_memcpy_write_ce.")]
    j = judged(D2D, only_read, json_output=False)
    assert j.status is Status.ERROR
    assert "no result for testcase device_to_device_memcpy_write_ce" in j.message
    reordered = judged(D2D, text, json_output=False, testcases=[
        "device_to_device_memcpy_write_ce", "device_to_device_memcpy_read_ce"])
    assert reordered.status is Status.ERROR and "in the order" in reordered.message
    h2d = read("h2d-8xh100-v0.8-healthy.txt")
    block = h2d[h2d.index("Running"):h2d.index("NOTE:")]
    twice = judged(H2D, h2d.replace(block, block + block), json_output=False)
    assert twice.status is Status.ERROR and "listed 2 times" in twice.message


def test_truth3_t5_output_in_the_other_format_than_asked_is_an_error():
    j = judged(H2D, read("h2d-8xh100-v0.8-healthy.txt"))  # the profile asks for --json
    assert j.status is Status.ERROR and "text output, but the command asked for json" in j.message
    j = judged(H2D, read("h2d-8xh100-v0.8-healthy.json"), json_output=False)
    assert j.status is Status.ERROR


def test_truth3_t5_the_diagonal_is_na_by_design_and_only_there():
    c = check(D2D)
    run = c.parse(read("d2d-8xh100-v0.8-read-write-healthy.json"))
    case = run.testcases[0]
    m = case.matrices[0]
    rows = [list(r) for r in m.rows]
    rows[4][4] = 391.0
    bad = dataclasses.replace(m, rows=tuple(tuple(r) for r in rows))
    run = dataclasses.replace(run, testcases=(dataclasses.replace(case, matrices=(bad,)),
                                              *run.testcases[1:]))
    p = site("dgx-h100")
    j = c.judge(run, c.params_model.model_validate(p.check(D2D).params),
                p.check(D2D).thresholds, p.model.hardware)
    assert j.status is Status.ERROR and "GPU 4 -> GPU 4: a figure on the diagonal" in j.message


# ---- the reader: every line accounted for ----

@pytest.mark.parametrize(("edit", "match"), [
    (lambda t: t.replace("SUM host_to_device_memcpy_ce ", "SUM host_to_device_memcpy_ce 1"),
     "not the sum of its"),
    (lambda t: t.replace("Device 3: ", "Device 3: x\nDevice 3: "), "Device 3 where Device 4"),
    (lambda t: t.replace("nvbandwidth Version: v0.8\n", ""), "nvbandwidth Version"),
    (lambda t: t.replace("Running host_to_device_memcpy_ce.\n",
                         "Running host_to_device_memcpy_ce.\nsomething else\n"),
     "no line nvbandwidth prints"),
    (lambda t: t[:t.index("SUM ")], "ends before its SUM line"),
    (lambda t: t.replace("55.", "55.0", 1), "where a row or 'SUM host_to_device_memcpy_ce"),
])
def test_truth3_t5_the_reader_refuses_what_nvbandwidth_does_not_print(edit, match):
    with pytest.raises(ParseError, match=match):
        check(H2D).parse(edit(read("h2d-8xh100-v0.8-healthy.txt")))


def test_truth3_t5_a_node_without_nvbandwidth_is_an_error():
    ev = Evidence(host="n1", check=H2D, argv=("nvbandwidth", "--bufferSize", "512"),
                  outcome="completed", rc=127, started=None, ended=None, duration_s=0.1,
                  stderr="nvbandwidth: command not found", message="",
                  stdout_file="evidence/n1/x.out", stdout_sha256="0" * 64, stdout_bytes=0)
    r = judge_evidence(check(H2D), ev, "", site("dgx-h100"))
    assert r.status is Status.ERROR and "cannot execute nvbandwidth" in r.message


def test_truth3_t5_the_command_is_an_argv_of_the_profiles_testcases():
    c, p = check(D2D), load_profile("dgx-h100")
    params = c.params_model.model_validate(p.check(D2D).params)
    assert c.command(params, {}) == [
        "nvbandwidth", "--bufferSize", "512", "--testSamples", "3", "--json", "--testcase",
        "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce"]
    h2d = check(H2D)
    assert h2d.command(h2d.params_model.model_validate({"program": "/opt/nvbw/nvbandwidth"}),
                       {})[-2:] == ["--testcase", "host_to_device_memcpy_ce"]
    for bad in ({"program": "nvbandwidth; reboot"}, {"testcases": ["host_to_device_memcpy_ce"]},
                {"testcases": ["device_to_device_memcpy_read_ce"] * 2}):
        with pytest.raises(ValueError):
            c.params_model.model_validate(bad)


@pytest.mark.parametrize("name", ["dgx-h100", "hgx-h200", "dgx-a100"])
def test_truth3_t5_gpu_profiles_state_the_floors_with_their_basis(name):
    """Shipped disabled (no role installs nvbandwidth: enabled, a node without it would be an
    error and rejected), with the floors and their basis a site gets by enabling them."""
    shipped, enabled = load_profile(name), site(name)
    link = {"dgx-a100": (31.5, 300.0)}.get(name, (63.0, 450.0))
    for check_name, ref in ((H2D, link[0]), (D2H, link[0]), (D2D, link[1])):
        section = shipped.check(check_name)
        assert section is not None and not section.enabled, (name, check_name)
        assert enabled.check(check_name).enabled
        t = section.thresholds["copy_bw"]
        assert (t.ref, t.limit, t.unit) == (ref, True, "GB/s")
        assert ("datasheet" in t.basis) is (check_name != D2D)
        assert "x 25 GB/s" in t.basis or "x 16 lanes x" in t.basis
    assert "nvbandwidth is published as source only" in \
        (Path(shipped.source)).read_text(encoding="utf-8")


def test_truth3_t5_d2d_does_not_apply_where_pairs_use_different_links():
    assert check(D2D).applies(load_profile("dgx-a100").model.hardware) is None
    bridged = Hardware(gpu=GpuSpec(
        model="NVIDIA RTX A6000", count=4, nvlink_generation=3, nvlinks_per_gpu=4,
        nvlink_topology={"kind": "pairs", "pairs": [[0, 1, 4], [2, 3, 4]],
                         "basis": "two bridged pairs, for a test"},
        source="a test: four RTX A6000 in two NVLink-bridged pairs"))
    assert "cannot share one device-to-device floor" in check(D2D).applies(bridged)
    assert check(H2D).applies(bridged) is None
    assert check(H2D).applies(Hardware()) == "the profile expects no GPU"


# ---- degraded evidence never passes (issue 11's property, for the new reader) ----

H2D_TEXT = read("h2d-8xh100-v0.8-healthy.txt")
D2D_TEXT = read("d2d-8xh100-v0.8-read-write-healthy.txt")
D2D_END = D2D_TEXT.rindex("SUM ") + len(D2D_TEXT[D2D_TEXT.rindex("SUM "):].split("\n")[0])
H2D_END = H2D_TEXT.rindex("SUM ") + len(H2D_TEXT[H2D_TEXT.rindex("SUM "):].split("\n")[0])
ROWS = r"^(?: ?[0-9]+ .*|SUM .*|Running .*|Device .*|memcpy .*)$"
CELLS = r"(?<![\w.])([0-9]+\.[0-9]{2})(?![\w.])"


def test_truth3_t5_control_the_healthy_sources_pass():
    assert outcome(check(H2D).parse, lambda r: _judge(H2D, r), H2D_TEXT) is Status.PASS
    assert outcome(check(D2D).parse, lambda r: _judge(D2D, r), D2D_TEXT) is Status.PASS


def _judge(name: str, run: Any) -> Judgement:
    c, p = check(name), site("dgx-h100")
    params = c.params_model.model_validate({**p.check(name).params, "json_output": False})
    return c.judge(run, params, p.check(name).thresholds, p.model.hardware)


@settings(max_examples=60, deadline=None)
@given(text=degraded(H2D_TEXT, CELLS, ROWS, H2D_END))
def test_truth3_t5_degraded_h2d_never_passes(text):
    assert outcome(check(H2D).parse, lambda r: _judge(H2D, r), text) in BAD


@settings(max_examples=60, deadline=None)
@given(text=degraded(D2D_TEXT, CELLS, ROWS, D2D_END))
def test_truth3_t5_degraded_d2d_never_passes(text):
    assert outcome(check(D2D).parse, lambda r: _judge(D2D, r), text) in BAD
