"""Issue 29, item t2: the ``nvidia-smi`` summary table and its ``ERR!`` fields.

Plain ``nvidia-smi`` prints ``ERR!`` where NVML returns an error for a GPU's field (every
field of a GPU fallen off the bus, XID 79, or behind a GSP timeout; one field where one
query failed). rackgate could not read the table at all. ``gpu.smi_table`` (a check of its
own: the table holds none of what gpu.health judges besides the count) reads it: every
GPU row accounted for, the count and model matched against the profile, any ERR! field a
failure of that GPU naming the field.

Fixtures: tests/fixtures/gpu/nvidia-smi-table-* (each header names the published layout it
follows: NVIDIA/open-gpu-kernel-modules issue #446, Project-HAMi/HAMi issue #1903,
XuehaiPan/nvitop pull request #8).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded
from hypothesis import given, settings

from rackgate.checks import REGISTRY, load_profile
from rackgate.model import Result, Status
from rackgate.parsers import ParseError
from rackgate.placement.evidence import judge_evidence
from rackgate.profile import Profile
from rackgate.store.evidence import Evidence

FIX = Path(__file__).parents[1] / "fixtures" / "gpu"
NAME = "gpu.smi_table"
SHIPPED = load_profile("dgx-h100")  # 8 x NVIDIA H100 80GB HBM3
SRC = "the fixture's header: the GPUs it lists"


def body(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


def site() -> Profile:
    """The shipped H100 profile with the check listed, as a site lists it."""
    assert NAME in REGISTRY, "no check reads nvidia-smi's summary table"
    return SHIPPED.with_overrides({"checks": {NAME: {}}}, "a site's profile listing the check")


def profile_of(model: str, count: int) -> Profile:
    """A site's profile for the node a fixture describes (the shipped H100 profile's
    checks, another GPU block)."""
    return site().with_overrides({"hardware": {"gpu": None}}, "no GPU (test)").with_overrides(
        {"hardware": {"gpu": {"model": model, "count": count, "source": SRC}}},
        "the fixture's GPUs (test)")


def judged(text: str, profile: Profile | None = None) -> Result:
    assert NAME in REGISTRY, "no check reads nvidia-smi's summary table"
    check = REGISTRY[NAME]
    ev = Evidence(host="gpu01", check=NAME, argv=tuple(check.command(
        check.params_model(), {})), outcome="completed", rc=0, started=None, ended=None,
        duration_s=0.4, stderr="", message="", stdout_file=f"evidence/gpu01/{NAME}.out",
        stdout_sha256="0" * 64, stdout_bytes=len(text))
    return judge_evidence(check, ev, text, profile or site())


H100_570 = "nvidia-smi-table-8xh100-r570-healthy.txt"
A40_525 = "nvidia-smi-table-8xa40-r525-healthy.txt"
A100_MIG = "nvidia-smi-table-2xa100-r510-mig-enabled-healthy.txt"


def a40() -> Profile:
    return profile_of("NVIDIA A40", 8)


# --- healthy tables pass with a profile that says what the machine is ------------------------

@pytest.mark.parametrize(("name", "profile"), [
    (H100_570, site),
    (A40_525, a40),
    (A100_MIG, lambda: profile_of("NVIDIA A100-SXM4-80GB", 2)),  # name cut: 'A100-SXM...'
], ids=["8xh100-r570", "8xa40-r525", "2xa100-r510-mig"])
def test_truth3_t2_healthy_table_passes(name, profile):
    r = judged(body(name), profile())
    assert r.status is Status.PASS, r.message
    assert "no ERR! field" in r.message
    assert r.details["gpu_count"] == r.measured


def test_truth3_t2_the_check_runs_plain_nvidia_smi_and_skips_without_gpu():
    check = REGISTRY.get(NAME)
    assert check is not None, "no check reads nvidia-smi's summary table"
    assert check.command(check.params_model(), {}) == ["nvidia-smi"]
    assert check.applies(load_profile("demo").model.hardware) == "the profile expects no GPU"
    # opt-in: the shipped profiles are unchanged, a site lists the check
    assert NAME not in SHIPPED.model.checks and site().check(NAME) is not None


def test_truth3_t2_two_heading_rows_layout_is_read():
    """Drivers and GPUs without the MIG M. row print two lines per GPU."""
    lines = [line for line in body(H100_570).splitlines()
             if "MIG M." not in line and "Disabled |" not in line]
    r = judged("\n".join(lines) + "\n")
    assert r.status is Status.PASS, r.message


# --- ERR! fields fail, naming the GPU and the field -----------------------------------------

def test_truth3_t2_one_err_field_fails_naming_gpu_and_field():
    r = judged(body("nvidia-smi-table-8xh100-r570-gpu3-temp-err.txt"))
    assert r.status is Status.FAIL, r.message
    assert r.message.startswith("GPU 3: Temp ERR!")
    assert "GPU 0" not in r.message and "fallen off the bus" in r.message


def test_truth3_t2_gpu_with_every_field_err_fails():
    r = judged(body("nvidia-smi-table-8xa40-r525-gpu4-all-err.txt"), a40())
    assert r.status is Status.FAIL, r.message
    assert ("GPU 4: Name ERR!, Volatile Uncorr. ECC ERR!, Fan ERR!, Temp ERR!, Perf ERR!, "
            "Pwr:Usage ERR!, Pwr:Cap ERR!, GPU-Util ERR!, MIG M. ERR!") in r.message


def test_truth3_t2_err_in_the_mig_devices_table_fails():
    text = body(A100_MIG).replace("| 28      0 |  2   0    1    0    0 |\n|                  |"
                                  "      0MiB / 32767MiB |",
                                  "| 28   ERR! |  2   0    1    0    0 |\n|                  |"
                                  "      0MiB / 32767MiB |", 1)
    r = judged(text, profile_of("NVIDIA A100-SXM4-80GB", 2))
    assert r.status is Status.FAIL, r.message
    assert "MIG devices: 1    3   0   0" in r.message and "(ERR!)" in r.message


def test_truth3_t2_a_gpu_nvidia_smi_cannot_open_fails():
    r = judged(body("nvidia-smi-table-8xh100-r580-gpu5-device-handle-unknown-error.txt"))
    assert r.status is Status.FAIL, r.message
    assert "nvidia-smi: Unable to determine the device handle for GPU0000:AB:00.0: Unknown " \
        "Error" in r.message
    assert "the table lists 7 GPU(s), expected 8 x NVIDIA H100 80GB HBM3" in r.message


def test_truth3_t2_no_devices_found_fails():
    r = judged(body("nvidia-smi-table-no-devices-found.txt"))
    assert r.status is Status.FAIL, r.message
    assert "nvidia-smi: No devices were found" in r.message


def test_truth3_t2_uncorrectable_ecc_and_a_foreign_model_fail():
    text = body(H100_570)
    ecc = text.replace("|   00000000:AB:00.0 Off |                    0 |",
                       "|   00000000:AB:00.0 Off |                    2 |")
    r = judged(ecc)
    assert r.status is Status.FAIL and "GPU 5: 2 uncorrectable ECC error(s) (volatile)" \
        in r.message, r.message
    r = judged(body(A40_525))  # an A40 node judged against the H100 profile
    assert r.status is Status.FAIL and "GPU 0: is 'NVIDIA A40', expected 'NVIDIA H100 80GB " \
        "HBM3'" in r.message, r.message


def test_truth3_t2_the_gpu_count_is_matched_against_the_profile():
    r = judged(body(H100_570), profile_of("NVIDIA H100 80GB HBM3", 16))
    assert r.status is Status.FAIL, r.message
    assert "the table lists 8 GPU(s), expected 16 x NVIDIA H100 80GB HBM3" in r.message


# --- every row is accounted for: a damaged or cut table is no evidence ----------------------

def _cut_in_gpu5() -> str:
    text = body(H100_570)
    return text[:text.index("|   5  NVIDIA")]


def _drop_border_after(text: str, index: int) -> str:
    """``text`` without the border that closes GPU ``index``'s block of three rows."""
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(f"|   {index}  NVIDIA"))
    assert lines[at + 3].startswith("+---")
    return "\n".join(lines[:at + 3] + lines[at + 4:])


