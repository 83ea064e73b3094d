"""Property tests, the nccl family: degraded copies of the project's healthy nccl-tests
fixtures (tests/fixtures/nccl, written from NVIDIA/nccl-tests' published layout) never
raise anything but ParseError and never judge ``pass``.

Degradations: a non-finite number (nan, inf, -inf, 1e400, NaN, Infinity) in any figure of
any size row, a size row or rail section given twice, and the output cut anywhere before
its last summary line (``### end`` for the per-rail run).
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import load_profile
from rackgate.checks.nccl.fabric import NcclFabricParams, judge_fabric, parse_fabric
from rackgate.checks.nccl.local import NcclParams, judge_nccl
from rackgate.parsers import ParseError
from rackgate.parsers.nccl_tests import parse_nccl_tests

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
H100 = load_profile("dgx-h100")
HW = H100.model.hardware
NODE_T = H100.check("nccl.all_reduce").thresholds  # type: ignore[union-attr]
FABRIC = H100.check("nccl.fabric_all_reduce")
assert FABRIC is not None
RAILS = NcclFabricParams.model_validate(FABRIC.params)
NON_FINITE = st.sampled_from(["nan", "inf", "-inf", "1e400", "NaN", "Infinity", "-Infinity"])
ROW = re.compile(r"^(\d+: )?\s*\d+\s+\d+\s+\w+")


def body(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


HEALTHY = body("allreduce-8xh100-healthy.txt")
JSON = (FIX / "allreduce-8xh100-healthy.json").read_text(encoding="utf-8")
RAIL = body("allreduce-2node-rail-ndr-healthy.txt")
PER_RAIL = "\n".join(["### rackgate-rails rails=8",
                      *(f"### rail index={i} hca={h} rc=0\n{RAIL.rstrip()}"
                        for i, h in enumerate(RAILS.rail_hcas)), "### end"]) + "\n"
ROWS = [i for i, line in enumerate(HEALTHY.splitlines()) if ROW.match(line)]


def node_status(text: str) -> str:
    try:
        run = parse_nccl_tests(text)
    except ParseError:
        return "error"
    return judge_nccl(run, NcclParams(), NODE_T, HW).status.label


def rails_status(text: str) -> str:
    try:
        run = parse_fabric(text)
    except ParseError:
        return "error"
    return judge_fabric(run, RAILS, FABRIC.thresholds, HW).status.label  # type: ignore[union-attr]


def test_the_undegraded_fixtures_pass() -> None:
    assert node_status(HEALTHY) == node_status(JSON) == rails_status(PER_RAIL) == "pass"


def with_cell(text: str, row: int, cell: int, value: str) -> str:
    """Size row number ``row`` (of the rows) with its ``cell``-th figure from the right
    (the measurement columns: time, algbw, busbw, #wrong of both sides) replaced."""
    lines = text.splitlines()
    index = [i for i, ln in enumerate(lines) if ROW.match(ln)][row]
    tokens = lines[index].split()
    tokens[-1 - cell] = value
    lines[index] = "  ".join(tokens)
    return "\n".join(lines) + "\n"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, len(ROWS) - 1), st.integers(0, 7), NON_FINITE)
def test_a_non_finite_figure_anywhere_is_a_parse_error(row: int, cell: int, value: str) -> None:
    text = with_cell(HEALTHY, row, cell, value)
    try:
        parse_nccl_tests(text)
    except ParseError as exc:
        assert re.search(r"line \d+", str(exc))
    else:
        raise AssertionError(f"{value} in row {row}, cell {cell} parsed")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, len(ROWS) - 1), st.integers(0, 7), NON_FINITE, st.integers(0, 7))
def test_a_non_finite_figure_in_one_rail_never_passes(row: int, cell: int, value: str,
                                                      rail: int) -> None:
    sections = PER_RAIL.split("### rail ")
    sections[rail + 1] = with_cell(sections[rail + 1], row, cell, value)
    assert rails_status("### rail ".join(sections)) == "error"


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_non_finite_json_figure_is_a_parse_error(data: st.DataObject) -> None:
    numbers = [m.start(1) for m in re.finditer(r'"(?:time|alg_bw|bus_bw|size|count)": '
                                               r'(-?[0-9.e+]+)', JSON)]
    at = data.draw(st.sampled_from(numbers))
    end = re.match(r"-?[0-9.e+]+", JSON[at:])
    assert end is not None
    text = JSON[:at] + data.draw(NON_FINITE) + JSON[at + end.end():]
    assert node_status(text) == "error"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, len(ROWS) - 1), min_size=1, max_size=3))
def test_a_duplicated_size_row_never_passes(rows: list[int]) -> None:
    lines = HEALTHY.splitlines()
    for r in sorted(set(rows), reverse=True):
        lines.insert(ROWS[r] + 1, lines[ROWS[r]])
    assert node_status("\n".join(lines) + "\n") == "error"


@settings(max_examples=40, deadline=None)
@given(st.integers(0, len(HEALTHY.splitlines()) - 1))
def test_any_duplicated_line_raises_only_parse_error(line: int) -> None:
    lines = HEALTHY.splitlines()
    lines.insert(line, lines[line])
    node_status("\n".join(lines))  # anything but ParseError fails the test


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 7))
def test_a_duplicated_rail_section_never_passes(rail: int) -> None:
    sections = PER_RAIL.split("### rail ")
    sections.insert(rail + 1, sections[rail + 1])
    assert rails_status("### rail ".join(sections)) == "error"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, HEALTHY.index("# Avg bus bandwidth")))
def test_a_truncated_output_never_passes(cut: int) -> None:
    assert node_status(HEALTHY[:cut]) == "error"


@settings(max_examples=40, deadline=None)
@given(st.integers(0, len(JSON) - 2))
def test_a_truncated_json_file_never_passes(cut: int) -> None:
    assert node_status(JSON[:cut]) == "error"


@settings(max_examples=40, deadline=None)
@given(st.integers(0, PER_RAIL.rindex("### end")))
def test_a_truncated_per_rail_run_never_passes(cut: int) -> None:
    assert rails_status(PER_RAIL[:cut]) == "error"


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from("#0123456789 .:=\nabcdeinfrlx_-"), max_size=200))
def test_arbitrary_rails_text_raises_only_parse_error(text: str) -> None:
    rails_status("### rackgate-rails rails=8\n" + text)
    rails_status(text)
