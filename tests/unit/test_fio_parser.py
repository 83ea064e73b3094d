"""parse_fio_json on real fio 3.33 output captured here (tests/fixtures/fio, see headers)."""

from __future__ import annotations

import pytest

from rackgate.parsers import ParseError
from rackgate.parsers.fio import parse_fio_json


def test_healthy_seq_read(fixture_text):
    run = parse_fio_json(fixture_text("fio/seq-read-healthy.json"))
    assert run.version == "fio-3.33"
    (job,) = run.jobs
    assert job.name == "rackgate_seq_read"
    assert job.error == 0
    assert job.read is not None and job.read.io_bytes > 0
    assert job.read.bw_bytes_per_s > 0
    assert job.read.clat_p99_ns is not None and job.read.clat_p99_ns > 0
    assert job.write is not None and job.write.io_bytes == 0


def test_note_before_json_is_skipped(fixture_text):
    text = fixture_text("fio/seq-read-note-before-json.txt")
    assert "note: both iodepth" in text
    assert parse_fio_json(text).jobs[0].read.io_bytes > 0


def test_job_error_is_reported_not_hidden(fixture_text):
    (job,) = parse_fio_json(fixture_text("fio/seq-read-open-failed-enoent.json")).jobs
    assert job.error == 2


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.95])
def test_truncated_output_is_a_parse_error(fixture_text, cut):
    text = fixture_text("fio/seq-read-healthy.json")
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_fio_json(text[: int(len(text) * cut)])


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("fio: failed parsing rw=reed\n", "no line starts with"),
        ("[1, 2]", "no line starts with"),
        ('{"fio version": "fio-3.33"}', "'jobs' is missing"),
        ('{"jobs": []}', "'jobs' is missing or empty"),
        ('{"jobs": [{"jobname": "x", "read": {"io_bytes": "lots"}}]}',
         r"jobs\[0\].read.io_bytes is missing or not a number"),
    ],
)
def test_malformed_output_names_what_is_wrong(text, match):
    with pytest.raises(ParseError, match=match):
        parse_fio_json(text)


def test_old_fio_without_bw_bytes_uses_kib_per_s():
    # fio 2.x JSON (fio's own docs, HOWTO "JSON output"): bw in KiB/s, clat in usec
    run = parse_fio_json('{"fio version": "fio-2.2.10", "jobs": [{"jobname": "j", "error": 0,'
                         ' "read": {"io_bytes": 1024, "bw": 2048, "iops": 2, "runtime": 500,'
                         ' "clat": {"percentile": {"99.000000": 1500}}}}]}')
    read = run.jobs[0].read
    assert read.bw_bytes_per_s == 2048 * 1024
    assert read.clat_p99_ns == 1_500_000