@pytest.mark.parametrize(("damage", "message"), [
    (lambda t: t.replace(" 33C ", " 33F ", 1), "Fan Temp Perf Pwr:Usage / Pwr:Cap read"),
    (lambda t: t.replace("Default |", "Fast    |", 1), "is not a percentage and a compute mode"),
    (lambda t: t.replace("   5  NVIDIA", "   4  NVIDIA"), "GPU index 4 is listed twice"),
    (lambda t: _drop_border_after(t, 5), "not closed by a border"),
    (lambda t: _cut_in_gpu5(), "cut short"),
    (lambda t: t[:t.index("+-------------------------------------------------------------------"
                          "----------------------+\n| Processes:")], "no closed 'Processes:'"),
    (lambda t: t.replace("| Processes:", "| Process list:", 1), "does not open with its title"),
    (lambda t: t + "+" + "-" * 89 + "+\n", "does not open with its title"),
    (lambda t: t + "a line nvidia-smi never prints\n", "not part of nvidia-smi's tables"),
    (lambda t: "garbage\n" + t, "neither nvidia-smi's time stamp nor a message"),
    (lambda t: t.replace("Driver Version:", "Drvier Version:"), "NVIDIA-SMI / Driver Version"),
    (lambda t: "", "no table"),
], ids=["temp-unit", "compute-mode", "index-twice", "block-not-closed", "cut-in-block",
        "no-processes", "processes-renamed", "border-twice", "trailing-text", "leading-text",
        "version-row", "empty"])
