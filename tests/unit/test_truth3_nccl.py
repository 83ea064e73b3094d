"""Issue 29, the nccl family: r5 (an ``error`` column judged without a rank count when every
value is within the least bound any rank count would give) and a1 (evidence that
contradicts the command the check built is an ``error`` in every nccl-tests judge, and
mpi.allreduce's rows timed over other iterations than asked).

Every input is one of the project's fixtures (tests/fixtures/nccl, tests/fixtures/mpi:
written from NVIDIA/nccl-tests' and rackgate's probe's published output layouts, see their
SOURCES.md) with the one edit the test names: what a run of another command prints there
(nccl-tests ``src/util.cu`` writeDeviceReport and writeBenchmarkLineBody, ``src/common.cu``
setupArgs and the tests' GetCollByteCount). The judges are reached through the registry
(each nccl.<op> check's own judge) with the profile's params, as the runner calls them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.mpi import AllreduceParams, judge_allreduce
from rackgate.checks.nccl.fabric import NcclFabricParams, judge_fabric, parse_fabric
from rackgate.checks.nccl.local import NcclParams
from rackgate.model import Judgement, Status
from rackgate.parsers.mpi_allreduce import parse_mpi_allreduce
from rackgate.parsers.nccl_tests import parse_nccl_tests
from rackgate.profile import Threshold

FIX = Path(__file__).resolve().parents[1] / "fixtures"
H100 = load_profile("dgx-h100")
A100 = load_profile("dgx-a100")
FABRIC = H100.check("nccl.fabric_all_reduce")
assert FABRIC is not None
RAILS = NcclFabricParams.model_validate(FABRIC.params)  # per rail, the profile's 8 HCAs
ONE_JOB = NcclFabricParams(judge_min_bytes="1G")  # one job over every GPU
# a floor without a physical limit, for the runs whose collective's profile threshold is
# another (the all_reduce capture as sendrecv or all_gather rows, one job over 16 ranks)
FLOOR = {"busbw": Threshold(unit="GB/s", ref=400, min_ratio=0.8, basis="test threshold")}


def body(rel: str) -> str:
    return (FIX / rel).read_text(encoding="utf-8").partition("\n# ---\n")[2]


HEALTHY = body("nccl/allreduce-8xh100-healthy.txt")  # all_reduce_perf -b 8 -e 8G -f 2 -g 8
JSON = (FIX / "nccl" / "allreduce-8xh100-healthy.json").read_text(encoding="utf-8")
RAIL_OK = body("nccl/allreduce-2node-rail-ndr-healthy.txt")  # -g 1, 2 nodes, 1 rail
TWO_NODES = body("nccl/allreduce-2node-srun-label.txt")  # -g 1, 16 ranks, one job
OLD = body("nccl/allreduce-8xa100-error-column-unprefixed.txt")  # < 2.13 'error' column
SIZE_ROW = re.compile(r"^(\d+: )?(\s*)(\d+\s+\d+\s+\S+.*)$")


def judge(check: str, text: str, profile: str = "dgx-h100",
          thresholds: Mapping[str, Threshold] | None = None, **params: object) -> Judgement:
    """nccl.<op>'s registered judge on ``text``, the profile's params with ``params``."""
    p = load_profile(profile)
    cp = p.check(check)
    assert cp is not None
    model = NcclParams.model_validate({**cp.params, **params})
    return REGISTRY[check].judge(parse_nccl_tests(text), model, thresholds or cp.thresholds,
                                 p.model.hardware)


def rails(text: str) -> str:
    """The per-rail run of the dgx-h100 profile with every rail's output ``text``."""
    out = [f"### rackgate-rails rails={len(RAILS.rail_hcas)}"]
    for i, hca in enumerate(RAILS.rail_hcas):
        out += [f"### rail index={i} hca={hca} rc=0", text.rstrip("\n")]
    return "\n".join([*out, "### end"]) + "\n"


def fabric(text: str, params: NcclFabricParams = RAILS) -> Judgement:
    thresholds = FABRIC.thresholds if params.per_rail else FLOOR
    return judge_fabric(parse_fabric(text), params, thresholds, H100.model.hardware)


