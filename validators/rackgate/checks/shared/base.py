"""What every check is made of: its declaration as one of the kinds of check
(:class:`NodeCheck`, :class:`ControlCheck`, :class:`AcrossCheck`, :class:`FabricCheck`,
:class:`RackCheck`) and the comparison of a figure with its threshold band
(:func:`compare`), which every family's judge uses.

A check declares its scope, tags, the command it runs on a host (an argv, never a
shell string), the parser for that command's output and the judge that compares the
parsed record with the profile. Judges are pure: record + params + thresholds in,
Judgement out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from rackgate.figures import figure, with_unit
from rackgate.model import Better, Judgement, Metric, Result, Status
from rackgate.profile import Hardware, Threshold
from rackgate.thresholds import Direction, band


class Scope(StrEnum):
    NODE = "node"
    NODE_PAIR = "node_pair"
    RACK = "rack"


class CommandError(ValueError):
    """A host's variables do not allow building the check's command."""


# The word a command builder puts in argv where the tool takes the path of a password
# file; the collector replaces it with the private file holding ``ControlCheck.secret_var``.
SECRET_FILE = "{rackgate:secret-file}"


class Params(BaseModel):
    """What every check's params share: unknown keys are refused (a misspelt setting in a
    profile is an error, never silently ignored), values are frozen, and ``timeout_s``
    bounds the check's command. A family whose command needs another default or bound
    re-declares ``timeout_s`` alone.

    >>> Params().timeout_s, params_timeout(Params(timeout_s=5))
    (60, 5)
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: int = Field(default=60, ge=5, description="kill the command after this long")


def params_timeout(params: Params) -> int:
    """A check's timeout in seconds: its params' ``timeout_s`` (``Check.timeout_s``'s
    default)."""
    return int(params.timeout_s)


@dataclass(frozen=True)
class HostNeeds:
    """What a check's command needs on a host besides the program it runs (its argv[0],
    which the plan looks for itself), for ``rackgate validate --plan`` to look for before
    any benchmark runs. Names are checked by the plan against ``commands.launch``'s patterns.

    >>> HostNeeds(root="DMI serials are readable by root only").root != ""
    True
    """

    tools: tuple[str, ...] = ()  # programs the command runs besides argv[0] (on PATH)
    # programs of which the command runs the first it finds on PATH (fabric.ports' port
    # readers): the plan wants at least one of them
    any_tool: tuple[str, ...] = ()
    # directories the command writes into: (absolute path, bytes it must have free, the
    # inventory variable or profile field naming it)
    dirs: tuple[tuple[str, int, str], ...] = ()
    rdma_devices: tuple[str, ...] = ()  # /sys/class/infiniband/<name> (HCAs)
    net_devices: tuple[str, ...] = ()  # /sys/class/net/<name> (netdevs, bonds)
    root: str = ""  # why the command must run as root ("": it need not)


def no_needs(params: Any, hostvars: Mapping[str, Any]) -> HostNeeds:
    return HostNeeds()


Judge = Callable[[Any, Any, Mapping[str, Threshold], Hardware], Judgement]


@dataclass(frozen=True, kw_only=True)
class Check:
    """What every check that collects evidence declares, whatever kind it is. A check is
    declared as one of its kinds, each with only the fields that kind needs; the kind says
    where its command runs (``rackgate.placement.placement_of``):

    - :class:`NodeCheck`: on each node under test, judged node by node;
    - :class:`ControlCheck`: on the control host, once per node and about it (its BMC);
    - :class:`AcrossCheck`: once per run, a job launched across every node under test;
    - :class:`FabricCheck`: once per fabric, on the fabric host, judged against the plan.
    """

    name: str
    scope: Scope = Scope.NODE  # what one result covers
    tags: frozenset[str]
    description: str
    params_model: type[BaseModel]
    metrics: frozenset[str]
    # (params, hostvars) -> argv (a check across the nodes is given their ``Across`` too);
    # raises CommandError when the host's variables are unusable
    command: Callable[..., list[str]]
    parse: Callable[[str], Any]
    # params -> seconds the command may run before it is killed
    timeout_s: Callable[[Any], int] = params_timeout
    # the profile's hardware -> why this check does not apply (a skip reason), or None
    applies: Callable[[Hardware], str | None] = lambda hw: None
    # metrics a profile may threshold but need not (the judge uses them when present)
    optional_metrics: frozenset[str] = frozenset()
    # (params, hostvars) -> what the command needs on the host (for a check launched across
    # the nodes: on each node); the plan (``collect.preflight``) looks for it first
    needs: Callable[[Any, Mapping[str, Any]], HostNeeds] = no_needs
    # The benchmark figures a site may baseline from its own golden nodes (``rackgate
    # baseline``): (metric, where a result holds its figure: "measured", or a key of the
    # result's details). Limits (safety, health, counts, line rates) are never declared.
    baseline: tuple[tuple[str, str], ...] = ()
    # Which way each metric it judges (metrics and optional_metrics) improves: "higher" (its
    # threshold is a floor, min_ratio) or "lower" (a ceiling, max_ratio). A profile's
    # threshold that says otherwise is refused (rackgate.thresholds.band_problems).
    better: Mapping[str, Direction] = field(default_factory=dict, compare=False)

    collected = True  # a command runs for it: the plan collects evidence for it
    scopes: ClassVar[frozenset[Scope]] = frozenset({Scope.NODE})  # those its kind can give

    def __post_init__(self) -> None:
        if type(self) is Check:
            raise TypeError(f"check {self.name}: declare it as one of the kinds of check "
                            f"(NodeCheck, ControlCheck, AcrossCheck, FabricCheck)")
        if self.scope not in self.scopes:
            raise ValueError(f"check {self.name}: a {type(self).__name__} cannot have scope "
                             f"{self.scope.value}")
        judged = self.metrics | self.optional_metrics
        if set(self.better) != judged:
            raise ValueError(f"check {self.name}: better must name every metric it judges "
                             f"({', '.join(sorted(judged)) or 'none'}), got "
                             f"{', '.join(sorted(self.better)) or 'none'}")


