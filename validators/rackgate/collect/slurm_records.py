"""A SLURM collection job's output, bound task by task to the nodes it ran on. Pure.

With ``--via slurm`` every node's collector is one task of one srun job
(``collect.bundle.slurm_job``), and srun writes what they all print into one file on the
launch host (the readiness guard's ``--records``). What binds a line to a node:

1. The file's first line is the readiness guard's decision, written before srun started
   (``programs/probes/slurm_ready.py``): the nodes SLURM was asked to run, and the ones
   it left out with SLURM's state and reason. A node not in that list did not run,
   whatever the job printed; without that line no node is taken to have run.
2. ``srun --label`` puts the number of the task that printed a line in front of it
   (srun(1): ``<task>: ``, padded to the width of the highest task number). srun adds it
   on the launch host to what slurmstepd forwarded from that task's standard output, so
   no task can print a line under another task's number. A frame without that label is
   foreign.
3. Each task's lines are one collector's output (``collect.framing``): its ``+begin``
   record names its node and its task (``SLURMD_NODENAME``, ``SLURM_PROCID``), and binds
   the task to that node when it is exactly one node, asked for, its task number is the
   label's, and no other task claims the same node. A task that printed records for
   another node (something on its node wrote into the task's output) has all of its own
   refused, and those records are foreign, named; a node two tasks claim is refused.

>>> from rackgate.programs.probes.node_collector import frame
>>> doc = {"argv": ["true"], "rc": 0, "start": "s", "end": "e", "stdout": "", "stderr": ""}
>>> lines = ['rackgate-slurm-ready {"ready": ["n1", "n2"], "left_out": {"n3": "drained"}}']
>>> lines += [f"0: {x}" for x in frame("n1", "+begin", {"task": 0}) + frame("n1", "c", doc)]
>>> lines += [f"1: {x}" for x in frame("n2", "+begin", {"task": 1}) + frame("n3", "c", doc)]
>>> job = decode_job("\\n".join(lines), {"n1": ["c"], "n2": ["c"], "n3": ["c"]})
>>> sorted(job.decoded.records), job.decoded.foreign, job.left_out
([('n1', 'c')], ['n3 c'], {'n3': 'drained'})
>>> job.decoded.refused["n2"]
"task 1's output also carried records that are not its node's (n3 c): something on n2 wrote into it"
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from rackgate.collect.framing import BEGIN, FRAME, Decoded, Frames, lines_of, take
from rackgate.documents import load_json

HEADER = "rackgate-slurm-ready"  # the readiness guard's first line (slurm_ready.HEADER)
MAX_HEADER = 64 << 20  # its length: every node's name and SLURM's reason, with room
_LABEL = re.compile(r" *(\d{1,9}): (.*)\Z")
Item = tuple[str, str, dict[str, Any] | None, str]  # node, name, record or None, why


@dataclass
class Job:
    """What a collection job's output says: ``decoded`` (records per node, and the nodes
    whose records are refused), ``ready`` (the nodes SLURM was asked to run; None when the
    guard's line is missing), ``left_out`` (node -> SLURM's state and reason) and
    ``problem`` (why no node is taken to have run, or "")."""

    decoded: Decoded = field(default_factory=Decoded)
    ready: list[str] | None = None
    left_out: dict[str, str] = field(default_factory=dict)
    problem: str = ""


def _decision(line: str, expected: Mapping[str, Sequence[str]]
              ) -> tuple[list[str] | None, dict[str, str], str]:
    """The guard's first line: (ready nodes, nodes left out, what is wrong with it)."""
    head, _, body = line.partition(" ")
    if head != HEADER:
        return None, {}, (f"its output does not begin with the readiness guard's line "
                          f"({line[:120]!r})")
    try:
        doc: Any = load_json(body)
    except ValueError as exc:
        return None, {}, (f"the readiness guard's line is unreadable "
                          f"({type(exc).__name__}: {str(exc)[:200]})")
    ready, left = (doc.get("ready"), doc.get("left_out")) if isinstance(doc, dict) else (0, 0)
    if not isinstance(ready, list) or not all(isinstance(n, str) for n in ready) \
            or not isinstance(left, dict) or not all(isinstance(v, str) for v in left.values()):
        return None, {}, "the readiness guard's line is not {ready: [...], left_out: {...}}"
    unknown = sorted((set(ready) | set(left)) - set(expected))
    if unknown or len(set(ready)) != len(ready) or set(ready) & set(left):
        return None, {}, (f"the readiness guard's line names nodes not asked for, or a "
                          f"node twice ({', '.join(unknown[:5]) or 'twice'})")
    return ready, dict(left), ""


