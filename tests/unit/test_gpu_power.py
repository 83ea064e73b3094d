"""gpu.health and a capped rack: the profile's ``hardware.gpu.power_cap`` (rackgate.hardware.
PowerCap) against the limit in force, on tests/fixtures/gpu/h100-8gpu-healthy.xml (8 x H100
SXM: default and max limit 700 W, min 200 W) with its "Current Power Limit" changed per test;
the cap in the report (JSON, HTML, Markdown)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from pydantic import ValidationError

from rackgate.checks import load_profile
from rackgate.checks.gpu.health import GpuHealthParams, judge_gpu_health
from rackgate.model import Result, Status, node_verdict, rack_verdict
from rackgate.parsers import ParseError
from rackgate.parsers.nvidia_smi import GpuQuery, parse_nvidia_smi_xml
from rackgate.profile import Hardware, PowerCap, ProfileError
from rackgate.reports import report_document
from rackgate.reports.html import render_html
from rackgate.reports.markdown import render_markdown

PROFILE = load_profile("dgx-h100")
H100 = PROFILE.model.hardware
BASIS = "site power budget: 8 x 550 W per node (a test)"
HEALTHY = "gpu/h100-8gpu-healthy.xml"


def capped(watts: float = 550, tolerance_w: float = 1) -> Hardware:
    assert H100.gpu is not None
    cap = PowerCap(watts=watts, tolerance_w=tolerance_w, basis=BASIS)
    return H100.model_copy(update={"gpu": H100.gpu.model_copy(update={"power_cap": cap})})


def limits(text: str, *watts: str) -> GpuQuery:
    """The fixture with GPU i's "Current Power Limit" set to watts[i] (the rest unchanged)."""
    parts = text.split("<current_power_limit>700.00 W</current_power_limit>")
    assert len(parts) == 9, "the fixture has 8 GPUs at 700 W"
    out = parts[0]
    for i, rest in enumerate(parts[1:]):
        value = watts[i] if i < len(watts) else "700.00 W"
        out += f"<current_power_limit>{value}</current_power_limit>" + rest
    return parse_nvidia_smi_xml(out)


def judge(q: GpuQuery, hw: Hardware):
    return judge_gpu_health(q, GpuHealthParams(), {}, hw)


def test_capped_rack_passes_and_says_it_is_capped(fixture_text):
    j = judge(limits(fixture_text(HEALTHY), *["550.00 W"] * 8), capped())
    assert j.status is Status.PASS, j.message
    assert j.message == ("8 x NVIDIA H100 80GB HBM3, driver 535.183.01: healthy, power capped "
                         "at 550 W")
    assert j.expected == "8 x NVIDIA H100 80GB HBM3, power capped at 550 W (± 1 W)"
    assert (j.details["power_cap_w"], j.details["power_cap_tolerance_w"]) == (550.0, 1.0)
    assert [j.details[f"gpu{i}_power_limit_w"] for i in range(8)] == [550.0] * 8


def test_a_limit_within_the_tolerance_passes(fixture_text):
    j = judge(limits(fixture_text(HEALTHY), *["553.50 W"] * 4, *["547.00 W"] * 4),
              capped(tolerance_w=5))
    assert j.status is Status.PASS, j.message


@pytest.mark.parametrize(("limit", "why"), [
    ("700.00 W", "GPU 3: power limit 700 W, above the profile's power cap 550 W (± 1 W): it may "
                 "draw more than the rack's power budget"),
    ("400.00 W", "GPU 3: power limit 400 W, below the profile's power cap 550 W (± 1 W): slower "
                 "than the rack was sized for"),
    ("551.50 W", "GPU 3: power limit 551.5 W, above the profile's power cap 550 W"),
])
def test_a_gpu_at_another_limit_fails(fixture_text, limit, why):
    j = judge(limits(fixture_text(HEALTHY), *["550.00 W"] * 3, limit, *["550.00 W"] * 4),
              capped())
    assert j.status is Status.FAIL
    assert f"fail: {why}" in j.message, j.message
    assert "GPU 0" not in j.message  # the GPUs at the cap are no finding


def test_uncapped_rack_fails_against_a_cap(fixture_text):
    # the rack nobody capped: every GPU at its 700 W default, the site's budget 550 W each
    j = judge(limits(fixture_text(HEALTHY)), capped())
    assert j.status is Status.FAIL
    assert "GPU 0, 1, 2, 3, 4, 5, 6, 7: power limit 700 W, above the profile's power cap" \
        in j.message


def test_without_a_cap_a_lowered_limit_warns_as_before(fixture_text):
    assert H100.gpu is not None and H100.gpu.power_cap is None
    j = judge(limits(fixture_text(HEALTHY), *["550.00 W"] * 8), H100)
    assert j.status is Status.WARN
    assert "warn: GPU 0, 1, 2, 3, 4, 5, 6, 7: power limit 550 W, below the default 700 W" \
        in j.message
    assert "power_cap_w" not in j.details
    assert judge(limits(fixture_text(HEALTHY)), H100).status is Status.PASS


def test_an_absent_power_limit_is_an_error_against_a_cap(fixture_text):
    q = limits(fixture_text(HEALTHY), *["550.00 W"] * 7, "N/A")
    j = judge(q, capped())
    assert j.status is Status.ERROR
    assert ("error: GPU 7: no power limit reported: the profile's power cap 550 W cannot be "
            "checked") in j.message
    # without a cap there is nothing to compare it with: as before, no finding
    assert "GPU 7" not in judge(q, H100).message


