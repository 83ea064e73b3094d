"""Issue 11, storage family: fio.* and redundancy.multipath give an ACCEPT only from
complete, finite, physically plausible evidence, each LUN and path counted once.

fio inputs are derived here from the project's captured fio runs (tests/fixtures/fio, real
fio-3.33 output, headers there) by editing one value; multipath fixtures are written by
hand from multipath-tools' topology format (libmultipath/print.c), headers in the files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rackgate.checks.redundancy import MultipathParams, judge_multipath
from rackgate.checks.storage.fio import judge_rand_read, judge_seq_read
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.fio import parse_fio_json
from rackgate.parsers.multipath import parse_multipath_ll
from rackgate.profile import Hardware, StorageSpec, Threshold

FIX = Path(__file__).parents[1] / "fixtures"
BASIS = "a figure for the unit tests"
READ_BW = {"read_bw": Threshold(unit="MB/s", ref=1000, min_ratio=0.5, basis=BASIS)}
RAND = {"read_iops": Threshold(unit="IOPS", ref=30000, min_ratio=0.5, basis=BASIS),
        "read_p99_ms": Threshold(unit="ms", ref=10, max_ratio=1.0, basis=BASIS)}
HW = Hardware(storage=StorageSpec(multipath_paths_per_lun=2, source=BASIS))
WWIDS = ["3600a098038303053453f463045727a31", "3600a098038303053453f463045727a32"]


def fio_text(name: str) -> str:
    return (FIX / "fio" / name).read_text(encoding="utf-8")


def mp_text(name: str) -> str:
    text = (FIX / "redundancy" / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def seq_read(text: str) -> Status:
    try:
        run = parse_fio_json(text)
    except ParseError:
        return Status.ERROR
    return judge_seq_read(run, None, READ_BW).status  # type: ignore[arg-type]


def test_healthy_inputs_still_pass():
    """The control: without it every test below could pass by failing everything."""
    assert seq_read(fio_text("seq-read-healthy.json")) is Status.PASS
    rand = judge_rand_read(parse_fio_json(fio_text("rand-read-4k-qd32-healthy.json")), None,  # type: ignore[arg-type]
                           RAND)
    assert rand.status is Status.PASS, rand.message
    j = judge_multipath(parse_multipath_ll(mp_text("multipath-healthy-2maps-2paths.txt")),
                        MultipathParams(wwids=WWIDS), {}, HW)
    assert j.status is Status.PASS, j.message


# --- finding 4: non-finite and impossible figures ---------------------------------------------

def test_sound_4_fio_bandwidth_of_1e24_mb_s_is_never_a_pass():
    healthy = fio_text("seq-read-healthy.json")
    text = healthy.replace('"bw_bytes" : 1208954668', '"bw_bytes" : 1e30', 1)
    assert text != healthy
    with pytest.raises(ParseError, match=r"jobs\[0\]\.read\.bw_bytes is 1e\+30, not a whole "
                                         "64-bit count"):
        parse_fio_json(text)


def test_sound_4_fio_bandwidth_beyond_any_node_is_an_error():
    """1e12 MB/s, consistent with io_bytes and runtime, fits fio's counters: the judge must
    see it is more than any node's memory or PCIe carries."""
    healthy = fio_text("seq-read-healthy.json")
    text = healthy.replace('"bw_bytes" : 1208954668', '"bw_bytes" : 1000000000000000000', 1)
    text = text.replace('"io_bytes" : 3628072960', '"io_bytes" : 3001000000000000000', 1)
    j = judge_seq_read(parse_fio_json(text), None, READ_BW)  # type: ignore[arg-type]
    assert j.status is Status.ERROR, j.message
    assert "fio read: bandwidth 1,000,000,000,000 MB/s is above the 10,000,000 MB/s" in j.message


def test_sound_4_fio_negative_p99_latency_is_an_error():
    healthy = fio_text("rand-read-4k-qd32-healthy.json")
    text = healthy.replace('"99.000000" : 5406720', '"99.000000" : -1000000', 1)
    assert text != healthy
    j = judge_rand_read(parse_fio_json(text), None, RAND)  # type: ignore[arg-type]
    assert j.status is Status.ERROR, j.message
    assert "p99 completion latency -1,000,000 ns is not positive" in j.message


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_sound_4_fio_non_finite_figures_are_refused_naming_the_field(value):
    healthy = fio_text("seq-read-healthy.json")
    text = healthy.replace('"bw_bytes" : 1208954668', f'"bw_bytes" : {value}', 1)
    with pytest.raises(ParseError, match=r"jobs\[0\]\.read\.bw_bytes is .*not a finite number"):
        parse_fio_json(text)


