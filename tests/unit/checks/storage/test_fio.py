"""The fio.seq_read command builder and judge."""

from __future__ import annotations

from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings

from rackgate.checks.shared.base import CommandError
from rackgate.checks.storage.fio import (
    SeqReadParams,
    judge_rand_read,
    judge_seq_read,
    seq_read_command,
)
from rackgate.model import Status
from rackgate.parsers.fio import parse_fio_json
from rackgate.profile import Hardware, StorageSpec, Threshold

FLOOR = Threshold(unit="MB/s", ref=100, min_ratio=0.5, basis="a nominal demo floor")


def thresholds(ref: float = 100, min_ratio: float = 0.5, limit: bool = False):
    return {"read_bw": Threshold(unit="MB/s", ref=ref, min_ratio=min_ratio, limit=limit,
                                 basis="a figure for the test")}


def test_command_uses_scratch_path_and_profile_params():
    argv = seq_read_command(SeqReadParams(size="64M", runtime_s=3, ioengine="psync",
                                          timeout_s=60), {"rackgate_scratch_path": "/scratch/"})
    assert argv[0] == "fio"
    assert "--filename_format=/scratch/rackgate-seq_read.$jobnum.dat" in argv
    assert {"--rw=read", "--size=64M", "--runtime=3", "--ioengine=psync", "--direct=1",
            "--output-format=json", "--unlink=1"} <= set(argv)


def test_command_defaults_to_var_tmp_rackgate():
    assert "--filename_format=/var/tmp/rackgate/rackgate-seq_read.$jobnum.dat" in \
        seq_read_command(SeqReadParams(), {})


@pytest.mark.parametrize("bad", ["relative/path", "/a:b", 42, ""])
def test_unusable_scratch_path_is_refused(bad):
    with pytest.raises(CommandError, match="rackgate_scratch_path"):
        seq_read_command(SeqReadParams(), {"rackgate_scratch_path": bad})


def test_timeout_must_exceed_runtime():
    with pytest.raises(ValueError, match="timeout_s 30 must exceed runtime_s 60"):
        SeqReadParams(runtime_s=60, timeout_s=30)


def test_healthy_run_passes_with_figures(fixture_text):
    run = parse_fio_json(fixture_text("fio/seq-read-healthy.json"))
    j = judge_seq_read(run, SeqReadParams(), thresholds())
    expected_mb_s = run.jobs[0].read.bw_bytes_per_s / 1e6
    assert j.status is Status.PASS
    assert j.measured == pytest.approx(expected_mb_s, abs=0.05)
    assert j.unit == "MB/s"
    assert j.expected.startswith(">= 50 MB/s")
    assert j.percent_of_limit is None  # the demo ref is nominal, not a physical limit
    assert {"iops", "clat_p99_ms", "io_mib", "fio_version"} <= set(j.details)


def test_slow_node_fails_and_says_by_how_much(fixture_text):
    run = parse_fio_json(fixture_text("fio/seq-read-healthy.json"))
    measured = run.jobs[0].read.bw_bytes_per_s / 1e6
    j = judge_seq_read(run, SeqReadParams(), thresholds(ref=measured * 10, min_ratio=0.9))
    assert j.status is Status.FAIL
    assert f"misses >= {round(measured * 9):,} MB/s (0.9 x {round(measured * 10):,} MB/s)" \
        in j.message


def test_percent_of_physical_limit(fixture_text):
    run = parse_fio_json(fixture_text("fio/seq-read-healthy.json"))
    measured = run.jobs[0].read.bw_bytes_per_s / 1e6
    j = judge_seq_read(run, SeqReadParams(), thresholds(ref=measured * 2, limit=True))
    assert j.percent_of_limit == pytest.approx(50.0, abs=0.1)
    assert "50% of the" in j.message


def test_job_error_is_error_not_pass(fixture_text):
    run = parse_fio_json(fixture_text("fio/seq-read-open-failed-enoent.json"))
    j = judge_seq_read(run, SeqReadParams(), thresholds(ref=0.001, min_ratio=0.001))
    assert j.status is Status.ERROR
    assert "error 2 (No such file or directory)" in j.message


def test_no_read_data_is_error(fixture_text):
    run = parse_fio_json(fixture_text("fio/write-only-no-read-data.json"))
    j = judge_seq_read(run, SeqReadParams(), thresholds(ref=0.001, min_ratio=0.001))
    assert j.status is Status.ERROR
    assert "read no data" in j.message


def test_other_patterns_build_their_commands():
    from rackgate.checks import REGISTRY

    hv = {"rackgate_scratch_path": "/s", "inventory_hostname": "n1",
          "rackgate_parallel_fs_mount": "/lustre"}
    cmd = {name: REGISTRY[name].command(REGISTRY[name].params_model(), hv) for name in
           ("fio.seq_write", "fio.rand_read", "fio.checkpoint", "fio.pfs.checkpoint")}
    assert "--rw=write" in cmd["fio.seq_write"] and "--time_based=1" in cmd["fio.seq_write"]
    assert {"--rw=randread", "--bs=4K", "--iodepth=32"} <= set(cmd["fio.rand_read"])
    assert {"--fsync=64", "--end_fsync=1"} <= set(cmd["fio.checkpoint"])
    assert "--time_based=1" not in cmd["fio.checkpoint"]
    assert "--filename_format=/lustre/rackgate/n1/rackgate-checkpoint.$jobnum.dat" in \
        cmd["fio.pfs.checkpoint"]


