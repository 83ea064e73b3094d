"""Issue 11, the MPI family (mpi.allreduce): an ACCEPT only from complete, finite,
positively healthy evidence, and data never executes.

Every input is derived in the test from the project's fixtures tests/fixtures/mpi (written
by hand in the output format of rackgate's own probe, probes/mpi_allreduce.py) by the one
edit its name says: a host renamed, a row removed, duplicated or given another value.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import ValidationError
from stored_runs import strict_json, write_run

from rackgate.checks import REGISTRY, load_profile, profile_from_document
from rackgate.checks.mpi import AllreduceParams, judge_allreduce
from rackgate.model import Result
from rackgate.parsers import ParseError
from rackgate.parsers.mpi_allreduce import parse_mpi_allreduce
from rackgate.placement.evidence import judge_launched
from rackgate.profile import Profile, Threshold
from rackgate.run import judge_run
from rackgate.store.evidence import Evidence

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "mpi"
CHECK = REGISTRY["mpi.allreduce"]
PARAMS = AllreduceParams(sizes=[1024, 65536, 1048576, 4194304], judge_min_bytes=1048576,
                         iters=10)  # the fixtures' --iters (the demo profile's)
NODES = ("rg-node01", "rg-node02")  # the hosts of the healthy fixture
HW = load_profile("demo").model.hardware


def fixture(name: str) -> str:
    return "".join(line + "\n" for line in (FIX / name).read_text(encoding="utf-8")
                   .splitlines() if not line.startswith("#"))


HEALTHY = fixture("allreduce-2nodes-srun-healthy.txt")
WRONG = fixture("allreduce-2nodes-wrong-elements.txt")


def profile_with_mpi(ref: float = 0.05, limit: bool = False,
                     params: AllreduceParams = PARAMS) -> Profile:
    doc = dict(load_profile("demo").raw)
    doc["checks"] = {**doc["checks"], "mpi.allreduce": {
        "params": params.model_dump(exclude_defaults=True),
        "thresholds": {"busbw": {"unit": "GB/s", "ref": ref, "min_ratio": 0.5 if limit else 1.0,
                                 "limit": limit, "basis": "test threshold"}}}}
    return profile_from_document(doc, "demo + mpi.allreduce (test)")


def launched(stdout: str, nodes: Sequence[str], profile: Profile | None = None
             ) -> list[Result]:
    """Every node's result as the runner judges a launched check (judge.judge_launched)."""
    ev = Evidence(host="rg-head", check=CHECK.name, argv=("timeout", "python3"),
                  outcome="completed", rc=0, started=None, ended=None, duration_s=3.0,
                  stderr="", message="", stdout_file="evidence/rg-head/mpi.allreduce.out",
                  stdout_sha256="0" * 64, stdout_bytes=len(stdout))
    return judge_launched(CHECK, ev, stdout, profile or profile_with_mpi(), nodes)[0]


def statuses(results: list[Result]) -> set[str]:
    return {r.status.label for r in results}


def test_the_healthy_run_passes_on_its_own_nodes() -> None:
    assert statuses(launched(HEALTHY, NODES)) == {"pass"}


# ------------------------------------------------- 6: exactly the nodes, every size once


def test_sound_6_hosts_that_are_not_the_nodes_under_test_are_an_error() -> None:
    other = HEALTHY.replace('"rg-node02"', '"some-other-host"')
    results = launched(other, ["gpu01", "gpu02"])
    assert statuses(results) == {"error"}, results[0].message
    assert "not under test: rg-node01, some-other-host" in results[0].message
    results = launched(other, NODES)
    assert statuses(results) == {"error"}
    assert "node rg-node02 ran 0 rank(s), expected 1" in results[0].message


def test_sound_6_a_node_missing_or_named_twice_is_an_error() -> None:
    results = launched(HEALTHY, [*NODES, "rg-node03"])
    assert statuses(results) == {"error"} and "node rg-node03 ran 0 rank(s)" in \
        results[0].message
    twice = HEALTHY.replace('"ranks": 2, "hosts": ["rg-node01", "rg-node02"]',
                            '"ranks": 3, "hosts": ["rg-node01", "rg-node01", "rg-node02"]')
    assert twice != HEALTHY
    results = launched(twice, NODES)
    assert statuses(results) == {"error"}
    assert "node rg-node01 ran 2 rank(s), expected 1" in results[0].message


