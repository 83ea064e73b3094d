"""What the plan before collecting (``collect.preflight``) records: the problems it finds,
what each probe asks a host, and a probe's answer as the collector stored it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rackgate.commands.task import Task

# "unreachable": a node under test that did not answer: the run judges it error and goes on
# for the others (it refuses on an "error" only)
Severity = Literal["error", "unreachable", "note"]
# "any_tool": one of several programs (subject: their names, space-separated)
Kind = Literal["tool", "any_tool", "dir", "rdma", "net", "root", "secret", "slurm"]


@dataclass(frozen=True)
class Problem:
    """One finding of the plan: an ``error`` refuses the run, a node that is
    ``unreachable`` will be judged error while the others are judged on their merits, a
    ``note`` is for people."""

    host: str | None  # None: the run as a whole
    check: str | None  # the check(s) it concerns, comma-separated; None: every check
    message: str
    severity: Severity = "error"


@dataclass(frozen=True)
class Need:
    """One thing a probe looks for, and the checks that need it."""

    kind: Kind
    subject: str  # the tool(s), path, device, variable, or the nodes (slurm)
    checks: tuple[str, ...]
    room_bytes: int = 0  # dir: free bytes wanted
    what: str = ""  # dir: the variable naming it; root: why; slurm: the partition


@dataclass(frozen=True)
class Probe:
    task: Task
    needs: tuple[Need, ...]


@dataclass(frozen=True)
class Preflight:
    problems: tuple[Problem, ...]  # found without asking any host
    probes: tuple[Probe, ...]
    nodes: tuple[str, ...] = ()  # the nodes under test


@dataclass(frozen=True)
class Answer:
    """What a probe task left: as the collector records evidence."""

    outcome: str
    rc: int | None
    stdout: str
    message: str = ""
    stderr: str = ""