def rows(text: str, edit: Callable[[list[str]], list[str]]) -> str:
    """``text`` with every size row's tokens passed through ``edit`` (labels kept)."""
    out = []
    for line in text.splitlines():
        m = SIZE_ROW.match(line)
        if m and not line.lstrip("0123456789: ").startswith("#") and "NCCL" not in line:
            tokens = edit(m.group(3).split())
            line = f"{m.group(1) or ''}  " + "  ".join(tokens)
        out.append(line)
    return "\n".join(out) + "\n"


def unchecked(text: str, header: bool = True) -> str:
    """What ``-c 0`` prints: N/A in both #wrong cells of every row, validation: 0."""
    text = rows(text, lambda t: [*t[:-5], "N/A", *t[-4:-1], "N/A"])
    return text.replace("validation: 1", "validation: 0") if header else text


def without(text: str, *starts: str) -> str:
    """``text`` without the header lines whose body (after '#') starts with ``starts``."""
    return "".join(line + "\n" for line in text.splitlines()
                   if not re.sub(r"^(\d+: )?[#\s]*", "", line).startswith(starts))


# ------------------------------------------------------------------ the controls


def test_control_the_matching_healthy_runs_pass() -> None:
    assert judge("nccl.all_reduce", HEALTHY).status is Status.PASS
    assert judge("nccl.all_reduce", JSON).status is Status.PASS
    assert fabric(rails(RAIL_OK)).status is Status.PASS
    assert fabric(TWO_NODES, ONE_JOB).status is Status.PASS
    # a -c 0 run judged as the -c 0 command it is: nothing contradicts it
    assert fabric(rails(unchecked(RAIL_OK)), RAILS.model_copy(update={"check_iters": 0})
                  ).status is Status.PASS
    assert judge("nccl.all_reduce", unchecked(HEALTHY), check_iters=0).status is Status.PASS


def test_control_degraded_runs_still_fail() -> None:
    wrong = body("nccl/allreduce-8xh100-wrong-elements.txt")
    assert judge("nccl.all_reduce", wrong).status is Status.FAIL
    slow = body("nccl/allreduce-8xh100-nvlink-gpu3-slow.txt")
    assert judge("nccl.all_reduce", slow).status is Status.FAIL
    assert fabric(rails(body("nccl/allreduce-2node-rail-at-hdr-degraded.txt"))
                  ).status is Status.FAIL


# --------------------------------------------- a1: #wrong N/A where checking was asked


def test_truth3_a1_fabric_run_with_checking_off_is_an_error_when_checking_was_asked() -> None:
    """The latent false ACCEPT: every rail's #wrong N/A (nccl-tests -c 0), the profile's
    command asked -c 1. Main passed it."""
    j = fabric(rails(unchecked(RAIL_OK)))
    assert j.status is Status.ERROR, j.message
    assert "N/A" in j.message and "-c 1" in j.message


def test_truth3_a1_fabric_one_job_with_checking_off_is_an_error() -> None:
    j = fabric(unchecked(TWO_NODES), ONE_JOB)
    assert j.status is Status.ERROR and "not checked" in j.message, j.message


def test_truth3_a1_na_cells_without_a_configuration_line_are_an_error() -> None:
    """An excerpt without the nThread line: the N/A cells alone contradict -c 1."""
    text = without(unchecked(RAIL_OK, header=False), "nThread")
    assert parse_nccl_tests(text).validation is None
    assert fabric(rails(text)).status is Status.ERROR
    node = without(unchecked(HEALTHY, header=False), "nThread")
    j = judge("nccl.all_reduce", node)
    assert j.status is Status.ERROR and "N/A" in j.message, j.message  # main: warn


def test_truth3_a1_node_run_with_checking_off_is_an_error() -> None:
    j = judge("nccl.all_reduce", unchecked(HEALTHY))
    assert j.status is Status.ERROR and "validation (-c) 0" in j.message, j.message


def test_truth3_a1_checking_figures_where_c0_was_asked_are_an_error() -> None:
    j = judge("nccl.all_reduce", without(HEALTHY, "nThread"), check_iters=0)
    assert j.status is Status.ERROR and "-c 0" in j.message, j.message


