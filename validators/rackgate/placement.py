"""Placements: where a check's command runs, and how its evidence becomes node results.

A check says where it runs (``Check.runs_on``); :func:`placement_of` turns that into one
of three placements, and nothing else in rackgate asks:

- :data:`ON_NODE`: the command runs on each node under test, under the node's lock; each
  node is judged from its own evidence.
- :data:`ON_CONTROL_HOST`: the command runs on the host running rackgate, once per node
  and about that node (its BMC: the BMC network is reached from there). rackgate's own
  programs (``python3 -m rackgate.…``) run with rackgate's interpreter there.
- :data:`ACROSS_NODES`: the command runs once per run on the launch host and starts a job
  across every node under test (srun, mpirun); its command is given the nodes as a typed
  :class:`~rackgate.collect.launch.Across`, and every node is judged from that one
  evidence file. It runs after every node's own benchmarks (``phase`` 1): a job across the
  nodes would load the very nodes fio is measuring.

A placement plans its part of a run (:meth:`Placement.plan`: tasks to run, records of
what cannot run, skips) from a :class:`RunView`, and judges its part of a stored run
through an evidence reader: node by node (:meth:`OnNode.judge_node`) or once for every
node (:meth:`AcrossNodes.judge`). Both are pure apart from that
reader: planning is unit-tested without Ansible or a run directory.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol

from rackgate.checks.base import Check, CommandError, Scope
from rackgate.collect.launch import Across
from rackgate.collect.task import DEFAULT_LOCK_FILE, Task
from rackgate.judge.evidence import (
    absent_from_profile,
    judge_evidence,
    judge_launched,
    missing_evidence,
    not_applicable,
)
from rackgate.model import Result, Status
from rackgate.profile import Profile
from rackgate.store.evidence import Evidence, EvidenceError
from rackgate.store.manifest import Launched

MIN_NODES_ACROSS = 2  # a job across the nodes needs at least two of them

LAUNCH_HOST_VAR = "rackgate_launch_host"
LAUNCH_GROUP = "slurm_controller"
# a site without a scheduler rackgate can launch through says why, and its multi-node
# checks are skipped with that reason (every node must say so)
NO_LAUNCH_VAR = "rackgate_no_launch_reason"
NO_LAUNCH_HOST = (f"no launch host for multi-node checks: set {LAUNCH_HOST_VAR} for the "
                  f"nodes, or put the scheduler's controller in inventory group {LAUNCH_GROUP}")


class EvidenceReader(Protocol):
    """Where judging reads evidence from (``store.evidence.EvidenceStore``, or a test's)."""

    def read(self, host: str, check: str) -> tuple[Evidence, str]: ...


@dataclass(frozen=True)
class RunView:
    """What planning sees of a run: the nodes under test, every inventory host's variables,
    each node's profile (the rack's, with the node's overrides) and the launch host."""

    nodes: tuple[str, ...]
    hostvars: Mapping[str, Mapping[str, Any]]
    sources: tuple[str, ...]
    profiles: Mapping[str, Profile]
    launch_host: str | None = None
    python: str = field(default=sys.executable)  # rackgate's interpreter on this host
    # nodes left out of the jobs across the nodes, with the reason (unreachable in this
    # collection, or broke the job's first attempt): the job runs on the others
    left_out: Mapping[str, str] = field(default_factory=dict)

    @property
    def rack_profile(self) -> Profile:
        """The rack's profile, which configures the checks launched across the nodes: the
        first node's."""
        return self.profiles[self.nodes[0]]


@dataclass(frozen=True)
class NotRun:
    """A (host, check) that cannot run: recorded as ``not_run`` evidence, judged ``error``."""

    host: str
    check: str
    why: str


@dataclass(frozen=True)
class Skipped:
    """A (host, check) the profile says does not apply: nothing is collected, judged skip."""

    host: str
    check: str


Planned = Task | NotRun | Skipped
Usable = Callable[[str, str], bool]  # (host, check) -> its stored evidence can be judged


@dataclass(frozen=True)
class JudgeJob:
    """What judging a stored run needs besides the evidence."""

    hosts: tuple[str, ...]
    checks: tuple[str, ...]  # the run's checks, as its manifest lists them
    profiles: Mapping[str, Profile]  # what each node is judged with
    collected_with: Mapping[str, Profile]  # what each node's evidence was collected with
    launch_host: str | None = None  # where checks across the nodes ran (their evidence)
    # per check launched across the nodes: the nodes its latest job ran on, and those left
    # out of it with the reason (the manifest's ``launched``); a check absent here ran on
    # every node under test
    launched: Mapping[str, Launched] = field(default_factory=dict)
    # why the site launches no job across its nodes (``rackgate_no_launch_reason``: a site
    # without a scheduler rackgate can launch through); None: multi-node checks must run
    no_launch_reason: str | None = None

    @property
    def rack_profile(self) -> Profile:
        """As :attr:`RunView.rack_profile`: the first node's."""
        return self.profiles[self.hosts[0]]


@dataclass
class Judged:
    """Results, the digests of the evidence they came from, and report sections (pairwise
    matrices) of checks that have one."""

    results: list[Result] = field(default_factory=list)
    digests: dict[tuple[str, str], str] = field(default_factory=dict)
    sections: list[Mapping[str, Any]] = field(default_factory=list)

    def add(self, other: Judged) -> None:
        self.results += other.results
        self.digests.update(other.digests)
        self.sections += other.sections


def params_mismatch(check: Check, collected: Profile, judging: Profile) -> str:
    """Why evidence collected under ``collected`` cannot answer ``judging``'s question
    (different benchmark parameters), or "" when it can."""
    cp_then, cp_now = collected.check(check.name), judging.check(check.name)
    if cp_then is None or cp_now is None:
        return ""
    then = check.params_model.model_validate(cp_then.params).model_dump()
    now = check.params_model.model_validate(cp_now.params).model_dump()
    diff = [f"{k} {then[k]!r} (wanted {now[k]!r})" for k in now if then.get(k) != now[k]]
    if not diff:
        return ""
    return (f"evidence was collected with other {check.name} parameters than profile "
            f"{judging.name} prescribes: {', '.join(diff)}; collect again with this profile")


def command_vars(host: str, hostvars: Mapping[str, Any], profile: Profile) -> dict[str, Any]:
    """What a check's command builder sees: the host's inventory variables, plus its name
    and the parallel file system mount from the profile unless the inventory sets one."""
    out = {**hostvars, "inventory_hostname": host}
    storage = profile.model.hardware.storage
    if storage is not None and storage.parallel_fs_mount:
        out.setdefault("rackgate_parallel_fs_mount", storage.parallel_fs_mount)
    return out


def lock_file(host: str, hostvars: Mapping[str, Any]) -> str:
    """The node lock of ``host``: ``rackgate_node_lock_file``, else /var/lock/rackgate.lock."""
    path = hostvars.get("rackgate_node_lock_file", DEFAULT_LOCK_FILE)
    if not isinstance(path, str) or not path.startswith("/") or any(
            not c.isprintable() for c in path):
        raise CommandError(f"rackgate_node_lock_file must be an absolute path, got {path!r}")
    return path


class Placement:
    """Where a check's command runs; subclasses plan and judge their part of a run."""

    name: ClassVar[str]
    where: ClassVar[str]  # for people: where the command runs
    scopes: ClassVar[frozenset[Scope]] = frozenset({Scope.NODE})  # what one result covers
    phase: ClassVar[int] = 0  # collection runs phase 0 first, then phase 1

    def plan(self, check: Check, view: RunView, usable: Usable) -> list[Planned]:
        raise NotImplementedError

    # -- shared by the placements ------------------------------------------------------

    def _task(self, host: str, check: Check, profile: Profile, view: RunView,
              extra: Callable[[], tuple[Any, ...]] = tuple) -> Planned:
        """One (host, check): a Task, or why it cannot run, or a skip."""
        hostvars = view.hostvars.get(host)
        if hostvars is None:
            return NotRun(host, check.name, f"inventory host {host} is no longer in "
                                            f"{', '.join(view.sources)}")
        cp = profile.check(check.name)
        if cp is None:
            return NotRun(host, check.name, f"the profile of inventory host {host} has no "
                                            f"{check.name}")
        if not_applicable(host, check, profile) is not None:
            return Skipped(host, check.name)
        params = check.params_model.model_validate(cp.params)
        try:
            argv = check.command(params, command_vars(host, hostvars, profile), *extra())
            lock = self._lock(host, hostvars, view)
        except CommandError as exc:
            return NotRun(host, check.name, f"inventory host {host}: {exc}")
        if check.secret_var and check.secret_var not in hostvars:
            return NotRun(host, check.name, f"inventory host {host} has no {check.secret_var} "
                                            f"(the BMC password; vault it)")
        return Task(host, check.name, tuple(self._argv(argv, view)), check.timeout_s(params),
                    on_control=self._on_control, secret_var=check.secret_var, lock_file=lock)

    _on_control: ClassVar[bool] = False

    def _lock(self, host: str, hostvars: Mapping[str, Any], view: RunView) -> str | None:
        return lock_file(host, hostvars)

    def _argv(self, argv: Sequence[str], view: RunView) -> Sequence[str]:
        return argv


class OnNode(Placement):
    """The command runs on each node under test, under the node lock. Its evidence is per
    node, so it is judged node by node (:meth:`judge_node`, in ``judge.run``'s parallel
    loop)."""

    name = "node"
    where = "on the node"

    def plan(self, check: Check, view: RunView, usable: Usable) -> list[Planned]:
        return [self._task(h, check, view.profiles[h], view) for h in view.nodes
                if not usable(h, check.name)]

    def judge_node(self, check: Check, job: JudgeJob, reader: EvidenceReader, host: str,
                   digests: dict[tuple[str, str], str],
                   mismatches: dict[tuple[str, str, str], str]) -> Result:
        """One node's result, recording the digest of its evidence in ``digests``;
        ``mismatches`` caches parameter comparisons per (check, profiles) across calls."""
        name = check.name
        now = job.profiles[host]
        absent = absent_from_profile(host, name, now)
        if absent is not None:
            return absent
        skipped = not_applicable(host, check, now)
        if skipped is not None:
            return skipped
        try:
            ev, stdout = reader.read(host, name)
        except EvidenceError as exc:
            return missing_evidence(host, name, str(exc))
        digests[(host, name)] = ev.stdout_sha256
        then = job.collected_with[host]
        if then is not now:
            key = (name, then.sha256, now.sha256)
            if key not in mismatches:
                mismatches[key] = params_mismatch(check, then, now)
            if mismatches[key]:
                return missing_evidence(host, name, mismatches[key])
        return judge_evidence(check, ev, stdout, now)


class OnControlHost(OnNode):
    """The command runs on the control host, once per node (its BMC), without a lock;
    rackgate's own programs run with rackgate's interpreter."""

    name = "control"
    where = "on the control host"
    _on_control = True

    def _lock(self, host: str, hostvars: Mapping[str, Any], view: RunView) -> str | None:
        return None

    def _argv(self, argv: Sequence[str], view: RunView) -> Sequence[str]:
        if list(argv[:2]) == ["python3", "-m"] and len(argv) > 2 \
                and argv[2].startswith("rackgate."):
            return [view.python, *argv[1:]]
        return argv


class AcrossNodes(Placement):
    """The command runs once on the launch host and starts a job across every node."""

    name = "launcher"
    where = "once, across the nodes"
    scopes = frozenset({Scope.RACK, Scope.NODE_PAIR})
    phase = 1

    def plan(self, check: Check, view: RunView, usable: Usable) -> list[Planned]:
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

    def judge(self, check: Check, job: JudgeJob, reader: EvidenceReader,
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
        launched = job.launched.get(name, Launched(tuple(hosts)))
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
        try:
            ev, stdout = reader.read(job.launch_host, name)
        except EvidenceError as exc:
            out.results += [Result(h, name, Status.ERROR, str(exc)) for h in ran]
            return out
        mismatch = params_mismatch(check, job.collected_with[hosts[0]], profile)
        if mismatch:
            out.results += [Result(h, name, Status.ERROR, mismatch) for h in ran]
            return out
        results, section = judge_launched(check, ev, stdout, profile, ran)
        if left:
            without = ", ".join(f"{h} ({_short(why)})" for h, why in left.items())
            results = [replace(r, message=f"{r.message} [run without {without}]")
                       for r in results]
        out.add(Judged(results, {(h, name): ev.stdout_sha256 for h in ran},
                       [section] if section else []))
        return out


def _short(why: str, n: int = 80) -> str:
    return why if len(why) <= n else why[:n] + "..."


ON_NODE = OnNode()
ON_CONTROL_HOST = OnControlHost()
ACROSS_NODES = AcrossNodes()
PLACEMENTS: Mapping[str, Placement] = {p.name: p for p in (ON_NODE, ON_CONTROL_HOST,
                                                           ACROSS_NODES)}


def placement_of(check: Check) -> Placement:
    """Where ``check`` runs. A check whose declared scope its placement cannot give (a
    per-node check launched across the nodes, say) is a bug in its declaration."""
    placement = PLACEMENTS[check.runs_on]
    if check.scope not in placement.scopes:
        raise ValueError(f"check {check.name}: scope {check.scope.value} cannot run "
                         f"{placement.where}")
    return placement
