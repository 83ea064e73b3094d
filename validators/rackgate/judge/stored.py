"""Judging a stored run: (the run's hosts and checks, profiles, an evidence reader) in,
every node's results out. Nothing here plans, collects or writes.

Each check's placement judges its part: checks with evidence per node are judged node by
node (the hot loop: on every core for a large run, forked workers inheriting the job),
checks with one evidence file for every node (jobs across the nodes, fabric queries)
once for all of them. Then the rack-level judgements
(``judge.rack``) compare the nodes with each other. One (node, check) that cannot be
judged is an ``error`` for it alone; so is one whose judgement runs longer than its bound
(``judge.bound``: ``limit_s`` per (node, check), and as many times that for a check judged
once for every node). Evidence on disk that the manifest does not list is an ``error`` too
(``judge.strays``), so the run's checks are the manifest's and the disk's.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rackgate.checks.shared.base import Check, ControlCheck, NodeCheck, RackCheck
from rackgate.judge import bound
from rackgate.judge.rack import judge_rack
from rackgate.judge.strays import stray_evidence
from rackgate.model import Result, Status, describe
from rackgate.placement import (
    EvidenceReader,
    Judged,
    JudgedOnce,
    JudgeJob,
    OnNode,
    placement_of,
)
from rackgate.placement.evidence import missing_evidence

PARALLEL_MIN_RESULTS = 5000  # below this, forking costs more than it saves


@dataclass(frozen=True)
class _Work:
    """The per-node part of a judgement, as forked workers inherit it."""

    job: JudgeJob
    reader: EvidenceReader
    each: Sequence[tuple[str, NodeCheck | ControlCheck | None, OnNode | None]]  # name, check, where
    limit_s: float  # the time bound of one (node, check) judgement


_FORKED: _Work | None = None  # handed to forked workers without pickling


def _judge_hosts(work: _Work, hosts: Sequence[str]) -> Judged:
    """Read, parse and judge every per-node check of ``hosts``: the per-result hot loop."""
    out = Judged()
    mismatches: dict[tuple[str, str, str], str] = {}
    gc_was_on = gc.isenabled()
    gc.disable()  # only acyclic objects are made here; collections would cost ~8 %
    try:
        with bound.alarms():
            for host in hosts:
                for name, check, placement in work.each:
                    out.results.append(_judge_one(work, host, name, check, placement, out,
                                                  mismatches))
    finally:
        if gc_was_on:
            gc.enable()
    return out


def _judge_one(work: _Work, host: str, name: str, check: NodeCheck | ControlCheck | None,
               placement: OnNode | None, out: Judged,
               mismatches: dict[tuple[str, str, str], str]) -> Result:
    if check is None or placement is None:
        return missing_evidence(host, name, f"check {name} is not known to this rackgate "
                                            f"version")
    try:
        with bound.bounded(work.limit_s):
            return placement.judge_node(check, work.job, work.reader, host, out, mismatches)
    except bound.Overrun as exc:  # a runaway is this (node, check)'s error alone
        return missing_evidence(host, name, str(exc))
    except Exception as exc:  # one (node, check) never stops the others
        return missing_evidence(host, name, f"judging failed: {describe(exc)}")


def _judge_slice(bounds: tuple[int, int]) -> Judged:
    assert _FORKED is not None
    return _judge_hosts(_FORKED, _FORKED.job.hosts[bounds[0]:bounds[1]])


def _judge_each_node(work: _Work) -> Judged:
    """Every host's per-node checks, on every core for a large run (fork: workers inherit
    ``work``)."""
    global _FORKED
    hosts = work.job.hosts
    workers = min(os.cpu_count() or 1, 8)
    if (len(hosts) * len(work.each) < PARALLEL_MIN_RESULTS or workers < 2
            or "fork" not in multiprocessing.get_all_start_methods()):
        return _judge_hosts(work, hosts)
    step = max(1, len(hosts) // (workers * 4))
    slices = [(i, min(i + step, len(hosts))) for i in range(0, len(hosts), step)]
    _FORKED = work
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_judge_slice, slices)
    finally:
        _FORKED = None
    out = Judged()
    for part in parts:
        out.add(part)
    return out


def judge_stored(job: JudgeJob, reader: EvidenceReader, registry: Mapping[str, Check],
                 rack_registry: Mapping[str, RackCheck], *, limit_s: float | None = None
                 ) -> tuple[dict[str, list[Result]], Judged]:
    """Every node's results (per node, in the run's host order) and what they were judged
    from (digests, report sections); evidence on disk the manifest does not list is an
    ``error`` (``judge.strays``). ``limit_s``: the time bound of one (node, check)
    judgement (default ``bound.JUDGE_LIMIT_S``; 0: none)."""
    limit = bound.JUDGE_LIMIT_S if limit_s is None else limit_s
    each: list[tuple[str, NodeCheck | ControlCheck | None, OnNode | None]] = []
    once: list[tuple[Check, JudgedOnce[Any]]] = []
    for name in job.checks:
        check = registry.get(name)
        placement = placement_of(check) if check is not None else None
        if check is not None and isinstance(placement, JudgedOnce):
            once.append((check, placement))
        elif isinstance(check, NodeCheck | ControlCheck) and isinstance(placement, OnNode):
            each.append((name, check, placement))
        else:  # not known to this version: an error on every node, in the per-node loop
            each.append((name, None, None))
    judged = _judge_each_node(_Work(job, reader, each, limit))
    for check, placement in once:
        try:
            with bound.alarms(), bound.bounded(limit * max(1, len(job.hosts))):
                part = placement.judge(check, job, reader, job.hosts)
            judged.add(part)
        except bound.Overrun as exc:  # every node's share of the judgement ran out
            judged.add(Judged([Result(h, check.name, Status.ERROR, str(exc))
                               for h in job.hosts]))
        except Exception as exc:  # one check never stops the report
            judged.add(Judged([Result(h, check.name, Status.ERROR,
                                      f"judging failed: {describe(exc)}") for h in job.hosts]))
    judged.results += stray_evidence(job, reader.stored())
    per_node: dict[str, list[Result]] = {h: [] for h in job.hosts}
    for r in judge_rack(judged.results, job.rack_profile, job.hosts, rack_registry):
        per_node[r.node].append(r)
    return per_node, judged