def test_truth3_a1_alltoall_and_sendrecv_in_place_na_with_checking_on_is_not_an_error() -> None:
    """nccl-tests never checks their in-place side (reportErrors = in_place ? 0 : 1)."""
    text = rows(HEALTHY, lambda t: [*t[:-1], "N/A"]).replace("all_reduce_perf",
                                                             "sendrecv_perf")
    assert judge("nccl.sendrecv", text, thresholds=FLOOR).status is Status.PASS
    assert judge("nccl.all_reduce", rows(HEALTHY, lambda t: [*t[:-1], "N/A"])
                 ).status is Status.ERROR


# -------------------------------------------------------- a1: the message-size range


def test_truth3_a1_another_min_bytes_is_an_error() -> None:
    """The run was -b 1K (its rows start at 1024 B); the command asked -b 8. The judged
    plateau is the same, so main passed it."""
    text = rows(HEALTHY.replace("minBytes 8 ", "minBytes 1024 "), lambda t: t)
    text = "".join(line + "\n" for line in text.splitlines()
                   if not re.match(r"^\s+(8|16|32|64|128|256|512)\s", line))
    j = judge("nccl.all_reduce", text)
    assert j.status is Status.ERROR and "minBytes (-b) 1024" in j.message, j.message


def test_truth3_a1_another_max_bytes_in_the_header_is_an_error() -> None:
    j = fabric(rails(RAIL_OK.replace("maxBytes 8589934592", "maxBytes 17179869184")))
    assert j.status is Status.ERROR and "maxBytes (-e) 17179869184" in j.message


def test_max_bytes_reduced_for_memory_is_named() -> None:
    """Main errs too (the 8 GiB row is missing); the error now says why."""
    text = HEALTHY.replace("# Using devices", "# Reducing maxBytes to 4294967296 due to "
                           "memory limitation\n# Using devices")
    j = judge("nccl.all_reduce", text)
    assert j.status is Status.ERROR and "reduced maxBytes to 4294967296" in j.message


# ------------------------------------------------------------ a1: another collective


def test_truth3_a1_another_tests_binary_is_an_error() -> None:
    """all_reduce_perf's output as nccl.all_gather's evidence: main passed it."""
    j = judge("nccl.all_gather", HEALTHY, thresholds=FLOOR)
    assert j.status is Status.ERROR and "all_reduce_perf's" in j.message, j.message


def test_truth3_a1_another_collectives_redop_is_an_error() -> None:
    """Without the 'Collective test starting' line (before 2.17.3): all_gather prints
    redop 'none', these rows 'sum'."""
    text = without(HEALTHY, "Collective test")
    assert parse_nccl_tests(text).program is None
    j = judge("nccl.all_gather", text, thresholds=FLOOR)
    assert j.status is Status.ERROR and "redop sum" in j.message, j.message


def test_truth3_a1_another_collectives_element_counts_are_an_error() -> None:
    """reduce_scatter prints sum like all_reduce; its count is per rank (size / (4 x 8))."""
    j = judge("nccl.reduce_scatter", without(HEALTHY, "Collective test"), thresholds=FLOOR)
    assert j.status is Status.ERROR and "element counts" in j.message, j.message


