"""Pairwise fabric bandwidth: ``ib_write_bw`` between every pair of nodes, scheduled as a
round-robin tournament and launched through the scheduler.

- ``fabric.pairwise_bw``: for N nodes, ``pairs.round_robin`` gives N-1 rounds (N with a bye
  when N is odd) in which no node is in two pairs; the pairs of a round run in parallel,
  one ``srun`` job of two tasks each (the server on the pair's first node, the client on
  the second, told apart by ``SLURMD_NODENAME``), rounds one after the other. The schedule
  runs once on the launch host through rackgate's job sequencer (``programs/probes/srun_rounds.py``,
  sent as text), which starts every srun from its argv list and prints each pair's output
  after its round (``parsers/pairwise.py``). No shell script is generated from data: on the
  nodes each task runs ``PAIR_TASK``, a constant ``bash -c`` text that receives the server's
  name and the perftest argv as positional arguments.
- With a fabric plan, the report's matrix also groups the pairs by hop class (same leaf,
  across a spine, across the core: ``fabric.hops``) for the rail of ``device``, so a weak
  uplink shows as one weak class; the schedule is the same N-1 rounds.
- Judged as an N x N matrix (``pairs.judge_pairwise``): each pair's ``ib_write_bw`` average
  (Gb/s, the client's report) against the ``bw`` threshold of the profile, or, when the
  profile sets none, ``min_ratio`` x the per-port line rate of its compute NICs; the weak
  links are named, the node in most of them is the likely culprit, a pair without a
  figure is ``error``. Each node's result is the worst of its pairs (a weak pair with the
  culprit only warns its partner); the matrix goes into the report as a heatmap.
- **Completeness**: every pair of the schedule must be in the evidence exactly once, as
  scheduled (round, server, client); a pair missing, printed twice or run otherwise is an
  ``error`` naming it, and so is a pair whose client report is not one row of
  ``size_bytes`` on ``device`` from exactly one client task.

Skipped when the profile has no compute NIC (the demo rack). One HCA port per run
(``device``, ``ib_port``): a node with eight rails runs it once per rail (a profile entry
per rail is the way to name a bad rail instead of averaging it away).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, field_validator

from rackgate.checks.shared.base import AcrossCheck, CommandError, HostNeeds, Params, Scope
from rackgate.checks.shared.pairs import (
    DEFAULT_MIN_RATIO,
    judge_pairwise,
    line_rate_threshold,
    node_results,
    round_robin,
)
from rackgate.commands.launch import (
    RDMA_DEVICE,
    Across,
    Launch,
    LaunchError,
    plain,
    rounds_argv,
    srun_argv,
    when_slurm_ready,
)
from rackgate.fabric.hops import by_hop_class
from rackgate.model import Judgement, Result, Status
from rackgate.parsers import ParseError
from rackgate.parsers.pairwise import CLIENT_MARK, PairOutput, PairwiseRun, parse_pairwise
from rackgate.parsers.perftest import parse_ib_write_bw
from rackgate.profile import Hardware, Threshold
from rackgate.thresholds import FLOOR_RATIOS

NAME = "fabric.pairwise_bw"
# What each task of a pair's srun job runs: ``bash -c PAIR_TASK rackgate-pair <server>
# ib_write_bw ...``. A constant: the server's name and the perftest argv arrive as
# positional arguments, never inside the script text. The server's task runs the
# perftest server; the client's marks itself, gives the server a moment, and connects.
PAIR_TASK = (f'server=$1; shift; if [ "$SLURMD_NODENAME" = "$server" ]; then exec "$@"; fi; '
             f'echo {CLIENT_MARK}; sleep 2; exec "$@" "$server"')


class PairwiseParams(Params):
    device: str = Field(default="mlx5_0", description="RDMA device (ibv_devices) of the port "
                                                      "under test (launch.RDMA_DEVICE)")
    ib_port: int = Field(default=1, ge=1, le=2)
    gid_index: int | None = Field(default=None, ge=0, le=255,
                                  description="RoCE: the GID index (-x) of the RoCEv2 GID")
    size_bytes: int = Field(default=1 << 20, ge=2, le=1 << 30)
    duration_s: int = Field(default=5, ge=1, le=600, description="ib_write_bw -D")
    tcp_port: int = Field(default=18515, ge=1024, le=65535,
                          description="perftest's out-of-band port (-p)")
    min_ratio: float = Field(default=DEFAULT_MIN_RATIO, ge=FLOOR_RATIOS[0], le=FLOOR_RATIOS[1],
                             description="pass ratio of the line rate, without a bw threshold "
                                         "(a floor: rackgate.thresholds.FLOOR_RATIOS)")
    queue_wait_s: int = Field(default=60, ge=1)
    pair_timeout_s: int = Field(default=120, ge=10, le=3600)
    timeout_s: int = Field(default=3600, ge=10, description="the whole schedule: about "
                           "rounds x (duration + start-up) when every pair runs")

    @field_validator("device")
    @classmethod
    def _plain_device(cls, value: str) -> str:
        return plain(RDMA_DEVICE, value, "device")


def _perftest(p: PairwiseParams) -> list[str]:
    argv = ["ib_write_bw", "-d", p.device, "-i", str(p.ib_port), "-s", str(p.size_bytes),
            "-D", str(p.duration_s), "-p", str(p.tcp_port), "--report_gbits", "-F"]
    if p.gid_index is not None:
        argv += ["-x", str(p.gid_index)]
    return argv


def pair_argv(p: PairwiseParams, server: str, client: str,
              node_lock: str | None = None) -> list[str]:
    """The srun job of one pair: the server on ``server``, the client on ``client``."""
    launch = Launch(nodes=(server, client), tasks_per_node=1, mpi="none",
                    program=("bash", "-c", PAIR_TASK, "rackgate-pair", server, *_perftest(p)),
                    timeout_s=p.pair_timeout_s, queue_wait_s=p.queue_wait_s,
                    node_lock=node_lock)
    return srun_argv(launch, job_name=f"rackgate-{NAME}")


def schedule_argv(p: PairwiseParams, nodes: Sequence[str],
                  node_lock: str | None = None) -> list[str]:
    """The job sequencer's command line that runs the whole schedule.

    >>> argv = schedule_argv(PairwiseParams(), ["a", "b"])
    >>> argv[3:6], argv[6:8]
    (['### rackgate-pairwise nodes=a,b rounds=1', '### end', '--round'], ['--job', \
'### pair round=1 server=a client=b'])
    """
    schedule = round_robin(nodes)
    rounds = [[(f"### pair round={r} server={a} client={b}", pair_argv(p, a, b, node_lock))
               for a, b in pairs] for r, pairs in enumerate(schedule, start=1)]
    return rounds_argv(f"### rackgate-pairwise nodes={','.join(nodes)} rounds={len(schedule)}",
                       "### end", rounds)


def pairwise_command(p: PairwiseParams, hostvars: Mapping[str, Any],
                     across: Across) -> list[str]:
    nodes = list(across.nodes)
    if len(nodes) < 2:
        raise CommandError(f"{NAME} needs at least two nodes under test, got {nodes}")
    try:
        return when_slurm_ready(nodes, schedule_argv(p, nodes, across.node_lock))
    except (LaunchError, ValueError) as exc:
        raise CommandError(str(exc)) from None


def _threshold(p: PairwiseParams, thresholds: Mapping[str, Threshold],
               hw: Hardware) -> Threshold:
    return thresholds.get("bw") or line_rate_threshold(hw, p.min_ratio)


def _scheduled(run: PairwiseRun) -> tuple[dict[tuple[str, str], PairOutput],
                                          dict[tuple[str, str], str]]:
    """Each pair of the schedule (from the header's node order) found exactly once, as
    scheduled; the others keyed as scheduled with why they cannot be judged."""
    found: dict[tuple[str, str], PairOutput] = {}
    errors: dict[tuple[str, str], str] = {}
    for r, pairs in enumerate(round_robin(run.nodes), start=1):
        for a, b in pairs:
            sections = [s for s in run.pairs if {s.server, s.client} == {a, b}]
            if not sections:
                errors[(a, b)] = "pair missing from the evidence (not run, or its output lost)"
            elif len(sections) > 1:
                errors[(a, b)] = (f"pair printed {len(sections)} times (lines "
                                  f"{', '.join(str(s.line) for s in sections)}): one job per "
                                  "pair, two sections are not one measurement")
            elif (sections[0].round, sections[0].server, sections[0].client) != (r, a, b):
                s = sections[0]
                errors[(a, b)] = (f"ran as round {s.round} server {s.server} client "
                                  f"{s.client}, the schedule has round {r} server {a} client "
                                  f"{b}: not the scheduled run")
            else:
                found[(a, b)] = sections[0]
    return found, errors


def _figure(pair: PairOutput, p: PairwiseParams) -> float:
    """The client's bandwidth for exactly the run the command asked for; ParseError else."""
    if pair.client_tasks != 1:
        raise ParseError(f"{pair.client_tasks} tasks said '{CLIENT_MARK}': a pair has one "
                         "client")
    bw = parse_ib_write_bw(pair.client_text)
    sizes = [r.size_bytes for r in bw.rows]
    if sizes != [p.size_bytes]:
        raise ParseError(f"the client measured size(s) {sizes[:5]} B, the command ran -s "
                         f"{p.size_bytes}: not the scheduled measurement")
    if bw.header.device is not None and bw.header.device != p.device:
        raise ParseError(f"the client ran on device {bw.header.device}, the command named "
                         f"{p.device}")
    return bw.rows[0].bw_average_gbps


def _measure(run: PairwiseRun, p: PairwiseParams, evidence: str | None
             ) -> tuple[dict[tuple[str, str], float | None], dict[tuple[str, str], str]]:
    found, errors = _scheduled(run)
    measured: dict[tuple[str, str], float | None] = {}
    for key, pair in found.items():
        if pair.rc != 0:
            tail = " ".join(pair.text.split()[-30:])
            errors[key] = f"the pair's job exited with rc {pair.rc}: {tail}"
            continue
        try:
            measured[key] = _figure(pair, p)
        except ParseError as exc:
            errors[key] = f"unparseable client output in {evidence or 'the evidence'}: {exc}"
    return measured, errors


def _run_problem(run: PairwiseRun, nodes: Sequence[str] | None) -> str | None:
    if nodes is not None and sorted(run.nodes) != sorted(nodes):
        return (f"the pairwise run covered {', '.join(run.nodes)}, the nodes under test are "
                f"{', '.join(nodes)}")
    if run.rounds != len(round_robin(run.nodes)):
        return (f"the header announces {run.rounds} rounds, the schedule of "
                f"{len(run.nodes)} nodes has {len(round_robin(run.nodes))}")
    return None


def judge_nodes(run: PairwiseRun, p: PairwiseParams, thresholds: Mapping[str, Threshold],
                hw: Hardware, nodes: Sequence[str], evidence: str | None
                ) -> tuple[list[Result], dict[str, Any]]:
    """One result per node of ``nodes`` and the matrix for the report."""
    why = _run_problem(run, nodes)
    if why is not None:
        return [Result(n, NAME, Status.ERROR, why, evidence=evidence) for n in nodes], {}
    measured, errors = _measure(run, p, evidence)
    where = {k: evidence for k in measured.keys() | errors.keys()} if evidence else None
    matrix = judge_pairwise(list(run.nodes), measured, _threshold(p, thresholds, hw), NAME,
                            errors, where)
    return node_results(matrix), matrix.to_doc()


def judge_rack(run: PairwiseRun, p: PairwiseParams, thresholds: Mapping[str, Threshold],
               hw: Hardware) -> Judgement:
    """The matrix's verdict as one judgement (what the rack as a whole gets)."""
    why = _run_problem(run, None)
    if why is not None:
        return Judgement(Status.ERROR, why)
    measured, errors = _measure(run, p, None)
    matrix = judge_pairwise(list(run.nodes), measured, _threshold(p, thresholds, hw), NAME,
                            errors)
    return Judgement(matrix.status, matrix.message)


def _applies(hw: Hardware) -> str | None:
    if not any(n.role == "compute" for n in hw.nics):
        return "the profile has no compute NIC (hardware.nics)"
    return None


CHECKS = (
    AcrossCheck(
        name=NAME, scope=Scope.NODE_PAIR,
        tags=frozenset({"fabric", "infiniband", "multinode", "pairwise"}),
        description="ib_write_bw between every pair of nodes (round-robin rounds, pairs of a "
                    "round in parallel, through srun): the N x N matrix against line rate",
        params_model=PairwiseParams, metrics=frozenset(), optional_metrics=frozenset({"bw"}),
        better={"bw": "higher"},
        command=pairwise_command, parse=parse_pairwise,
        # on every node: the job's tasks run ib_write_bw on this device
        needs=lambda p, hv: HostNeeds(tools=("ib_write_bw",), rdma_devices=(p.device,)),
        judge=judge_rack, applies=_applies, judge_nodes=judge_nodes,
        plan_section=lambda section, p, plan: {
            **section, "hop_classes": by_hop_class(plan, section["pairs"], p.device)},
    ),
)