# --- finding 9: one node's output can leave the rack with no report ---------------------------

def test_sound_9_fio_error_nan_is_a_parse_error():
    text = fio_text("seq-read-healthy.json").replace('"error" : 0', '"error" : NaN', 1)
    with pytest.raises(ParseError, match=r"jobs\[0\]\.error"):
        parse_fio_json(text)


def test_sound_9_fio_iops_nan_is_a_parse_error():
    healthy = fio_text("rand-read-4k-qd32-healthy.json")
    text = healthy.replace('"iops" : 32680.106631', '"iops" : NaN', 1)
    assert text != healthy
    with pytest.raises(ParseError, match=r"jobs\[0\]\.read\.iops"):
        parse_fio_json(text)


# --- finding 14: counting ---------------------------------------------------------------------

def test_sound_14_fio_a_duplicated_job_report_is_not_twice_the_bandwidth():
    """One job group, reported once (--group_reporting=1): a second copy of the job must not
    double the measured bandwidth past a floor the node misses."""
    start = fio_text("seq-read-healthy.json").index("{")
    doc = json.loads(fio_text("seq-read-healthy.json")[start:])
    doc["jobs"].append(doc["jobs"][0])
    floor = {"read_bw": Threshold(unit="MB/s", ref=2000, min_ratio=1.0, basis=BASIS)}
    j = judge_seq_read(parse_fio_json(json.dumps(doc)), None, floor)  # type: ignore[arg-type]
    assert j.status is Status.ERROR, j.message
    assert "fio reported 2 jobs (rackgate_seq_read, rackgate_seq_read)" in j.message


def test_sound_14_multipath_a_duplicated_path_line_is_not_a_second_path():
    with pytest.raises(ParseError, match="path device sdb listed twice"):
        parse_multipath_ll(mp_text("multipath-mpatha-path-line-duplicated.txt"))


def test_sound_14_multipath_a_lun_whose_whole_map_is_gone_is_noticed():
    topo = parse_multipath_ll(mp_text("multipath-mpatha-single-path.txt").replace(
        "`-+- policy='service-time 0' prio=50 status=active\n  `- 1:0:0:1 sdb 8:16 active "
        "ready running",
        "|-+- policy='service-time 0' prio=50 status=active\n| `- 1:0:0:1 sdb 8:16 active "
        "ready running\n`-+- policy='service-time 0' prio=10 status=enabled\n  `- 2:0:0:1 "
        "sdd 8:48 active ready running"))  # mpatha healthy with 2 paths; mpathb's map gone
    assert len(topo.maps) == 1 and len(topo.maps[0].paths) == 2
    j = judge_multipath(topo, MultipathParams(wwids=WWIDS), {}, HW)
    assert j.status is Status.FAIL, j.message
    assert f"LUN {WWIDS[1]}: no multipath map" in j.message
    j = judge_multipath(topo, MultipathParams(lun_count=2), {}, HW)
    assert j.status is Status.FAIL and "1 multipath map(s) (mpatha), expected 2" in j.message


def test_sound_14_multipath_without_an_expected_lun_set_is_an_error():
    topo = parse_multipath_ll(mp_text("multipath-healthy-2maps-2paths.txt"))
    j = judge_multipath(topo, MultipathParams(), {}, HW)
    assert j.status is Status.ERROR, j.message
    assert "the profile does not say which LUNs to expect" in j.message


def test_sound_14_multipath_a_cut_path_line_is_not_a_healthy_path():
    """'... active ready' without the online state: the line was cut (the current format
    always prints %o); read as online '' it counted as healthy."""
    text = mp_text("multipath-healthy-2maps-2paths.txt")
    cut = text[:text.rindex(" running")]
    with pytest.raises(ParseError, match="path sde has no online state"):
        parse_multipath_ll(cut)


def test_multipath_params_refuse_inconsistent_lun_sets():
    with pytest.raises(ValueError, match="WWIDs listed twice"):
        MultipathParams(wwids=[WWIDS[0], WWIDS[0]])
    with pytest.raises(ValueError, match="lun_count 3 differs from the 2 WWIDs"):
        MultipathParams(wwids=WWIDS, lun_count=3)
