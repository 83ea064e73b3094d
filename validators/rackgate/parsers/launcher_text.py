"""Launchers' own messages inside a tool's output: what a parser must report as a launch
error (quoting it), never read as the tool's rows.

A job launched through srun or mpirun records the launcher's messages on the same streams
as the tool's output. The formats, from the launchers' source (the same as
``parsers.launch_failure``, which names the node that broke a job from them):

* Open MPI 4 (``opal/util/show_help.c``), PRRTE and PMIx (Open MPI 5): a help message
  printed between two lines of 74 ``-`` (``dash_line``). Its text wraps over lines, and
  may hold lines that start with a digit (``  1. Hostfile, via "slots=N" clauses``), so
  the whole block is the launcher's, not the tool's. Fatal ones (the job did not run as
  launched): ``There are not enough slots available in the system to satisfy the <n>
  slots`` (``help-orte-rmaps-base.txt`` / ``help-prte-rmaps-base.txt``), ``<tool> noticed
  that process rank <r> ... exited on signal``, ``... has exited due to process rank``,
  ``<tool> job <id> terminated normally, but <n> process(es) returned a non-zero exit
  code``, ``MPI_ABORT was invoked on rank``, ``<tool> was unable to ...`` (launch, start
  daemons), ``... has lost communication with a remote daemon``, ``... detected that one
  or more processes exited with non-zero status``. Other blocks (``WARNING: There was an
  error initializing an OpenFabrics device``, transport notes) are warnings: the job ran.
* SLURM (``src/srun/launch.c``, ``src/slurmd/slurmstepd``): ``srun: error: ...``,
  ``slurmstepd: error: ...`` (``*** STEP <id> ON <node> CANCELLED AT <time> ***``),
  ``srun: Job step aborted ...``, ``srun: Force Terminated ...``: all fatal.

>>> m = launcher_messages(["-" * 74, "There are not enough slots available in the system "
...                        "to satisfy the 16", "slots that were requested by the application:",
...                        "  1. Hostfile", "-" * 74])
>>> m[0].source, m[0].first, m[0].last, m[0].fatal, m[0].text[:41]
('Open MPI', 1, 5, True, 'There are not enough slots available in t')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rackgate.parsers import LauncherFailed
from rackgate.parsers.launch_failure import trim_reason

DASH_LINE = "-" * 74  # opal/util/show_help.c, PRRTE's and PMIx's show_help: dash_line

_SLURM = re.compile(r"^(srun|slurmstepd(?:-\S+)?): (?:error: |Job step aborted|"
                    r"Force Terminated)")
_MPI_FATAL = re.compile(
    r"There are not enough slots available in the system|"
    r"\bnoticed that (?:process rank \d+|the job aborted)|"
    r"\bhas exited due to process rank \d+|"
    r"\bjob\s+(?:\S+\s*)?terminated normally, but \d+ process|"  # not \s+\S*\s*: quadratic
    r"\bMPI_ABORT was invoked on rank \d+|"
    r"\b(?:mpirun|mpiexec|orterun|prterun|prte|ORTE|PRTE) was unable to\b|"
    r"\bhas lost communication with a remote daemon|"
    r"\bdetected that one or more processes exited with non-zero status")
# a literal that every alternative of _MPI_FATAL holds: a text without any of them has no
# fatal line, and is not searched line by line (most outputs: a tool's own lines)
_MPI_FATAL_WORDS = ("There are not enough slots available in the system", "noticed that ",
                    "has exited due to process rank ", "terminated normally, but ",
                    "MPI_ABORT was invoked on rank ", " was unable to",
                    "has lost communication with a remote daemon",
                    "detected that one or more processes exited with non-zero status")


@dataclass(frozen=True)
class LauncherMessage:
    """One launcher message: where it is (1-based lines, both ends included) and its text."""

    first: int
    last: int
    source: str  # "Open MPI" (Open MPI, PRRTE or PMIx help block or line), "srun", "slurmstepd"
    text: str  # whitespace collapsed, at most launch_failure.MAX_REASON_CHARS
    fatal: bool  # the job did not run as launched (else a warning; the job went on)


def launcher_messages(lines: Sequence[str]) -> tuple[LauncherMessage, ...]:
    """The launcher messages among ``lines`` (launcher labels already removed). A help block
    with no closing dash line runs to the end (the output was cut)."""
    found: list[LauncherMessage] = []
    joined = "\n".join(lines)
    if DASH_LINE not in joined and "srun" not in joined and "slurmstepd" not in joined \
            and not any(word in joined for word in _MPI_FATAL_WORDS):
        return ()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line == DASH_LINE:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == DASH_LINE),
                       len(lines) - 1)
            text = trim_reason(" ".join(lines[i + 1:end + (lines[end].strip() != DASH_LINE)]))
            found.append(LauncherMessage(i + 1, end + 1, "Open MPI", text,
                                         bool(_MPI_FATAL.search(text))))
            i = end + 1
            continue
        if m := _SLURM.match(line):
            found.append(LauncherMessage(i + 1, i + 1, m.group(1).split("-")[0],
                                         trim_reason(line), True))
        elif _MPI_FATAL.search(line):
            found.append(LauncherMessage(i + 1, i + 1, "Open MPI", trim_reason(line), True))
        i += 1
    return tuple(found)


def launcher_lines(messages: Sequence[LauncherMessage]) -> frozenset[int]:
    """The (1-based) line numbers the messages occupy: a parser skips them."""
    return frozenset(n for m in messages for n in range(m.first, m.last + 1))


def raise_if_fatal(messages: Sequence[LauncherMessage], tool: str) -> None:
    """LauncherFailed quoting the first fatal message: the tool did not run as launched, and
    its output (rows or none) is not one measurement."""
    fatal = next((m for m in messages if m.fatal), None)
    if fatal is not None:
        raise LauncherFailed(f"{tool}: line {fatal.first}: {fatal.source} reported a launch "
                         f"error: {fatal.text!r}: the job did not run as launched (the "
                         "launcher's message, not the tool's output)")


def mention(messages: Sequence[LauncherMessage]) -> str:
    """``; the launcher says: '<text>'`` for the first message, else ``""``: a parser adds it
    to its error when the tool printed nothing it could read."""
    return f"; {messages[0].source} says: {messages[0].text!r}" if messages else ""
