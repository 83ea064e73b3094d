"""The node collector's input and output, on the control host. Pure: text in, records out.

The node collector (``programs/probes/node_collector.py``) runs a node's commands one
after the other and writes each command's evidence as framed lines (its docstring has the
format). :func:`node_input` writes what it reads; :func:`decode` reads back what one
collector wrote (its records file, fetched from its host), and says for every expected
(node, check) what came back: a record, a damaged record (a chunk missing, a digest or
JSON that does not match, two different records for one command), or nothing; and per
node whether its collector began and ended. Lines that are not frames are skipped. One
collector's output is one node's: a frame of another node or of a check it was not given
is foreign, named, and makes the whole output untrustworthy (something else wrote into
it): that node's records are all refused. A SLURM job's output, every node's task in one
file, is split into its tasks' outputs by ``collect.slurm_records`` first.

A record's lines are decoded as soon as the last of them arrives and then let go, so a
large output (hundreds of MiB from one host) is held one record at a time; a line longer
than any frame is skipped unread (:func:`lines_of`).

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from rackgate.documents import load_json
from rackgate.programs.probes import source

SCHEMA = "rackgate.node-tasks/1"
MARK = "RGEV1"
BEGIN, END = "+begin", "+end"  # a node's first and last record
FRAME = re.compile(rf"{MARK} (\S+) (\S+) (\d+)/(\d+) ([0-9a-f]{{16}}) ([A-Za-z0-9+/=]*)\s*\Z")
_MAX_CHUNKS = 1 << 20  # 800 MB of base64 in one record: nothing real comes near
MAX_LINE = 4096  # a frame is under 1,000 characters; a longer line is not one


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
    refused: dict[str, str] = field(default_factory=dict)  # node -> why all its are refused


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


def collector_argv(node: str | None = None, records: str = "") -> list[str]:
    """The node collector's command (its text in the argv, so the evidence of the
    collection shows the very program that ran); ``node``: the node it runs on, when not
    started by SLURM, and ``records`` the file it writes its records to."""
    return ["python3", "-c", source("node_collector"),
            *(["--records", records, node] if node else [])]


class Frames:
    """Framed lines, grouped by a key (node and name; a SLURM task's number too), each
    group decoded as soon as its last line has come and its lines then let go."""

    def __init__(self) -> None:
        self.groups: dict[tuple[Any, ...], _Group] = {}

    def add(self, key: tuple[Any, ...], m: re.Match[str]) -> None:
        """One framed line (``m``: :data:`FRAME` matched) of group ``key``."""
        index, count, digest, part = int(m.group(3)), int(m.group(4)), m.group(5), m.group(6)
        if not 1 <= index <= count <= _MAX_CHUNKS:
            return
        got = self.groups.setdefault(key, _Group(count, digest))
        if (got.count, got.digest) != (count, digest):
            got.fail("two different records came back for it")
            return
        crc = zlib.crc32(part.encode("ascii"))
        if got.seen.setdefault(index, crc) != crc:
            got.fail(f"line {index} came back twice, different")
        elif not got.problem and index not in got.parts and not got.done:
            got.parts[index] = part
            if len(got.parts) == got.count:
                got.doc, got.problem = _unframe(got.parts, got.count, got.digest)
                got.parts, got.done = {}, True

    def results(self) -> Iterator[tuple[tuple[Any, ...], dict[str, Any] | None, str]]:
        """Each group's key, its record (None when damaged) and what is wrong with it."""
        for key, got in self.groups.items():
            if got.problem:
                yield key, None, got.problem
            elif not got.done:
                yield key, None, (f"cut short: {len(got.seen)} of its {got.count} line(s) "
                                  f"came back")
            else:
                yield key, got.doc, ""


@dataclass
class _Group:
    count: int
    digest: str
    parts: dict[int, str] = field(default_factory=dict)
    seen: dict[int, int] = field(default_factory=dict)  # line -> crc32 of what came
    problem: str = ""
    doc: dict[str, Any] | None = None
    done: bool = False

    def fail(self, why: str) -> None:
        self.problem, self.doc, self.parts = self.problem or why, None, {}


def _unframe(parts: Mapping[int, str], count: int, digest: str
             ) -> tuple[dict[str, Any] | None, str]:
    payload = "".join(parts[i] for i in range(1, count + 1))
    if hashlib.sha256(payload.encode("ascii")).hexdigest()[:16] != digest:
        return None, "its lines do not match its digest"
    try:
        doc = load_json(zlib.decompress(base64.b64decode(payload, validate=True)))
    except (binascii.Error, zlib.error, ValueError, RecursionError) as exc:
        return None, f"unreadable ({type(exc).__name__}: {str(exc)[:200]})"
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


def lines_of(source: str | IO[str]) -> Iterator[str]:
    """The lines of a text or of a file opened with ``newline="\\n"``, without their line
    ends; a line longer than :data:`MAX_LINE` (no frame is) is skipped, read a piece at a
    time, never whole into memory."""
    if isinstance(source, str):
        yield from (line.rstrip("\r") for line in source.split("\n") if len(line) < MAX_LINE)
        return
    while line := source.readline(MAX_LINE):
        if line.endswith("\n") or len(line) < MAX_LINE:  # a whole line, or the last
            yield line.rstrip("\r\n")
            continue
        while (rest := source.readline(MAX_LINE)) and not rest.endswith("\n"):
            pass


def take(out: Decoded, items: Iterable[tuple[str, str, dict[str, Any] | None, str]],
         owner: str, expected: Mapping[str, Sequence[str]], whose: str) -> None:
    """Add to ``out`` the records ``items`` (node, name, record or None, why) of one output
    that belongs to node ``owner``; any frame of another node, or of a check ``owner``
    was not given, is foreign and refuses all of ``owner``'s records (``whose``: what the
    output is, for the message)."""
    items = list(items)
    mine = set(expected.get(owner, ())) | {BEGIN, END}
    stray = sorted({f"{node} {name}" for node, name, _, _ in items
                    if node != owner or name not in mine})
    if stray:
        out.foreign += stray
        out.refused[owner] = (f"{whose} also carried records that are not its node's "
                              f"({', '.join(stray[:5])}{' ...' if len(stray) > 5 else ''}): "
                              f"something on {owner} wrote into it")
        return
    for node, name, doc, why in items:
        if name == BEGIN:
            out.begun.add(node)
        elif name == END:
            out.ended[node] = str(doc.get("why") or "") if doc else \
                f"its last record is damaged: {why}"
        elif doc is None:
            out.damaged[(node, name)] = why
        elif isinstance(rec := _record(doc), str):
            out.damaged[(node, name)] = rec
        else:
            out.records[(node, name)] = rec


def decode(source: str | IO[str], expected: Mapping[str, Sequence[str]]) -> Decoded:
    """What one collector wrote in ``source`` for the ``expected`` checks of its node (the
    one node of ``expected``)."""
    (owner,) = expected
    frames = Frames()
    for line in lines_of(source):
        m = FRAME.match(line)
        if m is not None:
            frames.add((m.group(1), m.group(2)), m)
    out = Decoded()
    take(out, ((k[0], k[1], doc, why) for k, doc, why in frames.results()), owner, expected,
         f"the output of {owner}'s collector")
    return out
