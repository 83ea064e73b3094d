"""Issue 29 (verdict truth, third pass), NVLink items:

* r1: PCIe cards joined by NVLink bridges list every link slot of their chip, the unwired
  ones ``<inactive>``; a profile's ``gpu.nvlink_links`` says which are wired (or how many),
  so a healthy bridged pair passes and a wired link down, an unwired link up or a GPU
  missing still fails. Without it (every shipped profile) the old strict rule holds.
* r6: ``gpu.nvlink`` compares a speed at the precision nvidia-smi printed it: "14.062" meets
  an RTX A6000 bridge's 14.0625 GB/s, a lower speed does not.
* t3: ``gpu.nvlink_errors`` reads ``nvidia-smi nvlink -e`` and judges every expected link's
  replay, recovery, CRC and ECC counters against the profile's limits.

Inputs are the hand-written fixtures under tests/fixtures/topology (their headers name the
published layouts), edited by one line where a test needs another case. Profiles are built
as a site would write them and validated by ``profile_from_document``; where a profile is
refused, the helpers return the refusal so that a test fails by its assertion.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from degrade_helpers import BAD, degraded
from hypothesis import given, settings

from rackgate.checks import REGISTRY, load_profile, profile_from_document
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.profile import Profile, ProfileError

FIX = Path(__file__).parents[3] / "fixtures" / "topology"
SRC = "a public document for the test"


def body(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


H100_PCIE = {"model": "NVIDIA H100 PCIe", "count": 2, "nvlink_generation": 4,
             "nvlinks_per_gpu": 12, "nvlink_gb_s_per_gpu": 600, "source": SRC,
             "nvlink_topology": {"kind": "pairs", "name": "nvlink-bridge", "pairs": [[0, 1, 12]],
                                 "basis": "three NVLink bridges join the two cards"}}
WIRED = [0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15]
BRIDGED = {"listed": 18, "wired": WIRED, "basis": "the bridges' wiring as the vendor's guide "
                                                 "and nvidia-smi nvlink -R show it"}
COUNTED = {"listed": 18, "basis": "three bridges wire 12 of the H100's 18 link slots"}
A6000 = {"model": "NVIDIA RTX A6000", "count": 2, "nvlink_generation": 3,
         "nvlinks_per_gpu": 4, "nvlink_gb_s_per_gpu": 112.5, "source": SRC,
         "nvlink_topology": {"kind": "pairs", "name": "nvlink-bridge", "pairs": [[0, 1, 4]],
                             "basis": "one NVLink bridge joins the two cards"}}


def site_profile(gpu: dict[str, Any], checks: dict[str, Any] | None = None) -> Profile | str:
    """A site's profile of a node with ``gpu``; the refusal's text where it is refused."""
    doc = {"schema_version": 1, "name": "site", "description": "a site's bridged GPU node",
           "hardware": {"gpu": gpu}, "checks": checks or {"gpu.nvlink": {}}}
    try:
        return profile_from_document(doc, "site.yaml")
    except ProfileError as exc:
        return f"profile refused: {exc}"


def judged(check: str, profile: Profile | str, text: str) -> tuple[Status, str]:
    """(status, message) of ``check`` on ``text`` under ``profile``; a ParseError is
    ``error``, as judging makes it."""
    assert not isinstance(profile, str), profile
    assert check in REGISTRY, f"no check {check} in the registry"
    c = REGISTRY[check]
    cp = profile.check(check)
    assert cp is not None, f"profile {profile.name} has no {check}"
    try:
        record = c.parse(text)
    except ParseError as exc:
        return Status.ERROR, f"ParseError: {exc}"
    j = c.judge(record, c.params_model.model_validate(cp.params), cp.thresholds,
                profile.model.hardware)
    return j.status, j.message


def with_gpu(gpu: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(gpu)
    out.update(changes)
    return out


# --- r1: bridged PCIe cards -----------------------------------------------------------------

BRIDGED_OK = body("nvlink-2x-h100-pcie-3-bridges-healthy.txt")
BRIDGED_DOWN = body("nvlink-2x-h100-pcie-3-bridges-gpu1-link7-inactive.txt")


def test_truth3_r1_bridged_pcie_nvlink_passes_with_the_wired_links():
    status, message = judged("gpu.nvlink", site_profile(with_gpu(H100_PCIE,
                                                                 nvlink_links=BRIDGED)),
                             BRIDGED_OK)
    assert status is Status.PASS, message
    assert "12 active NVLinks (of 18 listed" in message


def test_truth3_r1_bridged_pcie_nvlink_passes_with_a_count_of_active_links():
    status, message = judged("gpu.nvlink", site_profile(with_gpu(H100_PCIE,
                                                                 nvlink_links=COUNTED)),
                             BRIDGED_OK)
    assert status is Status.PASS, message


def status_text(wired: dict[int, list[int]]) -> str:
    """nvidia-smi nvlink -s of two H100 PCIe cards, 18 slots each, ``wired[g]`` up."""
    return "".join(f"GPU {g}: NVIDIA H100 PCIe (UUID: GPU-{g})\n" + "".join(
        f"\t Link {i}: {'26.562 GB/s' if i in wired[g] else '<inactive>'}\n"
        for i in range(18)) for g in range(2))


def test_truth3_r1_bridged_wiring_may_differ_per_gpu():
    """Another machine's bridges wire other slots on each card: a per-GPU map says so."""
    other = [0, 1, 2, 3, 5, 6, 7, 8, 11, 12, 13, 14]
    mixed = status_text({0: WIRED, 1: other})
    per_gpu = dict(BRIDGED, wired={0: WIRED, 1: other})
    status, message = judged("gpu.nvlink", site_profile(with_gpu(H100_PCIE,
                                                                 nvlink_links=per_gpu)), mixed)
    assert status is Status.PASS, message
    status, message = judged("gpu.nvlink", site_profile(with_gpu(H100_PCIE,
                                                                 nvlink_links=BRIDGED)), mixed)
    assert status is Status.FAIL, message
    assert "GPU 1 links 9, 15 are inactive" in message, message
    assert "GPU 1 links 5, 11 are active but not wired" in message, message