def test_an_absent_max_limit_is_an_error_against_a_cap(fixture_text):
    text = fixture_text(HEALTHY).replace("<max_power_limit>700.00 W</max_power_limit>",
                                         "<max_power_limit>N/A</max_power_limit>")
    j = judge(limits(text, *["550.00 W"] * 8), capped())
    assert j.status is Status.ERROR
    assert "no max power limit reported" in j.message


def test_a_nan_power_limit_is_an_error(fixture_text):
    # nvidia-smi never prints one and the parser refuses the text ...
    with pytest.raises(ParseError, match="current_power_limit is 'nan W'"):
        limits(fixture_text(HEALTHY), "nan W")
    # ... and a NaN that reached the judge another way is an error, capped or not
    q = limits(fixture_text(HEALTHY), *["550.00 W"] * 8)
    bad = dataclasses.replace(q.gpus[2], power_limit_w=math.nan)
    q = dataclasses.replace(q, gpus=(*q.gpus[:2], bad, *q.gpus[3:]))
    for hw in (capped(), H100):
        j = judge(q, hw)
        assert j.status is Status.ERROR
        assert "GPU 2: power limit reported as nan: not a number of watts" in j.message
        assert "gpu2_power_limit_w" not in j.details


@pytest.mark.parametrize(("watts", "why"), [
    (800, "the profile's power cap 800 W is above the GPU's max power limit 700 W: no GPU of "
          "this kind can be set to it (profile error)"),
    (150, "the profile's power cap 150 W is below the GPU's min power limit 200 W"),
])
def test_a_cap_the_gpu_cannot_be_set_to_is_a_profile_error(fixture_text, watts, why):
    j = judge(limits(fixture_text(HEALTHY), *["700.00 W"] * 8), capped(watts))
    assert j.status is Status.ERROR
    assert f"error: GPU 0, 1, 2, 3, 4, 5, 6, 7: {why}" in j.message, j.message


@pytest.mark.parametrize("cap", [
    {"watts": float("nan")}, {"watts": float("inf")}, {"watts": 0}, {"watts": -550},
    {"watts": 550, "tolerance_w": float("nan")}, {"watts": 550, "tolerance_w": -1},
    {"watts": 550, "tolerance_w": 550},
])
def test_the_cap_must_be_finite_and_positive(cap):
    with pytest.raises(ValidationError):
        PowerCap(**cap, basis=BASIS)


def test_a_cap_comes_with_its_basis():
    with pytest.raises(ValidationError, match="basis"):
        PowerCap.model_validate({"watts": 550})


def test_the_cap_as_a_profile_override(tmp_path):
    over = {"hardware": {"gpu": {"power_cap": {"watts": 550, "tolerance_w": 2, "basis": BASIS}}}}
    profile = PROFILE.with_overrides(over, "group_vars/gpu.yml")
    gpu = profile.model.hardware.gpu
    assert gpu is not None and gpu.power_cap == PowerCap(watts=550, tolerance_w=2, basis=BASIS)
    assert profile.sha256 != PROFILE.sha256  # a capped rack is another profile
    bad = {"hardware": {"gpu": {"power_cap": {"watts": ".nan", "basis": BASIS}}}}
    with pytest.raises(ProfileError, match=r"hardware\.gpu\.power_cap\.watts"):
        PROFILE.with_overrides(bad, "group_vars/gpu.yml")
    typo = {"hardware": {"gpu": {"power_cap": {"wats": 550, "basis": BASIS}}}}
    with pytest.raises(ProfileError, match="wats"):
        PROFILE.with_overrides(typo, "group_vars/gpu.yml")


def _report(hardware_cap: dict[str, object] | None):
    profile = PROFILE if hardware_cap is None else PROFILE.with_overrides(
        {"hardware": {"gpu": {"power_cap": hardware_cap}}}, "a test")
    result = Result("n1", "gpu.health", Status.PASS, "8 x NVIDIA H100 80GB HBM3: healthy", None,
                    "", evidence="evidence/n1/gpu.health.out")
    doc = report_document(rack_verdict([node_verdict("n1", [result])]),
                          {"run_id": "cap-1", "inventory": ["inv"], "group": "gpu",
                           "started": "t0", "finished": "t1", "rackgate_version": "0",
                           "ansible_core_version": "0"}, profile, {"n1": ""}, {})
    return json.loads(json.dumps(doc))


def test_the_cap_is_in_the_reports_certificate():
    doc = _report({"watts": 550, "tolerance_w": 2, "basis": BASIS})
    assert doc["profile"]["gpu_power_cap"] == {"model": "NVIDIA H100 80GB HBM3", "watts": 550.0,
                                               "tolerance_w": 2.0, "basis": BASIS}
    html = render_html(doc)
    assert "GPU power capped at 550 W" in html  # the verdict line
    row = html[html.index('<tr id="gpu-power-cap">'):]
    row = row[:row.index("</tr>")]
    assert "<b>550 W</b> per GPU (&plusmn; 2 W)" in row and "accepted as capped" in row
    assert BASIS in row
    assert render_markdown(doc).rstrip().endswith("GPU power capped at 550 W")


def test_an_uncapped_profile_shows_no_cap():
    doc = _report(None)
    assert doc["profile"]["gpu_power_cap"] is None
    html = render_html(doc)
    assert "gpu-power-cap" not in html and "power capped" not in html
    assert "power capped" not in render_markdown(doc)