def decode_job(source: str | IO[str], expected: Mapping[str, Sequence[str]]) -> Job:
    """The records of the ``expected`` checks per node in a collection job's output."""
    if isinstance(source, str):
        first, _, source = source.partition("\n")
    else:
        first = source.readline(MAX_HEADER).rstrip("\n")
    ready, left_out, problem = _decision(first, expected)
    lines = lines_of(source)
    job = Job(ready=ready, left_out=left_out, problem=problem)
    frames = Frames()
    unlabelled: set[str] = set()
    for line in lines:
        label = _LABEL.match(line)
        m = FRAME.match(label.group(2) if label else line)
        if m is None:
            continue
        if label is None:
            unlabelled.add(f"{m.group(1)} {m.group(2)}")
        else:
            frames.add((int(label.group(1)), m.group(1), m.group(2)), m)
    per_task: dict[int, list[Item]] = {}
    for (task, node, name), doc, why in frames.results():
        per_task.setdefault(task, []).append((node, name, doc, why))
    out = job.decoded
    out.foreign += sorted(unlabelled)
    claims: dict[str, list[int]] = {}
    unbound: dict[str, str] = {}  # a node an unbound task named in a first record -> why
    for task, items in sorted(per_task.items()):
        node, why = _claim(task, items, ready or [])
        if node is not None:
            claims.setdefault(node, []).append(task)
            continue
        out.foreign += sorted({f"{n} {c}" for n, c, _, _ in items})
        for n, c, _, _ in items:
            if c == BEGIN:
                unbound.setdefault(n, why)
    for node, tasks in claims.items():
        if len(tasks) > 1:
            out.refused[node] = (f"tasks {', '.join(map(str, tasks))} of the job each "
                                 f"claim to be {node}")
            out.foreign += sorted({f"{n} {c}" for t in tasks for n, c, _, _ in per_task[t]})
        else:
            take(out, per_task[tasks[0]], node, expected, f"task {tasks[0]}'s output")
    for node, why in unbound.items():
        if node in (ready or []) and node not in claims:
            out.refused[node] = why
    return job


def _claim(task: int, items: Sequence[Item], ready: Sequence[str]) -> tuple[str | None, str]:
    """The node task ``task``'s output is bound to (its one ``+begin``), or None and why."""
    begins = [(node, doc, why) for node, name, doc, why in items if name == BEGIN]
    if not begins:
        return None, f"task {task}'s output has no first record"
    if len({node for node, _, _ in begins}) > 1:
        return None, (f"task {task}'s output claims to be "
                      f"{' and '.join(sorted({node for node, _, _ in begins}))}")
    node, doc, why = begins[0]
    if task >= len(ready):
        return None, f"task {task} is not a task of the job (it has {len(ready)})"
    if doc is None:
        return None, f"task {task}'s first record is damaged: {why}"
    if node not in ready:
        return None, f"task {task} claims to be {node}, which SLURM was not asked to run"
    if doc.get("task") != task or type(doc.get("task")) is not int:
        return None, (f"task {task}'s first record names task {doc.get('task')!r}: srun "
                      f"labelled its lines {task}")
    return node, ""
