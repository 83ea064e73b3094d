"""Which node(s) broke a job launched across the nodes (srun or mpirun), from its output.

When a multi-node job (nccl-tests across nodes, the MPI all-reduce, per-pair ib_write_bw
rounds) fails, its recorded stdout and stderr (stderr after stdout) say which node failed
it. :func:`find_culprits` reads them; it never raises: output it cannot read names nobody.
Every format below was written from the tool's own source or published help text:

* rackgate's readiness guard (``programs/probes/slurm_ready.py``): ``rackgate-slurm-ready:
  SLURM nodes not ready, nothing was queued: <node> <state> (<reason>); <node> not known to
  slurmctld``. Its other messages (no sinfo, usage) name no node.
* srun (SchedMD/slurm ``src/srun/launch.c`` ``_task_finish``, ``src/srun/allocate.c``,
  ``src/api/step_launch.c``): ``srun: error: <hostlist>: task[s] <ids>: Exited with exit
  code <n>`` | ``Out Of Memory`` | ``<strsignal>[ (core dumped)]``; ``Task launch for
  <step> failed on node <node>: <reason>``; ``Node failure on <hostlist>``; ``Nodes
  <hostlist> are still not ready``. ``<hostlist>`` is SLURM's range syntax
  (``gpu[01-03,07]``). ``Application launch failed``, ``Unable to create step for job``,
  ``Job step aborted`` and slurmstepd's ``*** STEP ... ON <node> CANCELLED ... ***`` (said
  by the step's first node whoever failed) name no culprit. ``--label`` prefixes task
  output with ``<task id>: `` (space-padded).
* Open MPI 4 (``orte/tools/orterun/help-orterun.txt``, ``orte/mca/errmgr/base/
  help-errmgr-base.txt``, ``ompi/mpi/help-mpi-api.txt``) and 5 (PRRTE ``help-prun.txt``,
  ``help-errmgr-base.txt``): ``<tool> noticed that process rank <r> with PID <p> on node
  <node> exited on signal <s> (<name>).``; ``... process rank <r> with PID <p> on node
  <node> exiting improperly`` / ``calling "abort"``; ``Process name: [[<job>,<vpid>],<r>]``
  followed by ``Exit code: <c>`` (after ``Primary job terminated normally, but 1 process
  returned a non-zero exit code``) or by ``Node: <node>`` (communication lost, memory
  exceeded, heartbeat failed); ``MPI_ABORT was invoked on rank <r>``; ``ORTE|PRTE has lost
  communication with a remote daemon. HNP daemon : <name> on node <x> Remote daemon: <name>
  on node <y>`` (y broke the job; x is mpirun's host). These messages wrap over lines,
  so they are matched on the whole text. ``... was unable to reliably start one or more
  daemons`` names no node itself: OpenSSH's ``ssh: connect to host <node> port <p>: ...``
  and ``ssh: Could not resolve hostname <node>: ...`` before it do. ``--tag-output``
  prefixes rank output with ``[<job>,<rank>]<stdout|stderr|stddiag>:`` (PMIx adds a space).
* NCCL (NVIDIA/nccl ``src/debug.cc``): ``[<timestamp>] <host>:<pid>:<tid> [<dev>]
  [<file>:<line> [(<func>)] ]NCCL WARN|ERROR|INFO <text>``; nccl-tests (``src/common.h``,
  ``src/util.cu``): ``<host>: Test NCCL failure <file>:<line> '<msg>'``, ``<host>: Test
  CUDA failure ...``, and rank 0's ``#  Rank <r> Group <g> Pid <p> on <host> device ...``.

A rank number (Open MPI's ``Process name``, ``MPI_ABORT``) is turned into a host only from
the output itself: a ``--tag-output`` line of that rank that starts with NCCL's or
nccl-tests' host, nccl-tests' ``#  Rank`` lines when each process drives one GPU
(``nThread 1 nGpus 1``: nccl-tests rank = MPI rank), or the ``hosts`` of rackgate's
all-reduce probe header. A rank seen on two hosts, or never seen, stays unresolved.

Rules. A node with a primary failure (non-zero exit, abnormal signal, out of memory, launch
failure, node failure, not ready, a lost daemon, NCCL WARN/ERROR, nccl-tests failure) is a
culprit. A node named only as ``Killed``/``Terminated`` (srun's --kill-on-bad-exit ending
the other ranks, or signal 9/15 in mpirun's report) is a bystander; when no node has a
primary failure, the killed ones are the culprits: something outside the job killed them
(the OOM killer, an operator) and nothing else explains the failure. An NCCL message that
names a remote peer (``peer``, ``remote``: a network error seen from one end) blames neither
end: the peer is an address this output cannot resolve, and the reporting end may be the
healthy one. Host names match a node under test when equal (case-insensitive) or when one
is the other's fully qualified form (``gpu01`` and ``gpu01.rack1``, never ``gpu011``); a
name matching two nodes, or none, is ignored. Every node may be a culprit: the caller then
knows that a rerun without them cannot help.

>>> f = find_culprits("srun: error: gpu02: task 1: Exited with exit code 3\\n"
...                   "srun: error: gpu01: task 0: Killed\\n", ["gpu01", "gpu02"])
>>> dict(f.culprits), sorted(f.bystanders)
({'gpu02': 'srun: error: gpu02: task 1: Exited with exit code 3'}, ['gpu01'])
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

MAX_REASON_CHARS = 240  # one line of evidence, whitespace collapsed
MAX_REASONS = 4  # distinct lines kept per node
MAX_HOSTLIST = 4096  # names one SLURM hostlist may expand to (a bound, not a limit of SLURM)


@dataclass(frozen=True)
class JobFailure:
    """The nodes that broke a job, and those only killed because another rank failed."""

    culprits: Mapping[str, str]  # node under test -> why it broke the job (its lines, trimmed)
    bystanders: frozenset[str]  # nodes named only as killed/aborted after another's failure


# Launchers' line prefixes (srun --label; Open MPI --tag-output, optionally timestamped).
_INDEX = re.compile(r"[0-9]{1,10}", re.ASCII)  # str.isdigit takes '²', which int() refuses
_SRUN_LABEL = re.compile(r"^\s*([0-9]{1,10}): ")
_MPI_TAG = re.compile(r"^(?:\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})?"
                      r"\[[^,\]\s]+,([0-9]{1,10})\]<std(?:out|err|diag)>: ?")
_HOST = r"[A-Za-z0-9][A-Za-z0-9._-]*"

_READY = re.compile(r"rackgate-slurm-ready: SLURM nodes not ready, nothing was queued: (.*)")
_SRUN_TASKS = re.compile(r"srun: error: (\S+): tasks? ([\d,-]+): (.+)")
_SRUN_LAUNCH = re.compile(rf"srun: error: Task launch for \S+ failed on node ({_HOST}): (.*)")
_SRUN_NODES = re.compile(r"srun: error: (?:Node failure on (\S+)|Nodes (\S+) are still not"
                         r" ready)")
_SSH = re.compile(rf"ssh: (?:connect to host ({_HOST}) port \d+|Could not resolve "
                  rf"hostname ({_HOST})): ")
_NCCL = re.compile(rf"^(?:\[[^\]]*\] )?({_HOST}):\d+:\d+ \[\d+\] "
                   r"(?:\S+:\d+ (?:\(\S*\) )?)?NCCL (WARN|ERROR|INFO) ?(.*)")
_NCCL_TESTS = re.compile(rf"^({_HOST}): Test (?:NCCL|CUDA) failure \S+ '(.*)'")
_RANK_LINE = re.compile(rf"^#\s+Rank\s+([0-9]{{1,10}}) (?:Group\s+\d+ )?Pid\s+\d+ on\s+"
                        rf"({_HOST}) device")
_ONE_GPU = re.compile(r"^# nThread 1 nGpus 1 ")
_REMOTE = re.compile(r"\b(?:peer|remote)\b", re.IGNORECASE)

# Open MPI's help messages, matched on the whole (prefix-stripped) text: they wrap.
# (?<!\S): a tool name starts only after a space (linear time on a line without spaces)
_MPI_SIGNAL = re.compile(rf"(?<!\S)\S+ noticed that process rank ([0-9]{{1,10}}) with PID "
                         rf"\d+ on\s+node ({_HOST}) exited on\s+signal ([0-9]{{1,10}})"
                         r"(?: \(([^)\n]*)\))?\.?")
_MPI_IMPROPER = re.compile(rf"(?<!\S)\S+ has exited due to process rank ([0-9]{{1,10}}) with "
                           rf"PID \d+ on\s+node ({_HOST}) (exiting\s+improperly|calling\s+"
                           r"\"abort\")")
_MPI_EXIT = re.compile(r"Process name:\s*\[\[[^\][]*\],([0-9]{1,10})\]\s+Exit code:\s*"
                       r"([0-9]{1,10})")
_MPI_NODE = re.compile(rf"Process name:\s*(\S+)\s+Node:\s*({_HOST})")
_MPI_ABORT = re.compile(r"MPI_ABORT was invoked on rank ([0-9]{1,10}) in communicator "
                        r"(\S+)\s+with errorcode (-?[0-9]{1,10})")
_MPI_DAEMON = re.compile(rf"(?:ORTE|PRTE) has lost communication with a remote daemon\.\s+"
                         rf"HNP daemon\s*:\s*\S+ on node ({_HOST})\s+Remote daemon\s*:\s*\S+ "
                         rf"on node ({_HOST})")
_KILL_SIGNALS = {"9", "15"}  # SIGKILL, SIGTERM: what a launcher sends the other ranks
_KILL_WORDS = ("Killed", "Terminated")  # strsignal(9), strsignal(15), as srun prints them


def host_matches(reported: str, node: str) -> bool:
    """Whether a reported host name is ``node``: equal, or one is the other's FQDN.

    >>> host_matches("GPU01.rack1.example", "gpu01"), host_matches("gpu011", "gpu01")
    (True, False)
    """
    a, b = reported.lower(), node.lower()
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _items(expr: str) -> list[str]:
    """The comma-separated items of a hostlist, a bracket and what it holds up to its
    ``]`` kept whole: ``re.findall(r"(?:[^,\\[]|\\[[^\\]]*\\])+", expr)``, in linear time
    (that search scans to the end from every ``[`` that no ``]`` follows).

    >>> _items("gpu[01-03,07],[x,login-a[")
    ['gpu[01-03,07]', 'x', 'login-a']
    """
    items, item, at, last = [], [], 0, expr.rfind("]")
    while at < len(expr):
        c = expr[at]
        if c == "[" and at < last:
            close = expr.index("]", at)
            item.append(expr[at:close + 1])
            at = close + 1
            continue
        if c in ",[":
            if item:
                items.append("".join(item))
            item = []
        else:
            item.append(c)
        at += 1
    if item:
        items.append("".join(item))
    return items


def expand_hostlist(expr: str) -> list[str]:
    """SLURM's hostlist syntax as names (at most MAX_HOSTLIST); a malformed range is kept
    as written (it then matches no node).

    >>> expand_hostlist("gpu[01-03,07],login-a")
    ['gpu01', 'gpu02', 'gpu03', 'gpu07', 'login-a']
    >>> expand_hostlist("r[1-2]n[8-9]")
    ['r1n8', 'r1n9', 'r2n8', 'r2n9']
    """
    names: list[str] = []
    todo = _items(expr)
    while todo and len(names) < MAX_HOSTLIST:
        name = todo.pop(0)
        bracket = re.search(r"\[([^\[\]]*)\]", name)
        if bracket is None:
            names.append(name)
            continue
        head, tail, expanded = name[:bracket.start()], name[bracket.end():], []
        for piece in bracket.group(1).split(","):
            lo, _, hi = piece.partition("-")
            if not _INDEX.fullmatch(lo) or not _INDEX.fullmatch(hi or lo) \
                    or int(hi or lo) < int(lo):
                expanded = [name]
                break
            top = min(int(hi or lo), int(lo) + MAX_HOSTLIST - len(expanded))
            expanded += [f"{head}{str(i).zfill(len(lo))}{tail}" for i in range(int(lo), top + 1)]
            if len(expanded) >= MAX_HOSTLIST:
                break
        if expanded == [name]:
            names.append(name)
        else:
            todo[:0] = expanded[:MAX_HOSTLIST]
    return names


def trim_reason(text: str) -> str:
    """A launcher's words on one line, at most MAX_REASON_CHARS."""
    return " ".join(text.split())[:MAX_REASON_CHARS]


