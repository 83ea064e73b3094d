"""Issue 14, verdict truth for nccl-tests, launcher errors and fio: layouts real machines
print that were refused, or refused with a misleading reason.

* nccl-tests' old layouts: v1.x (2017-2018) prints its ``nThread`` and summary lines
  without ``#``, its column header as ``# bytes N type op ... res`` and times in ms;
  captures of the pre-2.13 table with every leading ``#`` replaced by a space. Their
  ``Out of bounds values : 2 FAILED`` and the ``error``/``res`` column (the largest
  deviation from the expected result) are judged: wrong data never passes.
* launcher messages (Open MPI / PRRTE help blocks between 74-dash lines, srun and
  slurmstepd errors) inside a tool's output are launch errors quoting the launcher,
  never complaints about a size row (nccl-tests, the MPI all-reduce probe, perftest).
* fio without latency percentiles (``gtod_reduce=1``, ``clat_percentiles=0``): the
  error says which option removed them.

Fixtures: tests/fixtures/nccl (SOURCES.md, each file's header) and tests/fixtures/fio
(each file's header).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from degrade_helpers import BAD, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import load_profile
from rackgate.checks.nccl.local import NcclParams, judge_nccl
from rackgate.checks.storage.fio import judge_rand_read
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.fio import parse_fio_json
from rackgate.parsers.mpi_allreduce import parse_mpi_allreduce
from rackgate.parsers.nccl_tests import parse_nccl_tests
from rackgate.parsers.perftest import parse_ib_write_bw
from rackgate.profile import Threshold

FIX = Path(__file__).resolve().parents[1] / "fixtures"
BASIS = "a figure for the unit tests"
A100 = load_profile("dgx-a100")
HW = A100.model.hardware
A100_T = A100.check("nccl.all_reduce").thresholds  # type: ignore[union-attr]
# 8 x V100 SXM2 (DGX-1): NVLink 2, 6 links x 25 GB/s = 150 GB/s per GPU each way
V100_T = {"busbw": Threshold(unit="GB/s", ref=150, min_ratio=0.75, limit=True, basis=BASIS)}
V1_PARAMS = NcclParams(max_bytes="1G", judge_min_bytes="256M")
RAND = {"read_iops": Threshold(unit="IOPS", ref=30000, min_ratio=0.5, basis=BASIS),
        "read_p99_ms": Threshold(unit="ms", ref=10, max_ratio=1.0, basis=BASIS)}


def nccl_body(name: str) -> str:
    return (FIX / "nccl" / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


def fio_text(name: str) -> str:
    return (FIX / "fio" / name).read_text(encoding="utf-8")


V1 = nccl_body("allreduce-8xv100-v1-unprefixed-summary.txt")
V1_BAD = nccl_body("allreduce-8xv100-v1-res-out-of-bounds-failed.txt")
UNPREFIXED = nccl_body("allreduce-8xa100-error-column-unprefixed.txt")
UNPREFIXED_BAD = nccl_body("allreduce-8xa100-error-column-unprefixed-out-of-bounds.txt")
OLD_ERROR = nccl_body("allgather-8xa100-old-error-column.txt")
SLOTS = nccl_body("allreduce-mpirun-not-enough-slots.txt")
SRUN_MID = nccl_body("allreduce-2node-srun-task-exited-mid-table.txt")
HEALTHY_H100 = nccl_body("allreduce-8xh100-healthy.txt")


def v1_status(text: str) -> Status:
    return outcome(parse_nccl_tests, lambda r: judge_nccl(r, V1_PARAMS, V100_T, HW), text)


def a100_status(text: str, params: NcclParams | None = None, op: str = "all_reduce") -> Status:
    return outcome(parse_nccl_tests,
                   lambda r: judge_nccl(r, params or NcclParams(), A100_T, HW, op), text)


# ------------------------------------------------------ nccl-tests: the old layouts


def test_nccl_tests_v1_layout_parses_with_times_in_us_and_unprefixed_summary():
    run = parse_nccl_tests(V1)
    assert run.error_column == "error" and len(run.rows) == 28
    assert (run.n_threads, run.n_gpus, run.validation) == (1, 8, 1)
    assert len(run.ranks) == 8 and run.ranks[0].pid is None
    assert run.ranks[7].host == "dgx1-v04" and run.ranks[7].bus_id == "0x8a"
    last = run.rows[-1]
    assert (last.size_bytes, last.count, last.type, last.redop) == (2**30, 2**28, "float", "sum")
    assert last.out_of_place is not None and last.out_of_place.max_error == 0.0
    assert last.out_of_place.time_us == pytest.approx(14_423)  # printed 14.423 ms
    assert last.out_of_place.busbw_gbps == 130.28
    assert run.out_of_bounds == 0 and run.complete and run.avg_busbw_gbps is not None


def test_nccl_tests_v1_layout_healthy_passes_and_out_of_bounds_fails():
    assert v1_status(V1) is Status.PASS
    run = parse_nccl_tests(V1_BAD)
    assert run.out_of_bounds == 6
    j = judge_nccl(run, V1_PARAMS, V100_T, HW)
    assert j.status is Status.FAIL
    assert "Out of bounds values: 6" in j.message
    assert "largest deviation 2 at 268435456 B out-of-place" in j.message


def test_nccl_tests_unprefixed_error_column_layout_parses():
    run = parse_nccl_tests(UNPREFIXED)
    assert run.error_column == "error" and len(run.rows) == 31
    assert len(run.ranks) == 8 and run.ranks[0].pid == 61422
    assert run.out_of_bounds == 0 and run.complete
    last = run.rows[-1]
    assert last.out_of_place is not None and last.out_of_place.max_error == 0.0
    assert last.out_of_place.time_us == 63842 and last.out_of_place.busbw_gbps == 235.46
    assert a100_status(UNPREFIXED) is Status.PASS


def test_nccl_tests_unprefixed_out_of_bounds_failed_fails():
    run = parse_nccl_tests(UNPREFIXED_BAD)
    assert run.out_of_bounds == 4
    j = judge_nccl(run, NcclParams(), A100_T, HW)
    assert j.status is Status.FAIL
    assert "Out of bounds values: 4" in j.message
    assert "largest deviation 0.2 at 2147483648 B out-of-place" in j.message
    assert "float" in j.message and "0.00007" in j.message


def test_nccl_tests_error_column_beyond_tolerance_fails_even_when_the_summary_says_ok():
    text = UNPREFIXED.replace("0e+00    16026", "3e-01    16026")  # 2 GiB out-of-place
    assert text != UNPREFIXED
    j = judge_nccl(parse_nccl_tests(text), NcclParams(), A100_T, HW)
    assert j.status is Status.FAIL and "0.3 at 2147483648 B out-of-place" in j.message


def test_nccl_tests_error_column_within_tolerance_or_rounding_passes():
    # float, 8 ranks: nccl-tests' bound is DeltaMaxValue(float) 1e-5 x 7 = 7e-5; '%5.0le'
    # keeps one digit, so 7e-05 and 8e-05 (7.5e-05 at the least) cannot be told apart
    # from the bound: nccl-tests' own Out of bounds count decides those
    for printed in ("3e-06", "7e-05"):
        text = UNPREFIXED.replace("0e+00    64033", f"{printed}    64033")
        assert text != UNPREFIXED
        assert a100_status(text) is Status.PASS, printed


def test_nccl_tests_error_column_of_an_unknown_type_is_not_passed():
    text = OLD_ERROR.replace("   float ", "   fp8e4m3 ").replace(
        "0e+00  4132.50", "1e-03  4132.50")
    j = judge_nccl(parse_nccl_tests(text), NcclParams(max_bytes="1G"), A100_T, HW, "all_gather")
    assert j.status is Status.ERROR and "fp8e4m3" in j.message


ERROR_CELL = re.compile(r"(?m)^\s*\d+\s+\d+\s+float(?:\s+sum)?(?:\s+\S+){3}\s+(0e\+00)"
                        r"(?:\s+\S+){3}\s+(0e\+00)\s*$")
# the healthy runs with an 'error' column, the params of their sweep and their collective
ERROR_COLUMN_RUNS = [(OLD_ERROR, NcclParams(max_bytes="1G"), "all_gather"),
                     (UNPREFIXED, NcclParams(), "all_reduce")]


def _error_cells(text: str) -> list[tuple[int, int]]:
    cells = [m.span(g) for m in ERROR_CELL.finditer(text) for g in (1, 2)]
    assert cells, "no error cell in the fixture: the test would draw nothing"
    return cells


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(ERROR_COLUMN_RUNS), st.data(),
       st.sampled_from(["2e-04", "1e-03", "5e-01", "1e+00", "3e+02"]), st.booleans())
def test_nccl_tests_any_deviation_beyond_tolerance_in_any_error_cell_never_passes(
        run, data, value, out_of_bounds_ok):
    """float on 8 ranks: nccl-tests' bound is 7e-05; the 'Out of bounds' line may say OK
    (a run whose count disagrees with its own rows) or FAILED."""
    text, params, op = run
    assert a100_status(text, params, op) is Status.PASS
    cell = data.draw(st.sampled_from(_error_cells(text)))
    text = text[:cell[0]] + value + text[cell[1]:]
    if not out_of_bounds_ok:
        text = text.replace("Out of bounds values : 0 OK", "Out of bounds values : 1 FAILED")
    assert a100_status(text, params, op) in BAD


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([V1, UNPREFIXED]), st.data())
def test_nccl_tests_old_layouts_any_healthy_sweep_cut_parses_and_judges_without_crash(
        text, data):
    """Any prefix of the sweep (rows dropped from the end, summary kept) parses; the
    judge then errors on the missing plateau sizes, never passes and never crashes."""
    lines = text.split("\n")
    rows = [i for i, line in enumerate(lines) if re.match(r"^\s*\d+\s+\d+\s+float", line)]
    keep = data.draw(st.integers(min_value=1, max_value=len(rows) - 1))
    cut = "\n".join(lines[:rows[keep]] + lines[rows[-1] + 1:])
    run = parse_nccl_tests(cut)
    assert len(run.rows) == keep and run.complete
    status = v1_status(cut) if text is V1 else a100_status(cut)
    assert status in BAD


# ---------------------------------------------- launcher errors inside a tool's output


def test_nccl_tests_open_mpi_not_enough_slots_is_a_launch_error_quoting_it():
    with pytest.raises(ParseError) as exc:
        parse_nccl_tests(SLOTS)
    message = str(exc.value)
    assert "launch" in message and "Open MPI" in message
    assert "There are not enough slots available in the system to satisfy the 16 slots" \
        in message
    assert "size row" not in message


def test_nccl_tests_srun_error_mid_table_is_a_launch_error_quoting_srun():
    with pytest.raises(ParseError) as exc:
        parse_nccl_tests(SRUN_MID)
    message = str(exc.value)
    assert "srun: error: gpu-b02: task 12: Exited with exit code 1" in message
    assert "launch" in message and "size row" not in message


def test_nccl_tests_open_mpi_warning_block_does_not_refuse_a_complete_run():
    block = ("-" * 74 + "\nWARNING: There was an error initializing an OpenFabrics device.\n\n"
             "  Local host:   gpu-a07\n  Local device: mlx5_4\n" + "-" * 74 + "\n")
    lines = HEALTHY_H100.split("\n")
    at = next(i for i, line in enumerate(lines) if "  1048576 " in line)
    text = "\n".join(lines[:at] + block.split("\n") + lines[at:])
    assert len(parse_nccl_tests(text).rows) == 31


MPI_HEADER = ('{"probe": "mpi_allreduce", "ranks": 2, "hosts": ["gpu-b01", "gpu-b02"], '
              '"mpi": "Open MPI v4.1.6"}')
MPI_ROW = ('{"bytes": 8, "iters": 5, "time_us": 4.0, "algbw_gbps": 0.002, '
           '"busbw_gbps": 0.002, "wrong": 0}')


def test_mpi_allreduce_open_mpi_not_enough_slots_is_a_launch_error_quoting_it():
    with pytest.raises(ParseError, match=r"Open MPI.*launch.*not enough slots"):
        parse_mpi_allreduce(SLOTS)


def test_mpi_allreduce_srun_error_after_rows_is_a_launch_error():
    text = f"0: {MPI_HEADER}\n0: {MPI_ROW}\nsrun: error: gpu-b02: task 1: Exited with exit code 1\n"
    with pytest.raises(ParseError, match=r"srun: error: gpu-b02: task 1"):
        parse_mpi_allreduce(text)
    assert len(parse_mpi_allreduce(f"{MPI_HEADER}\n{MPI_ROW}\n").rows) == 1


def test_perftest_srun_error_is_a_launch_error_not_a_header_field():
    text = (" Device : mlx5_0\n Link type : IB\n"
            " #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n"
            " 65536 5000 392.10 391.75 0.747210\n" + "-" * 87 + "\n"
            "srun: error: gpu-b02: task 1: Exited with exit code 1\n")
    with pytest.raises(ParseError, match=r"launch.*srun: error: gpu-b02: task 1"):
        parse_ib_write_bw(text)
    with pytest.raises(ParseError, match=r"Open MPI.*not enough slots"):
        parse_ib_write_bw(SLOTS)


LAUNCHER_LINES = [
    "srun: error: gpu-b02: task 3: Exited with exit code 2",
    "srun: error: Unable to create step for job 4242: Requested node configuration is not "
    "available",
    "slurmstepd: error: *** STEP 4242.0 ON gpu-b01 CANCELLED AT 2026-11-30T10:02:11 ***",
    "-" * 74 + "\nmpirun noticed that process rank 3 with PID 0 on node gpu-b02 exited on "
    "signal 11 (Segmentation fault).\n" + "-" * 74,
    "-" * 74 + "\nPrimary job  terminated normally, but 1 process returned\na non-zero exit "
    "code. Per user-direction, the job has been aborted.\n" + "-" * 74,
    "-" * 74 + "\nMPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith "
    "errorcode 1.\n" + "-" * 74,
]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(LAUNCHER_LINES), st.data())
def test_any_launcher_error_anywhere_in_nccl_tests_output_is_a_launch_error(message, data):
    lines = HEALTHY_H100.split("\n")
    at = data.draw(st.integers(min_value=0, max_value=len(lines)))
    text = "\n".join(lines[:at] + message.split("\n") + lines[at:])
    with pytest.raises(ParseError) as exc:
        parse_nccl_tests(text)
    quoted = " ".join(message.replace("-" * 74, "").split())[:60]
    assert "launch" in str(exc.value) and quoted in str(exc.value)


# --------------------------------------------------------------- fio: no percentiles


def test_fio_gtod_reduce_no_percentiles_error_names_gtod_reduce():
    run = parse_fio_json(fio_text("rand-read-4k-gtod-reduce-no-percentiles.json"))
    read = run.jobs[0].read
    assert read is not None and read.clat_p99_ns is None and read.clat_samples == 0
    assert run.jobs[0].option("gtod_reduce") == "1"
    j = judge_rand_read(run, None, RAND)
    assert j.status is Status.ERROR
    assert "gtod_reduce=1" in j.message and "read_p99_ms" in j.message


def test_fio_clat_percentiles_off_error_names_clat_percentiles():
    run = parse_fio_json(fio_text("rand-read-4k-clat-percentiles-off.json"))
    read = run.jobs[0].read
    assert read is not None and read.clat_p99_ns is None and read.clat_samples == 30_114_477
    j = judge_rand_read(run, None, RAND)
    assert j.status is Status.ERROR and "clat_percentiles=0" in j.message


def test_fio_percentile_list_without_99_error_names_percentile_list():
    text = fio_text("rand-read-4k-qd32-healthy.json")
    doc = json.loads(text[text.index("\n{") + 1:])
    doc["jobs"][0]["read"]["clat_ns"]["percentile"].pop("99.000000")
    doc["jobs"][0]["job options"]["percentile_list"] = "50:90:99.9"
    j = judge_rand_read(parse_fio_json(json.dumps(doc)), None, RAND)
    assert j.status is Status.ERROR and "percentile_list (50:90:99.9) has no 99" in j.message


def _fio_variant(where: str, option: str | None, samples: bool) -> str:
    """The healthy rand-read run without clat percentiles: ``option`` set in the job's
    or the global options, clat_ns sampled or not (N 0, as gtod_reduce leaves it)."""
    text = fio_text("rand-read-4k-qd32-healthy.json")
    doc = json.loads(text[text.index("\n{") + 1:])
    job = doc["jobs"][0]
    clat = job["read"]["clat_ns"]
    del clat["percentile"]
    if not samples:
        job["read"]["clat_ns"] = {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}
    if option is not None:
        name, value = option.split("=")
        if where == "job":
            job["job options"][name] = value
        else:
            doc = {"fio version": doc["fio version"], "global options": {name: value},
                   **{k: v for k, v in doc.items() if k != "fio version"}}
    return json.dumps(doc, indent=2)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["job", "global"]),
       st.sampled_from([None, "gtod_reduce=1", "gtod_reduce=true", "disable_clat=1",
                        "clat_percentiles=0", "clat_percentiles=off"]),
       st.booleans())
def test_fio_without_clat_percentiles_never_passes_and_says_why(where, option, samples):
    run = parse_fio_json(_fio_variant(where, option, samples))
    j = judge_rand_read(run, None, RAND)
    assert j.status is Status.ERROR and "read_p99_ms" in j.message
    if option is not None:
        assert option.split("=")[0] in j.message
    elif not samples:
        assert "N is 0" in j.message and "gtod_reduce" in j.message
    else:
        assert "clat_percentiles" in j.message


def test_a_launch_error_in_the_evidence_is_reported_as_a_launch_error_not_as_damage():
    """Judging the stored evidence: the result says the launcher stopped the job, with its
    words, not that the evidence is unparseable."""
    from rackgate.checks import REGISTRY
    from rackgate.commands.task import Task, wrapped
    from rackgate.placement.evidence import judge_evidence
    from rackgate.store.evidence import Evidence

    ev = Evidence(host="gpu-a07", check="nccl.all_reduce",
                  argv=wrapped(Task("gpu-a07", "nccl.all_reduce", ("all_reduce_perf",), 5)),
                  outcome="completed", rc=0, started=None, ended=None, duration_s=None,
                  stderr="", message="", stdout_file="evidence/gpu-a07/nccl.all_reduce.out",
                  stdout_sha256="0" * 64, stdout_bytes=len(SLOTS))
    r = judge_evidence(REGISTRY["nccl.all_reduce"], ev, SLOTS, load_profile("dgx-h100"))
    assert r.status is Status.ERROR
    assert r.message.startswith("launch error in evidence/gpu-a07/nccl.all_reduce.out: ")
    assert "There are not enough slots available in the system" in r.message
    assert "unparseable" not in r.message