@dataclass(frozen=True, kw_only=True)
class NodeCheck(Check):
    """The command runs on each node under test; each node is judged from its own evidence
    by ``judge``: (record, params, thresholds, the profile's hardware) -> Judgement, pure."""

    judge: Judge


@dataclass(frozen=True, kw_only=True)
class ControlCheck(Check):
    """The command runs on the host running rackgate, once per node and about that node
    (BMC queries: the BMC network is reached from there, not from the node); judged as a
    :class:`NodeCheck`.

    ``secret_var`` names the inventory variable (vaulted or not) holding a credential the
    command needs, such as a BMC password. The command takes it from a file: its argv has
    SECRET_FILE where the tool expects a password file (ipmitool -f,
    rackgate.programs.redfish --password-file). The collector has Ansible write the value
    into a 0600 file in a private directory on the control host and removes it afterwards;
    the value is never in an argv, an environment, the evidence, reports or logs."""

    judge: Judge
    secret_var: str | None = None


@dataclass(frozen=True, kw_only=True)
class AcrossCheck(Check):
    """The command runs once per run, on the launch host (rackgate_launch_host, else the
    first host of group slurm_controller), and launches a job across every node under test
    (srun, mpirun); its command is given those nodes (``commands.launch.Across``), and each
    node is judged from that one evidence file by ``judge``, or, where the verdict differs
    per node (a node-pair matrix), by ``judge_nodes``: (record, params, thresholds,
    hardware, the nodes under test, the evidence path) -> (one Result per node, a report
    section such as a pairwise matrix). ``plan_section``: (section, params, the fabric
    plan) -> the section with the plan's view added (pairwise: bandwidth by hop class);
    pure."""

    scope: Scope = Scope.RACK
    judge: Judge
    judge_nodes: Callable[..., tuple[list[Result], Mapping[str, Any]]] | None = None
    plan_section: Callable[[Mapping[str, Any], Any, Any], Mapping[str, Any]] | None = None
    scopes: ClassVar[frozenset[Scope]] = frozenset({Scope.RACK, Scope.NODE_PAIR})


# the kinds judged by their ``judge`` (a fabric check is judged against the plan instead)
JudgedCheck = NodeCheck | ControlCheck | AcrossCheck


@dataclass(frozen=True, kw_only=True)
class FabricCheck(Check):
    """The command runs once per fabric, on a host with an HCA on it (rackgate_fabric_host,
    else the first host of group subnet_managers), and is judged against the fabric plan by
    ``judge_plan``: (record, params, thresholds, the fabric plan) -> FabricVerdict (the
    findings, each with the nodes it bears on: ``rackgate.fabric.findings``), pure. Every
    node under test gets the findings that bear on it."""

    scope: Scope = Scope.RACK
    judge_plan: Callable[..., Any]
    scopes: ClassVar[frozenset[Scope]] = frozenset({Scope.RACK})


@dataclass(frozen=True)
class RackCheck:
    """A rack-level judgement: it reads every node's results (after each node was judged on
    its own) and compares the nodes with each other. Its settings, each figure with its
    basis, are the profile's ``rack:`` section (``profiles/common/rack.yaml`` by default).

    ``judge(results, params)`` is pure. It returns either its own results, one per node
    it judges (``revises=False``: version drift, duplicate identities), or ``results``
    themselves with some of them revised (``revises=True``: the peer comparison turns a
    passing outlier into ``warn``).
    """

    name: str
    description: str
    params_model: type[BaseModel]
    judge: Callable[[Sequence[Result], Any], list[Result]]
    revises: bool = False
    tags: frozenset[str] = frozenset({"rack"})
    metrics: frozenset[str] = frozenset()  # figures are params (with a basis), not thresholds
    optional_metrics: frozenset[str] = frozenset()
    better: Mapping[str, Direction] = field(default_factory=dict, compare=False)
    scope: Scope = Scope.RACK
    collected = False  # nothing is run for it: it judges what the other checks collected


