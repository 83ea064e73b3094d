"""Issue 11, node family: node.identity and node.conformance read each probe line once and
raise only ParseError.

Inputs are derived here from the project's hand-written probe fixtures
(tests/fixtures/conformance, tests/fixtures/identity; headers there) by editing one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rackgate.checks.conformance import ConformanceParams, judge_conformance
from rackgate.checks.identity import IdentityParams, judge_identity
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.conformance import parse_conformance
from rackgate.parsers.identity import parse_identity

FIX = Path(__file__).parents[1] / "fixtures"
GPU_NODE = ConformanceParams(modules=["nvidia", "nvidia_peermem", "mlx5_core"],
                             services=["nvidia-persistenced", "nvidia-fabricmanager"],
                             governor="performance", acs_disabled=True)


def probe(path: str) -> str:
    text = (FIX / path).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


def test_healthy_inputs_still_pass():
    """The control: without it every test below could pass by failing everything."""
    c = parse_conformance(probe("conformance/gpu-node-conforming.txt"))
    assert judge_conformance(c, GPU_NODE, {}).status is Status.PASS
    ident = parse_identity(probe("identity/server-with-dmi.txt"))
    assert judge_identity(ident, IdentityParams(), {}).status is Status.PASS


def test_sound_14_conformance_a_repeated_service_line_is_not_the_last_word():
    text = probe("conformance/gpu-node-conforming.txt").replace(
        "service.nvidia-fabricmanager=active",
        "service.nvidia-fabricmanager=failed\nservice.nvidia-fabricmanager=active")
    with pytest.raises(ParseError, match=r"'service\.nvidia-fabricmanager' is given twice"):
        parse_conformance(text)


def test_sound_14_identity_a_repeated_serial_line_is_refused():
    text = probe("identity/server-with-dmi.txt").replace(
        "product_serial=1234567890123", "product_serial=1234567890123\nproduct_serial=X")
    with pytest.raises(ParseError, match="product_serial given twice"):
        parse_identity(text)


def test_sound_9_conformance_count_with_a_superscript_digit_is_a_parse_error():
    """'²'.isdigit() is True, but int('²') raises ValueError."""
    text = probe("conformance/gpu-node-conforming.txt").replace(
        "acs_enabled_bridges=0", "acs_enabled_bridges=\u00b2")
    with pytest.raises(ParseError, match="acs_enabled_bridges is '\u00b2', not a count"):
        parse_conformance(text)
