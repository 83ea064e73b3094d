"""fabric.roce_lossless: the dcb probe's sections parsed, and PFC and the RoCE priority judged
per interface, on the fixtures in tests/fixtures/infiniband (see their headers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings

from rackgate.checks.fabric.roce_lossless import (
    LosslessParams,
    judge_lossless,
    lossless_command,
)
from rackgate.checks.shared.base import CommandError
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.dcb import parse_dcb_sections

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "infiniband"


def body(name: str) -> str:
    """The tool output after the fixture's '# ---' line, bytes kept (CRLF stays CRLF)."""
    raw = (FIX / name).read_bytes().decode("utf-8")
    _, sep, rest = raw.partition("\n# ---\n")
    assert sep, f"{name} has no '# ---' line after its header"
    return rest


def probe(*sections: tuple[str, str, int, str]) -> str:
    return "".join(f"### rackgate-dcb dev={d} what={w} rc={rc}\n{b}\n" for d, w, rc, b in sections)


def fx(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def test_command_passes_interfaces_as_arguments_never_in_the_script():
    argv = lossless_command(LosslessParams(interfaces=["eth2", "eth3"]), {})
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["rackgate-roce", "eth2", "eth3"]
    assert "eth2" not in argv[2] and '"$i"' in argv[2]
    with pytest.raises(CommandError, match=r"params\.interfaces"):
        lossless_command(LosslessParams(), {})
    with pytest.raises(ValueError, match="does not match"):
        LosslessParams(interfaces=["$(reboot)"])


def test_lossless_healthy():
    text = probe(("eth2", "pfc", 0, fx("dcb-pfc-prio3-only.json")),
                 ("eth2", "app", 0, fx("dcb-app-dscp26-to-prio3.json")))
    j = judge_lossless(parse_dcb_sections(text), LosslessParams(interfaces=["eth2"]), {}, None)
    assert j.status is Status.PASS, j.message
    assert j.details["pfc.eth2"] == "3"


@pytest.mark.parametrize("pfc, app, words", [
    ("dcb-pfc-disabled.json", "dcb-app-dscp26-to-prio3.json", ["eth3: PFC on priorities []"]),
    ("dcb-pfc-prio3-and-4.json", "dcb-app-dscp26-to-prio3.json", ["[3, 4], expected exactly"]),
    ("dcb-pfc-prio3-only.json", "dcb-app-no-dscp-pcp-trust.json", ["eth3: no DSCP", "PCP"]),
])
def test_lossless_faults_fail_naming_the_interface(pfc, app, words):
    text = probe(("eth2", "pfc", 0, fx("dcb-pfc-prio3-only.json")),
                 ("eth2", "app", 0, fx("dcb-app-dscp26-to-prio3.json")),
                 ("eth3", "pfc", 0, fx(pfc)), ("eth3", "app", 0, fx(app)))
    j = judge_lossless(parse_dcb_sections(text), LosslessParams(interfaces=["eth2", "eth3"]),
                       {}, None)
    assert j.status is Status.FAIL and "eth2" not in j.message
    for w in words:
        assert w in j.message, (w, j.message)


def test_lossless_dcb_error_and_missing_interface():
    text = probe(("eth2", "pfc", 1, "Error: Cannot find device \"eth2\""),
                 ("eth2", "app", 1, "Error: Cannot find device \"eth2\""))
    j = judge_lossless(parse_dcb_sections(text), LosslessParams(interfaces=["eth2", "eth9"]),
                       {}, None)
    assert j.status is Status.ERROR
    assert "Cannot find device" in j.message and "eth9: no dcb output" in j.message
    with pytest.raises(ParseError, match="marker"):
        parse_dcb_sections("")
    with pytest.raises(ParseError, match="'prio_pfc'"):
        parse_dcb_sections(probe(("eth2", "pfc", 0, json.dumps({"pfc_cap": 8}))))


# ------------------------------------------------------------ degraded evidence (issue 11)
# Healthy source: the dcb fixtures dcb-pfc-prio3-only.json and dcb-app-dscp26-to-prio3.json
# (tests/fixtures/infiniband, hand-written from the published layout; SOURCES.md there) in
# the probe's section format.

FIXTURES = Path(__file__).parents[3] / "fixtures"
DCB = "".join(f"### rackgate-dcb dev=eth2 what={what} rc=0\n"
              f"{(FIXTURES / 'infiniband' / name).read_text(encoding='utf-8').strip()}\n"
              for what, name in (("pfc", "dcb-pfc-prio3-only.json"),
                                 ("app", "dcb-app-dscp26-to-prio3.json")))


def lossless(text: str) -> Status:
    return outcome(parse_dcb_sections,
                   lambda r: judge_lossless(r, LosslessParams(interfaces=["eth2"]), {}), text)


class TestDegradedDcb:
    """Issue 11, fabric.roce_lossless: degraded dcb evidence never passes and never raises anything
    but ParseError (degrade_helpers says how it is degraded)."""

    def test_the_healthy_source_passes(self):
        assert lossless(DCB) is Status.PASS

    @settings(max_examples=100, deadline=None)
    @given(degraded(DCB, numbers=r"(?:rc=|\[)([0-9]+)", lines=r"\S", end=len(DCB.rstrip())))
    def test_degraded_dcb_never_passes(self, text):
        assert lossless(text) in BAD
