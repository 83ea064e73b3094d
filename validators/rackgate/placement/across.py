"""Checks launched across the nodes: their command runs once, on the launch host, and
starts a job across every node under test (srun, mpirun); every node is judged from that
one evidence file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rackgate.checks.shared.base import AcrossCheck, CommandError, Scope
from rackgate.commands.launch import Across
from rackgate.model import Result, Status
from rackgate.placement.base import (
    MIN_NODES_ACROSS,
    NO_LAUNCH_HOST,
    EvidenceReader,
    Judged,
    JudgedOnce,
    JudgeJob,
    Planned,
    RunView,
    Usable,
    lock_file,
)
from rackgate.placement.evidence import absent_from_profile, judge_launched, not_applicable
from rackgate.store.manifest import Launched


class AcrossNodes(JudgedOnce[AcrossCheck]):
    """The command runs once on the launch host and starts a job across every node."""

    name = "launcher"
    where = "once, across the nodes"
    scopes = frozenset({Scope.RACK, Scope.NODE_PAIR})
    phase = 1

    def plan(self, check: AcrossCheck, view: RunView, usable: Usable) -> list[Planned]:
        host = view.launch_host
        nodes = self.job_nodes(view)
        if host is None or len(nodes) < MIN_NODES_ACROSS or usable(host, check.name):
            return []  # judged as NO_LAUNCH_HOST / one node / already collected
        return [self._task(host, check, view.rack_profile, view,
                           lambda: (Across(nodes, self._nodes_lock(view)),))]

    @staticmethod
    def job_nodes(view: RunView) -> tuple[str, ...]:
        """The nodes a job across the nodes runs on: those under test, less the left out."""
        return tuple(n for n in view.nodes if n not in view.left_out)

    def _nodes_lock(self, view: RunView) -> str:
        """The one lock file every node under test uses (the job's tasks take it)."""
        paths = {lock_file(n, view.hostvars.get(n, {})) for n in view.nodes}
        if len(paths) != 1:
            raise CommandError(f"the nodes under test disagree on rackgate_node_lock_file "
                               f"({', '.join(sorted(paths))}): a job across them needs one "
                               f"path")
        return paths.pop()

    def _lock(self, host: str, hostvars: Mapping[str, Any], view: RunView) -> str | None:
        # The job's tasks take each node's lock themselves (shared, on the node). On the
        # launch host the launch takes its lock too, so two runs' jobs start one after the
        # other, unless the launch host is a node under test, whose shared lock the
        # exclusive one would block.
        return None if host in view.nodes else lock_file(host, hostvars)

    def judge(self, check: AcrossCheck, job: JudgeJob, reader: EvidenceReader,
              hosts: Sequence[str]) -> Judged:
        """Every node's result from the one evidence file of the job across ``hosts``.

        A node left out of the job (unreachable, or it broke the job's first attempt) is an
        ``error`` naming why; the others are judged from the job that ran without it, and
        when fewer than two were left to run one, they ``warn``: not measured, through no
        fault of their own."""
        name, profile = check.name, job.rack_profile

        def every(why: str, status: Status = Status.ERROR) -> Judged:
            return Judged([Result(h, name, status, why) for h in hosts])

        absent = absent_from_profile(hosts[0], name, profile)
        if absent is not None:
            return every(absent.message)
        if len(hosts) < MIN_NODES_ACROSS:
            return every("a multi-node check, and this run has one node under test (--limit "
                         "or --group)", Status.SKIP)
        skipped = not_applicable(hosts[0], check, profile)
        if skipped is not None:
            return Judged([replace(skipped, node=h) for h in hosts])
        if job.launch_host is None:
            if job.no_launch_reason:
                return every(f"no launch path for multi-node checks at this site: "
                             f"{job.no_launch_reason} (rackgate_no_launch_reason)", Status.SKIP)
            return every(NO_LAUNCH_HOST)
        launched = job.launched.get(name, Launched(nodes=tuple(hosts)))
        left = {h: launched.left_out[h] for h in hosts if h in launched.left_out}
        ran = [h for h in hosts if h in launched.nodes]
        out = Judged([Result(h, name, Status.ERROR, f"left out of the job across the nodes: "
                             f"{why}") for h, why in left.items()])
        out.results += [Result(h, name, Status.ERROR, "neither in the job across the nodes "
                               "nor left out of it (the manifest's launched record)")
                        for h in hosts if h not in left and h not in ran]
        if len(ran) < MIN_NODES_ACROSS:
            partners = "; ".join(f"partner {why}" for why in left.values())
            out.results += [Result(h, name, Status.WARN, f"not measured: {partners} (no "
                                   f"partner left to run the job with)") for h in ran]
            return out
        read = self._read_once(check, job, reader, job.launch_host, ran, out)
        if read is None:
            return out
        ev, stdout = read
        results, section = judge_launched(check, ev, stdout, profile, ran)
        cp = profile.check(name)
        if section and job.fabric is not None and check.plan_section is not None and cp:
            section = check.plan_section(section, check.params_model.model_validate(
                cp.params), job.fabric)
        if left:
            without = ", ".join(f"{h} ({_short(why)})" for h, why in left.items())
            results = [replace(r, message=f"{r.message} [run without {without}]")
                       for r in results]
        out.add(Judged(results, sections=[section] if section else []))
        out.evidence_of(ran, name, ev)
        return out


def _short(why: str, n: int = 80) -> str:
    return why if len(why) <= n else why[:n] + "..."
