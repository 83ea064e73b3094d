"""mpi.allreduce: the probe run for real under mpirun, its parser, its judge, and the
runner judging every node of a multi-node job from the launch host's one evidence file."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stored_runs import write_run

from rackgate.checks import REGISTRY, load_profile, profile_from_document
from rackgate.checks.mpi import AllreduceParams, judge_allreduce
from rackgate.cli.main import main
from rackgate.parsers import ParseError
from rackgate.parsers.mpi_allreduce import parse_mpi_allreduce
from rackgate.placement import NO_LAUNCH_HOST
from rackgate.profile import Threshold
from rackgate.programs.probes import source
from rackgate.reports.verify import verify_report
from rackgate.run import judge_run

CHECK = REGISTRY["mpi.allreduce"]
PARAMS = AllreduceParams(sizes=[1024, 65536, 1048576, 4194304], judge_min_bytes=1048576,
                         iters=10)  # the fixtures' --iters (the demo profile's)
FLOOR = {"unit": "GB/s", "ref": 0.05, "min_ratio": 1.0, "limit": False,
         "basis": "test floor"}


def thresholds(ref: float = 0.05):
    profile = profile_with_mpi(ref)
    return profile.check("mpi.allreduce").thresholds  # type: ignore[union-attr]


def profile_with_mpi(ref: float = 0.05):
    doc = dict(load_profile("demo").raw)
    doc["checks"] = {**doc["checks"], "mpi.allreduce": {
        "params": PARAMS.model_dump(exclude_defaults=True),
        "thresholds": {"busbw": {**FLOOR, "ref": ref}}}}
    return profile_from_document(doc, "demo + mpi.allreduce (test)")


def test_the_probe_measures_for_real_under_mpirun() -> None:
    """Two ranks on this machine: a real measurement, judged honestly as not multi-node."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.fail("mpirun not found: scripts/bootstrap.sh --test installs openmpi-bin "
                    "and python3-mpi4py")
    run = subprocess.run(
        [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", "/usr/bin/python3",
         "-c", source("mpi_allreduce"), "8192", "1048576", "--iters", "3", "--warmup", "1"],
        capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    parsed = parse_mpi_allreduce(run.stdout)
    assert parsed.ranks == 2 and len(parsed.hosts) == 2
    assert [r.size_bytes for r in parsed.rows] == [8192, 1048576]
    assert all(r.wrong == 0 and r.busbw_gbps > 0 and r.time_us > 0 for r in parsed.rows)
    # busbw of a 2-rank all-reduce is its algbw (2(n-1)/n = 1)
    assert all(abs(r.busbw_gbps - r.algbw_gbps) < 1e-12 for r in parsed.rows)
    judged = judge_allreduce(parsed, AllreduceParams(sizes=[8192, 1048576],
                                                     judge_min_bytes=1048576),
                             thresholds(), load_profile("demo").model.hardware)
    assert judged.status.label == "error"
    assert "ran on one host" in judged.message


def test_healthy_two_node_run_passes_with_the_median_of_the_large_sizes(fixture_text) -> None:
    run = parse_mpi_allreduce(fixture_text("mpi/allreduce-2nodes-srun-healthy.txt"))
    assert run.hosts == ("rg-node01", "rg-node02")
    j = judge_allreduce(run, PARAMS, thresholds(), load_profile("demo").model.hardware)
    assert j.status.label == "pass"
    assert j.measured == pytest.approx((0.3732 + 0.4029) / 2)  # not the 1 KiB row
    assert j.details["busbw_gbps@1024"] == 0.0167


def test_slow_path_fails_naming_the_figure(fixture_text) -> None:
    run = parse_mpi_allreduce(fixture_text("mpi/allreduce-2nodes-srun-healthy.txt"))
    j = judge_allreduce(run, PARAMS, thresholds(ref=1.0), load_profile("demo").model.hardware)
    assert j.status.label == "fail"
    assert "0.388" in j.message and ">= 1 GB/s" in j.expected


def test_wrong_elements_fail_even_when_fast(fixture_text) -> None:
    run = parse_mpi_allreduce(fixture_text("mpi/allreduce-2nodes-wrong-elements.txt"))
    j = judge_allreduce(run, PARAMS, thresholds(), load_profile("demo").model.hardware)
    assert j.status.label == "fail"
    assert "17 wrong element(s) at 4194304 bytes" in j.message


def test_no_probe_output_is_refused(fixture_text) -> None:
    with pytest.raises(ParseError, match="no mpi_allreduce probe header"):
        parse_mpi_allreduce(fixture_text("mpi/allreduce-no-rank-started.txt"))
    with pytest.raises(ParseError, match="printed no message size"):
        parse_mpi_allreduce('{"probe": "mpi_allreduce", "ranks": 2, "hosts": ["a", "b"]}')
    with pytest.raises(ParseError, match="'busbw_gbps' should be a float"):
        parse_mpi_allreduce('{"probe": "mpi_allreduce", "ranks": 2, "hosts": ["a", "b"]}\n'
                            '{"bytes": 8, "iters": 1, "time_us": 1, "algbw_gbps": 1, '
                            '"busbw_gbps": "fast", "wrong": 0}')


def test_params_refuse_a_sweep_that_judges_nothing() -> None:
    with pytest.raises(ValueError, match="no size in"):
        AllreduceParams(sizes=[1024], judge_min_bytes=1 << 20)


def stored_run(tmp_path: Path, stdout: str | None, launch_host: str | None,
               nodes: tuple[str, ...] = ("rg-node01", "rg-node02")) -> Path:
    evidence = {(launch_host, "mpi.allreduce"): stdout} \
        if stdout is not None and launch_host else {}
    return write_run(tmp_path / "runs" / "mpi-run", profile_with_mpi(), ["mpi.allreduce"],
                     nodes, launch_host=launch_host, evidence=evidence,
                     argv=("timeout", "srun"), duration_s=3.0)


def test_every_node_is_judged_from_the_launch_hosts_evidence(tmp_path, fixture_text) -> None:
    run = stored_run(tmp_path, fixture_text("mpi/allreduce-2nodes-srun-healthy.txt"), "rg-head")
    outcome = judge_run(run)
    doc = json.loads(outcome.report_json.read_text())
    results = {n["name"]: n["results"][0] for n in doc["nodes"]}
    assert set(results) == {"rg-node01", "rg-node02"}  # the launch host is not a node
    for r in results.values():
        assert r["check"] == "mpi.allreduce" and r["status"] == "pass"
        assert r["evidence"] == "evidence/rg-head/mpi.allreduce.out"
    assert outcome.rack.verdict.name == "ACCEPT"
    assert verify_report(outcome.report_json) == (2, [])
    assert main(["verify", str(outcome.report_json)]) == 0  # and judged again, the same


def test_without_a_launch_host_every_node_is_an_error(tmp_path) -> None:
    doc = json.loads(judge_run(stored_run(tmp_path, None, None)).report_json.read_text())
    for node in doc["nodes"]:
        assert node["results"][0]["status"] == "error"
        assert node["results"][0]["message"].endswith(NO_LAUNCH_HOST)


def test_a_run_with_one_node_skips_the_multi_node_check(tmp_path) -> None:
    doc = json.loads(judge_run(stored_run(tmp_path, None, "rg-head", ("rg-node01",)))
                     .report_json.read_text())
    (result,) = doc["nodes"][0]["results"]
    assert result["status"] == "skip" and "one node under test" in result["message"]


# ------------------------------------------------------------ degraded evidence (issue 11)
# Degradations: a non-finite number (nan, inf, -inf, 1e400, NaN, Infinity) in any figure of
# any row, a row given twice, and the output cut anywhere before its last row ends.

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "mpi"
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


class TestDegradedAllreduce:
    """Property tests, the MPI family: degraded copies of the project's healthy MPI probe output
    (tests/fixtures/mpi, written in the format of rackgate's probe, probes/mpi_allreduce.py)
    never raise anything but ParseError and never judge ``pass``."""

    def test_the_undegraded_fixture_passes(self) -> None:
        assert status(HEALTHY) == "pass"

    @settings(max_examples=60, deadline=None)
    @given(st.integers(1, 4), st.sampled_from(FIELDS), NON_FINITE)
    def test_a_non_finite_figure_in_any_row_never_passes(self, row: int, field: str,
                                                         value: str) -> None:
        lines = HEALTHY.splitlines()
        lines[row] = re.sub(rf'"{field}": [^,}}]+', f'"{field}": {value}', lines[row])
        assert status("\n".join(lines)) == "error"

    @settings(max_examples=30, deadline=None)
    @given(st.lists(st.integers(0, 4), min_size=1, max_size=3))
    def test_a_duplicated_line_never_passes(self, rows: list[int]) -> None:
        lines = HEALTHY.splitlines()
        for r in sorted(set(rows), reverse=True):
            lines.insert(r + 1, lines[r])
        assert status("\n".join(lines)) == "error"

    @settings(max_examples=60, deadline=None)
    @given(st.integers(0, HEALTHY.rstrip().rindex("}")))
    def test_a_truncated_output_never_passes(self, cut: int) -> None:
        assert status(HEALTHY[:cut]) == "error"

    @settings(max_examples=60, deadline=None)
    @given(st.text(alphabet=st.sampled_from('{}[]":,0123456789.eE-+ NaInfity\nbytesr'),
                   max_size=200))
    def test_arbitrary_text_raises_only_parse_error(self, text: str) -> None:
        status(text)
        status(HEALTHY.splitlines()[0] + "\n" + text)
