"""Issue 29, item r3: DCGM level-1 (deployment) results name no GPU; they are node-level.

The Deployment checks of ``dcgmi diag -r 1`` (Denylist, NVML Library, CUDA Main Library,
Permissions and OS Blocks, Persistence Mode, Environment Variables, Page Retirement/Row
Remap, Graphics Processes, Inforom) are the node's, and DCGM 2.x/3.x writes them without
GPU ids (NVIDIA/DCGM ``dcgmi/Diag.cpp``). They are judged on their own status; per-GPU
results still cover exactly the profile's GPUs; a result claiming to be a GPU's that names
none stays an error; a profile asking for level 2 or more still needs per-GPU evidence.

Fixtures: tests/fixtures/topology/dcgm-diag-r1-* (SOURCES.md and the text files' headers
say how each was written from DCGM's source).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.gpu.topology import DcgmDiagParams, judge_dcgm
from rackgate.model import Result, Status
from rackgate.parsers.dcgm import parse_dcgm_diag
from rackgate.placement.evidence import judge_evidence
from rackgate.profile import Profile
from rackgate.store.evidence import Evidence

FIX = Path(__file__).parents[1] / "fixtures" / "topology"
CHECK = REGISTRY["gpu.dcgm_diag"]
SHIPPED = load_profile("dgx-h100")  # 8 GPUs, gpu.dcgm_diag at level 2
# a site's profile that says what its run is: the deployment level only
LEVEL1 = SHIPPED.with_overrides({"checks": {"gpu.dcgm_diag": {"params": {"level": 1}}}},
                                "a site's profile (test)")
HW = SHIPPED.model.hardware


def body(name: str) -> str:
    text = (FIX / name).read_text(encoding="utf-8")
    return text.partition("\n# ---\n")[2] if "\n# ---\n" in text else text


def doc(name: str) -> dict[str, Any]:
    return json.loads(body(name))  # type: ignore[no-any-return]


def judged(text: str, profile: Profile = LEVEL1) -> Result:
    ev = Evidence(host="dgx001", check=CHECK.name, argv=("dcgmi", "diag", "-r", "1", "-j"),
                  outcome="completed", rc=0, started=None, ended=None, duration_s=30.0,
                  stderr="", message="", stdout_file="evidence/dgx001/gpu.dcgm_diag.out",
                  stdout_sha256="0" * 64, stdout_bytes=len(text))
    return judge_evidence(CHECK, ev, text, profile)


V3_JSON = "dcgm-diag-r1-v3-json-healthy.json"
V3_TEXT = "dcgm-diag-r1-v3.3-text-healthy.txt"
V4_JSON = "dcgm-diag-r1-v4-json-healthy.json"


# --- healthy level-1 runs pass with the profile that asks for level 1 -----------------------

@pytest.mark.parametrize("name", [V3_JSON, V3_TEXT])
def test_truth3_r3_level1_run_naming_no_gpu_passes_at_level1(name):
    r = judged(body(name))
    assert r.status is Status.PASS, r.message
    assert "9 DCGM results passed at level 1 (node-level checks" in r.message
    assert r.details["node_level"] == 9


def test_truth3_r3_level1_dcgm4_software_test_per_gpu_passes_at_level1():
    r = judged(body(V4_JSON))
    assert r.status is Status.PASS, r.message
    assert r.details["node_level"] == 0


def test_truth3_r3_the_results_are_node_level_and_the_device_count_is_read():
    d = parse_dcgm_diag(body(V3_JSON))
    assert {r.scope for r in d.results} == {"node"} and len(d.results) == 9
    assert d.devices == 8
    assert parse_dcgm_diag(body(V3_TEXT)).devices == 8
    assert parse_dcgm_diag(body(V4_JSON)).devices == 8


# --- degraded level-1 runs still fail -------------------------------------------------------

def test_truth3_r3_level1_json_deployment_failure_fails_naming_test_and_gpu():
    r = judged(body("dcgm-diag-r1-v3-json-gpu3-row-remap-fail.json"))
    assert r.status is Status.FAIL, r.message
    assert ("Page Retirement/Row Remap fails on the node (GPU 3): GPU 3 had uncorrectable "
            "memory errors and row remappings are pending") in r.message
    assert "error_id" not in r.message  # the warning's text, not its JSON


def test_truth3_r3_level1_text_deployment_failure_fails_naming_gpu():
    r = judged(body("dcgm-diag-r1-v3.3-text-gpu3-row-remap-fail.txt"))
    assert r.status is Status.FAIL, r.message
    assert "Page Retirement/Row Remap fails on the node (GPU 3): GPU 3 had uncorrectable" \
        in r.message


def test_truth3_r3_level2_text_deployment_error_row_is_a_failure_not_a_coverage_error():
    """An Error row naming GPU 3 under Deployment is a node-level failure about GPU 3, not a
    per-GPU result that leaves GPUs 0-2 and 4-7 untested."""
    table = body("dcgm-diag-r2-v3.3-text-healthy.txt").replace(
        "| Page Retirement/Row Remap | Pass                                           |\n",
        "| Page Retirement/Row Remap | Fail                                           |\n"
        "| Error                     | GPU 3 had uncorrectable memory errors and row  |\n"
        "|                           |  remappings are pending                        |\n")
    j = judge_dcgm(parse_dcgm_diag(table), DcgmDiagParams(level=2), {}, HW)
    assert j.status is Status.FAIL, j.message
    assert "fails on the node (GPU 3): GPU 3 had uncorrectable memory errors" in j.message
    assert "no result for GPU" not in j.message


def test_truth3_r3_level1_warning_warns():
    d = doc(V3_JSON)
    test = d["DCGM GPU Diagnostic"]["test_categories"][0]["tests"][4]
    assert test["name"] == "Persistence Mode"
    test["results"] = [{"status": "Warn", "gpu_id": 5, "warnings": [
        {"warnings": "Persistence mode for GPU 5 is disabled", "error_id": 9}]}]
    r = judged(json.dumps(d))
    assert r.status is Status.WARN, r.message
    assert "Persistence Mode warns on the node (GPU 5): Persistence mode for GPU 5" in r.message


@pytest.mark.parametrize("name", [V3_JSON, V4_JSON])
def test_truth3_r3_level1_run_on_fewer_gpus_than_the_profile_fails(name):
    d = doc(name)
    if "GPU Device IDs" in d:
        d["GPU Device IDs"].pop()
    else:
        d["entity_groups"][0]["entities"].pop()
    r = judged(json.dumps(d))
    assert r.status is Status.FAIL, r.message
    assert "DCGM ran on 7 GPUs, the profile expects 8" in r.message


def test_truth3_r3_level1_text_with_seven_device_ids_fails():
    text = body(V3_TEXT).replace("2330,2330,2330,2330,2330,2330,2330,2330 ",
                                 "2330,2330,2330,2330,2330,2330,2330      ")
    r = judged(text)
    assert r.status is Status.FAIL, r.message
    assert "DCGM ran on 7 GPUs, the profile expects 8" in r.message


def test_truth3_r3_level1_dcgm4_run_missing_a_gpu_result_is_not_a_pass():
    d = doc(V4_JSON)
    test = d["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    test["results"] = [x for x in test["results"] if x["entity_id"] != 7]
    r = judged(json.dumps(d))
    assert r.status is Status.FAIL, r.message
    assert "no result for [7]" in r.message


# --- the old strictness where the profile asks for per-GPU tests ----------------------------

@pytest.mark.parametrize("name", [V3_JSON, V3_TEXT])
def test_truth3_r3_level1_evidence_is_no_evidence_for_the_shipped_level2_profile(name):
    r = judged(body(name), SHIPPED)
    assert r.status is Status.ERROR, r.message
    assert "no DCGM result names a GPU: no evidence that the 8 GPUs were tested" in r.message


def test_truth3_r3_dcgm4_deployment_only_is_no_evidence_at_level2():
    """DCGM 4 names the GPUs of its software test, but a level-2 profile asks for the
    Integration and Hardware tests too."""
    r = judged(body(V4_JSON), SHIPPED)
    assert r.status is Status.ERROR, r.message
    assert "only Deployment results: no evidence that the level-2 per-GPU tests" in r.message


# --- a result claiming to be a GPU's but naming none stays an error -------------------------

def _v3_level2() -> dict[str, Any]:
    return doc("dcgm-diag-r2-v3-gpu-ids-pass.json")


def _pcie(d: dict[str, Any]) -> list[dict[str, Any]]:
    cats = d["DCGM GPU Diagnostic"]["test_categories"]
    return next(t for c in cats for t in c["tests"] if t["name"] == "PCIe")["results"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("damage", [
    lambda rs: rs[7].pop("gpu_ids"),        # an Integration result with no GPU at all
    lambda rs: rs[7].update(gpu_ids=""),    # gpu_ids present, naming none
    lambda rs: rs[7].update(gpu_ids=None),
    # every GPU covered, and one more result that names none: passed on main
    lambda rs: rs.append({"status": "Pass", "info": "a result of no GPU"}),
], ids=["no-gpu-field", "empty-gpu-ids", "null-gpu-ids", "extra-nameless-result"])
def test_truth3_r3_per_gpu_result_naming_no_gpu_is_an_error(damage):
    d = _v3_level2()
    damage(_pcie(d))
    for profile in (SHIPPED, LEVEL1):
        r = judged(json.dumps(d), profile)
        assert r.status is Status.ERROR, r.message
        assert "PCIe: a per-GPU result names no GPU" in r.message


def test_truth3_r3_dcgm4_gpu_entity_without_id_is_an_error():
    d = doc(V4_JSON)
    del d["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][2]["entity_id"]
    r = judged(json.dumps(d))
    assert r.status is Status.ERROR, r.message
    assert "software: a per-GPU result names no GPU" in r.message


def test_truth3_r3_text_all_row_that_nothing_resolves_is_an_error():
    text = "\n".join(line for line in body("dcgm-diag-r2-v3.3-text-healthy.txt").splitlines()
                     if "Device IDs" not in line)
    r = judged(text)
    assert r.status is Status.ERROR, r.message
    assert "a per-GPU result names no GPU" in r.message


def test_truth3_r3_control_level2_healthy_runs_still_pass():
    """The control: healthy level-2 runs of DCGM 3 and 4 pass the shipped profile."""
    for name in ("dcgm-diag-r2-v3-gpu-ids-pass.json", "dcgm-diag-r2-pass.json",
                 "dcgm-diag-r2-v3.3-text-healthy.txt", "dcgm-diag-r2-v4-text-healthy.txt"):
        r = judged(body(name), SHIPPED)
        assert r.status is Status.PASS, (name, r.message)
