"""Conformance: the perftest parsers and the pairwise judge on real outputs published by
others (../shared/corpus/perftest, read at test time; skipped when the corpus is absent).

Every ib_write_bw file must parse to a positive bandwidth whose Gb/s figure agrees with
perftest's own message rate (size x Mpps: the check that perftest's "MB" is 2^20 bytes);
ib_read_lat files must parse to ordered latencies. Judged against a line rate, an HDR
figure must fail an NDR profile, and no corpus figure may pass a pair it did not measure.
"""

from __future__ import annotations

import pytest

from conftest import CorpusFile, corpus_params
from rackgate.checks.shared.pairs import judge_pairwise, line_rate_threshold
from rackgate.model import Status
from rackgate.parsers.perftest import parse_ib_read_lat, parse_ib_write_bw
from rackgate.profile import Hardware, NicSpec


def _hw(rate: float) -> Hardware:
    return Hardware(nics=[NicSpec(role="compute", count=1, rate_gbps=rate,
                                  link_layer="InfiniBand", source="conformance test profile")])


@pytest.mark.parametrize("f", corpus_params("perftest", "ib_write_bw-*"))
def test_write_bw_outputs_parse_and_agree_with_the_message_rate(f: CorpusFile) -> None:
    r = parse_ib_write_bw(f.body)
    assert r.rows and r.header.link_type in ("IB", "Ethernet")
    for row in r.rows:
        assert row.bw_average_gbps > 0 and row.iterations > 0
        if row.bw_average_gbps >= 1:  # below that perftest's 2 decimals are too coarse
            assert row.size_bytes * row.msg_rate_mpps * 8e-3 == pytest.approx(
                row.bw_average_gbps, rel=0.01), row
    if "duration" in f.path.name:
        assert r.result.bw_peak_gbps is None and r.bw_unit == "Gb/sec"


@pytest.mark.parametrize("f", corpus_params("perftest", "ib_read_lat-*"))
def test_read_lat_outputs_parse(f: CorpusFile) -> None:
    r = parse_ib_read_lat(f.body)
    row = r.result
    assert row.t_min_us is not None and row.t_max_us is not None
    assert row.t_min_us <= row.t_avg_us <= row.t_max_us
    assert row.t_p99_us is not None and row.t_p99_9_us is not None
    if "cpufreq" in f.path.name:
        assert len(r.warnings) == 2 and r.header.link_type == "Ethernet"


@pytest.mark.parametrize("f", corpus_params("perftest", "ib_write_bw-*"))
def test_corpus_figures_judged_against_ndr(f: CorpusFile) -> None:
    """The corpus machines are HDR (or slower): on an NDR 400 profile they are weak links."""
    bw = parse_ib_write_bw(f.body).bw_average_gbps
    m = judge_pairwise(["x", "y", "z"], {("x", "y"): bw}, line_rate_threshold(_hw(400)))
    assert m.cell("x", "y").status is Status.FAIL  # type: ignore[union-attr]
    assert m.cell("x", "z").status is Status.ERROR  # type: ignore[union-attr]
    assert m.status is Status.ERROR
