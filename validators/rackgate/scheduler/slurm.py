"""SLURM's side of ``rackgate drain``: the commands (argv lists, every identifier checked
first) and what sinfo answers.

A node is drained with ``scontrol update nodename=<n> state=drain reason=<text>`` and
resumed with ``state=resume`` (scontrol(1)); its state and reason are read with
``sinfo --Node --format=%N|%T|%E`` (sinfo(1): name, extended state, reason), the same
query the readiness guard of every srun job makes (``programs/probes/slurm_ready.py``,
whose reader this uses).

The reason rackgate writes says that rackgate drained the node, in which run, for which
check: ``rackgate 20261202T031500Z-demo: redundancy.psu_ipmi: PSU2 Status (02h): Failure
detected``. Only a reason of that shape (:data:`RACKGATE_REASON`) marks a node as
rackgate's to resume; the health check's drains (``rackgate healthcheck: ...``) are not.

>>> drain_argv("rg-node01", "rackgate r1-demo: fio.seq_read: slow")[2:]
['nodename=rg-node01', 'state=drain', 'reason=rackgate r1-demo: fio.seq_read: slow']
>>> base_state("drained*"), is_drained("draining"), is_drained("idle")
('drained', True, False)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rackgate.collect.launch import NODE_NAME, plain
from rackgate.programs.probes.slurm_ready import node_states

# A run id as new_run_dir makes it (<UTC stamp>-<profile>[-<n>]); anything plain is taken.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
# "rackgate healthcheck: ..." is the health check's own drain (rackgate.health), which only
# the health check resumes: to ``rackgate drain`` it is someone else's.
RACKGATE_REASON = re.compile(
    r"rackgate (?!healthcheck: )(?P<run>[A-Za-z0-9][A-Za-z0-9._-]*): \S")
REASON_MAX = 160  # characters: sinfo -R shows it whole, a ticket quotes it
# States with SLURM's flags after them (sinfo(1) NODE STATE CODES): * not responding,
# ~ powered off, # powering up, ! pending power down, % powering down, $ maintenance
# reservation, @ pending reboot, ^ reboot issued, - planned.
_FLAGS = "*~#!%$@^-"
DRAINED = frozenset({"drained", "draining", "drain"})
# Reasons slurmctld itself sets on a node it lost (not a person's decision): a drain may
# replace them. Any other reason on a node that is not rackgate's is someone else's.
SLURM_OWN_REASONS = frozenset({"Not responding"})
NO_REASON = frozenset({"", "none", "(null)"})


@dataclass(frozen=True)
class NodeState:
    """One node as slurmctld sees it: its extended state and reason ("" when none)."""

    node: str
    state: str
    reason: str

    @property
    def drained(self) -> bool:
        return is_drained(self.state)

    @property
    def by_rackgate(self) -> bool:
        """Whether the reason is one rackgate wrote (so rackgate may resume the node)."""
        return RACKGATE_REASON.match(self.reason) is not None

    @property
    def held_by_others(self) -> bool:
        """Whether a person or another tool set this node's reason: rackgate leaves it."""
        return bool(self.reason) and not self.by_rackgate and self.reason not in \
            SLURM_OWN_REASONS

    def describe(self) -> str:
        return f"{self.state} ({self.reason})" if self.reason else self.state


def base_state(state: str) -> str:
    """The state without SLURM's flag characters."""
    return state.rstrip(_FLAGS).lower()


def is_drained(state: str) -> bool:
    """Drained, or draining (the drain is set; running jobs finish first)."""
    return base_state(state) in DRAINED


def node_list(nodes: Sequence[str]) -> str:
    """The nodes as one comma list for sinfo, each checked (never list syntax of ours)."""
    return ",".join(plain(NODE_NAME, n, "SLURM node name") for n in nodes)


def sinfo_argv(nodes: Sequence[str]) -> list[str]:
    """The state query of ``nodes``.

    >>> sinfo_argv(["n1", "n2"])
    ['sinfo', '--Node', '--noheader', '--nodes=n1,n2', '--format=%N|%T|%E']
    """
    return ["sinfo", "--Node", "--noheader", f"--nodes={node_list(nodes)}",
            "--format=%N|%T|%E"]


def parse_states(text: str) -> dict[str, NodeState]:
    """sinfo's lines (:func:`sinfo_argv`) -> each node's state; "(null)"/"none" reasons are
    no reason. A line without the two separators is a ValueError naming it.

    >>> parse_states("n1|drained|rackgate r1: fio.seq_read: slow | odd\\nn2|idle|none\\n")["n1"]
    NodeState(node='n1', state='drained', reason='rackgate r1: fio.seq_read: slow | odd')
    """
    for line in text.splitlines():
        if line.strip() and line.count("|") < 2:
            raise ValueError(f"sinfo line {line[:120]!r} is not <node>|<state>|<reason>")
    return {node: NodeState(node, state, "" if reason in NO_REASON else reason)
            for node, (state, reason) in node_states(text).items()}


def reason_for(run_id: str, node: Mapping[str, Any]) -> str:
    """The drain reason of a rejected node of a report: rackgate, the run, the first
    blocking check and its message (printable text, at most REASON_MAX characters).

    >>> reason_for("r1-demo", {"name": "n1", "results": [
    ...     {"check": "fio.seq_read", "status": "fail", "message": "read   42 MB/s"},
    ...     {"check": "gpu.health", "status": "error", "message": "no GPU"}]})
    'rackgate r1-demo: fio.seq_read: read 42 MB/s (+1 more)'
    """
    plain(RUN_ID, run_id, "run id")
    blocking = [r for r in node.get("results", []) if r.get("status") in ("fail", "error")]
    if blocking:
        check, message = str(blocking[0]["check"]), str(blocking[0].get("message", ""))
    else:  # rejected with nothing judged: its verdict's reason says why
        check, message = "verdict", "; ".join(node.get("reasons") or ["rejected"])
    more = f" (+{len(blocking) - 1} more)" if len(blocking) > 1 else ""
    head = f"rackgate {run_id}: {check}: "
    room = max(20, REASON_MAX - len(head) - len(more))
    short = "".join(c if c.isprintable() else "?" for c in " ".join(message.split()))
    if len(short) > room:
        short = short[:room - 3].rstrip() + "..."
    return f"{head}{short}{more}"


def drain_argv(node: str, reason: str) -> list[str]:
    return ["scontrol", "update", f"nodename={plain(NODE_NAME, node, 'SLURM node name')}",
            "state=drain", f"reason={reason}"]


def resume_argv(node: str) -> list[str]:
    """Back into service: SLURM clears the drain and its reason.

    >>> resume_argv("n1")
    ['scontrol', 'update', 'nodename=n1', 'state=resume']
    """
    return ["scontrol", "update", f"nodename={plain(NODE_NAME, node, 'SLURM node name')}",
            "state=resume"]