class _Evidence:
    """Reasons per node under test, primary or killed, in the order they were found."""

    def __init__(self, nodes: Sequence[str]) -> None:
        self.nodes = list(dict.fromkeys(nodes))
        self.primary: dict[str, list[str]] = {}
        self.killed: dict[str, list[str]] = {}

    def node(self, reported: str) -> str | None:
        """The one node under test ``reported`` names (exact name first), else None."""
        exact = [n for n in self.nodes if n.lower() == reported.lower()]
        close = exact or [n for n in self.nodes if host_matches(reported, n)]
        return close[0] if len(close) == 1 else None

    def add(self, hosts: Iterable[str], why: str, killed: bool = False) -> None:
        for host in hosts:
            node = self.node(host)
            if node is not None:
                reasons = (self.killed if killed else self.primary).setdefault(node, [])
                if trim_reason(why) not in reasons and len(reasons) < MAX_REASONS:
                    reasons.append(trim_reason(why))

    def failure(self) -> JobFailure:
        chosen = self.primary or self.killed
        culprits = {n: "\n".join(chosen[n]) for n in self.nodes if n in chosen}
        bystanders = frozenset(self.killed) - frozenset(culprits)
        return JobFailure(MappingProxyType(culprits), bystanders)


def _strip(line: str) -> tuple[int | None, str]:
    """(the rank or task id its launcher labelled the line with, the line without it)."""
    for prefix in (_SRUN_LABEL, _MPI_TAG):
        m = prefix.match(line)
        if m:
            return int(m.group(1)), line[m.end():]
    return None, line


