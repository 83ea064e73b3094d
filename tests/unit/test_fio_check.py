"""The fio.seq_read command builder and judge."""

from __future__ import annotations

import pytest

from rackgate.checks import CommandError
from rackgate.checks.fio import SeqReadParams, judge_seq_read, seq_read_command
from rackgate.model import Status
from rackgate.parsers.fio import parse_fio_json
from rackgate.profile import Threshold

FLOOR = Threshold(unit="MB/s", ref=100, min_ratio=0.5, basis="a nominal demo floor")


def thresholds(ref: float = 100, min_ratio: float = 0.5, limit: bool = False):
    return {"read_bw": Threshold(unit="MB/s", ref=ref, min_ratio=min_ratio, limit=limit,
                                 basis="a figure for the test")}


def test_command_uses_scratch_path_and_profile_params():
    argv = seq_read_command(SeqReadParams(size="64M", runtime_s=3, ioengine="psync",
                                          timeout_s=60), {"rackgate_scratch_path": "/scratch/"})
    assert argv[0] == "fio"
    assert "--directory=/scratch" in argv
    assert "--filename_format=rackgate-fio-seq-read.$jobnum.dat" in argv
    assert {"--rw=read", "--size=64M", "--runtime=3", "--ioengine=psync", "--direct=1",
            "--output-format=json", "--unlink=1"} <= set(argv)


def test_command_defaults_to_var_tmp_rackgate():
    assert "--directory=/var/tmp/rackgate" in seq_read_command(SeqReadParams(), {})


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
    assert "misses" in j.message and f"{measured * 9:g}"[:4] in j.message


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