def test_truth3_t2_damaged_table_is_an_error(damage, message):
    r = judged(damage(body(H100_570)))
    assert r.status is Status.ERROR, r.message
    assert message in r.message, r.message


def test_truth3_t2_parse_errors_name_the_format_and_line():
    from rackgate.parsers.nvidia_smi.table import parse_nvidia_smi_table
    with pytest.raises(ParseError, match=r"nvidia-smi summary table: line 22: .*33F"):
        parse_nvidia_smi_table(body(H100_570).replace(" 33C ", " 33F ", 1))


def test_truth3_t2_control_gpu_health_is_unchanged():
    """The control: gpu.health still reads nvidia-smi -q -x, and the table is no evidence
    for it (a different command)."""
    assert REGISTRY["gpu.health"].command(REGISTRY["gpu.health"].params_model(), {}) == \
        ["nvidia-smi", "-q", "-x"]
    check = REGISTRY["gpu.health"]
    ev = Evidence(host="gpu01", check="gpu.health", argv=("nvidia-smi", "-q", "-x"),
                  outcome="completed", rc=0, started=None, ended=None, duration_s=1.0,
                  stderr="", message="", stdout_file="evidence/gpu01/gpu.health.out",
                  stdout_sha256="0" * 64, stdout_bytes=1)
    r = judge_evidence(check, ev, body(H100_570), SHIPPED)
    assert r.status is Status.ERROR, r.message


TABLE = body(H100_570)


@settings(max_examples=80, deadline=None)
@given(degraded(TABLE, numbers=r"^\|\s+([0-9]+)  NVIDIA", lines=r"^\|\s+[0-9]+  NVIDIA|^\| N/A",
                end=len(TABLE.rstrip("\n"))))  # the Processes table's closing border
def test_truth3_t2_degraded_table_never_passes(text):
    """Issue 11's damage (a number made non-finite, a GPU row printed twice, the output cut
    anywhere before its end) is never a pass."""
    assert judged(text).status in BAD
