"""Pure parsers: text in, typed record out, or a ParseError naming what was missing.

Parsers import nothing from collection, reports, the CLI or Ansible.
"""

from __future__ import annotations


class ParseError(ValueError):
    """The evidence could not be read as the tool's published format.

    The message names the format and what was wrong; the caller adds the host,
    the check and the evidence file.
    """


class LaunchError(ParseError):
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
