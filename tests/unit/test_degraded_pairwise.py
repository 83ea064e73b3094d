"""Property tests, the pairwise family: degraded copies of the project's healthy perftest
fixtures (tests/fixtures/perftest, written from linux-rdma/perftest's published format),
alone and inside rackgate's pairwise run, never raise anything but ParseError and never
judge ``pass``.

Degradations: a non-finite number (nan, inf, -inf, 1e400, NaN, Infinity) in any cell of a
result row, a result row or pair section given twice, and the output cut anywhere before
the table's closing dashed line (``### end`` for the pairwise run).
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import load_profile
from rackgate.checks.fabric.pairwise import PairwiseParams, judge_nodes
from rackgate.checks.shared.pairs import round_robin
from rackgate.parsers import ParseError
from rackgate.parsers.pairwise import parse_pairwise
from rackgate.parsers.perftest import parse_ib_read_lat, parse_ib_write_bw

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "perftest"
HW = load_profile("dgx-h100").model.hardware
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]
PARAMS = PairwiseParams(device="mlx5_0", size_bytes=65536)
NON_FINITE = st.sampled_from(["nan", "inf", "-inf", "1e400", "NaN", "Infinity", "-Infinity"])
ROW = re.compile(r"^\s*\d+\s+\d")


def perftest(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


SINGLE = perftest("ib_write_bw-ndr400-64k-healthy.txt")  # -s 65536 on mlx5_0: PARAMS' run
SWEEP = perftest("ib_write_bw-ndr400-sweep-gbits-healthy.txt")
LAT = perftest("ib_read_lat-ndr-2b-healthy.txt")


def pairwise_output(client: str = SINGLE) -> str:
    out = [f"### rackgate-pairwise nodes={','.join(NODES)} rounds=3"]
    for r, pairs in enumerate(round_robin(NODES), start=1):
        for a, b in pairs:
            out += [f"### pair round={r} server={a} client={b} rc=0", "1: rackgate-role=client",
                    *(f"1: {line}" for line in client.splitlines())]
    return "\n".join([*out, "### end"]) + "\n"


RUN = pairwise_output()


def statuses(text: str) -> dict[str, str]:
    """Each node's status (every node errs when the run is unparseable)."""
    try:
        run = parse_pairwise(text)
    except ParseError:
        return dict.fromkeys(NODES, "error")
    results, _ = judge_nodes(run, PARAMS, {}, HW, NODES, "evidence/x.out")
    return {r.node: r.status.label for r in results}


PAIRS = [p for rnd in round_robin(NODES) for p in rnd]  # in section order


def bw_parses(text: str) -> bool:
    try:
        parse_ib_write_bw(text)
    except ParseError:
        return False
    return True


def with_cell(text: str, row: int, cell: int, value: str) -> str:
    lines = text.splitlines()
    index = [i for i, ln in enumerate(lines) if ROW.match(ln)][row]
    tokens = lines[index].split()
    tokens[cell % len(tokens)] = value
    lines[index] = " ".join(tokens)
    return "\n".join(lines) + "\n"


def test_the_undegraded_fixtures_pass() -> None:
    assert bw_parses(SINGLE) and bw_parses(SWEEP)
    assert set(statuses(RUN).values()) == {"pass"}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 22), st.integers(0, 4), NON_FINITE)
def test_a_non_finite_cell_is_a_parse_error(row: int, cell: int, value: str) -> None:
    assert not bw_parses(with_cell(SWEEP, row, cell, value))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 8), NON_FINITE)
def test_a_non_finite_latency_cell_is_a_parse_error(cell: int, value: str) -> None:
    text = with_cell(LAT, 0, cell, value)
    try:
        parse_ib_read_lat(text)
    except ParseError:
        return
    raise AssertionError(f"{value} in latency cell {cell} parsed")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), NON_FINITE, st.integers(0, 5))
def test_a_non_finite_cell_in_one_pair_never_passes(cell: int, value: str, pair: int) -> None:
    sections = RUN.split("### pair ")
    row = next(ln for ln in sections[pair + 1].splitlines() if ln.startswith("1:  65536"))
    tokens = row.split()
    tokens[1 + cell] = value
    sections[pair + 1] = sections[pair + 1].replace(row, " ".join(tokens))
    status = statuses("### pair ".join(sections))
    assert {status[n] for n in PAIRS[pair]} == {"error"}


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 22))
def test_a_duplicated_row_is_a_parse_error(row: int) -> None:
    lines = SWEEP.splitlines()
    index = [i for i, ln in enumerate(lines) if ROW.match(ln)][row]
    lines.insert(index, lines[index])
    assert not bw_parses("\n".join(lines))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 5))
def test_a_duplicated_pair_section_never_passes(pair: int) -> None:
    sections = RUN.split("### pair ")
    sections.insert(pair + 1, sections[pair + 1])
    status = statuses("### pair ".join(sections))
    assert {status[n] for n in PAIRS[pair]} == {"error"}


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_any_duplicated_line_raises_only_parse_error(data: st.DataObject) -> None:
    for text in (SWEEP, RUN):
        lines = text.splitlines()
        at = data.draw(st.integers(0, len(lines) - 1))
        lines.insert(at, lines[at])
        bw_parses("\n".join(lines))
        statuses("\n".join(lines))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, SWEEP.rstrip().rindex("\n")))
def test_a_truncated_table_is_a_parse_error(cut: int) -> None:
    assert not bw_parses(SWEEP[:cut])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, RUN.rindex("### end")))
def test_a_truncated_pairwise_run_never_passes(cut: int) -> None:
    assert set(statuses(RUN[:cut]).values()) == {"error"}
