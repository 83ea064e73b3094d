"""Parser for the output of rackgate's pairwise run (``checks/fabric/pairwise.py``): one
``ib_write_bw`` server/client job per node pair, the pairs of a round in parallel (the job
sequencer, ``programs/probes/srun_rounds.py``), printed after each round as sections, one per pair,
in schedule order:

    ### rackgate-pairwise nodes=n1,n2,n3,n4 rounds=3
    ### pair round=1 server=n1 client=n4 rc=0
    0: <the job's output, srun --label: task id first>
    1: rackgate-role=client
    1: <the client's ib_write_bw output>
    ...
    ### end

The format is rackgate's own (every job's argv is in the evidence's argv). Each pair's
text is split by task label; the task that printed ``rackgate-role=client`` is the client,
whose ``ib_write_bw`` report is the pair's figure (``client_tasks`` counts the tasks that
claimed it: the judge wants exactly one). A missing ``### end`` (the run was killed), a
second header and output after the end are ParseErrors; a pair whose job failed keeps its
rc and text, for the judge to report. Which pairs must be present is the judge's question:
it knows the schedule.

>>> run = parse_pairwise("### rackgate-pairwise nodes=a,b rounds=1\\n"
...     "### pair round=1 server=a client=b rc=0\\n1: rackgate-role=client\\n1: x\\n### end\\n")
>>> run.nodes, run.pairs[0].client_text
(('a', 'b'), 'x')
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from rackgate.parsers import ParseError

CLIENT_MARK = "rackgate-role=client"
# counts and exit statuses in ASCII digits, at most 9 (int() of a 100,000-digit run raises)
_HEAD = re.compile(r"^### rackgate-pairwise nodes=(\S+) rounds=([0-9]{1,9})$")
_PAIR = re.compile(r"^### pair round=([0-9]{1,9}) server=(\S+) client=(\S+) "
                   r"rc=(-?[0-9]{0,9})$")
_LABEL = re.compile(r"^(\d+): ?(.*)$")


@dataclass(frozen=True)
class PairOutput:
    round: int
    server: str
    client: str
    rc: int | None  # None: the job's exit status was not recorded
    client_text: str  # the client task's lines, labels removed ("" when none)
    text: str  # the whole section, as printed
    client_tasks: int = 1  # tasks that said they were the client (exactly 1 in a sound run)
    line: int = 0  # the section's line in the evidence


@dataclass(frozen=True)
class PairwiseRun:
    nodes: tuple[str, ...]
    rounds: int
    pairs: tuple[PairOutput, ...]


def _pair(round_: int, server: str, client: str, rc: str, at: int, lines: list[str]
          ) -> PairOutput:
    by_task: dict[str, list[str]] = {}
    for line in lines:
        m = _LABEL.match(line)
        if m:
            by_task.setdefault(m.group(1), []).append(m.group(2))
    clients = [ls for ls in by_task.values() if CLIENT_MARK in ls]
    body = [ln for ln in (clients[0] if clients else []) if ln != CLIENT_MARK]
    return PairOutput(round_, server, client, int(rc) if rc not in ("", "-") else None,
                      "\n".join(body), "\n".join(lines), len(clients), at)


def parse_pairwise(text: str) -> PairwiseRun:
    """The pair sections (module docstring). Refused: no header, or a second one; a header
    naming a node twice; a pair of a node with itself or naming a node outside the header;
    no ``### end``, or output after it (two runs in one evidence file)."""
    head: tuple[tuple[str, ...], int] | None = None
    pairs: list[PairOutput] = []
    current: tuple[int, str, str, str, int] | None = None
    lines: list[str] = []
    ended = False
    # only \n ends a line: a stray CR stays inside the client's line, where the perftest
    # parser sees the row it cuts (splitlines would drop the part after it, unlabelled)
    for lineno, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        if ended:
            if line.strip():
                raise ParseError(f"line {lineno}: output after '### end' (two runs in one "
                                 f"evidence file?): {line[:80]!r}")
            continue
        if line.startswith("### rackgate-pairwise"):
            m = _HEAD.match(line)
            if m is None or head is not None:
                raise ParseError(f"line {lineno}: {'a second' if head else 'not a'} pairwise "
                                 f"header: {line[:80]!r}")
            nodes = tuple(m.group(1).split(","))
            twice = sorted(n for n, c in Counter(nodes).items() if c > 1)
            if twice or "" in nodes:
                raise ParseError(f"line {lineno}: the header lists node(s) "
                                 f"{twice or ['(empty)']} more than once or empty")
            head = (nodes, int(m.group(2)))
            continue
        if line.startswith("### pair ") or line == "### end":
            if head is None:
                raise ParseError(f"line {lineno}: {line!r} before the "
                                 f"'### rackgate-pairwise' header")
            if current is not None:
                pairs.append(_pair(*current, lines))
            lines, current = [], None
            if line == "### end":
                ended = True
                continue
            m = _PAIR.match(line)
            if m is None:
                raise ParseError(f"line {lineno}: not a pair header: {line[:120]!r}")
            if m.group(2) == m.group(3):
                raise ParseError(f"line {lineno}: a pair of {m.group(2)} with itself")
            current = (int(m.group(1)), m.group(2), m.group(3), m.group(4), lineno)
            continue
        if current is not None:
            lines.append(line)
        elif head is not None and line.strip():
            raise ParseError(f"line {lineno}: output before the first pair section: "
                             f"{line[:80]!r}")
    if head is None:
        raise ParseError("no '### rackgate-pairwise' header: the pairwise script did not run")
    if not ended:
        raise ParseError(f"no '### end' line after {len(pairs)} pair section(s): the run "
                         f"was cut short")
    strays = sorted({n for p in pairs for n in (p.server, p.client)} - set(head[0]))
    if strays:
        raise ParseError(f"pair sections name node(s) outside the header: {strays}")
    return PairwiseRun(head[0], head[1], tuple(pairs))
