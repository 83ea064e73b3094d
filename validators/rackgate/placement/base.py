"""What every placement shares: the view of a run it plans from (:class:`RunView`), what
judging a stored run needs (:class:`JudgeJob`), the records of what cannot run, and the
:class:`Placement` base with the task building every placement uses."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from rackgate.checks.shared.base import Check, CommandError, Scope
from rackgate.commands.task import DEFAULT_LOCK_FILE, Task
from rackgate.fabric.plan import FabricPlan
from rackgate.model import Result, Status
from rackgate.placement.evidence import not_applicable
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

    def stored(self) -> set[tuple[str, str]]:
        """Every (host, check) with evidence, whatever the manifest lists."""
        ...


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
    fabric: FabricPlan | None = None  # the fabric plan (the inventory's fabric.yml)
    fabric_host: str | None = None  # where the fabric checks run (placement.fabric)

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
    why: str = field(default="", compare=False)  # the skip's message, for the plan's display


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
    fabric: FabricPlan | None = None  # the fabric plan the run recorded
    fabric_host: str | None = None  # where the fabric checks ran (their evidence)

    @property
    def rack_profile(self) -> Profile:
        """As :attr:`RunView.rack_profile`: the first node's."""
        return self.profiles[self.hosts[0]]


@dataclass
class Judged:
    """Results, the digests of the evidence they came from, how long that evidence's
    command ran (seconds, where the record says), and report sections (pairwise matrices)
    of checks that have one."""

    results: list[Result] = field(default_factory=list)
    digests: dict[tuple[str, str], str] = field(default_factory=dict)
    sections: list[Mapping[str, Any]] = field(default_factory=list)
    durations: dict[tuple[str, str], float] = field(default_factory=dict)

    def add(self, other: Judged) -> None:
        self.results += other.results
        self.digests.update(other.digests)
        self.sections += other.sections
        self.durations.update(other.durations)

    def evidence_of(self, hosts: Sequence[str], check: str, ev: Evidence) -> None:
        """Record that ``hosts``' results of ``check`` were judged from ``ev``."""
        for h in hosts:
            self.digests[(h, check)] = ev.stdout_sha256
            if ev.duration_s is not None:
                self.durations[(h, check)] = ev.duration_s


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


K = TypeVar("K", bound=Check)  # the kind of check a placement runs


class Placement(Generic[K]):
    """Where a check's command runs; subclasses plan and judge their part of a run."""

    name: ClassVar[str]
    where: ClassVar[str]  # for people: where the command runs
    scopes: ClassVar[frozenset[Scope]] = frozenset({Scope.NODE})  # what one result covers
    phase: ClassVar[int] = 0  # collection runs phase 0 first, then phase 1

    def plan(self, check: K, view: RunView, usable: Usable) -> list[Planned]:
        raise NotImplementedError

    # -- shared by the placements ------------------------------------------------------

    def _task(self, host: str, check: K, profile: Profile, view: RunView,
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
        if (skipped := not_applicable(host, check, profile)) is not None:
            return Skipped(host, check.name, skipped.message)
        params = check.params_model.model_validate(cp.params)
        try:
            argv = check.command(params, command_vars(host, hostvars, profile), *extra())
            lock = self._lock(host, hostvars, view)
        except CommandError as exc:
            return NotRun(host, check.name, f"inventory host {host}: {exc}")
        secret_var = self._secret_var(check)
        if secret_var and secret_var not in hostvars:
            return NotRun(host, check.name, f"inventory host {host} has no {secret_var} "
                                            f"(the BMC password; vault it)")
        return Task(host, check.name, tuple(self._argv(argv, view)), check.timeout_s(params),
                    on_control=self._on_control, secret_var=secret_var, lock_file=lock)

    _on_control: ClassVar[bool] = False

    def _secret_var(self, check: K) -> str | None:
        """The inventory variable holding the credential the command reads, if any."""
        return None

    def _lock(self, host: str, hostvars: Mapping[str, Any], view: RunView) -> str | None:
        return lock_file(host, hostvars)

    def _argv(self, argv: Sequence[str], view: RunView) -> Sequence[str]:
        return argv


class JudgedOnce(Placement[K]):
    """A placement whose checks leave one evidence file for every node under test (a job
    across the nodes, a query of the fabric): judged once, for all of them."""

    def judge(self, check: K, job: JudgeJob, reader: EvidenceReader,
              hosts: Sequence[str]) -> Judged:
        raise NotImplementedError

    @staticmethod
    def _read_once(check: Check, job: JudgeJob, reader: EvidenceReader, host: str,
                   nodes: Sequence[str], out: Judged) -> tuple[Evidence, str] | None:
        """The one evidence file, stored on ``host``, that judges ``nodes``; None, with an
        ``error`` for each of them in ``out``, when it cannot be read or was collected
        with other parameters than the judging profile prescribes."""
        try:
            ev, stdout = reader.read(host, check.name)
        except EvidenceError as exc:
            why = str(exc)
        else:
            why = params_mismatch(check, job.collected_with[job.hosts[0]], job.rack_profile)
            if not why:
                return ev, stdout
        out.results += [Result(n, check.name, Status.ERROR, why) for n in nodes]
        return None
