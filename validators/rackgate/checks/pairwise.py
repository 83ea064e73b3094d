"""Pairwise fabric bandwidth: ``ib_write_bw`` between every pair of nodes, scheduled as a
round-robin tournament and launched through the scheduler.

- ``fabric.pairwise_bw``: for N nodes, ``pairs.round_robin`` gives N-1 rounds (N with a bye
  when N is odd) in which no node is in two pairs; the pairs of a round run in parallel,
  one ``srun`` job of two tasks each (the server on the pair's first node, the client on
  the second, told apart by ``SLURMD_NODENAME``), rounds one after the other. The whole
  schedule is one shell script run once on the launch host (its text is in the evidence's
  argv), which prints each pair's output after the last round (``parsers/pairwise.py``).
- Judged as an N x N matrix (``pairs.judge_pairwise``): each pair's ``ib_write_bw`` average
  (Gb/s, the client's report) against the ``bw`` threshold of the profile, or, when the
  profile sets none, ``min_ratio`` x the per-port line rate of its compute NICs; the weak
  links are named, the node in most of them is the likely culprit, a pair without a
  figure is ``error``. Each node's result is the worst of its pairs (a weak pair with the
  culprit only warns its partner); the matrix goes into the report as a heatmap.

Skipped when the profile has no compute NIC (the demo rack). One HCA port per run
(``device``, ``ib_port``): a node with eight rails runs it once per rail (a profile entry
per rail is the way to name a bad rail instead of averaging it away).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rackgate.checks import Check, CommandError, Scope
from rackgate.launch import Launch, LaunchError, srun_argv, when_slurm_ready
from rackgate.model import Judgement, Result, Status
from rackgate.pairs import (
    DEFAULT_MIN_RATIO,
    judge_pairwise,
    line_rate_threshold,
    node_results,
    round_robin,
)
from rackgate.parsers import ParseError
from rackgate.parsers.pairwise import CLIENT_MARK, PairwiseRun, parse_pairwise
from rackgate.parsers.perftest import parse_ib_write_bw
from rackgate.profile import Hardware, Threshold

NAME = "fabric.pairwise_bw"


class PairwiseParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(default="mlx5_0", pattern=r"^[A-Za-z0-9_.-]+$",
                        description="RDMA device (ibv_devices) of the port under test")
    ib_port: int = Field(default=1, ge=1, le=2)
    gid_index: int | None = Field(default=None, ge=0, le=255,
                                  description="RoCE: the GID index (-x) of the RoCEv2 GID")
    size_bytes: int = Field(default=1 << 20, ge=2, le=1 << 30)
    duration_s: int = Field(default=5, ge=1, le=600, description="ib_write_bw -D")
    tcp_port: int = Field(default=18515, ge=1024, le=65535,
                          description="perftest's out-of-band port (-p)")
    min_ratio: float = Field(default=DEFAULT_MIN_RATIO, gt=0, le=1,
                             description="pass ratio of the line rate, without a bw threshold")
    queue_wait_s: int = Field(default=60, ge=1)
    pair_timeout_s: int = Field(default=120, ge=10, le=3600)
    timeout_s: int = Field(default=3600, ge=10, description="the whole schedule: about "
                           "rounds x (duration + start-up) when every pair runs")


def _perftest(p: PairwiseParams) -> list[str]:
    argv = ["ib_write_bw", "-d", p.device, "-i", str(p.ib_port), "-s", str(p.size_bytes),
            "-D", str(p.duration_s), "-p", str(p.tcp_port), "--report_gbits", "-F"]
    if p.gid_index is not None:
        argv += ["-x", str(p.gid_index)]
    return argv


def pair_argv(p: PairwiseParams, server: str, client: str) -> list[str]:
    """The srun job of one pair: the server on ``server``, the client on ``client``."""
    perftest = shlex.join(_perftest(p))
    inner = (f'if [ "$SLURMD_NODENAME" = "$0" ]; then exec {perftest}; '
             f'else echo {CLIENT_MARK}; sleep 2; exec {perftest} "$0"; fi')
    launch = Launch(nodes=(server, client), tasks_per_node=1, mpi="none",
                    program=("bash", "-c", inner, server), timeout_s=p.pair_timeout_s,
                    queue_wait_s=p.queue_wait_s)
    return srun_argv(launch, job_name=f"rackgate-{NAME}")


def script(p: PairwiseParams, nodes: Sequence[str]) -> str:
    """The shell script that runs the whole schedule and prints every pair's output.

    >>> print(script(PairwiseParams(), ["a", "b"]).splitlines()[3])
    echo '### rackgate-pairwise nodes=a,b rounds=1'
    """
    schedule = round_robin(nodes)
    lines = ["set -u", 'out="$(mktemp -d)"', "trap 'rm -rf \"$out\"' EXIT",
             "echo " + shlex.quote(f"### rackgate-pairwise nodes={','.join(nodes)} "
                                   f"rounds={len(schedule)}")]
    jobs = [(r, a, b) for r, pairs in enumerate(schedule, start=1) for a, b in pairs]
    for r in range(1, len(schedule) + 1):
        for k, (rr, a, b) in enumerate(jobs):
            if rr == r:
                lines.append(f'( {shlex.join(pair_argv(p, a, b))} >"$out/{k}" 2>&1; '
                             f'echo $? >"$out/{k}.rc" ) &')
        lines.append("wait")
    for k, (r, a, b) in enumerate(jobs):
        lines.append(f'echo "### pair round={r} server={a} client={b} '
                     f'rc=$(cat "$out/{k}.rc" 2>/dev/null)"')
        lines.append(f'cat "$out/{k}"')
    lines.append("echo '### end'")
    return "\n".join(lines) + "\n"


def pairwise_command(p: PairwiseParams, hostvars: Mapping[str, Any]) -> list[str]:
    nodes = list(hostvars.get("rackgate_nodes") or [])
    if len(nodes) < 2:
        raise CommandError(f"{NAME} needs at least two nodes under test, got {nodes}")
    try:
        return when_slurm_ready(nodes, ["bash", "-c", script(p, nodes), "rackgate-pairwise"])
    except LaunchError as exc:
        raise CommandError(str(exc)) from None


def _threshold(p: PairwiseParams, thresholds: Mapping[str, Threshold],
               hw: Hardware) -> Threshold:
    return thresholds.get("bw") or line_rate_threshold(hw, p.min_ratio)


def _measure(run: PairwiseRun, evidence: str | None
             ) -> tuple[dict[tuple[str, str], float | None], dict[tuple[str, str], str]]:
    measured: dict[tuple[str, str], float | None] = {}
    errors: dict[tuple[str, str], str] = {}
    for pair in run.pairs:
        key = (pair.server, pair.client)
        if pair.rc != 0:
            tail = " ".join(pair.text.split()[-30:])
            errors[key] = f"the pair's job exited with rc {pair.rc}: {tail}"
            continue
        try:
            measured[key] = parse_ib_write_bw(pair.client_text).bw_average_gbps
        except ParseError as exc:
            errors[key] = f"unparseable client output in {evidence or 'the evidence'}: {exc}"
    return measured, errors


def judge_nodes(run: PairwiseRun, p: PairwiseParams, thresholds: Mapping[str, Threshold],
                hw: Hardware, nodes: Sequence[str], evidence: str | None
                ) -> tuple[list[Result], dict[str, Any]]:
    """One result per node of ``nodes`` and the matrix for the report."""
    if set(run.nodes) != set(nodes):
        why = (f"the pairwise run covered {', '.join(run.nodes)}, the nodes under test are "
               f"{', '.join(nodes)}")
        return [Result(n, NAME, Status.ERROR, why, evidence=evidence) for n in nodes], {}
    measured, errors = _measure(run, evidence)
    where = {k: evidence for k in measured.keys() | errors.keys()} if evidence else None
    matrix = judge_pairwise(list(nodes), measured, _threshold(p, thresholds, hw), NAME,
                            errors, where)
    return node_results(matrix), matrix.to_doc()


def judge_rack(run: PairwiseRun, p: PairwiseParams, thresholds: Mapping[str, Threshold],
               hw: Hardware) -> Judgement:
    """The matrix's verdict as one judgement (what the rack as a whole gets)."""
    measured, errors = _measure(run, None)
    matrix = judge_pairwise(list(run.nodes), measured, _threshold(p, thresholds, hw), NAME,
                            errors)
    return Judgement(matrix.status, matrix.message)


def _applies(hw: Hardware) -> str | None:
    if not any(n.role == "compute" for n in hw.nics):
        return "the profile has no compute NIC (hardware.nics)"
    return None


CHECKS = (
    Check(
        name=NAME, scope=Scope.NODE_PAIR,
        tags=frozenset({"fabric", "infiniband", "multinode", "pairwise"}),
        description="ib_write_bw between every pair of nodes (round-robin rounds, pairs of a "
                    "round in parallel, through srun): the N x N matrix against line rate",
        params_model=PairwiseParams, metrics=frozenset(), optional_metrics=frozenset({"bw"}),
        command=pairwise_command, timeout_s=lambda p: int(p.timeout_s), parse=parse_pairwise,
        judge=judge_rack, applies=_applies, runs_on="launcher", judge_nodes=judge_nodes,
    ),
)
