"""Property tests, the MPI family: degraded copies of the project's healthy MPI probe
output (tests/fixtures/mpi, written in the format of rackgate's probe,
probes/mpi_allreduce.py) never raise anything but ParseError and never judge ``pass``.

Degradations: a non-finite number (nan, inf, -inf, 1e400, NaN, Infinity) in any figure of
any row, a row given twice, and the output cut anywhere before its last row ends.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import load_profile
from rackgate.checks.mpi import AllreduceParams, judge_allreduce
from rackgate.parsers import ParseError
from rackgate.parsers.mpi_allreduce import parse_mpi_allreduce
from rackgate.profile import Threshold

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "mpi"
PARAMS = AllreduceParams(sizes=[1024, 65536, 1048576, 4194304], judge_min_bytes=1048576,
                         iters=10)  # the fixtures' --iters (the demo profile's)
T = {"busbw": Threshold(unit="GB/s", ref=0.05, min_ratio=1.0, basis="test threshold")}
HW = load_profile("demo").model.hardware
NODES = ["rg-node01", "rg-node02"]
NON_FINITE = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "nan", "inf", "-inf"])
HEALTHY = "".join(line + "\n" for line in (FIX / "allreduce-2nodes-srun-healthy.txt")
                  .read_text(encoding="utf-8").splitlines() if not line.startswith("#"))
FIELDS = ("bytes", "iters", "time_us", "algbw_gbps", "busbw_gbps", "wrong")


def status(text: str) -> str:
    try:
        run = parse_mpi_allreduce(text)
    except ParseError:
        return "error"
    return judge_allreduce(run, PARAMS, T, HW, nodes=NODES).status.label


def test_the_undegraded_fixture_passes() -> None:
    assert status(HEALTHY) == "pass"


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.sampled_from(FIELDS), NON_FINITE)
def test_a_non_finite_figure_in_any_row_never_passes(row: int, field: str, value: str) -> None:
    lines = HEALTHY.splitlines()
    lines[row] = re.sub(rf'"{field}": [^,}}]+', f'"{field}": {value}', lines[row])
    assert status("\n".join(lines)) == "error"


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=3))
def test_a_duplicated_line_never_passes(rows: list[int]) -> None:
    lines = HEALTHY.splitlines()
    for r in sorted(set(rows), reverse=True):
        lines.insert(r + 1, lines[r])
    assert status("\n".join(lines)) == "error"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, HEALTHY.rstrip().rindex("}")))
def test_a_truncated_output_never_passes(cut: int) -> None:
    assert status(HEALTHY[:cut]) == "error"


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from('{}[]":,0123456789.eE-+ NaInfity\nbytesr'),
               max_size=200))
def test_arbitrary_text_raises_only_parse_error(text: str) -> None:
    status(text)
    status(HEALTHY.splitlines()[0] + "\n" + text)
