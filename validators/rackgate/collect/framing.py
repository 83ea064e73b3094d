"""The node collector's input and output, on the control host. Pure: text in, records out.

The node collector (``programs/probes/node_collector.py``) runs a node's commands one
after the other and prints each command's evidence as framed lines (its docstring has the
format). :func:`node_input` writes what it reads; :func:`decode` reads back what the
collectors of one command (Ansible's, on one host) or one SLURM job (every node's task)
printed, interleaved in any order, and says for every expected (node, check) what came
back: a record, a damaged record (a chunk missing, a digest or JSON that does not match,
two different records for one command), or nothing; and per node whether its collector
began and ended. Lines of anything else (srun's own words, a ``N: `` label) are skipped.

>>> from rackgate.programs.probes.node_collector import frame
>>> out = decode("\\n".join(frame("n1", "c", {"argv": ["true"], "rc": 0, "start": "s",
...     "end": "e", "stdout": "", "stderr": ""})), {"n1": ["c"]})
>>> out.records[("n1", "c")].rc, out.damaged
(0, {})
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rackgate.documents import load_json
from rackgate.programs.probes import source

SCHEMA = "rackgate.node-tasks/1"
MARK = "RGEV1"
BEGIN, END = "+begin", "+end"  # a node's first and last record
_LINE = re.compile(rf"(?:^|\s){MARK} (\S+) (\S+) (\d+)/(\d+) ([0-9a-f]{{16}}) "
                   r"([A-Za-z0-9+/=]*)\s*\Z")
_MAX_CHUNKS = 1 << 20  # 800 MB of base64 in one record: nothing real comes near


@dataclass(frozen=True)
class Record:
    """One command's evidence as the node collector returned it."""

    argv: tuple[str, ...]
    rc: int | None
    started: str
    ended: str
    stdout: str
    stderr: str


@dataclass
class Decoded:
    records: dict[tuple[str, str], Record] = field(default_factory=dict)
    damaged: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, check) -> why
    begun: set[str] = field(default_factory=set)
    ended: dict[str, str] = field(default_factory=dict)  # node -> why it ended early, or ""
    foreign: list[str] = field(default_factory=list)  # records nobody asked for


def node_input(tasks: Mapping[str, Sequence[tuple[str, Sequence[str], int]]]) -> str:
    """The collector's input: per node, its (check, argv, bound_s) in the order they run.
    Each distinct argv and each distinct list of tasks is written once (the nodes of a
    rack mostly run the same commands), and the document goes zlib-compressed in base64:
    SLURM sends it whole to every node of the job.

    >>> doc = json.loads(zlib.decompress(base64.b64decode(node_input({
    ...     "n1": [("c", ["true"], 5)], "n2": [("c", ["true"], 5)]}))))
    >>> doc == {"schema": SCHEMA, "argvs": [["true"]], "lists": [[["c", 0, 5]]],
    ...         "nodes": {"n1": 0, "n2": 0}}
    True
    """
    index: dict[tuple[str, ...], int] = {}
    lists: dict[str, int] = {}
    nodes: dict[str, int] = {}
    for node, items in tasks.items():
        mine = [[check, index.setdefault(tuple(argv), len(index)), bound_s]
                for check, argv, bound_s in items]
        nodes[node] = lists.setdefault(json.dumps(mine), len(lists))
    doc = {"schema": SCHEMA, "argvs": [list(a) for a in index],
           "lists": [json.loads(k) for k in lists], "nodes": nodes}
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def collector_argv(node: str | None = None) -> list[str]:
    """The node collector's command (its text in the argv, so the evidence of the
    collection shows the very program that ran); ``node``: the node it runs on, when not
    started by SLURM."""
    return ["python3", "-c", source("node_collector"), *([node] if node else [])]


@dataclass
class _Chunks:
    count: int
    digest: str
    parts: dict[int, str] = field(default_factory=dict)
    problem: str = ""


def _unframe(chunks: _Chunks) -> tuple[dict[str, Any] | None, str]:
    if chunks.problem:
        return None, chunks.problem
    if len(chunks.parts) != chunks.count:
        return None, (f"cut short: {len(chunks.parts)} of its {chunks.count} line(s) came "
                      f"back")
    payload = "".join(chunks.parts[i] for i in range(1, chunks.count + 1))
    if hashlib.sha256(payload.encode("ascii")).hexdigest()[:16] != chunks.digest:
        return None, "its lines do not match its digest"
    try:
        doc = load_json(zlib.decompress(base64.b64decode(payload, validate=True)))
    except (binascii.Error, zlib.error, ValueError) as exc:
        return None, f"unreadable ({exc})"
    if not isinstance(doc, dict):
        return None, "not a JSON object"
    return doc, ""


def _record(doc: Mapping[str, Any]) -> Record | str:
    argv, rc = doc.get("argv"), doc.get("rc")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return "field argv is not a list of strings"
    if rc is not None and type(rc) is not int:
        return f"field rc is not an exit status: {rc!r}"
    texts = [doc.get(k) for k in ("start", "end", "stdout", "stderr")]
    if not all(isinstance(t, str) for t in texts):
        return "fields start, end, stdout and stderr must be strings"
    start, end, out, err = (str(t) for t in texts)
    return Record(tuple(argv), rc, start, end, out, err)


def decode(text: str, expected: Mapping[str, Sequence[str]]) -> Decoded:
    """What the collectors printed in ``text``, for the ``expected`` checks of each node."""
    groups: dict[tuple[str, str], _Chunks] = {}
    for line in text.splitlines():
        m = _LINE.search(line)
        if m is None:
            continue
        node, name, i, n, digest, part = m.groups()
        index, count = int(i), int(n)
        if not 1 <= index <= count <= _MAX_CHUNKS:
            continue
        got = groups.setdefault((node, name), _Chunks(count, digest))
        if (got.count, got.digest) != (count, digest):
            got.problem = got.problem or "two different records came back for it"
        elif got.parts.setdefault(index, part) != part:
            got.problem = got.problem or f"line {index} came back twice, different"
    out = Decoded()
    for (node, name), chunks in groups.items():
        known = node in expected
        doc, why = _unframe(chunks)
        if name == BEGIN and known:
            out.begun.add(node)
            continue
        if name == END and known:
            out.ended[node] = str(doc.get("why") or "") if doc else \
                f"its last record is damaged: {why}"
            continue
        if not known or name not in expected[node]:
            out.foreign.append(f"{node} {name}")
            continue
        if doc is None:
            out.damaged[(node, name)] = why
            continue
        rec = _record(doc)
        if isinstance(rec, str):
            out.damaged[(node, name)] = rec
        else:
            out.records[(node, name)] = rec
    return out
