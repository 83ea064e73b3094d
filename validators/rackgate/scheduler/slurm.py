"""SLURM's side of ``rackgate drain``: the commands (argv lists, every identifier checked
first), what sinfo answers, and the drain reasons rackgate writes and reads back.

A node is drained with ``scontrol update nodename=<n> state=drain reason=<text>`` and
resumed with ``state=resume`` (scontrol(1)); its state and reason are read with
``sinfo --Node --format=%N|%T|%E`` (sinfo(1): name, extended state, reason), the same
query the readiness guard of every srun job makes (``programs/probes/slurm_ready.py``,
whose reader this uses).

The reason rackgate writes starts with a marker a person does not type, ``rackgate/drain``,
and the runs whose rejection holds the node, in brackets:
``rackgate/drain[20261202T031500Z-demo]: redundancy.psu_ipmi: PSU2 Status (02h): Failure
detected``. A node that two runs
rejected names both (``rackgate/drain[A,B]: ...``): each run's follow-up
(``drain --resume-passed``) takes only its own run off the list, and the node is resumed
when the list is empty. The marker alone proves nothing (anyone can type it):
:mod:`rackgate.scheduler.drain` resumes a node for a run only when that run's own records
in its run directory show that it drained the node.

A reason of the shape older rackgate wrote, ``rackgate <run id>: <check>: ...``
(:data:`LEGACY`), is rackgate's only for the run it names and only when that run's
records hold exactly that reason: a person's "rackgate maint: PSU2 RMA" is someone else's.

>>> reason(("r1-demo",), "fio.seq_read: slow")
'rackgate/drain[r1-demo]: fio.seq_read: slow'
>>> claims_of("rackgate/drain[r1,r2]: fio.seq_read: slow"), claims_of("rackgate maint: PSU2")
(('r1', 'r2'), None)
>>> drain_argv("rg-node01", "rackgate/drain[r1]: fio.seq_read: slow")[2:]
['nodename=rg-node01', 'state=drain', 'reason=rackgate/drain[r1]: fio.seq_read: slow']
>>> base_state("drained*"), is_drained("draining"), is_drained("idle")
('drained', True, False)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rackgate.commands.launch import NODE_NAME, plain
from rackgate.programs.probes.slurm_ready import node_states

# A run id as new_run_dir makes it (<UTC stamp>-<profile>[-<n>]); anything plain is taken.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
MARK = "rackgate/drain"
_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
CLAIMS = re.compile(rf"{re.escape(MARK)}\[(?P<runs>{_ID}(?:,{_ID})*)\]: ")
# What rackgate wrote before the marker; "rackgate healthcheck: ..." was the health check's.
LEGACY = re.compile(rf"rackgate (?!healthcheck: )(?P<run>{_ID}): \S")
REASON_MAX = 160  # characters: sinfo -R shows it whole, a ticket quotes it
MESSAGE_MIN = 20  # characters of the message a reason keeps however many runs it names
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
    """One node as slurmctld sees it: its extended state and reason ("" when none), and
    when the reason was set (seconds since the epoch; None when sinfo was not asked or
    has no time: :func:`timed_sinfo_argv`)."""

    node: str
    state: str
    reason: str
    since: int | None = field(default=None, repr=False)

    @property
    def drained(self) -> bool:
        return is_drained(self.state)

    @property
    def free(self) -> bool:
        """No reason, or only slurmctld's own (a drain may replace it)."""
        return not self.reason or self.reason in SLURM_OWN_REASONS

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


def timed_sinfo_argv(nodes: Sequence[str]) -> list[str]:
    """The state query of ``nodes`` with the time each reason was set (``%H``), printed in
    seconds since the epoch (SLURM_TIME_FORMAT is a strftime format, sinfo(1)), so no time
    zone of the launch host is guessed: what ``rackgate drain`` and ``--retest`` read.

    >>> timed_sinfo_argv(["n1"])[:2], timed_sinfo_argv(["n1"])[-1]
    (['env', 'SLURM_TIME_FORMAT=%s'], '--format=%N|%T|%H|%E')
    """
    return ["env", "SLURM_TIME_FORMAT=%s", "sinfo", "--Node", "--noheader",
            f"--nodes={node_list(nodes)}", "--format=%N|%T|%H|%E"]


def parse_timed_states(text: str) -> dict[str, NodeState]:
    """sinfo's lines of :func:`timed_sinfo_argv` -> each node's state and the time of its
    reason (sinfo prints "Unknown" where there is none).

    >>> st = parse_timed_states("n1|drained|1764770000|ops: fan | odd\\nn2|idle|Unknown|none\\n")
    >>> st["n1"], st["n1"].since
    (NodeState(node='n1', state='drained', reason='ops: fan | odd'), 1764770000)
    >>> st["n2"].since, st["n2"].reason
    (None, '')
    """
    out: dict[str, NodeState] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|", 3)
        if len(fields) < 4:
            raise ValueError(f"sinfo line {line[:120]!r} is not <node>|<state>|<time>|<reason>")
        node, state, when, why = (f.strip() for f in fields)
        since = int(when) if when.isascii() and when.isdigit() else None
        out.setdefault(node, NodeState(node, state, "" if why in NO_REASON else why, since))
    return out


