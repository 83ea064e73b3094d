"""The one refusal: a command that cannot be done as asked (exit 2), whichever stage finds
it. Its message names what was asked and why it cannot be done; the command line prints it
in one line, never a traceback."""

from __future__ import annotations


class Refusal(RuntimeError):
    """The command cannot be done: its run could not start, its run directory is unusable,
    or what it was given is refused (CLI exit 2)."""
