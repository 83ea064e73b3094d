"""node.conformance on a real probe run (demo container) and hand-written GPU nodes;
property tests for the conformance and identity probe parsers."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from rackgate.checks.conformance import ConformanceParams, conformance_command, judge_conformance
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.conformance import parse_conformance
from rackgate.parsers.identity import parse_identity

DGX = ConformanceParams(
    modules=["nvidia", "nvidia_uvm", "nvidia_peermem", "mlx5_core", "ib_core"],
    services=["nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm"],
    governor="performance", acs_disabled=True)


def body(fixture_text, name: str) -> str:
    return "\n".join(line for line in fixture_text(f"conformance/{name}").splitlines()
                     if not line.startswith("#"))


def test_conforming_gpu_node_passes(fixture_text):
    c = parse_conformance(body(fixture_text, "gpu-node-conforming.txt"))
    j = judge_conformance(c, DGX, {})
    assert j.status is Status.PASS, j.message


def test_every_fault_is_named(fixture_text):
    c = parse_conformance(body(fixture_text, "gpu-node-fabricmanager-failed-acs-on.txt"))
    j = judge_conformance(c, DGX, {})
    assert j.status is Status.FAIL
    for text in ("kernel module(s) not loaded: nvidia_peermem",
                 "service nvidia-fabricmanager is failed",
                 "DefaultLimitMEMLOCK is 8388608, expected infinity",
                 "CPU governor ondemand, performance, expected performance",
                 "4 PCIe bridge(s) with ACS source validation on"):
        assert text in j.message


def test_real_container_run(fixture_text):
    """Captured in the demo rack: roles/common set memlock; chrony cannot run there."""
    c = parse_conformance(body(fixture_text, "demo-container-chrony-inactive.txt"))
    assert c.default_memlock == "infinity" and c.services["systemd-journald"] == "active"
    ok = judge_conformance(c, ConformanceParams(services=["systemd-journald"]), {})
    assert ok.status is Status.PASS
    bad = judge_conformance(c, ConformanceParams(services=["chrony"]), {})
    assert bad.status is Status.FAIL and "service chrony is inactive" in bad.message
    vm = judge_conformance(c, ConformanceParams(governor="performance"), {})
    assert vm.status is Status.WARN and "no cpufreq governor" in vm.message


def test_service_names_are_arguments_not_script():
    argv = conformance_command(ConformanceParams(services=["slurmd"]), {})
    assert argv[:2] == ["sh", "-c"] and argv[-1] == "slurmd" and "slurmd" not in argv[2]
    with pytest.raises(ValueError, match="not systemd unit names"):
        ConformanceParams(services=["x; rm -rf /"])


@pytest.mark.parametrize(("text", "match"), [
    ("", "no modules, default_memlock"),
    ("modules=a\n", "no default_memlock"),
    ("garbage\n", "line 1 is not key=value"),
])
def test_bad_probe_output(text, match):
    with pytest.raises(ParseError, match=match):
        parse_conformance(text)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_is_a_record_or_a_parse_error(text):
    for parse in (parse_conformance, parse_identity):
        with contextlib.suppress(ParseError):
            parse(text)


FAULTY = [line for line in (FIXTURES / "conformance" / "gpu-node-fabricmanager-failed-acs-on.txt")
          .read_text().splitlines() if not line.startswith("#")]


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_a_dropped_line_never_passes_a_node_that_would_fail(data):
    lines = FAULTY
    i = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    try:
        c = parse_conformance("\n".join(lines[:i] + lines[i + 1:]))
    except ParseError:
        return
    assert judge_conformance(c, DGX, {}).status is not Status.PASS


# ------------------------------------------------------------ degraded evidence (issue 11)
# Healthy source: tests/fixtures/conformance/gpu-node-conforming.txt, hand-written from the
# probe's format (header there). The probe prints every line, empty or not, so every line
# is judged.

FIX = Path(__file__).parents[2] / "fixtures"


def _probe(path: str) -> str:
    text = (FIX / path).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


GPU_NODE = ConformanceParams(modules=["nvidia", "nvidia_peermem", "mlx5_core"],
                             services=["nvidia-persistenced", "nvidia-fabricmanager"],
                             cmdline=["iommu=pt"], governor="performance", acs_disabled=True)
CONFORMANCE = _probe("conformance/gpu-node-conforming.txt")


def conformance_outcome(text: str) -> Status:
    return outcome(parse_conformance, lambda r: judge_conformance(r, GPU_NODE, {}), text)


class TestDegradedConformance:
    """Issue 11, node family, property tests: degraded conformance probe output never passes and
    never raises anything but ParseError (degrade_helpers says how it is degraded)."""

    def test_the_healthy_source_passes(self):
        assert conformance_outcome(CONFORMANCE) is Status.PASS

    @settings(max_examples=80, deadline=None)
    @given(degraded(CONFORMANCE, numbers=r"acs_enabled_bridges=([0-9]+)", lines=r"=",
                    end=len(CONFORMANCE.rstrip())))
    def test_degraded_conformance_never_passes(self, text):
        assert conformance_outcome(text) in BAD