@pytest.mark.parametrize("links", [BRIDGED, COUNTED], ids=["wired", "counted"])
def test_truth3_r1_a_wired_link_inactive_still_fails(links):
    status, message = judged("gpu.nvlink", site_profile(with_gpu(H100_PCIE, nvlink_links=links)),
                             BRIDGED_DOWN)
    assert status is Status.FAIL, message
    assert "GPU 1" in message and ("links 7 are inactive" in message
                                   or "11 active links" in message), message


@pytest.mark.parametrize("links", [BRIDGED, COUNTED], ids=["wired", "counted"])
def test_truth3_r1_an_unexpected_active_link_still_fails(links):
    lines = BRIDGED_OK.splitlines()
    at = lines.index("\t Link 4: <inactive>")  # GPU 0's first unwired slot
    lines[at] = "\t Link 4: 26.562 GB/s"
    status, message = judged("gpu.nvlink", site_profile(with_gpu(H100_PCIE, nvlink_links=links)),
                             "\n".join(lines) + "\n")
    assert status is Status.FAIL, message
    assert "GPU 0" in message and ("links 4 are active but not wired" in message
                                   or "13 active links" in message), message


def test_truth3_r1_a_missing_gpu_or_slot_still_fails():
    profile = site_profile(with_gpu(H100_PCIE, nvlink_links=BRIDGED))
    gpu0 = BRIDGED_OK.split("GPU 1:")[0]
    status, message = judged("gpu.nvlink", profile, gpu0)
    assert status is Status.FAIL and "lists 1 GPUs, the profile expects 2" in message, message
    cut = BRIDGED_OK.replace("\t Link 17: <inactive>\n", "")
    status, message = judged("gpu.nvlink", profile, cut)
    assert status is Status.FAIL and "lists 17 links, expected 18" in message, message


