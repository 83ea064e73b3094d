"""nccl-tests across nodes, launched through the scheduler: the inter-node fabric as a
training job uses it.

- ``nccl.fabric_all_reduce``: ``all_reduce_perf`` with one rank per GPU (``-g 1``,
  ``--ntasks-per-node`` = the node's GPUs) across every node under test, one ``srun`` job
  from the launch host, NCCL settings from the profile in the job's environment. Judged
  like the node check (median out-of-place busbw over the sizes >= ``judge_min_bytes``,
  any ``#wrong`` or an ``error`` column above nccl-tests' bound fails) against the
  profile's fabric threshold.
- **Per-rail mode** (``per_rail: true``, with ``rail_hcas``: the compute HCA of GPU 0, 1, ...):
  one job per rail, one after the other, each with one rank per node on GPU i
  (``CUDA_VISIBLE_DEVICES=i``) and only its rail's HCA (``NCCL_IB_HCA==<hca>``). Every rank
  then crosses exactly one port, so a rail's busbw compares with one port's line rate and
  a bad rail (a cable, an HCA, a leaf-switch port) is named instead of being averaged away
  by NCCL spreading traffic over the healthy ones. The jobs run through rackgate's job
  sequencer (``programs/probes/srun_rounds.py``, sent as text: every srun is an argv list, no shell
  ever reads a value) and come back as sections (``### rackgate-rails rails=<n>``, then
  ``### rail index=<i> hca=<hca> rc=<rc>`` per rail, ``### end``).

**Completeness.** Per rail, the judge expects exactly the rails of ``rail_hcas``: a rail
missing, printed twice or foreign (another index or HCA) is an ``error`` naming it, and
per-rail evidence without its header is refused, never judged as one run. In every run,
each expected size >= ``judge_min_bytes`` must be present once (``checks.nccl.local.plateau``),
every busbw a possible figure (finite, not above the threshold's physical limit), and the
ranks (``#  Rank`` lines) must have run on exactly the nodes under test, each with its
share of ranks (``gpus_per_node``, or 1 per rail): a run on other hosts proves nothing
about these nodes. Every run must answer the command asked (``checks.nccl.evidence
.contradictions``): all_reduce_perf's rows of the argv's type and op, its configuration
line (sizes, step, ``-g 1``, iterations, ``-c``), and figures in the error cells when
checking iterations were asked (``-c`` > 0): ``N/A`` there is a run that checked nothing.

Every node gets the rack's judgement: a collective cannot tell which node of the ring was
slow (``fabric.pairwise_bw`` can).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rackgate.checks.nccl.evidence import asked, contradictions, deviations, size_bytes
from rackgate.checks.nccl.local import NcclParams, binary_dir, plateau
from rackgate.checks.shared.base import AcrossCheck, CommandError, HostNeeds, Scope, compare
from rackgate.commands.launch import (
    HCA_PORT,
    PARTITION,
    Across,
    Launch,
    LaunchError,
    plain,
    rounds_argv,
    srun_argv,
    when_slurm_ready,
)
from rackgate.model import Judgement, Result, Status
from rackgate.parsers import ParseError
from rackgate.parsers.launch_failure import host_matches
from rackgate.parsers.nccl_tests import NcclTestsRun, parse_nccl_tests
from rackgate.profile import Hardware, Threshold

NAME = "nccl.fabric_all_reduce"
_NCCL_VAR = re.compile(r"NCCL_[A-Z0-9_]+\Z")
# NCCL settings' values: names, numbers, lists (NCCL_IB_HCA "=mlx5_0:1,mlx5_3:1",
# NCCL_SOCKET_IFNAME "^docker,lo"), paths with NCCL's %h/%p (NCCL_DEBUG_FILE). Nothing a
# shell or a template engine (Ansible's Jinja: '{{') would read.
_NCCL_VALUE = re.compile(r"[A-Za-z0-9_.,:=^/%+@-]*\Z")
_RAIL = re.compile(r"### rail index=([0-9]{1,4}) hca=(\S+) rc=(-?[0-9]{0,3})\Z")
_HEAD = "### rackgate-rails"
_HEAD_LINE = re.compile(r"### rackgate-rails rails=([0-9]{1,4})\Z")
_END = "### end"


class NcclFabricParams(NcclParams):
    gpus_per_task: int = Field(default=1, ge=1, le=1, description="-g: one GPU per rank")
    gpus_per_node: int = Field(default=8, ge=1, le=64, description="ranks per node")
    per_rail: bool = Field(default=False, description="one job per rail (rail_hcas)")
    rail_hcas: list[str] = Field(default=[], description="the compute HCA of GPU 0, 1, ... "
                                 "(RDMA device names, optionally :port; launch.HCA_PORT)")
    nccl_env: dict[str, str] = Field(default={}, description="NCCL_* settings of the job")
    mpi: Literal["pmix", "pmi2", "none"] = "pmix"
    partition: str | None = Field(default=None, description="SLURM partition(s)")
    queue_wait_s: int = Field(default=120, ge=1)
    request_gpus: bool = Field(default=True, description="srun --gres=gpu:<gpus_per_node>")

    @field_validator("rail_hcas")
    @classmethod
    def _plain_hcas(cls, value: list[str]) -> list[str]:
        for hca in value:
            plain(HCA_PORT, hca, "rail_hcas entry")
        twice = sorted(h for h, n in Counter(value).items() if n > 1)
        if twice:
            raise ValueError(f"rail_hcas names {', '.join(twice)} twice: one HCA per rail")
        return value

    @field_validator("partition")
    @classmethod
    def _plain_partition(cls, value: str | None) -> str | None:
        return None if value is None else plain(PARTITION, value, "partition")

    @model_validator(mode="after")
    def _consistent(self) -> NcclFabricParams:  # replaces the node check's rule
        if size_bytes(self.judge_min_bytes) > size_bytes(self.max_bytes):
            raise ValueError(f"judge_min_bytes {self.judge_min_bytes} is above max_bytes "
                             f"{self.max_bytes}: no row would be judged")
        if self.per_rail and len(self.rail_hcas) != self.gpus_per_node:
            raise ValueError(f"per_rail needs one HCA per GPU in rail_hcas ({self.gpus_per_node}"
                             f" GPUs per node), got {self.rail_hcas}")
        bad = [k for k in self.nccl_env if not _NCCL_VAR.fullmatch(k)]
        if bad:
            raise ValueError(f"nccl_env keys must be NCCL_* variables, got {bad}")
        odd = [k for k, v in self.nccl_env.items() if not _NCCL_VALUE.fullmatch(v)]
        if odd:
            raise ValueError(f"nccl_env values of {odd} are not plain NCCL settings (letters, "
                             "digits and _ . , : = ^ / % + @ -; no space, quote, $ or brace)")
        return self


def _program(p: NcclFabricParams, hostvars: Mapping[str, Any]) -> tuple[str, ...]:
    return (f"{binary_dir(p, hostvars)}/all_reduce_perf", "-b", p.min_bytes, "-e", p.max_bytes,
            "-f", str(p.step_factor), "-g", "1", "-n", str(p.iters), "-w", str(p.warmup_iters),
            "-d", p.datatype, "-c", str(p.check_iters), "-o", p.op)


def fabric_command(p: NcclFabricParams, hostvars: Mapping[str, Any],
                   across: Across) -> list[str]:
    """One srun job across every node, or (per rail) one job per rail in sequence through
    the job sequencer; both behind the SLURM readiness guard. Only argv lists: no shell."""
    nodes = across.nodes
    if len(nodes) < 2:
        raise CommandError(f"{NAME} needs at least two nodes under test, got {list(nodes)}")
    program = _program(p, hostvars)

    def job(tasks: int, env: dict[str, str]) -> list[str]:
        launch = Launch(nodes=nodes, tasks_per_node=tasks, program=program, env=env,
                        timeout_s=p.timeout_s, mpi=p.mpi, partition=p.partition,
                        queue_wait_s=p.queue_wait_s,
                        gpus_per_node=p.gpus_per_node if p.request_gpus else None,
                        node_lock=across.node_lock)
        return srun_argv(launch, job_name=f"rackgate-{NAME}")

    try:
        if not p.per_rail:
            return when_slurm_ready(nodes, job(p.gpus_per_node, dict(p.nccl_env)))
        rounds = [[(f"### rail index={i} hca={hca}",
                    job(1, {**p.nccl_env, "CUDA_VISIBLE_DEVICES": str(i),
                            "NCCL_IB_HCA": f"={hca}"}))]
                  for i, hca in enumerate(p.rail_hcas)]
        return when_slurm_ready(nodes, rounds_argv(f"{_HEAD} rails={len(p.rail_hcas)}", _END,
                                                   rounds))
    except LaunchError as exc:
        raise CommandError(str(exc)) from None


@dataclass(frozen=True)
class RailRun:
    index: int | None  # None: one job over every GPU (not per rail)
    hca: str
    rc: int | None
    run: NcclTestsRun | None
    error: str  # why ``run`` is None
    line: int = 0  # the section's line in the evidence


@dataclass(frozen=True)
class FabricRun:
    rails: tuple[RailRun, ...]
    expected_rails: int | None = None  # the header's rails=<n>; None: one job, not per rail


def parse_fabric(text: str) -> FabricRun:
    """One nccl-tests output, or the per-rail sections (see the module docstring).

    Rail sections, a rails header or an end line in an output that does not open with the
    rails header are refused (per-rail evidence is never one run), as are a second header
    and anything after ``### end``.
    """
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None or not lines[first].startswith(_HEAD):
        stray = next((n for n, ln in enumerate(lines, 1)
                      if ln.startswith(("### rail", _HEAD, _END))), None)
        if stray is not None:
            raise ParseError(f"line {stray}: per-rail section line {lines[stray - 1][:80]!r} "
                             f"in an output without the '{_HEAD} rails=<n>' header on its "
                             "first line: per-rail evidence is never judged as one run")
        return FabricRun((RailRun(None, "", 0, parse_nccl_tests(text), ""),))
    head = _HEAD_LINE.fullmatch(lines[first])
    if head is None:
        raise ParseError(f"line {first + 1}: not a rails header: {lines[first][:80]!r}")
    rails: list[RailRun] = []
    current: tuple[int, str, str, int] | None = None
    body: list[str] = []

    def close() -> None:
        if current is None:
            return
        index, hca, rc, at = current
        code = int(rc) if rc not in ("", "-") else None
        try:
            run, error = parse_nccl_tests("\n".join(body)), ""
        except ParseError as exc:
            run, error = None, str(exc)
        rails.append(RailRun(index, hca, code, run, error, at))

    for lineno in range(first + 2, len(lines) + 1):
        line = lines[lineno - 1]
        if line == _END:
            close()
            after = next((n for n in range(lineno + 1, len(lines) + 1)
                          if lines[n - 1].strip()), None)
            if after is not None:
                raise ParseError(f"line {after}: output after '{_END}' (two runs in one "
                                 f"evidence file?): {lines[after - 1][:80]!r}")
            return FabricRun(tuple(rails), int(head.group(1)))
        if line.startswith(_HEAD):
            raise ParseError(f"line {lineno}: a second rails header (two runs in one "
                             "evidence file?)")
        if line.startswith("### rail"):
            close()
            m = _RAIL.fullmatch(line)
            if m is None:
                raise ParseError(f"line {lineno}: not a rail header: {line[:80]!r}")
            current, body = (int(m.group(1)), m.group(2), m.group(3), lineno), []
        elif current is not None:
            body.append(line)
        elif line.strip():
            raise ParseError(f"line {lineno}: output before the first rail section: "
                             f"{line[:80]!r}")
    raise ParseError(f"no '{_END}' line after {len(rails) + (current is not None)} rail(s): "
                     "the run was cut short")


def _rail_set(run: FabricRun, p: NcclFabricParams) -> tuple[list[RailRun], list[str]]:
    """The rails to judge (each expected rail present once) and why the set is incomplete."""
    if not p.per_rail:
        if run.expected_rails is not None:
            return [], [f"the evidence is per rail ({run.expected_rails} rails) and the "
                        "profile sets per_rail: false: not the run the profile prescribes"]
        return list(run.rails), []
    if run.expected_rails is None:
        return [], ["per_rail is set and the evidence is one run without the per-rail header: "
                    f"{len(p.rail_hcas)} rails were expected, one run over every rail is "
                    "never judged as a rail"]
    problems = []
    if run.expected_rails != len(p.rail_hcas):
        problems.append(f"the header announces {run.expected_rails} rails, the profile has "
                        f"{len(p.rail_hcas)} (rail_hcas)")
    keep = []
    for i, hca in enumerate(p.rail_hcas):
        found = [r for r in run.rails if r.index == i]
        if not found:
            problems.append(f"rail {i} ({hca}) missing from the evidence")
        elif len(found) > 1:
            problems.append(f"rail {i} ({hca}) appears {len(found)} times (lines "
                            f"{', '.join(str(r.line) for r in found)}): one run per rail")
        elif found[0].hca != hca:
            problems.append(f"rail {i} ran on {found[0].hca}, the profile names {hca}")
        else:
            keep.append(found[0])
    foreign = [r for r in run.rails if r.index is None or not 0 <= r.index < len(p.rail_hcas)]
    problems += [f"foreign rail {r.index} ({r.hca}) at line {r.line}: the profile has rails "
                 f"0-{len(p.rail_hcas) - 1}" for r in foreign]
    return keep, problems


def _host_findings(r: NcclTestsRun, nodes: Sequence[str], per_node: int, name: str
                   ) -> list[str]:
    """The ranks must have run on exactly ``nodes``, ``per_node`` ranks on each."""
    if not r.ranks:
        return [f"{name}: no '#  Rank' device lines: which hosts ran is unknown"]
    owner = {k.rank: next((n for n in nodes if host_matches(k.host, n)), None)
             for k in r.ranks}
    out = []
    foreign = sorted({k.host for k in r.ranks if owner[k.rank] is None})
    if foreign:
        out.append(f"{name}: ranks ran on host(s) not under test: {', '.join(foreign)}")
    counts = Counter(owner.values())
    for n in nodes:
        if counts[n] != per_node:
            out.append(f"{name}: node {n} ran {counts[n]} rank(s), expected {per_node}")
    return out


def judge_fabric(run: FabricRun, p: NcclFabricParams, thresholds: Mapping[str, Threshold],
                 hw: Hardware, nodes: Sequence[str] | None = None) -> Judgement:
    """The rack's judgement; with ``nodes`` (the nodes under test) the ranks' hosts are
    checked too (``judge_nodes``)."""
    threshold = thresholds.get("busbw")
    if threshold is None:
        return Judgement(Status.ERROR, f"the profile gives no busbw threshold for {NAME}")
    rails, problems = _rail_set(run, p)
    findings: list[tuple[Status, str]] = [(Status.ERROR, t) for t in problems]
    figures: dict[str, float] = {}
    details: dict[str, float | str] = {}
    for rail in rails:
        name = "all rails" if rail.index is None else f"rail {rail.index} ({rail.hca})"
        if rail.run is None or rail.rc not in (0, None):
            why = rail.error or f"the job exited with rc {rail.rc}"
            findings.append((Status.ERROR, f"{name}: no measurement: {why}"))
            continue
        r = rail.run
        hosts = {k.host for k in r.ranks}
        if r.ranks and len(hosts) < 2:
            findings.append((Status.ERROR, f"{name}: every rank ran on {', '.join(hosts)}: "
                                           "nothing crossed the fabric"))
        if nodes is not None:
            per_node = 1 if rail.index is not None else p.gpus_per_node
            findings += [(Status.ERROR, t) for t in _host_findings(r, nodes, per_node, name)]
        wrong = [row for row in r.rows for m in (row.out_of_place, row.in_place)
                 if m is not None and m.wrong]
        if wrong or r.out_of_bounds:
            findings.append((Status.FAIL, f"{name}: #wrong > 0 at {len(wrong)} size(s) "
                                          f"(data corrupted between nodes)"))
        findings += [(s, f"{name}: {t}") for s, t in deviations(r, "all_reduce")]  # < 2.13
        findings += [(Status.ERROR, f"{name}: {t}")
                     for t in contradictions(r, asked(_program(p, {})))]
        if not r.complete and p.require_summary:
            findings.append((Status.ERROR, f"{name}: the output ends before the summary"))
        judged = plateau(r, p, threshold)
        findings += [(s, f"{name}: {t}") for s, t in judged.findings]
        if judged.busbw_gbps is None:
            findings.append((Status.ERROR, f"{name}: no row of at least {p.judge_min_bytes}"))
            continue
        figure = round(judged.busbw_gbps, 2)
        figures[name] = figure
        details[f"busbw_gbps {name}"] = figure
        j = compare(figure, threshold, f"{name} busbw")
        if j.status is not Status.PASS:
            findings.append((j.status, j.message))
    if not figures:
        findings.sort(key=lambda f: -f[0])
        return Judgement(Status.worst(s for s, _ in findings) if findings else Status.ERROR,
                         "; ".join(t for _, t in findings) or "no rail measured",
                         details=details)
    worst_name = min(figures, key=lambda k: figures[k])
    expected = len(p.rail_hcas) if p.per_rail else 1
    j = compare(figures[worst_name], threshold,
                f"lowest busbw ({worst_name}) of {len(figures)} measured of {expected} expected")
    findings.sort(key=lambda f: -f[0])
    status = Status.worst([j.status, *(s for s, _ in findings)])
    message = "; ".join([j.message, *(t for s, t in findings if s is not Status.PASS)])
    return Judgement(status, message, j.measured, j.unit, j.expected, j.percent_of_limit,
                     details, j.better)


def judge_nodes(run: FabricRun, p: NcclFabricParams, thresholds: Mapping[str, Threshold],
                hw: Hardware, nodes: Sequence[str], evidence: str | None
                ) -> tuple[list[Result], dict[str, Any]]:
    """Every node under test gets the rack's judgement, made knowing which nodes those are
    (a collective cannot tell which node of the ring was slow)."""
    j = judge_fabric(run, p, thresholds, hw, nodes=list(nodes))
    return [Result.from_judgement(n, NAME, j, evidence) for n in nodes], {}


def _applies(hw: Hardware) -> str | None:
    if hw.gpu is None:
        return "the profile expects no GPU"
    if not any(n.role == "compute" for n in hw.nics):
        return "the profile has no compute NIC (hardware.nics)"
    return None


CHECKS = (
    AcrossCheck(
        name=NAME, scope=Scope.RACK, tags=frozenset({"nccl", "gpu", "fabric", "multinode"}),
        description="nccl-tests all_reduce_perf across the nodes through srun (optionally one "
                    "job per rail): busbw at the largest sizes against the fabric threshold",
        params_model=NcclFabricParams, metrics=frozenset(), optional_metrics=frozenset({"busbw"}),
        better={"busbw": "higher"},
        command=fabric_command, parse=parse_fabric,
        # on every node: each rail's job runs on its HCA (NCCL_IB_HCA=<hca>:<port>)
        needs=lambda p, hv: HostNeeds(rdma_devices=tuple(h.split(":")[0] for h in p.rail_hcas)),
        judge=judge_fabric, applies=_applies, judge_nodes=judge_nodes,
        baseline=(("busbw", "measured"),),  # the job's (lowest rail's) busbw, one figure
    ),
)