# A figure above a physical limit (``limit: true``) by more than this is not a fast node but
# broken evidence: clocks, units or the tool's arithmetic are wrong. 5 % leaves room for
# rounding in the tools' own output and for limits quoted as nominal signalling rates.
LIMIT_TOLERANCE = 1.05


def implausible(measured: float, threshold: Threshold, what: str) -> str | None:
    """Why ``measured`` cannot be a real measurement for ``threshold``, or None.

    >>> t = Threshold(unit="GB/s", ref=450, min_ratio=0.8, limit=True, basis="NVLink 4 x18")
    >>> implausible(float("inf"), t, "busbw")
    'busbw inf is not a finite number'
    >>> print(implausible(1e15, t, "busbw"))
    busbw 1,000,000,000,000,000 GB/s is above the 450 GB/s physical limit (x1.05 tolerance): \
implausible evidence
    >>> implausible(400.0, t, "busbw") is None
    True
    """
    if not math.isfinite(measured):
        return f"{what} {measured} is not a finite number"
    ceiling = threshold.plausible_max
    unit = threshold.unit
    if ceiling is not None and measured > ceiling * LIMIT_TOLERANCE:
        return (f"{what} {with_unit(measured, unit)} is above the {with_unit(ceiling, unit)} "
                f"physical limit (x{figure(LIMIT_TOLERANCE)} tolerance): implausible evidence")
    if ceiling is not None and measured < 0:
        return (f"{what} {with_unit(measured, unit)} is negative, below any physical "
                f"measurement of a quantity limited by {with_unit(ceiling, unit)}")
    return None


def compare(measured: float, threshold: Threshold, what: str) -> Judgement:
    """Judge one figure against its threshold band. A figure that cannot be a measurement
    (not finite; beyond a physical limit; negative against a limit) is an ``error``.
    Figures print as :func:`rackgate.figures.figure` writes them (never 1.981e+04).

    >>> t = Threshold(unit="MB/s", ref=25000, min_ratio=0.5, basis="nominal demo floor")
    >>> j = compare(19810.4, t, "sequential read")
    >>> j.status.label, j.expected
    ('pass', '>= 12,500 MB/s (0.5 x 25,000 MB/s)')
    >>> j.message
    'sequential read 19,810 MB/s meets >= 12,500 MB/s (0.5 x 25,000 MB/s)'
    >>> compare(float("nan"), t, "sequential read").status.label
    'error'
    """
    why = implausible(measured, threshold, what)
    if why is not None:
        return Judgement(Status.ERROR, why, None, threshold.unit)
    lo, hi, unit = threshold.lower_bound, threshold.upper_bound, threshold.unit
    ref = with_unit(threshold.ref, unit)
    ok = (lo is None or measured >= lo) and (hi is None or measured <= hi)
    expected = band(threshold)
    percent = 100.0 * measured / threshold.ref if threshold.limit else None
    of_limit = f", {percent:.0f}% of the {ref} limit" if percent is not None else ""
    verb = "meets" if ok else "misses"
    message = f"{what} {with_unit(measured, unit)} {verb} {expected}{of_limit}"
    better: Better = None
    if lo is not None and hi is None:
        better = "higher"
    elif hi is not None and lo is None:
        better = "lower"
    return Judgement(Status.PASS if ok else Status.FAIL, message, measured, threshold.unit,
                     expected, percent, better=better)


def metric_of(metric: str, threshold: Threshold, j: Judgement | None = None) -> Metric:
    """One entry of a judgement's ``metrics``: ``metric`` as :func:`compare` judged it
    against ``threshold``, or, without a judgement, an ``error``: it was not measured.

    >>> t = Threshold(unit="L/min", ref=120, min_ratio=0.8, basis="a figure for the test")
    >>> m = metric_of("flow_lpm", t, compare(40.0, t, "coolant flow"))
    >>> m.status.label, m.measured, m.expected, m.lower
    ('fail', 40.0, '>= 96 L/min (0.8 x 120 L/min)', 96.0)
    >>> metric_of("flow_lpm", t).status.label
    'error'
    """
    status, measured = (j.status, j.measured) if j is not None else (Status.ERROR, None)
    return Metric(metric, status, measured, threshold.unit, band(threshold),
                  threshold.lower_bound, threshold.upper_bound)
