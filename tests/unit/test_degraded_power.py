"""Issue 11, power family, property tests: degraded IPMI and Redfish power evidence never
passes and never raises anything but ParseError (degrade_helpers says how it is degraded).

Healthy sources: tests/fixtures/redundancy/ipmi-elist-healthy-2psu-redundant.txt (hand-
written from ipmitool's sdr elist layout) and the healthy Redfish mockup
(tests/fixtures/redfish/healthy, written by generate.py from DMTF's schemas).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.cooling import PsuRedfishParams, judge_psu_redfish
from rackgate.checks.redundancy import PsuIpmiParams, judge_psu_ipmi
from rackgate.model import Status
from rackgate.parsers.ipmi import parse_ipmi_sdr
from rackgate.parsers.redfish import parse_redfish_power
from rackgate.profile import Hardware, PsuSpec

FIX = Path(__file__).parents[1] / "fixtures"
SRC = "a profile written for the unit tests"
HW2 = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source=SRC))
HW6 = Hardware(psu=PsuSpec(count=6, redundancy="N+2", source=SRC))

_ipmi = (FIX / "redundancy" / "ipmi-elist-healthy-2psu-redundant.txt").read_text(
    encoding="utf-8")
IPMI = "\n".join(line for line in _ipmi.splitlines() if not line.startswith("#")) + "\n"
# The judge reads the PSU status, power and redundancy lines. A cut after PSU2's status line
# leaves two healthy supplies: the power reading (no threshold here) and the redundancy
# sensor are not required (the demo's ipmi_sim has none), so cuts are drawn before that.
IPMI_END = IPMI.index("\n", IPMI.index("PSU2 Status"))


def _redfish_power() -> str:
    root = FIX / "redfish" / "healthy"
    found = {"/redfish/v1/" + p.parent.relative_to(root).as_posix():
             json.loads(p.read_text(encoding="utf-8"))
             for p in sorted(root.rglob("index.json"))
             if p.parent.relative_to(root).as_posix().startswith("Chassis")}
    return json.dumps({"collector": "rackgate.redfish", "kind": "power",
                       "resources": found}, indent=1) + "\n"


REDFISH = _redfish_power()
READ_NUMBERS = ("PowerInputWatts|LastPowerOutputWatts|PowerCapacityWatts|MinNumNeeded|"
                "MaxNumSupported|MinNeededInGroup|MaxSupportedInGroup|Reading|"
                "Members@odata.count")


def ipmi(text: str) -> Status:
    return outcome(parse_ipmi_sdr, lambda r: judge_psu_ipmi(r, PsuIpmiParams(), {}, HW2), text)


def redfish(text: str) -> Status:
    return outcome(parse_redfish_power,
                   lambda r: judge_psu_redfish(r, PsuRedfishParams(), {}, HW6), text)


def test_the_healthy_sources_pass():
    assert ipmi(IPMI) is Status.PASS
    assert ipmi(IPMI[:IPMI_END]) is Status.PASS  # the judged part alone is complete
    assert redfish(REDFISH) is Status.PASS


@settings(max_examples=120, deadline=None)
@given(degraded(IPMI, numbers=r"\| (400) Watts",
                lines=r"^(PSU1 Status|PSU2 Status|PSU1 Power In|PS Redundancy) ", end=IPMI_END))
def test_degraded_ipmi_never_passes(text):
    assert ipmi(text) in BAD


@settings(max_examples=120, deadline=None)
@given(degraded(REDFISH, numbers=rf'"(?:{READ_NUMBERS})": (-?[0-9.]+)', lines=r"\S",
                end=len(REDFISH.rstrip())))
def test_degraded_redfish_power_never_passes(text):
    assert redfish(text) in BAD


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["nan", "NaN", "Infinity", "-Infinity", "1e400", "1" + "0" * 400]),
       st.sampled_from(["PowerInputWatts", "MinNumNeeded", "Members@odata.count",
                        "PowerCapacityWatts"]))
def test_non_finite_redfish_numbers_anywhere_are_parse_errors(token, key):
    """Every occurrence of the key at once, as a BMC with a broken sensor layer would."""
    text = re.sub(rf'("{key}": )(-?[0-9.]+)', rf"\g<1>{token}", REDFISH)
    assert text != REDFISH
    assert redfish(text) is Status.ERROR
