"""Checks of the fabric: their command runs once per fabric, on a host with an HCA on it
(the fabric host), and is judged against the fabric plan; every node under test gets the
findings that bear on it (``fabric.findings``).

The fabric host is the nodes' ``rackgate_fabric_host`` (they must agree), else the first
host of inventory group ``subnet_managers`` (a host with an HCA on the fabric). Its
commands are read-only management queries (ibnetdiscover, iblinkinfo, perfquery, sminfo),
so they take no node lock. ``rackgate_fabric_wrapper`` (a list of program names, e.g.
``[sudo, -n]``, or ``[ibsim-run]`` to rehearse against Debian's fabric simulator) is put
in front of each command.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from rackgate.checks.shared.base import FabricCheck, Scope
from rackgate.commands.task import Task
from rackgate.model import Result, Status
from rackgate.placement.base import (
    EvidenceReader,
    Judged,
    JudgedOnce,
    JudgeJob,
    NotRun,
    Planned,
    RunView,
    Usable,
)
from rackgate.placement.evidence import absent_from_profile, judge_fabric, not_applicable

FABRIC_HOST_VAR = "rackgate_fabric_host"
FABRIC_GROUP = "subnet_managers"
WRAPPER_VAR = "rackgate_fabric_wrapper"
WRAPPER_WORD = re.compile(r"[A-Za-z0-9_/-][A-Za-z0-9._+/=-]*\Z")
NO_PLAN = ("no fabric plan: put the fabric as planned in the inventory's fabric.yml "
           "(`rackgate fabric plan` writes one to start from) or pass --fabric-plan")
NO_FABRIC_HOST = (f"no fabric host to query the fabric from: set {FABRIC_HOST_VAR} for the "
                  f"nodes, or put a host with an HCA on the fabric in inventory group "
                  f"{FABRIC_GROUP}")


def wrapper(hostvars: Mapping[str, Any]) -> tuple[str, ...]:
    """The fabric host's ``rackgate_fabric_wrapper`` words; ValueError for anything but a
    list of plain words.

    >>> wrapper({"rackgate_fabric_wrapper": ["sudo", "-n"]})
    ('sudo', '-n')
    """
    words = hostvars.get(WRAPPER_VAR, [])
    if not isinstance(words, list) or not all(
            isinstance(w, str) and WRAPPER_WORD.match(w) for w in words):
        raise ValueError(f"{WRAPPER_VAR} must be a list of words matching "
                         f"{WRAPPER_WORD.pattern}, got {words!r}")
    return tuple(words)


class OnFabric(JudgedOnce[FabricCheck]):
    """The command runs once, on the fabric host; judged against the fabric plan."""

    name = "fabric"
    where = "once, on the fabric host"
    scopes = frozenset({Scope.RACK})

    def plan(self, check: FabricCheck, view: RunView, usable: Usable) -> list[Planned]:
        host = view.fabric_host
        if view.fabric is None or host is None or usable(host, check.name):
            return []  # judged as NO_PLAN / NO_FABRIC_HOST / already collected
        item = self._task(host, check, view.rack_profile, view)
        if not isinstance(item, Task):
            return [item]
        try:
            words = wrapper(view.hostvars.get(host, {}))
        except ValueError as exc:
            return [NotRun(host, check.name, f"inventory host {host}: {exc}")]
        return [replace(item, argv=(*words, *item.argv))]

    def _lock(self, host: str, hostvars: Mapping[str, Any], view: RunView) -> str | None:
        return None  # read-only management queries: no benchmark to keep apart

    def judge(self, check: FabricCheck, job: JudgeJob, reader: EvidenceReader,
              hosts: Sequence[str]) -> Judged:
        """Every node's result from the fabric host's one evidence file. A node under test
        that the plan does not know is an ``error``: nothing says how it is cabled."""
        name, profile = check.name, job.rack_profile

        def every(why: str, status: Status = Status.ERROR) -> Judged:
            return Judged([Result(h, name, status, why) for h in hosts])

        absent = absent_from_profile(hosts[0], name, profile)
        if absent is not None:
            return every(absent.message)
        skipped = not_applicable(hosts[0], check, profile)
        if skipped is not None:
            return Judged([replace(skipped, node=h) for h in hosts])
        if job.fabric is None:
            return every(NO_PLAN)
        if job.fabric_host is None:
            return every(NO_FABRIC_HOST)
        planned = set(job.fabric.hosts)
        out = Judged([Result(h, name, Status.ERROR, f"{h} has no HCA port in fabric plan "
                             f"{job.fabric.name}: nothing says how it is cabled")
                      for h in hosts if h not in planned])
        known = [h for h in hosts if h in planned]
        if not known:
            return out
        read = self._read_once(check, job, reader, job.fabric_host, known, out)
        if read is None:
            return out
        ev, stdout = read
        out.add(Judged(judge_fabric(check, ev, stdout, profile, job.fabric, known)))
        out.evidence_of(known, name, ev)
        return out
