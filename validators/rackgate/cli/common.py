"""What every ``rackgate`` subcommand's parser shares: a help page with a description,
examples and exit codes (:func:`command`), and text columns aligned to their widest cell
(:func:`aligned`). Standard library only: the node's health check (its own venv) imports
it."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from typing import Any

EXAMPLES, EXIT_CODES = "Examples:", "Exit codes:"
EXIT_CANNOT_RUN = 2  # every command: it could not be done (a refusal, rackgate.refusal)
WIDTH = 88  # help text is filled to this many columns
SHOWN = 6  # names listed in a line before the rest are counted


def paragraphs(text: str) -> str:
    """``text``'s paragraphs (blank-line separated) filled to :data:`WIDTH` columns; a
    paragraph whose lines are indented is kept as written (a list, a command).

    >>> print(paragraphs("one  two\\nthree\\n\\n  kept   as is"))
    one two three
    <BLANKLINE>
      kept   as is
    """
    return "\n\n".join(par if par.startswith(" ") else
                       textwrap.fill(" ".join(par.split()), WIDTH)
                       for par in text.strip("\n").split("\n\n"))


def epilog(examples: Sequence[str], exit_codes: Sequence[tuple[int, str]]) -> str:
    """The end of a help page: each example command, then what each exit code means.

    >>> print(epilog(["rackgate list checks"], [(0, "listed")]))
    Examples:
      rackgate list checks
    <BLANKLINE>
    Exit codes:
      0  listed
    """
    return "\n".join([EXAMPLES, *(f"  {e}" for e in examples), "", EXIT_CODES,
                      *(textwrap.fill(what, WIDTH, initial_indent=f"  {code}  ",
                                      subsequent_indent="     ") for code, what in exit_codes)])


def command(sub: Any, name: str, *, summary: str, description: str,
            examples: Sequence[str], exit_codes: Sequence[tuple[int, str]]
            ) -> argparse.ArgumentParser:
    """Add subcommand ``name`` to ``sub`` (an ``add_subparsers()`` result): ``summary`` is
    its line in the parent's list, ``description`` (:func:`paragraphs`) opens its own help
    page, and :func:`epilog` closes it."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary, description=paragraphs(description),
        epilog=epilog(examples, exit_codes),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser


def aligned(rows: Sequence[Sequence[str]], gap: str = "  ") -> list[str]:
    """``rows`` as lines, every column but the last padded to its widest cell.

    >>> aligned([["a", "bb", "c"], ["ddd", "e", "f"]])
    ['a    bb  c', 'ddd  e   f']
    """
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(map(len, rows)))]
    return [gap.join(cell if i == len(r) - 1 else cell.ljust(widths[i])
                     for i, cell in enumerate(r)).rstrip() for r in rows]


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--forks 0`` would run nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def names(items: Sequence[str], shown: int = SHOWN) -> str:
    """Names, the first ``shown`` and a count of the rest.

    >>> names(["n1", "n2"]), names([f"n{i}" for i in range(1, 33)], 2)
    ('n1, n2', 'n1, n2 and 30 more')
    """
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")
