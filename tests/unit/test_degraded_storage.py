"""Issue 11, storage family, property tests: degraded fio and multipath evidence never passes
and never raises anything but ParseError (degrade_helpers says how it is degraded).

Healthy sources: tests/fixtures/fio/seq-read-healthy.json and rand-read-4k-qd32-healthy.json
(real fio-3.33 runs, headers there) and tests/fixtures/redundancy/multipath-healthy-2maps-
2paths.txt (hand-written from libmultipath/print.c's topology format).
"""

from __future__ import annotations

from pathlib import Path

from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings

from rackgate.checks.redundancy import MultipathParams, judge_multipath
from rackgate.checks.storage.fio import judge_rand_read, judge_seq_read
from rackgate.model import Status
from rackgate.parsers.fio import parse_fio_json
from rackgate.parsers.multipath import parse_multipath_ll
from rackgate.profile import Hardware, StorageSpec, Threshold

FIX = Path(__file__).parents[1] / "fixtures"
BASIS = "a figure for the unit tests"
READ_BW = {"read_bw": Threshold(unit="MB/s", ref=1000, min_ratio=0.5, basis=BASIS)}
RAND = {"read_iops": Threshold(unit="IOPS", ref=30000, min_ratio=0.5, basis=BASIS),
        "read_p99_ms": Threshold(unit="ms", ref=10, max_ratio=1.0, basis=BASIS)}
HW = Hardware(storage=StorageSpec(multipath_paths_per_lun=2, source=BASIS))

SEQ = (FIX / "fio" / "seq-read-healthy.json").read_text(encoding="utf-8")
RANDREAD = (FIX / "fio" / "rand-read-4k-qd32-healthy.json").read_text(encoding="utf-8")
_mp = (FIX / "redundancy" / "multipath-healthy-2maps-2paths.txt").read_text(encoding="utf-8")
MULTIPATH = "\n".join(line for line in _mp.splitlines() if not line.startswith("#")) + "\n"

# The figures and lines fio's judges read (fio 3.x's "bw" is read only without "bw_bytes",
# and job options are not read at all: fio repeats an option given twice).
FIO_NUMBERS = r'"(?:io_bytes|bw_bytes|iops|runtime|error|99\.000000)" : (-?[0-9.]+)'
FIO_LINES = (r'^\s*"(?:(?:fio version|jobname)"\s*:\s*"|(?:jobs|error|read|write|trim|'
             r'io_bytes|bw_bytes|bw|iops|runtime|clat_ns|percentile|99\.000000)"\s*:\s*[-0-9[{])')


def seq(text: str) -> Status:
    return outcome(parse_fio_json, lambda r: judge_seq_read(r, None, READ_BW), text)  # type: ignore[arg-type]


def rand(text: str) -> Status:
    return outcome(parse_fio_json, lambda r: judge_rand_read(r, None, RAND), text)  # type: ignore[arg-type]


def multipath(text: str) -> Status:
    return outcome(parse_multipath_ll,
                   lambda r: judge_multipath(r, MultipathParams(lun_count=2), {}, HW), text)


def test_the_healthy_sources_pass():
    assert seq(SEQ) is Status.PASS
    assert rand(RANDREAD) is Status.PASS
    assert multipath(MULTIPATH) is Status.PASS


@settings(max_examples=100, deadline=None)
@given(degraded(SEQ, numbers=FIO_NUMBERS, lines=FIO_LINES, end=len(SEQ.rstrip())))
def test_degraded_fio_seq_read_never_passes(text):
    assert seq(text) in BAD


@settings(max_examples=100, deadline=None)
@given(degraded(RANDREAD, numbers=FIO_NUMBERS, lines=FIO_LINES, end=len(RANDREAD.rstrip())))
def test_degraded_fio_rand_read_never_passes(text):
    assert rand(text) in BAD


@settings(max_examples=100, deadline=None)
@given(degraded(MULTIPATH, numbers=r"(?:prio=|`- )([0-9]+)",
                lines=r"dm-[0-9]|[0-9]+:[0-9]+:[0-9]+:[0-9]+ ", end=len(MULTIPATH.rstrip())))
def test_degraded_multipath_never_passes(text):
    assert multipath(text) in BAD