def test_truth3_a1_per_rank_counts_of_a_real_all_gather_pass() -> None:
    """Control: an all_gather's rows (count = size / (4 x ranks)) are all_gather's."""
    text = rows(without(HEALTHY, "Collective test"),
                lambda t: [t[0], str(int(t[0]) // 32), t[2], "none", *t[4:]])
    assert judge("nccl.all_gather", text, thresholds=FLOOR).status is Status.PASS
    assert judge("nccl.all_reduce", text).status is Status.ERROR


def test_truth3_a1_json_of_another_test_is_an_error() -> None:
    j = judge("nccl.alltoall", JSON, thresholds=FLOOR)
    assert j.status is Status.ERROR and "all_reduce_perf's" in j.message, j.message


# ------------------------------------------------------------------ a1: type and op


def test_truth3_a1_rows_of_another_datatype_are_an_error() -> None:
    """-d bfloat16 on a build without it runs float ('invalid type bfloat16, defaulting
    to float'): main passed the float rows."""
    j = judge("nccl.all_reduce", HEALTHY, datatype="bfloat16")
    assert j.status is Status.ERROR and "rows of type float" in j.message, j.message


def test_truth3_a1_rows_of_another_op_are_an_error() -> None:
    j = judge("nccl.all_reduce", HEALTHY, op="max")
    assert j.status is Status.ERROR and "redop sum" in j.message, j.message
    j = fabric(rails(RAIL_OK), RAILS.model_copy(update={"op": "avg"}))
    assert j.status is Status.ERROR and "-o avg" in j.message, j.message


# ------------------------------------------------- a1: iterations and GPUs per process


@pytest.mark.parametrize(("edit", "printed"), [
    ({"iters": 50}, "iters (-n) 20"),
    ({"warmup_iters": 10}, "warmup iters (-w) 5"),
])
def test_truth3_a1_configuration_other_than_the_command_is_an_error(
        edit: dict[str, int], printed: str) -> None:
    j = judge("nccl.all_reduce", HEALTHY, **edit)
    assert j.status is Status.ERROR and printed in j.message, j.message
    j = fabric(rails(RAIL_OK), RAILS.model_copy(update=edit))
    assert j.status is Status.ERROR and printed in j.message, j.message


def test_another_step_factor_is_named() -> None:
    """Main errs too (rows outside the -f 4 sweep); the error now names the step."""
    j = judge("nccl.all_reduce", HEALTHY, step_factor=4)
    assert j.status is Status.ERROR and "step factor (-f) 2" in j.message, j.message


def test_truth3_a1_other_gpus_per_process_is_an_error() -> None:
    """The fabric command runs -g 1; an output of -g 8 per process answers another."""
    j = fabric(rails(RAIL_OK.replace("nGpus 1 ", "nGpus 8 ")))
    assert j.status is Status.ERROR and "nGpus (-g) 8" in j.message, j.message


def test_truth3_a1_mpi_rows_timed_over_other_iterations_are_an_error() -> None:
    # the fixture's '#' provenance lines are no JSON object: the parser skips them
    run = parse_mpi_allreduce((FIX / "mpi" / "allreduce-2nodes-srun-healthy.txt")
                              .read_text(encoding="utf-8"))
    params = AllreduceParams(sizes=[r.size_bytes for r in run.rows],
                             judge_min_bytes=1 << 20, iters=run.rows[0].iters)
    t = {"busbw": Threshold(unit="GB/s", ref=0.4, min_ratio=0.5, basis="test threshold")}
    hw = load_profile("demo").model.hardware
    assert judge_allreduce(run, params, t, hw).status is Status.PASS
    j = judge_allreduce(run, params.model_copy(update={"iters": 100}), t, hw)
    assert j.status is Status.ERROR and "--iters 100" in j.message, j.message


# --------------------------------------------- r5: the error column without a rank count


def _old_without_ranks(value: str) -> str:
    """The < 2.13 run as an excerpt without its rank and nThread lines, every error cell
    ``value``."""
    text = without(OLD, "nThread", "Rank", "Using devices")
    return rows(text, lambda t: [*t[:-5], value, *t[-4:-1], value])


def test_truth3_r5_error_column_below_the_least_bound_passes_without_a_rank_count() -> None:
    """float: DeltaMaxValue 1e-5 x (ranks - 1); busbw > 0 shows more than one rank, so no
    rank count gives a bound under 1e-5, and 3e-06 is within it. Main: error."""
    text = _old_without_ranks("3e-06")
    run = parse_nccl_tests(text)
    assert not run.ranks and run.n_gpus is None
    j = judge("nccl.all_reduce", text, "dgx-a100")
    assert j.status is Status.PASS, j.message


def test_control_r5_error_column_above_the_least_bound_stays_an_error() -> None:
    j = judge("nccl.all_reduce", _old_without_ranks("2e-05"), "dgx-a100")
    assert j.status is Status.ERROR and "rank count" in j.message, j.message


def test_control_r5_known_rank_count_still_fails_beyond_its_bound() -> None:
    """Control: with its 8 ranks the bound is 7e-05; 3e-01 is wrong data."""
    text = rows(OLD, lambda t: [*t[:-5], "3e-01", *t[-4:]])
    assert judge("nccl.all_reduce", text, "dgx-a100").status is Status.FAIL


def test_control_r5_one_rank_not_excluded_keeps_the_bound_at_zero() -> None:
    """sendrecv's bus factor is 1: busbw > 0 does not exclude one rank (bound 0), so a
    positive deviation without a rank count stays an error."""
    text = _old_without_ranks("3e-06")
    j = judge("nccl.sendrecv", text, "dgx-a100")
    assert j.status is Status.ERROR and "rank count" in j.message, j.message
