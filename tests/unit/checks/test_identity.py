from __future__ import annotations

from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings

from rackgate.checks.identity import IdentityParams, identity_command, judge_identity
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.identity import FIELDS, parse_identity


def strip_header(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def test_server_with_serials_passes_and_keeps_the_fields(fixture_text):
    ident = parse_identity(strip_header(fixture_text("identity/server-with-dmi.txt")))
    assert ident.missing == ()
    j = judge_identity(ident, IdentityParams(), {})
    assert j.status is Status.PASS
    assert j.details["product_serial"] == "1234567890123"
    assert "DGXH100 serial 1234567890123, BIOS 1.0.0" in j.message


def test_vm_without_dmi_warns_that_it_cannot_be_bound(fixture_text):
    ident = parse_identity(strip_header(fixture_text("identity/vm-without-dmi.txt")))
    assert "product_serial" in ident.missing and ident.fields["kernel"]
    j = judge_identity(ident, IdentityParams(), {})
    assert j.status is Status.WARN and "cannot bind" in j.message


def test_crlf_and_unknown_keys_are_tolerated():
    lines = [f"{k}=" for k in FIELDS if k != "product_serial"]
    ident = parse_identity("\r\n".join([*lines, "something_new=1", "product_serial=X"]))
    assert ident.fields["product_serial"] == "X"


@pytest.mark.parametrize(("text", "match"), [
    ("", "no 'sys_vendor=', .*'kernel=', 'os=', 'machine_id=' line"),
    ("product_serial=X\n", r"no 'sys_vendor=', 'product_name=', 'board_serial=', .* line"),
    ("".join(f"{k}=\n" for k in FIELDS[:-1]), r"no 'machine_id=' line \(truncated output"),
    ("Segmentation fault\n", "line 1 is not key=value"),
])
def test_bad_probe_output(text, match):
    with pytest.raises(ParseError, match=match):
        parse_identity(text)


def test_command_is_a_fixed_argv():
    argv = identity_command(IdentityParams(), {"rackgate_scratch_path": "/x; rm -rf /"})
    assert argv[:2] == ["sh", "-c"] and "rm -rf" not in argv[2]


# ------------------------------------------------------------ degraded evidence (issue 11)
# Healthy source: tests/fixtures/identity/server-with-dmi.txt, hand-written from the probe's
# format (header there). The probe prints every line, empty or not, so every line is judged.

FIX = Path(__file__).parents[2] / "fixtures"


def _probe(path: str) -> str:
    text = (FIX / path).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


IDENTITY = _probe("identity/server-with-dmi.txt")


# every line must be there; the last one's value (machine_id, recorded, never judged) can be
# cut without the parser knowing, so cuts are drawn up to its '='
IDENTITY_END = IDENTITY.index("machine_id=") + len("machine_id=")


def identity_outcome(text: str) -> Status:
    return outcome(parse_identity, lambda r: judge_identity(r, IdentityParams(), {}), text)


class TestDegradedIdentity:
    """Issue 11, node family, property tests: degraded identity probe output never passes and never
    raises anything but ParseError (degrade_helpers says how it is degraded)."""

    def test_the_healthy_source_passes(self):
        assert identity_outcome(IDENTITY) is Status.PASS

    @settings(max_examples=80, deadline=None)
    @given(degraded(IDENTITY, numbers=None, lines=r"=", end=IDENTITY_END))
    def test_degraded_identity_never_passes(self, text):
        assert identity_outcome(text) in BAD