def parse_states(text: str) -> dict[str, NodeState]:
    """sinfo's lines (:func:`sinfo_argv`) -> each node's state; "(null)"/"none" reasons are
    no reason. A line without the two separators is a ValueError naming it.

    >>> parse_states("n1|drained|rackgate r1: fio.seq_read: slow | odd\\nn2|idle|none\\n")["n1"]
    NodeState(node='n1', state='drained', reason='rackgate r1: fio.seq_read: slow | odd')
    """
    for line in text.splitlines():
        if line.strip() and line.count("|") < 2:
            raise ValueError(f"sinfo line {line[:120]!r} is not <node>|<state>|<reason>")
    return {node: NodeState(node, state, "" if why in NO_REASON else why)
            for node, (state, why) in node_states(text).items()}


def claims_of(text: str) -> tuple[str, ...] | None:
    """The runs a reason in rackgate's format names (None: not that format, or a run named
    twice)."""
    m = CLAIMS.match(text)
    if m is None:
        return None
    runs = tuple(m.group("runs").split(","))
    return runs if len(set(runs)) == len(runs) else None


def legacy_run(text: str) -> str | None:
    """The run an older rackgate's reason (``rackgate <run id>: ...``) names, or None."""
    m = LEGACY.match(text)
    return m.group("run") if m else None


def message_for(node: Mapping[str, Any]) -> str:
    """What a rejected node of a report is drained for: its first blocking check and its
    message (printable text), and how many others blocked it. Measured faults (``fail``)
    come before what could not be measured (``error``), and a result that quotes a drain
    of rackgate (the readiness guard names a drained node's reason) comes last, its quote
    cut (:func:`unquoted`): a node's earlier drain is not a finding.

    >>> message_for({"name": "n1", "results": [
    ...     {"check": "gpu.health", "status": "error", "message": "no GPU"},
    ...     {"check": "fio.seq_read", "status": "fail", "message": "read   42 MB/s"}]})
    'fio.seq_read: read 42 MB/s (+1 more)'
    """
    results = [r for r in node.get("results", []) if isinstance(r, Mapping)]
    blocking = sorted((r for r in results if r.get("status") in ("fail", "error")),
                      key=lambda r: (r.get("status") != "fail",
                                     quotes_drain(str(r.get("message", "")))))
    if blocking:
        check, message = str(blocking[0]["check"]), str(blocking[0].get("message", ""))
    else:  # rejected with nothing judged: its verdict's reason says why
        check, message = "verdict", "; ".join(node.get("reasons") or ["rejected"])
    more = f" (+{len(blocking) - 1} more)" if len(blocking) > 1 else ""
    short = "".join(c if c.isprintable() else "?" for c in " ".join(message.split()))
    return f"{check}: {unquoted(short)}{more}"


# Where a message quotes a drain reason of rackgate: the marker, or an older rackgate's.
_QUOTED = re.compile(rf"{re.escape(MARK)}\[|rackgate (?!healthcheck: ){_ID}: \S")


def quotes_drain(text: str) -> bool:
    """Whether ``text`` quotes a drain reason rackgate wrote."""
    return _QUOTED.search(text) is not None


def unquoted(text: str) -> str:
    """``text`` cut where it quotes a drain reason of rackgate: a reason is built from a
    run's findings, never from an earlier drain's words.

    >>> unquoted("not queued: n1 drained (rackgate/drain[r1]: redundancy.psu_ipmi: PSU2)")
    'not queued: n1 drained (an earlier drain)'
    """
    m = _QUOTED.search(text)
    return text if m is None else f"{text[:m.start()].rstrip(' (:')} (an earlier drain)"


def reason(runs: Sequence[str], message: str) -> str:
    """The drain reason naming ``runs`` (each a plain run id), ``message`` cut to fit
    REASON_MAX (its ``(+N more)`` kept). ValueError when the runs leave the message less
    than MESSAGE_MIN characters.

    >>> reason(["r1"], "fio.seq_read: " + "x" * 200 + " (+1 more)")[-30:]
    'xxxxxxxxxxxxxxxxx... (+1 more)'
    """
    for run in runs:
        plain(RUN_ID, run, "run id")
    if not runs or len(set(runs)) != len(runs):
        raise ValueError(f"a drain reason names each run once, not {list(runs)}")
    head = f"{MARK}[{','.join(runs)}]: "
    tail = message[message.rindex(" (+"):] if message.endswith(" more)") and " (+" in \
        message else ""
    body = message[:len(message) - len(tail)]
    room = REASON_MAX - len(head) - len(tail)
    if room < MESSAGE_MIN:
        raise ValueError(f"a drain reason naming runs {', '.join(runs)} would leave "
                         f"{max(room, 0)} of {REASON_MAX} characters for why")
    if len(body) > room:
        body = body[:room - 3].rstrip() + "..."
    return f"{head}{body}{tail}"


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