def _probe_hosts(text: str) -> list[str]:
    """The ``hosts`` (rank order) of rackgate's all-reduce probe header, else []."""
    if not text.startswith('{"probe": "mpi_allreduce"'):
        return []
    try:
        hosts = json.loads(text).get("hosts")
    except (ValueError, AttributeError, RecursionError):
        return []
    ok = isinstance(hosts, list) and all(isinstance(h, str) for h in hosts)
    return hosts if ok else []


def _rank_hosts(lines: Sequence[tuple[int | None, str]]) -> dict[int, str]:
    """MPI rank -> host, from what the ranks said themselves; a rank seen on two hosts is
    left out (never guessed)."""
    seen: dict[int, set[str]] = {}
    one_gpu = any(_ONE_GPU.match(text) for _, text in lines)
    for rank, text in lines:
        own = _NCCL.match(text) or _NCCL_TESTS.match(text)
        if rank is not None and own:
            seen.setdefault(rank, set()).add(own.group(1).lower())
        if one_gpu and (m := _RANK_LINE.match(text)):
            seen.setdefault(int(m.group(1)), set()).add(m.group(2).lower())
        for r, host in enumerate(_probe_hosts(text)):
            seen.setdefault(r, set()).add(host.lower())
    return {r: next(iter(h)) for r, h in seen.items() if len(h) == 1}


