"""parse_fio_json on real fio 3.33 output captured here (tests/fixtures/fio, see headers)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
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


# Property-based: whatever text arrives, the parser returns a record or raises ParseError,
# and a mangled healthy output is never read as a clean measurement of the same run.
HEALTHY = (FIXTURES / "fio" / "seq-read-healthy.json").read_text()


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_is_a_record_or_a_parse_error(text):
    with contextlib.suppress(ParseError):
        parse_fio_json(text)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=len(HEALTHY) - 2))
def test_any_truncation_is_a_parse_error(cut):
    with pytest.raises(ParseError):
        parse_fio_json(HEALTHY[:cut])


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_deleting_a_line_never_yields_a_clean_different_record(data):
    lines = HEALTHY.splitlines(keepends=True)
    i = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    mangled = "".join(lines[:i] + lines[i + 1:])
    full = parse_fio_json(HEALTHY)
    try:
        got = parse_fio_json(mangled)
    except ParseError:
        return
    # the line was a comment or a field the parser does not read (the same figures), or
    # bw_bytes, which falls back to fio's KiB/s "bw": the same figure to a KiB
    got_bw, full_bw = got.jobs[0].read.bw_bytes_per_s, full.jobs[0].read.bw_bytes_per_s
    assert abs(got_bw - full_bw) <= 1024
    assert got.jobs[0].read.io_bytes == full.jobs[0].read.io_bytes
