"""nccl.fabric_all_reduce: nccl-tests across nodes through srun, and per rail."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rackgate.checks import load_profile
from rackgate.checks.nccl.fabric import (
    NcclFabricParams,
    fabric_command,
    judge_fabric,
    parse_fabric,
)
from rackgate.checks.shared.base import CommandError
from rackgate.commands.launch import Across
from rackgate.parsers import ParseError
from rackgate.profile import Threshold
from rackgate.programs.probes import source

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "nccl"
HW = load_profile("dgx-h100").model.hardware
HCAS = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
# one rail: one NDR port per rank, 400 Gb/s = 50 GB/s
BASIS = "test threshold"
RAIL = {"busbw": Threshold(unit="GB/s", ref=50, min_ratio=0.8, limit=True, basis=BASIS)}
NODE = {"busbw": Threshold(unit="GB/s", ref=450, min_ratio=0.75, limit=True, basis=BASIS)}


def body(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


def rails_output(bodies: list[tuple[str, int]], end: bool = True) -> str:
    out = [f"### rackgate-rails rails={len(bodies)}"]
    for i, (text, rc) in enumerate(bodies):
        out += [f"### rail index={i} hca={HCAS[i]} rc={rc}", text.rstrip("\n")]
    return "\n".join(out + (["### end"] if end else [])) + "\n"


def test_one_job_over_every_gpu_of_every_node() -> None:
    argv = fabric_command(NcclFabricParams(nccl_env={"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"}),
                          {}, Across(("gpu01", "gpu02")))
    # srun behind the readiness guard: it runs only when SLURM has both nodes idle
    assert argv[:2] == ["python3", "-c"] and argv[3:6] == ["gpu01,gpu02", "--", "srun"]
    assert "--ntasks-per-node=8" in argv and "--gres=gpu:8" in argv
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1" in argv
    assert argv[argv.index("-g") + 1] == "1"


def test_per_rail_runs_one_job_per_rail_on_its_gpu_and_hca() -> None:
    argv = fabric_command(NcclFabricParams(per_rail=True, rail_hcas=HCAS),
                          {}, Across(("gpu01", "gpu02")))
    # the job sequencer (programs/probes/srun_rounds.py) behind the readiness guard: no shell script
    assert argv[3:7] == ["gpu01,gpu02", "--", "python3", "-c"]
    assert argv[7] == source("srun_rounds")
    assert argv[8:10] == ["### rackgate-rails rails=8", "### end"]
    jobs = [i for i, word in enumerate(argv) if word == "--job"]
    assert len(jobs) == 8 and argv.count("--round") == 8  # one rail after the other
    rail3 = argv[jobs[3]:jobs[4]]
    assert rail3[1] == "### rail index=3 hca=mlx5_5" and rail3[3] == "srun"
    assert "CUDA_VISIBLE_DEVICES=3" in rail3 and "NCCL_IB_HCA==mlx5_5" in rail3
    assert "--ntasks-per-node=1" in rail3
    assert "bash" not in argv and not any("$(" in word for word in argv[8:])


def test_params_are_checked() -> None:
    with pytest.raises(ValidationError, match="one HCA per GPU"):
        NcclFabricParams(per_rail=True, rail_hcas=HCAS[:3])
    with pytest.raises(ValidationError, match="NCCL_"):
        NcclFabricParams(nccl_env={"LD_PRELOAD": "x"})
    with pytest.raises(CommandError, match="at least two nodes"):
        fabric_command(NcclFabricParams(), {}, Across(("gpu01",)))


def test_two_nodes_of_eight_gpus_pass_at_the_plateau_not_the_average() -> None:
    run = parse_fabric(body("allreduce-2node-srun-label.txt"))
    j = judge_fabric(run, NcclFabricParams(judge_min_bytes="1G"), NODE, HW)
    assert j.status.label == "pass", j.message
    assert j.measured is not None and j.measured > 350  # the Avg line says 109
    assert "% of the 450" in j.message


def test_a_rail_at_half_rate_is_named() -> None:
    healthy, degraded = (body("allreduce-2node-rail-ndr-healthy.txt"),
                         body("allreduce-2node-rail-at-hdr-degraded.txt"))
    rails = [(healthy, 0)] * 8
    rails[3] = (degraded, 0)
    run = parse_fabric(rails_output(rails))
    j = judge_fabric(run, NcclFabricParams(per_rail=True, rail_hcas=HCAS), RAIL, HW)
    assert j.status.label == "fail"
    assert "rail 3 (mlx5_5)" in j.message and j.measured == pytest.approx(22.86, abs=0.05)
    assert j.details["busbw_gbps rail 0 (mlx5_0)"] == pytest.approx(45.7, abs=0.1)
    healthy_only = parse_fabric(rails_output([(healthy, 0)] * 8))
    assert judge_fabric(healthy_only, NcclFabricParams(per_rail=True, rail_hcas=HCAS), RAIL,
                        HW).status.label == "pass"


def test_a_rail_that_did_not_run_is_an_error() -> None:
    healthy = body("allreduce-2node-rail-ndr-healthy.txt")
    rails = [(healthy, 0)] * 8
    rails[5] = ("srun: error: Unable to allocate resources", 1)
    j = judge_fabric(parse_fabric(rails_output(rails)),
                     NcclFabricParams(per_rail=True, rail_hcas=HCAS), RAIL, HW)
    assert j.status.label == "error" and "rail 5 (mlx5_9): no measurement" in j.message
    with pytest.raises(ParseError, match="cut short"):
        parse_fabric(rails_output(rails, end=False))


def test_skipped_without_gpus_or_fabric() -> None:
    from rackgate.checks import REGISTRY
    check = REGISTRY["nccl.fabric_all_reduce"]
    assert check.applies(load_profile("demo").model.hardware) is not None
    assert check.applies(HW) is None


def test_an_error_column_beyond_nccl_tests_bound_fails_the_fabric_job() -> None:
    """nccl-tests < 2.13 print the largest deviation ('error') where '#wrong' is now: across
    nodes it is judged as on one node (checks.nccl.local.deviations), not left to the summary."""
    from dataclasses import replace

    run = parse_fabric(body("allreduce-2node-srun-label.txt"))
    params = NcclFabricParams(judge_min_bytes="1G")
    assert judge_fabric(run, params, NODE, HW).status.label == "pass"
    rail = run.rails[0]
    assert rail.run is not None
    rows = list(rail.run.rows)
    last = rows[-1]
    assert last.out_of_place is not None
    rows[-1] = replace(last, out_of_place=replace(last.out_of_place, wrong=None, max_error=2e-2))
    bad = replace(run, rails=(replace(rail, run=replace(rail.run, rows=tuple(rows),
                                                        error_column="error")),))
    j = judge_fabric(bad, params, NODE, HW)
    assert j.status.label == "fail", j.message
    assert "error column above nccl-tests' bound" in j.message
    assert f"{last.size_bytes} B out-of-place" in j.message
