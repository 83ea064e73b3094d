"""Issue 11, node family, property tests: degraded identity and conformance probe output
never passes and never raises anything but ParseError (degrade_helpers says how it is
degraded).

Healthy sources: tests/fixtures/identity/server-with-dmi.txt and
tests/fixtures/conformance/gpu-node-conforming.txt, hand-written from the probes' format
(headers there). The probes print every line, empty or not, so every line is judged.
"""

from __future__ import annotations

from pathlib import Path

from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings

from rackgate.checks.conformance import ConformanceParams, judge_conformance
from rackgate.checks.identity import IdentityParams, judge_identity
from rackgate.model import Status
from rackgate.parsers.conformance import parse_conformance
from rackgate.parsers.identity import parse_identity

FIX = Path(__file__).parents[1] / "fixtures"
GPU_NODE = ConformanceParams(modules=["nvidia", "nvidia_peermem", "mlx5_core"],
                             services=["nvidia-persistenced", "nvidia-fabricmanager"],
                             cmdline=["iommu=pt"], governor="performance", acs_disabled=True)


def _probe(path: str) -> str:
    text = (FIX / path).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


IDENTITY = _probe("identity/server-with-dmi.txt")
# every line must be there; the last one's value (machine_id, recorded, never judged) can be
# cut without the parser knowing, so cuts are drawn up to its '='
IDENTITY_END = IDENTITY.index("machine_id=") + len("machine_id=")
CONFORMANCE = _probe("conformance/gpu-node-conforming.txt")


def identity(text: str) -> Status:
    return outcome(parse_identity, lambda r: judge_identity(r, IdentityParams(), {}), text)


def conformance(text: str) -> Status:
    return outcome(parse_conformance, lambda r: judge_conformance(r, GPU_NODE, {}), text)


def test_the_healthy_sources_pass():
    assert identity(IDENTITY) is Status.PASS
    assert conformance(CONFORMANCE) is Status.PASS


@settings(max_examples=80, deadline=None)
@given(degraded(IDENTITY, numbers=None, lines=r"=", end=IDENTITY_END))
def test_degraded_identity_never_passes(text):
    assert identity(text) in BAD


@settings(max_examples=80, deadline=None)
@given(degraded(CONFORMANCE, numbers=r"acs_enabled_bridges=([0-9]+)", lines=r"=",
                end=len(CONFORMANCE.rstrip())))
def test_degraded_conformance_never_passes(text):
    assert conformance(text) in BAD
