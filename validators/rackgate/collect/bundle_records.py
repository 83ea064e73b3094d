"""What came back of a bundle (``collect.bundle``), member by member.

A bundle's records never travel in an Ansible result: its command writes them to files
in a private directory on its host, and Ansible fetches those files to the control host
(``playbooks/collect.yml``). :func:`outcomes` reads them there, with what the bundle's
command returned (:class:`Ran`: its rc and stderr), and says for each member its record,
or why there is none:

- ``--via ansible``: the host's collector output (``collect.framing.decode``), which may
  carry that host's records only.
- ``--via slurm``: the job's output, bound task by task to the nodes SLURM ran
  (``collect.slurm_records``); a node the readiness guard left out is not run with
  SLURM's state and reason, whatever the job printed; srun's stderr (its own file) gives
  the job's last words.

ansible-runner empties any event result longer than its ``MAX_EVENT_RES`` (700,000
characters by default; ``stdout`` counts twice, through ``stdout_lines``): such a result
(``{}``) is said to be what it is (:func:`emptied_note`), never taken for a command that
did not start.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from rackgate.collect.bundle import ERRORS, RECORDS, Bundle
from rackgate.collect.framing import Decoded, Record, decode
from rackgate.collect.slurm_records import decode_job
from rackgate.commands.task import Task
from rackgate.model import last_words

DEFAULT_MAX_EVENT_RES = 700_000  # ansible-runner's display callback: res over it is {}
_TAIL_BYTES = 65_536  # what is read of the end of a SLURM job's stderr


@dataclass(frozen=True)
class Ran:
    """What the bundle's command returned in its Ansible result: ``rc``, its ``stderr``,
    and ``note``: why the result says nothing (emptied by ansible-runner, or none came)."""

    rc: int | None = None
    stderr: str = ""
    note: str = ""


def max_event_res() -> int:
    """ansible-runner's limit on an event result's length, as it reads it."""
    try:
        return int(os.environ.get("MAX_EVENT_RES", DEFAULT_MAX_EVENT_RES))
    except ValueError:
        return DEFAULT_MAX_EVENT_RES


def emptied_note(task: str, host: str) -> str:
    """Why a result of ``task`` on ``host`` has nothing in it: ansible-runner emptied it.

    >>> emptied_note("Run x", "n1")[:60]
    "ansible-runner emptied the result of 'Run x' on n1: it was l"
    """
    return (f"ansible-runner emptied the result of {task!r} on {host}: it was longer than "
            f"its MAX_EVENT_RES of {max_event_res():,} characters")


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - _TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def outcomes(bundle: Bundle, where: Path, ran: Ran) -> Iterator[tuple[Task, Record | str]]:
    """Each member of ``bundle`` with its record, or why it has none (``where``: the
    directory its files were fetched to)."""
    nodes = bundle.nodes()
    expected = {n: [t.check for t in ts] for n, ts in nodes.items()}
    what = (f"the SLURM job {bundle.job} on {bundle.host}" if bundle.job else
            f"rackgate's node collector on {bundle.host}")
    stderr = _tail(where / ERRORS) if bundle.job else ""
    said = last_words("\n".join(x for x in (ran.stderr, stderr) if x), 300)
    rc = f"rc {ran.rc}" if not ran.note else ran.note
    tail = f" ({rc}){': ' + said if said else ''}"
    records = where / RECORDS
    if not records.is_file():
        why = (f"{what} did not start" if bundle.job else f"{what} returned no records")
        for ts in nodes.values():
            for t in ts:
                yield t, f"{why}{tail}"
        return
    with records.open(encoding="utf-8", errors="replace", newline="\n") as fh:
        if bundle.job is None:
            got, left_out, problem = decode(fh, expected), {}, ""
        else:
            job = decode_job(fh, expected)
            got, left_out, problem = job.decoded, job.left_out, job.problem
            if job.ready is not None:
                left_out |= {n: "not among the nodes the job was asked to run"
                             for n in nodes if n not in job.ready and n not in left_out}
    for members in nodes.values():
        for t in members:
            yield t, _one(t, got, left_out, problem, what, tail)


def _one(t: Task, got: Decoded, left_out: Mapping[str, str], problem: str, what: str,
         tail: str) -> Record | str:
    node, key = t.host, (t.host, t.check)
    if key in got.records and node not in got.refused:
        return got.records[key]
    if node in left_out:
        forged = [f for f in got.foreign if f.split(" ", 1)[0] == node]
        return (f"SLURM did not run it: {node} is {left_out[node]}" +
                (f"; the job's output carried records for it ({', '.join(forged[:3])}), "
                 f"refused: it did not run" if forged else ""))
    if problem:
        return f"{what} ran no node: {problem}{tail}"
    if node in got.refused:
        return f"its evidence from {what} was refused: {got.refused[node]}"
    if key in got.damaged:
        return f"its evidence record from {what} is damaged: {got.damaged[key]}"
    if node not in got.begun:
        return f"{what} never started on {node}{tail}"
    early = got.ended.get(node)
    return f"{what} on {node} ended before this check{' (' + early + ')' if early else ''}{tail}"
