"""redundancy.multipath: ``multipath -ll`` (the current and the old bracket layouts) parsed and
judged against the profile's paths per LUN, on the fixtures in tests/fixtures/redundancy."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from checks.redundancy.evidence import HW, SRC, read
from rackgate.checks.redundancy import (
    MultipathParams,
    judge_multipath,
)
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.multipath import parse_multipath_ll
from rackgate.profile import Hardware, StorageSpec

# --- multipath ----------------------------------------------------------------------------

MP2 = MultipathParams(lun_count=2)  # the fixtures' two LUNs, mpatha and mpathb

def mp(name: str, per_lun: int = 2, params: MultipathParams = MP2):
    hw = Hardware(storage=StorageSpec(multipath_paths_per_lun=per_lun, source=SRC))
    return judge_multipath(parse_multipath_ll(read(name)), params, {}, hw)


def test_multipath_parser_reads_maps_groups_paths():
    topo = parse_multipath_ll(read("multipath-healthy-2maps-2paths.txt"))
    m = topo.maps[0]
    assert (m.name, m.wwid, m.dm_device, m.vendor, m.product) == \
        ("mpatha", "3600a098038303053453f463045727a31", "dm-0", "NETAPP", "LUN C-Mode")
    assert [(g.policy, g.prio, g.status) for g in m.groups] == \
        [("service-time 0", 50, "active"), ("service-time 0", 10, "enabled")]
    p = m.paths[1]
    assert (p.hctl, p.device, p.major_minor, p.dm_state, p.path_state, p.online_state,
            p.group) == ("2:0:0:1", "sdd", "8:48", "active", "ready", "running", 1)


@pytest.mark.parametrize(("fixture", "params"), [
    ("multipath-healthy-2maps-2paths.txt", MP2),
    ("multipath-wwid-as-alias-healthy.txt",
     MultipathParams(wwids=["3600a098038303053453f463045727a31"]))])
def test_multipath_healthy_passes(fixture, params):
    j = mp(fixture, params=params)
    assert j.status is Status.PASS, j.message
    assert j.measured == 2


@pytest.mark.parametrize(("fixture", "words"), [
    ("multipath-mpathb-path-failed-faulty.txt", ["mpathb", "sde", "failed faulty offline"]),
    ("multipath-mpatha-single-path.txt", ["mpatha", "1/2 healthy paths"]),
    ("multipath-no-maps.txt", ["no multipath map"]),
])
def test_multipath_each_fault_fails_and_names_map_and_device(fixture, words):
    j = mp(fixture)
    assert j.status is Status.FAIL
    assert all(w in j.message for w in words), j.message


def test_multipath_old_bracket_format():
    topo = parse_multipath_ll("mpath0 (3600508b4000156d70001200000b0000) dm-0 HP,HSV200\n"
                              "[size=10G][features=1 queue_if_no_path][hwhandler=0]\n"
                              "\\_ round-robin 0 [prio=1][active]\n"
                              " \\_ 0:0:0:1 sda 8:0   [active][ready]\n"
                              "\\_ round-robin 0 [prio=1][enabled]\n"
                              " \\_ 1:0:0:1 sdb 8:16  [failed][faulty]\n")
    paths = topo.maps[0].paths
    assert [(p.device, p.dm_state, p.path_state, p.healthy) for p in paths] == \
        [("sda", "active", "ready", True), ("sdb", "failed", "faulty", False)]
    assert topo.maps[0].groups[1].status == "enabled"


def test_multipath_unknown_line_in_a_map_is_a_parse_error():
    with pytest.raises(ParseError, match="line 2: not a map"):
        parse_multipath_ll("mpatha (3600a) dm-2 X,Y\nsomething else entirely\n")


@given(st.text(max_size=400))
@settings(max_examples=300)
def test_multipath_parser_gives_a_record_or_parse_error(text):
    with contextlib.suppress(ParseError):
        parse_multipath_ll(text)


@given(st.data())
def test_multipath_a_deleted_path_never_passes(data):
    lines = read("multipath-healthy-2maps-2paths.txt").splitlines()
    path_lines = [i for i, line in enumerate(lines) if " active ready " in line]
    drop = data.draw(st.sampled_from(path_lines))
    topo = parse_multipath_ll("\n".join(lines[:drop] + lines[drop + 1:]))
    assert judge_multipath(topo, MP2, {}, HW).status is Status.FAIL


# --- bonding ------------------------------------------------------------------------------


# ------------------------------------------------------------ degraded evidence (issue 11)
# Healthy source: tests/fixtures/redundancy/multipath-healthy-2maps-2paths.txt (hand-written
# from libmultipath/print.c's topology format).

FIX = Path(__file__).parents[3] / "fixtures"
BASIS = "a figure for the unit tests"
HW_TWO_PATHS = Hardware(storage=StorageSpec(multipath_paths_per_lun=2, source=BASIS))
_mp = (FIX / "redundancy" / "multipath-healthy-2maps-2paths.txt").read_text(encoding="utf-8")
MULTIPATH = "\n".join(line for line in _mp.splitlines() if not line.startswith("#")) + "\n"


def multipath_outcome(text: str) -> Status:
    return outcome(parse_multipath_ll,
                   lambda r: judge_multipath(r, MultipathParams(lun_count=2), {}, HW_TWO_PATHS),
                   text)


class TestDegradedMultipath:
    """Issue 11, multipath: degraded multipath evidence never passes and never raises anything but
    ParseError (degrade_helpers says how it is degraded)."""

    def test_the_healthy_source_passes(self):
        assert multipath_outcome(MULTIPATH) is Status.PASS

    @settings(max_examples=100, deadline=None)
    @given(degraded(MULTIPATH, numbers=r"(?:prio=|`- )([0-9]+)",
                    lines=r"dm-[0-9]|[0-9]+:[0-9]+:[0-9]+:[0-9]+ ", end=len(MULTIPATH.rstrip())))
    def test_degraded_multipath_never_passes(self, text):
        assert multipath_outcome(text) in BAD
