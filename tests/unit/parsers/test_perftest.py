"""perftest parsers (ib_write_bw, ib_read_lat) on hand-written fixtures
(tests/fixtures/perftest, one per scenario, written from perftest's published format)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.parsers import ParseError
from rackgate.parsers.perftest import MIB, parse_ib_read_lat, parse_ib_write_bw

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "perftest"


def body(name: str) -> str:
    raw = (FIX / name).read_text(encoding="utf-8")
    _, sep, rest = raw.partition("\n# ---\n")
    assert sep, f"{name} has no '# ---' line after its header"
    return rest


def test_healthy_single_size_in_mib_is_converted_to_gbps():
    r = parse_ib_write_bw(body("ib_write_bw-ndr400-64k-healthy.txt"))
    assert r.bw_unit == "MiB/sec" and len(r.rows) == 1
    row = r.result
    assert (row.size_bytes, row.iterations) == (65536, 5000)
    # perftest divides by 0x100000 for MiB/sec: 46610.83 MiB/s = 391.0 Gb/s
    assert row.bw_average_gbps == pytest.approx(46610.83 * MIB * 8 / 1e9, rel=1e-6)
    assert row.bw_average_gbps == pytest.approx(391.0, abs=0.01)
    assert row.bw_peak_gbps is not None and row.bw_peak_gbps >= row.bw_average_gbps
    # the message rate says the same thing: size x rate = bandwidth
    assert row.size_bytes * row.msg_rate_mpps * 8e-3 == pytest.approx(row.bw_average_gbps,
                                                                      rel=1e-4)
    h = r.header
    assert (h.title, h.device, h.link_type, h.transport, h.connection) == \
        ("RDMA_Write BW Test", "mlx5_0", "IB", "IB", "RC")
    assert (h.mtu_bytes, h.num_qps, h.gid_index) == (4096, 1, None)
    assert [a.side for a in h.addresses] == ["local", "remote"]
    assert h.addresses[0].lid == 0x2F and h.addresses[0].rkey == 0x1FE1C0
    assert h.field("rdma_cm QPs") == "OFF" and h.field("Data ex. method") == "Ethernet"
    assert r.warnings == () and r.notes == ()


def test_sweep_in_gbits_keeps_every_size_and_judges_the_largest():
    r = parse_ib_write_bw(body("ib_write_bw-ndr400-sweep-gbits-healthy.txt"))
    assert r.bw_unit == "Gb/sec"
    assert [row.size_bytes for row in r.rows] == [2 ** k for k in range(1, 24)]
    assert r.result.size_bytes == 8388608 and r.bw_average_gbps == 392.40


def test_degraded_link_parses_as_what_it_measured():
    r = parse_ib_write_bw(body("ib_write_bw-ndr-port-at-hdr-degraded.txt"))
    assert r.header.device == "mlx5_3" and r.bw_average_gbps == 193.42


def test_roce_duration_run_keeps_warnings_gids_and_no_peak():
    r = parse_ib_write_bw(body("ib_write_bw-roce-gid3-duration-warnings.txt"))
    h = r.header
    assert h.link_type == "Ethernet" and h.gid_index == 3 and h.device == "mlx5_2"
    assert [a.gid for a in h.addresses] == [
        "00:00:00:00:00:00:00:00:00:00:255:255:10:40:01:11",
        "00:00:00:00:00:00:00:00:00:00:255:255:10:40:01:12"]
    assert h.addresses[0].lid == 0
    row = r.result
    assert row.bw_peak_gbps is None, "a 0.00 peak is 'not measured', never a bandwidth"
    assert row.bw_average_gbps == pytest.approx(385.2, abs=0.05)
    assert len(r.warnings) == 2
    assert "BW peak won't be measured" in r.warnings[0]
    assert "CPU Frequency is not max" in r.warnings[1]


def test_read_lat_fields():
    r = parse_ib_read_lat(body("ib_read_lat-ndr-2b-healthy.txt"))
    row = r.result
    assert (row.size_bytes, row.iterations) == (2, 1000)
    assert (row.t_min_us, row.t_max_us, row.t_typical_us, row.t_avg_us, row.t_stdev_us,
            row.t_p99_us, row.t_p99_9_us) == (1.96, 5.41, 2.03, 2.05, 0.08, 2.31, 3.77)
    assert not r.duration_mode and r.header.title == "RDMA_Read Latency Test"
    assert r.header.field("Outstand reads") == "16"
    assert r.header.addresses[0].rkey == 0x1FE1C0


def test_read_lat_duration_mode():
    r = parse_ib_read_lat(body("ib_read_lat-ndr-duration.txt"))
    assert r.duration_mode
    row = r.result
    assert (row.t_avg_us, row.tps_average, row.t_min_us, row.t_p99_us) == \
        (2.06, 484987.21, None, None)


def test_connection_failure_names_the_line():
    with pytest.raises(ParseError, match=r"line 1: perftest reported an error: "
                                         r"\"Couldn't connect to node02:18515\""):
        parse_ib_write_bw(body("ib_write_bw-client-couldnt-connect.txt"))


def test_truncated_sweep_is_refused():
    with pytest.raises(ParseError, match="not closed by perftest's dashed line"):
        parse_ib_write_bw(body("ib_write_bw-sweep-truncated.txt"))


@pytest.mark.parametrize("text, match", [
    ("", "no '#bytes' results header"),
    ("hello world\n", "no '#bytes' results header"),
    (" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n", "no result row"),
    (" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 5000 3\n"
     + "-" * 87, "has 3 columns"),
    (" 65536 5000 390 390 0.7\n", "before any '#bytes'"),
    (" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n"
     " 65536 5000 390.00 389.00 0.741959\n 65536 5000 392.00 391.00 0.745773\n" + "-" * 87,
     "second, different result row for 65536 bytes"),
    (" #bytes #widgets\n 1 2\n", "none of perftest's RESULT_FMT"),
    ("Completion with error at client\n", "perftest reported an error"),
    (" Failed status 12: wr_id 0 syndrom 0x81\n", "perftest reported an error"),
])
def test_refusals_name_what_is_wrong(text, match):
    with pytest.raises(ParseError, match=match):
        parse_ib_write_bw(text)


def test_each_parser_refuses_the_other_tools_table():
    with pytest.raises(ParseError, match="latency table"):
        parse_ib_write_bw(body("ib_read_lat-ndr-2b-healthy.txt"))
    with pytest.raises(ParseError, match="bandwidth table"):
        parse_ib_read_lat(body("ib_write_bw-ndr400-64k-healthy.txt"))


def test_send_bw_title_is_not_write_bw():
    text = body("ib_write_bw-ndr400-64k-healthy.txt").replace("RDMA_Write BW", "Send BW")
    with pytest.raises(ParseError, match="not an RDMA_Write BW test"):
        parse_ib_write_bw(text)


def test_crlf_and_both_sides_captured_together():
    one = body("ib_write_bw-ndr400-64k-healthy.txt")
    r = parse_ib_write_bw((one + one).replace("\n", "\r\n"))
    assert len(r.rows) == 1 and len(r.header.addresses) == 4


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(st.text(max_size=300), st.lists(st.sampled_from([
    " #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]", " 2 1000 1 1 1",
    "-" * 87, " Device : mlx5_0", " local address: LID 0x1 QPN 0x2 PSN 0x3", " GID: 0:0",
    "Couldn't connect to x:1", "WARNING: x", "", " 65536 10 zz"]), max_size=12).map("\n".join)))
def test_parsers_only_raise_parse_error(text):
    for parser in (parse_ib_write_bw, parse_ib_read_lat):
        with contextlib.suppress(ParseError):
            parser(text)
