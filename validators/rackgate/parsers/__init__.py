"""Pure parsers: text in, typed record out, or a ParseError naming what was missing.

Parsers import nothing from collection, reports, the CLI or Ansible.
"""

from __future__ import annotations

import re
from collections.abc import Iterator


class ParseError(ValueError):
    """The evidence could not be read as the tool's published format.

    The message names the format and what was wrong; the caller adds the host,
    the check and the evidence file.
    """


class LauncherFailed(ParseError):
    """The tool's output holds its launcher's fatal message (srun, mpirun): the job did not
    run as launched, so the output is no measurement. Reported as a launch error quoting the
    launcher, not as a damaged format (``parsers.launcher_text``)."""


def key_value_lines(text: str, probe: str) -> list[tuple[str, str]]:
    """The ``key=value`` lines of one of rackgate's own probes (CRLF tolerated, blank lines
    skipped, values stripped); ParseError naming the probe and line for anything else.

    >>> key_value_lines("a=1\\r\\n\\nb= x \\n", "demo probe")
    [('a', '1'), ('b', 'x')]
    """
    pairs = []
    for n, line in enumerate(text.replace("\r\n", "\n").splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ParseError(f"{probe}: line {n} is not key=value: {line[:80]!r}")
        pairs.append((key, value.strip()))
    return pairs


_RC = re.compile(r"rc=([0-9]{1,3})\Z")


def marked_sections(text: str, mark: str, section: re.Pattern[str],
                    probe: str) -> Iterator[tuple[str, list[str], int]]:
    """The sections of one of rackgate's fixed scripts, in order: ``<mark><name>`` opens a
    section (``name`` matching ``section``), ``<mark>rc=N`` closes it with the exit status
    of what ran in it, ``<mark>done`` ends the output. Yields (name, its lines, its rc);
    ParseError naming ``probe`` and the line for text outside a section, a marker out of
    turn, or output that never says done (blank lines between sections are skipped).

    >>> list(marked_sections("## a\\nx\\n## rc=0\\n## done\\n", "## ", re.compile("a"), "p"))
    [('a', ['x'], 0)]
    """
    name: str | None = None
    body: list[str] = []
    done = False
    for n, line in enumerate(text.replace("\r\n", "\n").splitlines(), 1):
        if not line.startswith(mark):
            if name is not None:
                body.append(line)
            elif line.strip():
                raise ParseError(f"{probe} output: line {n} is outside any section of the "
                                 f"script: {line[:120]!r}")
            continue
        rest = line[len(mark):]
        rc = _RC.match(rest)
        if done or (rc is None and rest != "done" and not section.match(rest)):
            raise ParseError(f"{probe} output: line {n}: unexpected marker {line[:120]!r}")
        if rc is not None:
            if name is None:
                raise ParseError(f"{probe} output: line {n}: unexpected marker "
                                 f"{line[:120]!r}: an rc line without a section")
            yield name, body, int(rc.group(1))
            name, body = None, []
        elif name is not None:
            raise ParseError(f"{probe} output: line {n}: unexpected marker {line[:120]!r}: "
                             f"section {name!r} has no rc line")
        elif rest == "done":
            done = True
        else:
            name = rest
    if not done:
        raise ParseError(f"{probe} output: no '{mark}done' line: the script did not finish")