def test_sound_6_the_row_with_wrong_elements_deleted_is_an_error_not_a_pass() -> None:
    cut = "".join(line + "\n" for line in WRONG.splitlines() if '"wrong": 17' not in line)
    results = launched(cut.replace('"n1", "n2"', '"rg-node01", "rg-node02"'), NODES)
    assert statuses(results) == {"error"}, results[0].message
    assert "no row for the 4194304-byte message size" in results[0].message


def test_sound_6_every_expected_size_exactly_once() -> None:
    rows = HEALTHY.splitlines()
    missing = "\n".join(r for r in rows if '"bytes": 65536' not in r)
    assert "no row for the 65536-byte" in launched(missing, NODES)[0].message
    with pytest.raises(ParseError, match="a second row for 1048576 bytes"):
        parse_mpi_allreduce(HEALTHY + next(r for r in rows if '"bytes": 1048576' in r) + "\n")
    foreign = HEALTHY.replace('"bytes": 65536', '"bytes": 131072')
    message = launched(foreign, NODES)[0].message
    assert "no row for the 65536-byte" in message and "[131072]" in message


# --------------------------------------------------- 4: non-finite, impossible figures


def stored_run(tmp_path: Path, stdout: str) -> Path:
    return write_run(tmp_path / "runs" / "mpi-run", profile_with_mpi(), ["mpi.allreduce"],
                     NODES, launch_host="rg-head",
                     evidence={("rg-head", "mpi.allreduce"): stdout},
                     argv=("timeout", "srun"), duration_s=3.0)


@pytest.mark.parametrize("value", ["Infinity", "NaN", "-Infinity", "1e400"])
def test_sound_4_a_non_finite_busbw_never_accepts_and_the_report_stays_json(
        tmp_path: Path, value: str) -> None:
    text = HEALTHY.replace('"busbw_gbps": 0.4029', f'"busbw_gbps": {value}')
    assert text != HEALTHY
    outcome = judge_run(stored_run(tmp_path, text))
    assert outcome.rack.verdict.name == "REJECT"
    doc = strict_json(outcome.report_json.read_text())
    for node in doc["nodes"]:
        (result,) = node["results"]
        assert result["status"] == "error" and "busbw_gbps" in result["message"]
    with pytest.raises(ParseError, match=r"line 5: 'busbw_gbps'"):
        parse_mpi_allreduce(text)


@pytest.mark.parametrize(("field", "value"), [("time_us", "NaN"), ("algbw_gbps", "Infinity"),
                                              ("wrong", "-3"), ("iters", "-5")])
def test_sound_4_every_figure_is_finite_and_possible(field: str, value: str) -> None:
    rows = HEALTHY.splitlines()
    rows[2] = rows[2].replace(f'"{field}": ', f'"{field}": {value}, "x{field}": ', 1)
    with pytest.raises(ParseError, match=rf"line 3: '{field}'"):
        parse_mpi_allreduce("\n".join(rows))


def test_sound_4_one_impossible_row_is_an_error_though_the_median_looks_fine() -> None:
    """Against a physical limit (a test threshold: 0.5 GB/s, limit: true), one judged row
    at 1e30 GB/s: the median of the three judged rows (0.3732) looks fine, the row is no
    measurement."""
    params = AllreduceParams(sizes=PARAMS.sizes, judge_min_bytes=65536, iters=PARAMS.iters)
    profile = profile_with_mpi(ref=0.5, limit=True, params=params)
    assert statuses(launched(HEALTHY, NODES, profile)) == {"pass"}
    text = HEALTHY.replace('"busbw_gbps": 0.4029', '"busbw_gbps": 1e30')
    results = launched(text, NODES, profile)
    assert statuses(results) == {"error"}, results[0].message
    assert ("busbw at 4194304 bytes 1,000,000,000,000,000,019,884,624,838,656 GB/s is above "
            "the 0.5 GB/s physical limit") in results[0].message
    limit = Threshold(unit="GB/s", ref=0.5, min_ratio=0.5, limit=True, basis="test threshold")
    j = judge_allreduce(parse_mpi_allreduce(text), params, {"busbw": limit}, HW)
    assert j.status.label == "error"


# -------------------------------------------------------- 8: identifiers are plain names


def test_sound_8_partition_and_interpreter_are_plain_names() -> None:
    for partition in ("gpu;reboot", "gpu batch", "$(id)", "gpu\n"):
        with pytest.raises(ValidationError, match="partition"):
            AllreduceParams(partition=partition)
    for python in ("python3 -c 'import os'", "$(id)", "python3\n", "-m"):
        with pytest.raises(ValidationError, match="python"):
            AllreduceParams(python=python)
    AllreduceParams(partition="debug,gpu", python="/usr/bin/python3")
