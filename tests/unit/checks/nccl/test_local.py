"""nccl-tests: the parser (text in every layout, JSON), the judge (busbw at the largest
sizes, #wrong, 1 rank, missing summary), the command builder and the peer comparison."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.nccl.fabric import NcclFabricParams, judge_fabric, parse_fabric
from rackgate.checks.nccl.local import (
    NcclParams,
    all_reduce_command,
    judge_nccl,
    large_message_busbw,
    nccl_applies,
    rail_split_env,
)
from rackgate.checks.peers import NAME as PEERS
from rackgate.checks.peers import PeerParams, flag_peer_outliers
from rackgate.checks.shared.base import CommandError
from rackgate.model import Result, Status
from rackgate.parsers import ParseError
from rackgate.parsers.nccl_tests import NcclTestsRun, parse_nccl_tests

PEER_SETTINGS = PeerParams.model_validate(load_profile("demo").rack_check(PEERS).params)


H100 = load_profile("dgx-h100")
HW = H100.model.hardware
T = H100.check("nccl.all_reduce").thresholds  # type: ignore[union-attr]
P = NcclParams()


@pytest.fixture
def nccl(fixture_text):
    def read(name: str) -> str:
        text = fixture_text(f"nccl/{name}")
        return text.partition("\n# ---\n")[2] if "\n# ---\n" in text else text
    return read


def judge(run: NcclTestsRun, params: NcclParams = P):
    return judge_nccl(run, params, T, HW)


# ------------------------------------------------------------------------------ parser


def test_healthy_text_parses_header_ranks_rows_and_summary(nccl):
    run = parse_nccl_tests(nccl("allreduce-8xh100-healthy.txt"))
    assert (run.tests_version, run.nccl_version, run.program) == ("2.18.0", "2.21.5",
                                                                   "all_reduce_perf")
    assert (run.n_threads, run.n_gpus, run.validation) == (1, 8, 1)
    assert len(run.ranks) == 8 and run.ranks[3].bus_id == "0000:5d:00"
    assert run.ranks[0].device_name == "NVIDIA H100 80GB HBM3" and run.ranks[0].group == 0
    assert len(run.rows) == 31 and run.rows[-1].size_bytes == 8 * 2**30
    last = run.rows[-1]
    assert (last.redop, last.root, last.type) == ("sum", -1, "float")
    assert last.out_of_place is not None and last.out_of_place.busbw_gbps == 477.57
    assert last.in_place is not None and last.in_place.wrong == 0
    assert run.out_of_bounds == 0 and run.complete
    assert run.avg_busbw_gbps is not None and run.avg_busbw_gbps < 200


def test_json_parses_to_the_same_record_shape(nccl):
    run = parse_nccl_tests(nccl("allreduce-8xh100-healthy.json"))
    assert run.source_format == "json" and run.nccl_version == "2.21.5"
    assert len(run.rows) == 31 and len(run.ranks) == 8 and run.complete
    assert run.rows[-1].root == -1 and run.rows[-1].out_of_place is not None
    assert run.rows[0].out_of_place.wrong == 0  # type: ignore[union-attr]


def test_json_truncated_file_is_a_parse_error(nccl):
    text = nccl("allreduce-8xh100-healthy.json")
    with pytest.raises(ParseError, match="truncated"):
        parse_nccl_tests(text[: len(text) // 2])


def test_srun_labels_and_interleaved_nccl_info_are_removed(nccl):
    run = parse_nccl_tests(nccl("allreduce-2node-srun-label.txt"))
    assert run.task_labels == ("0",) and len(run.ranks) == 16 and len(run.rows) == 31
    assert run.nccl_version == "2.21.5" and run.complete


def test_rows_from_two_tasks_are_refused(nccl):
    text = nccl("allreduce-2node-srun-label.txt")
    two = text + text.replace("0: ", "1: ")
    with pytest.raises(ParseError, match="2 tasks"):
        parse_nccl_tests(two)


def test_old_layout_error_column_without_redop_root_or_group(nccl):
    run = parse_nccl_tests(nccl("allgather-8xa100-old-error-column.txt"))
    assert run.error_column == "error" and run.ranks[0].group is None
    last = run.rows[-1]
    assert (last.redop, last.root) == ("", None)
    assert last.out_of_place is not None and last.out_of_place.wrong is None
    assert last.out_of_place.max_error == 0.0


def test_busbw_zero_and_na_wrong(nccl):
    run = parse_nccl_tests(nccl("alltoall-1gpu-busbw-zero-inplace-na.txt"))
    row = run.rows[0]
    assert row.out_of_place is not None and row.out_of_place.busbw_gbps == 0.0
    assert row.in_place is not None and row.in_place.wrong is None
    assert row.redop == "none" and run.avg_busbw_gbps == 0.0


def test_truncated_row_names_the_line(nccl):
    with pytest.raises(ParseError, match=r"line \d+: expected a size row .*truncated"):
        parse_nccl_tests(nccl("allreduce-8xh100-truncated-mid-row.txt"))


def test_no_size_rows_is_an_error_quoting_the_failure(nccl):
    with pytest.raises(ParseError, match=r"no size rows.*NCCL WARN Cuda failure"):
        parse_nccl_tests(nccl("allreduce-8xh100-init-failed-no-rows.txt"))


@pytest.mark.parametrize("text", ["", "   \n", "hello\n", "# nThread 1 nGpus 8\n"])
def test_empty_or_rowless_output_is_an_error(text):
    with pytest.raises(ParseError, match=r"no size rows|empty"):
        parse_nccl_tests(text)


def test_noise_inside_the_table_is_named(nccl):
    text = nccl("allreduce-8xh100-healthy.txt").replace(
        "  1048576 ", "Segmentation fault\n  1048576 ", 1)
    with pytest.raises(ParseError, match="inside the results table, got 'Segmentation fault'"):
        parse_nccl_tests(text)


def test_timestamp_and_large_wrong_counts_in_g_notation():
    text = ("#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong "
            "timestamp\n"
            "1073741824 268435456 float sum -1 3000.0 357.9 626.3 1.23457e+06 3000.0 357.9 "
            "626.3 0 2026-11-29 10:00:01\n")
    row = parse_nccl_tests(text).rows[0]
    assert row.out_of_place is not None and row.out_of_place.wrong == 1234570
    assert row.in_place is not None and row.in_place.wrong == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**36), st.floats(0, 1e4, allow_nan=False),
                          st.integers(0, 10**6) | st.none()), min_size=1, max_size=20,
                unique_by=lambda row: row[0]),  # one run prints each size once
       st.sampled_from(["", "0: ", "[1,0]<stdout>:", "  "]))
def test_property_every_formatted_row_round_trips(rows, prefix):
    lines = ["#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong"]
    for size, bw, wrong in rows:
        w = "N/A" if wrong is None else f"{wrong:g}"
        lines.append(f"{size:12d}  {size // 4:12d}  float  sum  -1  12.5  {bw:.2f}  {bw:.2f}  "
                     f"{w}  12.5  {bw:.2f}  {bw:.2f}  {w}")
    run = parse_nccl_tests("\n".join(prefix + line for line in lines) + "\n")
    assert [r.size_bytes for r in run.rows] == [s for s, _, _ in rows]
    for r, (_, bw, wrong) in zip(run.rows, rows, strict=True):
        assert r.out_of_place is not None
        assert r.out_of_place.busbw_gbps == pytest.approx(round(bw, 2))
        assert r.out_of_place.wrong == (None if wrong is None else int(float(f"{wrong:g}")))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_property_arbitrary_text_parses_or_raises_parse_error(text):
    try:
        run = parse_nccl_tests(text)
    except ParseError:
        return
    assert run.rows


# ------------------------------------------------------------------------------- judge


def test_healthy_node_passes_on_the_large_sizes_not_the_average(nccl):
    run = parse_nccl_tests(nccl("allreduce-8xh100-healthy.txt"))
    j = judge(run)
    assert j.status is Status.PASS, j.message
    assert j.measured is not None and 460 < j.measured < 480
    assert j.percent_of_limit is not None and j.percent_of_limit > 100  # NVLS
    assert run.avg_busbw_gbps is not None and run.avg_busbw_gbps < T["busbw"].lower_bound  # type: ignore[operator]
    assert j.better == "higher" and "of the 450 GB/s limit" in j.message
    assert j.details["judged_sizes"].count(",") == 3  # 1, 2, 4, 8 GiB


def test_json_healthy_passes(nccl):
    assert judge(parse_nccl_tests(nccl("allreduce-8xh100-healthy.json"))).status is Status.PASS


def test_slow_nvlink_fails_below_the_floor(nccl):
    j = judge(parse_nccl_tests(nccl("allreduce-8xh100-nvlink-gpu3-slow.txt")))
    assert j.status is Status.FAIL and j.measured is not None and j.measured < 337.5
    assert "misses >= 337.5 GB/s" in j.message


def test_wrong_elements_fail_naming_size_and_count(nccl):
    j = judge(parse_nccl_tests(nccl("allreduce-8xh100-wrong-elements.txt")))
    assert j.status is Status.FAIL
    assert "1073741824 B out-of-place: 1024 wrong" in j.message
    assert "Out of bounds values: 2" in j.message


def test_one_rank_busbw_zero_is_an_error(nccl):
    j = judge(parse_nccl_tests(nccl("alltoall-1gpu-busbw-zero-inplace-na.txt")),
              NcclParams(max_bytes="32M", judge_min_bytes="32M"))
    assert j.status is Status.ERROR and "1 rank" in j.message


def test_missing_summary_is_an_error_unless_waived(nccl):
    text = nccl("allreduce-8xh100-healthy.txt")
    cut = text[: text.index("# Out of bounds")]
    assert judge(parse_nccl_tests(cut)).status is Status.ERROR
    assert judge(parse_nccl_tests(cut), NcclParams(require_summary=False)).status is Status.PASS


def test_sweep_below_judge_min_bytes_is_an_error(nccl):
    text = nccl("allreduce-8xh100-healthy.txt")
    small = "\n".join(line for line in text.splitlines()
                      if not line.strip()[:1].isdigit() or int(line.split()[0]) < 2**29)
    j = judge(parse_nccl_tests(small))
    assert j.status is Status.ERROR and "below the bandwidth plateau" in j.message


def test_missing_threshold_is_an_error(nccl):
    run = parse_nccl_tests(nccl("allreduce-8xh100-healthy.txt"))
    assert judge_nccl(run, P, {}, HW).status is Status.ERROR


def test_inplace_disagreement_is_noted(nccl):
    run = parse_nccl_tests(nccl("allreduce-8xh100-healthy.txt"))
    last = run.rows[-1]
    assert last.in_place is not None
    slow = replace(last, in_place=replace(last.in_place, busbw_gbps=300.0))
    j = judge(replace(run, rows=(*run.rows[:-1], slow)))
    assert j.status is Status.PASS and "in-place 300" in str(j.details["inplace_8589934592"])


def test_large_message_busbw_is_the_median_of_the_plateau(nccl):
    run = parse_nccl_tests(nccl("allreduce-8xh100-healthy.txt"))
    plateau = sorted(r.out_of_place.busbw_gbps for r in run.rows  # type: ignore[union-attr]
                     if r.size_bytes >= 2**30)
    assert large_message_busbw(run, 2**30) == pytest.approx((plateau[1] + plateau[2]) / 2)


def test_straggler_among_healthy_peers_becomes_warn(nccl):
    run = parse_nccl_tests(nccl("allreduce-8xh100-healthy.txt"))

    def scaled(k: float) -> NcclTestsRun:
        return replace(run, rows=tuple(
            replace(r, out_of_place=replace(r.out_of_place,
                                            busbw_gbps=r.out_of_place.busbw_gbps * k))
            if r.out_of_place else r for r in run.rows))

    factors = [1.0, 0.99, 1.01, 0.995, 1.005, 0.80]  # the last: passes 337.5 but lags
    results = []
    for i, k in enumerate(factors):
        j = judge(scaled(k))
        assert j.status is Status.PASS
        results.append(Result.from_judgement(f"gpu-a{i:02d}", "nccl.all_reduce", j, None))
    flagged = flag_peer_outliers(results, PEER_SETTINGS)
    assert [r.status for r in flagged] == [Status.PASS] * 5 + [Status.WARN]
    assert "peer outlier" in flagged[-1].message


# ----------------------------------------------------------------------------- command


def test_command_takes_the_profile_params_and_role_path():
    argv = all_reduce_command(NcclParams(min_bytes="1M", max_bytes="4G", iters=50,
                                         datatype="bfloat16", check_iters=0), {})
    assert argv[0] == "/opt/nccl-tests/2.17.6/build/all_reduce_perf"
    assert argv[1:] == ["-b", "1M", "-e", "4G", "-f", "2", "-g", "8", "-n", "50", "-w", "5",
                        "-d", "bfloat16", "-c", "0", "-o", "sum"]


def test_command_path_from_hostvars_and_no_op_for_alltoall():
    hv = {"nccl_tests_prefix": "/site/nccl-tests", "nccl_tests_version": "2.19.6"}
    argv = REGISTRY["nccl.alltoall"].command(NcclParams(), hv)
    assert argv[0] == "/site/nccl-tests/2.19.6/build/alltoall_perf" and "-o" not in argv
    assert REGISTRY["nccl.sendrecv"].command(
        NcclParams(), {"rackgate_nccl_tests_dir": "/x/build/"})[0] == "/x/build/sendrecv_perf"
    with pytest.raises(CommandError, match="absolute"):
        all_reduce_command(NcclParams(), {"rackgate_nccl_tests_dir": "build"})


def test_role_defaults_match_the_default_path():
    from pathlib import Path

    import yaml
    defaults = yaml.safe_load((Path(__file__).parents[4] / "roles/nccl/defaults/main.yml")
                              .read_text())
    assert all_reduce_command(NcclParams(), {})[0] == \
        f"{defaults['nccl_tests_prefix']}/{defaults['nccl_tests_version']}/build/all_reduce_perf"


def test_per_rail_is_refused_at_node_scope_and_given_to_the_multinode_runner():
    with pytest.raises(ValueError, match="multi-node scope"):
        NcclParams(per_rail=True)
    assert rail_split_env(8) == {"NCCL_TESTS_SPLIT": "MOD 8"}
    with pytest.raises(ValueError, match="judge_min_bytes"):
        NcclParams(max_bytes="512M")


def test_checks_skip_on_the_demo_profile_with_a_reason():
    from rackgate.placement.evidence import not_applicable
    demo = load_profile("demo")
    for name in ("nccl.all_reduce", "nccl.all_gather", "nccl.reduce_scatter", "nccl.alltoall",
                 "nccl.sendrecv"):
        r = not_applicable("rg-node01", REGISTRY[name], demo)
        assert r is not None and r.status is Status.SKIP and "no GPU" in r.message
    assert nccl_applies(HW) is None


# ------------------------------------------------------------ degraded evidence (issue 11)
# Degradations: a non-finite number (nan, inf, -inf, 1e400, NaN, Infinity) in any figure of
# any size row, a size row or rail section given twice, and the output cut anywhere before
# its last summary line (``### end`` for the per-rail run).

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "nccl"
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


def with_cell(text: str, row: int, cell: int, value: str) -> str:
    """Size row number ``row`` (of the rows) with its ``cell``-th figure from the right
    (the measurement columns: time, algbw, busbw, #wrong of both sides) replaced."""
    lines = text.splitlines()
    index = [i for i, ln in enumerate(lines) if ROW.match(ln)][row]
    tokens = lines[index].split()
    tokens[-1 - cell] = value
    lines[index] = "  ".join(tokens)
    return "\n".join(lines) + "\n"


class TestDegradedNcclTests:
    """Property tests, the nccl family: degraded copies of the project's healthy nccl-tests
    fixtures (tests/fixtures/nccl, written from NVIDIA/nccl-tests' published layout) never
    raise anything but ParseError and never judge ``pass``."""

    def test_the_undegraded_fixtures_pass(self) -> None:
        assert node_status(HEALTHY) == node_status(JSON) == rails_status(PER_RAIL) == "pass"

    @settings(max_examples=60, deadline=None)
    @given(st.integers(0, len(ROWS) - 1), st.integers(0, 7), NON_FINITE)
    def test_a_non_finite_figure_anywhere_is_a_parse_error(self, row: int, cell: int,
                                                           value: str) -> None:
        text = with_cell(HEALTHY, row, cell, value)
        try:
            parse_nccl_tests(text)
        except ParseError as exc:
            assert re.search(r"line \d+", str(exc))
        else:
            raise AssertionError(f"{value} in row {row}, cell {cell} parsed")

    @settings(max_examples=40, deadline=None)
    @given(st.integers(0, len(ROWS) - 1), st.integers(0, 7), NON_FINITE, st.integers(0, 7))
    def test_a_non_finite_figure_in_one_rail_never_passes(self, row: int, cell: int, value: str,
                                                          rail: int) -> None:
        sections = PER_RAIL.split("### rail ")
        sections[rail + 1] = with_cell(sections[rail + 1], row, cell, value)
        assert rails_status("### rail ".join(sections)) == "error"

    @settings(max_examples=40, deadline=None)
    @given(st.data())
    def test_a_non_finite_json_figure_is_a_parse_error(self, data: st.DataObject) -> None:
        numbers = [m.start(1) for m in re.finditer(r'"(?:time|alg_bw|bus_bw|size|count)": '
                                                   r'(-?[0-9.e+]+)', JSON)]
        at = data.draw(st.sampled_from(numbers))
        end = re.match(r"-?[0-9.e+]+", JSON[at:])
        assert end is not None
        text = JSON[:at] + data.draw(NON_FINITE) + JSON[at + end.end():]
        assert node_status(text) == "error"

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.integers(0, len(ROWS) - 1), min_size=1, max_size=3))
    def test_a_duplicated_size_row_never_passes(self, rows: list[int]) -> None:
        lines = HEALTHY.splitlines()
        for r in sorted(set(rows), reverse=True):
            lines.insert(ROWS[r] + 1, lines[ROWS[r]])
        assert node_status("\n".join(lines) + "\n") == "error"

    @settings(max_examples=40, deadline=None)
    @given(st.integers(0, len(HEALTHY.splitlines()) - 1))
    def test_any_duplicated_line_raises_only_parse_error(self, line: int) -> None:
        lines = HEALTHY.splitlines()
        lines.insert(line, lines[line])
        node_status("\n".join(lines))  # anything but ParseError fails the test

    @settings(max_examples=30, deadline=None)
    @given(st.integers(0, 7))
    def test_a_duplicated_rail_section_never_passes(self, rail: int) -> None:
        sections = PER_RAIL.split("### rail ")
        sections.insert(rail + 1, sections[rail + 1])
        assert rails_status("### rail ".join(sections)) == "error"

    @settings(max_examples=60, deadline=None)
    @given(st.integers(0, HEALTHY.index("# Avg bus bandwidth")))
    def test_a_truncated_output_never_passes(self, cut: int) -> None:
        assert node_status(HEALTHY[:cut]) == "error"

    @settings(max_examples=40, deadline=None)
    @given(st.integers(0, len(JSON) - 2))
    def test_a_truncated_json_file_never_passes(self, cut: int) -> None:
        assert node_status(JSON[:cut]) == "error"

    @settings(max_examples=40, deadline=None)
    @given(st.integers(0, PER_RAIL.rindex("### end")))
    def test_a_truncated_per_rail_run_never_passes(self, cut: int) -> None:
        assert rails_status(PER_RAIL[:cut]) == "error"

    @settings(max_examples=60, deadline=None)
    @given(st.text(alphabet=st.sampled_from("#0123456789 .:=\nabcdeinfrlx_-"), max_size=200))
    def test_arbitrary_rails_text_raises_only_parse_error(self, text: str) -> None:
        rails_status("### rackgate-rails rails=8\n" + text)
        rails_status(text)