def test_parallel_fs_checks_skip_without_a_mount():
    from rackgate.checks import REGISTRY

    check = REGISTRY["fio.pfs.seq_read"]
    assert "no parallel file system" in check.applies(Hardware())
    assert check.applies(Hardware(storage=StorageSpec(parallel_fs_mount="/lustre",
                                                      source="site storage plan"))) is None
    with pytest.raises(CommandError, match="no parallel file system mount"):
        check.command(check.params_model(), {"inventory_hostname": "n1"})


def test_seq_write_and_checkpoint_judged_on_write_bandwidth(fixture_text):
    from rackgate.checks.storage.fio import judge_checkpoint, judge_seq_write

    for judge, name in ((judge_seq_write, "seq-write-healthy.json"),
                        (judge_checkpoint, "checkpoint-2jobs-fsync-healthy.json")):
        run = parse_fio_json(fixture_text(f"fio/{name}"))
        j = judge(run, SeqReadParams(), {"write_bw": FLOOR})
        assert j.status is Status.PASS and j.measured > 100, name
    # a read-only run judged as a write is an error, not a pass
    run = parse_fio_json(fixture_text("fio/seq-read-healthy.json"))
    assert judge_seq_write(run, SeqReadParams(), {"write_bw": FLOOR}).status is Status.ERROR


def test_rand_read_judged_on_iops_and_p99(fixture_text):
    from rackgate.checks.storage.fio import judge_rand_read

    run = parse_fio_json(fixture_text("fio/rand-read-4k-qd32-healthy.json"))
    iops = Threshold(unit="IOPS", ref=10000, min_ratio=0.5, basis="a figure for the test")
    p99_ok = Threshold(unit="ms", ref=100, max_ratio=1.0, basis="a figure for the test")
    p99_tight = Threshold(unit="ms", ref=0.001, max_ratio=1.0, basis="a figure for the test")
    ok = judge_rand_read(run, SeqReadParams(), {"read_iops": iops, "read_p99_ms": p99_ok})
    assert ok.status is Status.PASS and ok.unit == "IOPS" and ok.measured > 5000
    bad = judge_rand_read(run, SeqReadParams(), {"read_iops": iops, "read_p99_ms": p99_tight})
    assert bad.status is Status.FAIL and "p99 completion latency" in bad.message


# ------------------------------------------------------------ degraded evidence (issue 11)
# Healthy sources: tests/fixtures/fio/seq-read-healthy.json and rand-read-4k-qd32-healthy.json
# (real fio-3.33 runs, headers there).

FIX = Path(__file__).parents[3] / "fixtures"
BASIS = "a figure for the unit tests"
READ_BW = {"read_bw": Threshold(unit="MB/s", ref=1000, min_ratio=0.5, basis=BASIS)}
RAND = {"read_iops": Threshold(unit="IOPS", ref=30000, min_ratio=0.5, basis=BASIS),
        "read_p99_ms": Threshold(unit="ms", ref=10, max_ratio=1.0, basis=BASIS)}
SEQ = (FIX / "fio" / "seq-read-healthy.json").read_text(encoding="utf-8")
RANDREAD = (FIX / "fio" / "rand-read-4k-qd32-healthy.json").read_text(encoding="utf-8")


# The figures and lines fio's judges read (fio 3.x's "bw" is read only without "bw_bytes",
# and job options are not read at all: fio repeats an option given twice).
FIO_NUMBERS = r'"(?:io_bytes|bw_bytes|iops|runtime|error|99\.000000)" : (-?[0-9.]+)'
FIO_LINES = (r'^\s*"(?:(?:fio version|jobname)"\s*:\s*"|(?:jobs|error|read|write|trim|'
             r'io_bytes|bw_bytes|bw|iops|runtime|clat_ns|percentile|99\.000000)"\s*:\s*[-0-9[{])')


def seq_outcome(text: str) -> Status:
    return outcome(parse_fio_json, lambda r: judge_seq_read(r, None, READ_BW), text)  # type: ignore[arg-type]


def rand_outcome(text: str) -> Status:
    return outcome(parse_fio_json, lambda r: judge_rand_read(r, None, RAND), text)  # type: ignore[arg-type]


class TestDegradedFio:
    """Issue 11, fio: degraded fio evidence never passes and never raises anything but ParseError
    (degrade_helpers says how it is degraded)."""

    def test_the_healthy_sources_pass(self):
        assert seq_outcome(SEQ) is Status.PASS
        assert rand_outcome(RANDREAD) is Status.PASS

    @settings(max_examples=100, deadline=None)
    @given(degraded(SEQ, numbers=FIO_NUMBERS, lines=FIO_LINES, end=len(SEQ.rstrip())))
    def test_degraded_fio_seq_read_never_passes(self, text):
        assert seq_outcome(text) in BAD

    @settings(max_examples=100, deadline=None)
    @given(degraded(RANDREAD, numbers=FIO_NUMBERS, lines=FIO_LINES, end=len(RANDREAD.rstrip())))
    def test_degraded_fio_rand_read_never_passes(self, text):
        assert rand_outcome(text) in BAD