def test_truth3_r1_control_without_nvlink_links_the_strict_rule_holds():
    """The default is today's rule: a profile that does not say the cards are bridged fails
    the bridged capture, and the shipped dgx-h100 still fails one link down."""
    strict = site_profile(with_gpu(H100_PCIE, nvlinks_per_gpu=12))
    status, message = judged("gpu.nvlink", strict, BRIDGED_OK)
    assert status is Status.FAIL and "links 4, 5, 10, 11, 16, 17 are inactive" in message
    assert "lists 18 links, expected 12" in message
    status, message = judged("gpu.nvlink", load_profile("dgx-h100"),
                             body("nvlink-gpu5-link7-inactive.txt"))
    assert status is Status.FAIL and message == "GPU 5 links 7 are inactive"


@pytest.mark.parametrize("gpu, why", [
    (with_gpu(H100_PCIE, nvlink_links=dict(BRIDGED, wired=WIRED[:11])), "gives GPU0 11"),
    (with_gpu(H100_PCIE, nvlink_links=dict(BRIDGED, wired=[*WIRED[:11], 18])), "from 0 to 17"),
    (with_gpu(H100_PCIE, nvlink_links=dict(BRIDGED, wired={0: WIRED})), "GPU0 to GPU1"),
    (with_gpu(H100_PCIE, nvlink_links=dict(COUNTED, listed=10)), "fewer than"),
    (with_gpu(H100_PCIE, nvlink_links={"listed": 18}), "basis"),
    (with_gpu(H100_PCIE, nvlink_links=COUNTED,
              nvlink_topology={"kind": "nvswitch", "basis": SRC}), "kind pairs"),
])
def test_truth3_r1_a_profile_that_does_not_add_up_is_refused(gpu, why):
    refused = site_profile(gpu)
    assert isinstance(refused, str) and why in refused, refused


# --- r6: speeds at the printed precision ----------------------------------------------------

A6000_OK = body("nvlink-2x-rtx-a6000-bridge-healthy.txt")


def test_truth3_r6_rtx_a6000_bridge_at_14_062_passes():
    status, message = judged("gpu.nvlink", site_profile(A6000), A6000_OK)
    assert status is Status.PASS, message
    assert ">= 14.0625 GB/s each way" in message


@pytest.mark.parametrize("printed", ["14.061", "14.0620", "13.9"])
def test_truth3_r6_a_speed_below_the_nominal_at_its_own_precision_fails(printed):
    """The precision comes from the printed figure: 14.0620 has four decimals, so it is
    compared with 14.0625 itself, not with 14.062."""
    text = A6000_OK.replace("\t Link 1: 14.062 GB/s", f"\t Link 1: {printed} GB/s", 1)
    status, message = judged("gpu.nvlink", site_profile(A6000), text)
    assert status is Status.FAIL, message
    assert f"GPU 0 links 1 ({printed} GB/s) are below 14.0625 GB/s" in message \
        or f"GPU 0 links 1 ({float(printed):g} GB/s) are below 14.0625 GB/s" in message, message


def test_truth3_r6_a_half_rate_link_still_fails():
    status, message = judged("gpu.nvlink", site_profile(A6000),
                             body("nvlink-2x-rtx-a6000-bridge-gpu0-link2-half-rate.txt"))
    assert status is Status.FAIL and "GPU 0 links 2 (7.031 GB/s)" in message, message


# --- t3: nvidia-smi nvlink -e ----------------------------------------------------------------

ERR_OK = body("nvlink-errors-h100-18links-healthy.txt")


PROFILES = {name: load_profile(name) for name in ("dgx-h100", "hgx-h200", "dgx-a100")}


def errors_on(name: str, text: str) -> tuple[Status, str]:
    return judged("gpu.nvlink_errors", PROFILES[name], text)


