"""Conformance: the nccl-tests parser and judge on real outputs published by others
(../shared/corpus/nccl, read at test time; skipped when the corpus is absent).

Every file must parse: old and new layouts, srun and mpirun labels, elided rows, N/A and
busbw 0. None is refused: even the publishers' excerpts keep whole rows. No corpus file is
marked DEGRADED in its header today; the K80-over-TCP run is the corpus's slow fabric and
must fail the H100 floor, and the 1-GPU alltoall must be an error (busbw 0 by definition).
Single-node A100 runs are judged against the dgx-a100 profile and must pass. Each run is
judged as the answer to the command its header shows (the judge refuses evidence of another
command): the SuperBench runs were ``-b 1 -e 8G -c 0``, the K80 run ``-b 1M -e 1G -g 1 -n 1
-c 0``.
"""

from __future__ import annotations

import pytest

from conftest import CorpusFile, corpus_files, corpus_params
from rackgate.checks import load_profile
from rackgate.checks.nccl.local import NcclParams, judge_nccl, large_message_busbw
from rackgate.model import Status
from rackgate.parsers.nccl_tests import parse_nccl_tests

OP = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
      "alltoall": "alltoall"}


def _judge(f: CorpusFile, profile: str, **params: object):
    p = load_profile(profile)
    op = OP[f.path.name.split("-")[0]]
    cp = p.check(f"nccl.{op}")
    assert cp is not None
    return judge_nccl(parse_nccl_tests(f.body), NcclParams(**params), cp.thresholds,  # type: ignore[arg-type]
                      p.model.hardware, op)


@pytest.mark.parametrize("f", corpus_params("nccl"))
def test_every_corpus_output_parses(f: CorpusFile) -> None:
    run = parse_nccl_tests(f.body)
    assert run.rows and all(r.out_of_place is not None for r in run.rows)
    if "srun" in f.path.name or "mpirun" in f.path.name:
        assert len(run.task_labels) == 1
    if "elided" in f.path.name:
        assert run.elided


@pytest.mark.parametrize("f", corpus_params("nccl", "*1node-8xA100*"))
def test_single_node_a100_runs_pass_the_a100_profile(f: CorpusFile) -> None:
    j = _judge(f, "dgx-a100", min_bytes="1", check_iters=0)  # their header: minBytes 1,
    # validation: 0
    assert j.status is Status.PASS, j.message
    run = parse_nccl_tests(f.body)
    assert run.avg_busbw_gbps is not None and j.measured is not None
    assert run.avg_busbw_gbps < 0.35 * j.measured  # the Avg line understates the fabric


@pytest.mark.parametrize("f", corpus_params("nccl", "*K80*"))
def test_tcp_fabric_fails_the_h100_floor(f: CorpusFile) -> None:
    j = _judge(f, "dgx-h100", min_bytes="1M", max_bytes="1G", judge_min_bytes="1G",
               gpus_per_task=1, iters=1, check_iters=0)
    assert j.status is Status.FAIL and j.measured is not None and j.measured < 1


@pytest.mark.parametrize("f", corpus_params("nccl", "*1gpu*"))
def test_one_gpu_run_is_an_error(f: CorpusFile) -> None:
    j = _judge(f, "dgx-h100", max_bytes="32M", judge_min_bytes="32M")
    assert j.status is Status.ERROR and "1 rank" in j.message


def test_degraded_files_judge_worse_than_healthy_ones() -> None:
    files = [f for f in corpus_files("nccl") if "1gpu" not in f.path.name]
    if not files:
        pytest.skip("no corpus")
    healthy = [large_message_busbw(parse_nccl_tests(f.body), 2**30) for f in files
               if not f.degraded and "K80" not in f.path.name]
    slow = [large_message_busbw(parse_nccl_tests(f.body), 2**30) for f in files
            if f.degraded or "K80" in f.path.name]
    assert healthy and slow
    assert max(v for v in slow if v is not None) < min(v for v in healthy if v is not None)