def _not_ready(ev: _Evidence, items: str) -> None:
    """The guard's ``<node> <state> (<reason>); ...`` list (a reason may hold '; ')."""
    merged: list[str] = []
    for item in items.split("; "):
        if merged and ev.node(item.split(" ", 1)[0]) is None:
            merged[-1] += "; " + item
        else:
            merged.append(item)
    for item in merged:
        ev.add([item.split(" ", 1)[0]], f"rackgate-slurm-ready: {item}")


def _srun_tasks(ev: _Evidence, hosts: str, status: str, line: str) -> None:
    killed = status.split(" (core dumped)")[0] in _KILL_WORDS
    ev.add(expand_hostlist(hosts), line, killed=killed)


def _lines(ev: _Evidence, text: str) -> None:
    """The one-line formats: the guard, srun, ssh, NCCL, nccl-tests."""
    if m := _READY.search(text):
        _not_ready(ev, m.group(1))
    elif m := _SRUN_TASKS.search(text):
        _srun_tasks(ev, m.group(1), m.group(3).strip(), text)
    elif m := _SRUN_LAUNCH.search(text):
        ev.add([m.group(1)], text)
    elif m := _SRUN_NODES.search(text):
        ev.add(expand_hostlist(m.group(1) or m.group(2)), text)
    elif m := _SSH.search(text):
        ev.add([m.group(1) or m.group(2)], text)
    elif (m := _NCCL.match(text)) and m.group(2) != "INFO":
        if not _REMOTE.search(m.group(3)):
            ev.add([m.group(1)], text)
    elif (m := _NCCL_TESTS.match(text)) and not _REMOTE.search(m.group(2)):
        ev.add([m.group(1)], text)