def test_truth3_t3_nvlink_errors_is_a_registered_check_of_the_gpu_profiles():
    assert "gpu.nvlink_errors" in REGISTRY
    check = REGISTRY["gpu.nvlink_errors"]
    assert check.command(check.params_model(), {}) == ["nvidia-smi", "nvlink", "-e"]
    assert {"gpu", "nvlink"} <= check.tags
    for name in ("dgx-h100", "hgx-h200", "dgx-a100"):
        cp = PROFILES[name].check("gpu.nvlink_errors")
        assert cp is not None and cp.enabled, name
        assert {cp.params[k]["max_count"] for k in ("replay", "recovery", "crc", "ecc")} == {0}
        assert all(len(cp.params[k]["basis"]) > 40 for k in cp.params), name


def test_truth3_t3_healthy_counters_pass():
    status, message = errors_on("dgx-h100", ERR_OK)
    assert status is Status.PASS, message
    assert "144 NVLinks of 8 GPUs" in message


@pytest.mark.parametrize("name, words", [
    ("nvlink-errors-gpu3-link5-replay-crc.txt",
     ["GPU 3: link 5 Replay Errors 142 (limit 0)", "link 5 CRC Errors 891 (limit 0)"]),
    ("nvlink-errors-gpu6-link11-recovery.txt", ["GPU 6: link 11 Recovery Errors 1 (limit 0)"]),
    ("nvlink-errors-7gpus-listed.txt", ["lists 7 GPUs, the profile expects 8", "GPU 7"]),
])
def test_truth3_t3_counters_over_their_limit_or_a_gpu_missing_fail(name, words):
    status, message = errors_on("dgx-h100", body(name))
    assert status is Status.FAIL, message
    assert all(w in message for w in words), message


def test_truth3_t3_limits_come_from_the_profile_with_their_basis():
    text = body("nvlink-errors-gpu3-link5-replay-crc.txt")
    allow = {"max_count": 1000, "basis": "a site's measured count after its 72 h burn-in"}
    ok = site_profile(with_gpu(A6000, count=8, nvlinks_per_gpu=18, nvlink_gb_s_per_gpu=900,
                               nvlink_topology={"kind": "nvswitch", "basis": SRC}),
                      {"gpu.nvlink_errors": {"params": {"replay": allow, "crc": allow}}})
    status, message = judged("gpu.nvlink_errors", ok, text)
    assert status is Status.PASS, message
    refused = site_profile(with_gpu(A6000),
                           {"gpu.nvlink_errors": {"params": {"replay": {"max_count": 5}}}})
    assert isinstance(refused, str) and "replay.basis" in refused, refused


def test_truth3_t3_every_expected_link_must_be_listed():
    no_link = ERR_OK.replace("\t Link 9: Replay Errors: 0\n\t Link 9: Recovery Errors: 0\n"
                             "\t Link 9: CRC Errors: 0\n", "", 1)
    status, message = errors_on("dgx-h100", no_link)
    assert status is Status.ERROR and "GPU 0: no error counters for links 9" in message, message


def test_truth3_t3_foreign_gpus_and_links_are_errors():
    gpu8 = ERR_OK + ERR_OK.split("GPU 1:")[0].replace("GPU 0:", "GPU 8:")
    status, message = errors_on("dgx-h100", gpu8)
    assert status is Status.ERROR and "counters for GPU 8" in message, message
    link18 = ERR_OK.replace("\t Link 17: CRC Errors: 0\n",
                            "\t Link 17: CRC Errors: 0\n\n\t Link 18: Replay Errors: 0\n"
                            "\t Link 18: Recovery Errors: 0\n\t Link 18: CRC Errors: 0\n", 1)
    status, message = errors_on("dgx-h100", link18)
    assert status is Status.ERROR and "GPU 0 lists counters for links 18" in message, message