def _open_mpi(ev: _Evidence, whole: str, ranks: Mapping[int, str]) -> None:
    """Open MPI's (wrapping) help messages, on the whole text."""
    def by_rank(rank: str, what: str) -> None:
        host = ranks.get(int(rank))
        if host is not None:
            ev.add([host], f"{what} (rank {rank} ran on {host}, as its own output says)")

    for m in _MPI_SIGNAL.finditer(whole):
        ev.add([m.group(2)], m.group(0), killed=m.group(3) in _KILL_SIGNALS)
    for m in _MPI_IMPROPER.finditer(whole):
        ev.add([m.group(2)], m.group(0))
    for m in _MPI_DAEMON.finditer(whole):
        ev.add([m.group(2)], m.group(0))
    for m in _MPI_NODE.finditer(whole):
        ev.add([m.group(2)], m.group(0))
    for m in _MPI_EXIT.finditer(whole):
        by_rank(m.group(1), f"Open MPI: process rank {m.group(1)} exited with code "
                            f"{m.group(2)}, and the job was aborted")
    for m in _MPI_ABORT.finditer(whole):
        by_rank(m.group(1), m.group(0))


def find_culprits(output: str, nodes: Sequence[str]) -> JobFailure:
    """output: the job's stdout and stderr as recorded (stderr after stdout); nodes: the
    nodes under test. The culprits (each with the lines that blame it) and bystanders.

    >>> find_culprits("", ["gpu01"])
    JobFailure(culprits=mappingproxy({}), bystanders=frozenset())
    >>> f = find_culprits("rackgate-slurm-ready: SLURM nodes not ready, nothing was queued: "
    ...                   "n2 down* (Not responding); n3 not known to slurmctld",
    ...                   ["n1", "n2", "n3"])
    >>> print("\\n".join(f"{n}: {why}" for n, why in f.culprits.items()))
    n2: rackgate-slurm-ready: n2 down* (Not responding)
    n3: rackgate-slurm-ready: n3 not known to slurmctld
    """
    ev = _Evidence(nodes)
    lines = [_strip(line.rstrip("\r")) for line in output.split("\n")]
    for _, text in lines:
        _lines(ev, text.strip())
    _open_mpi(ev, "\n".join(text for _, text in lines), _rank_hosts(lines))
    return ev.failure()