@pytest.mark.parametrize("edit, match", [
    (("\t Link 3: CRC Errors: 0\n", "\t Link 3: CRC Errors: 0\n\t Link 3: CRC Errors: 0\n"),
     "prints CRC Errors twice"),
    (("\t Link 3: CRC Errors: 0\n", "\t Link 3: CRC Errors: 0\n\t Link 2: CRC Errors: 0\n"),
     "split or repeated"),
    (("\t Link 3: CRC Errors: 0\n", ""), "a line lost or added"),
    (("\t Link 3: CRC Errors: 0\n", "\t Link 3: CRC Errors: N/A\n"), "neither"),
    (("\t Link 3: CRC Errors: 0\n", "\t Link 3: Rx Errors: 0\n"), "'Rx Errors' is none"),
    (("GPU 1:", "GPU 2:"), "GPU 2 where GPU 1 is next"),
    (("\t Link 3: CRC Errors: 0\n", "\t Link 3: CRC Errors: 0\n\t [...]\n"), "neither"),
])
def test_truth3_t3_unreadable_or_duplicated_entries_are_errors(edit, match):
    status, message = errors_on("dgx-h100", ERR_OK.replace(*edit, 1))
    assert status is Status.ERROR and match in message, message


def test_truth3_t3_a_gpu_with_every_link_down_fails():
    text = ERR_OK.split("GPU 1:")[0] + "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n" \
        "\tNVML: Unable to retrieve NVLink information as all links are inActive\n" \
        + "GPU 2:" + ERR_OK.split("GPU 2:")[1]
    status, message = errors_on("dgx-h100", text)
    assert status is Status.FAIL and "GPU 1: no active NVLink" in message, message


def test_truth3_t3_bridged_cards_are_judged_on_their_wired_links():
    profile = site_profile(with_gpu(H100_PCIE, nvlink_links=BRIDGED),
                           {"gpu.nvlink_errors": {}})
    block = "".join(f"\t Link {i}: Replay Errors: 0\n\t Link {i}: Recovery Errors: 0\n"
                    f"\t Link {i}: CRC Errors: 0\n" for i in WIRED)
    text = "".join(f"GPU {g}: NVIDIA H100 PCIe (UUID: GPU-{g})\n{block}" for g in range(2))
    status, message = judged("gpu.nvlink_errors", profile, text)
    assert status is Status.PASS, message  # only the wired links listed
    every = "".join(f"\t Link {i}: Replay Errors: 0\n\t Link {i}: Recovery Errors: 0\n"
                    f"\t Link {i}: CRC Errors: 0\n" for i in range(18))
    status, message = judged("gpu.nvlink_errors", profile, text.replace(block, every, 1))
    assert status is Status.PASS, message  # every slot listed, the unwired ones quiet
    short = text.replace("\t Link 7: Replay Errors: 0\n\t Link 7: Recovery Errors: 0\n"
                         "\t Link 7: CRC Errors: 0\n", "")
    status, message = judged("gpu.nvlink_errors", profile, short)
    assert status is Status.ERROR and "no error counters for links 7" in message, message


BRIDGED_PROFILE = site_profile(with_gpu(H100_PCIE, nvlink_links=BRIDGED))


def errors_status(text: str) -> Status:
    return errors_on("dgx-h100", text)[0]


@settings(max_examples=100, deadline=None)
@given(degraded(ERR_OK, numbers=r"Errors: ([0-9]+)$", lines=r"^\s*(?:GPU|Link) ",
                end=len(ERR_OK.rstrip("\n"))))
def test_truth3_t3_degraded_counters_never_pass(text):
    """A line printed twice, the output cut anywhere, a count not a number: never a pass."""
    assert errors_status(text) in BAD


@settings(max_examples=60, deadline=None)
@given(degraded(BRIDGED_OK, numbers=r"Link [0-9]+: ([0-9.]+) GB/s", lines=r"^\s*(?:GPU|Link) ",
                end=len(BRIDGED_OK.rstrip("\n"))))
def test_truth3_r1_degraded_bridged_status_never_passes(text):
    assert judged("gpu.nvlink", BRIDGED_PROFILE, text)[0] in BAD
