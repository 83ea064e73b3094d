"""A time bound on each judgement: a parser or judge that runs away (superlinear on a
hostile input, a loop that never ends) becomes an ``error`` for the (node, check) it was
judging, and the other judgements go on.

The bound is wall-clock time, kept by ``SIGALRM`` (``setitimer(ITIMER_REAL)``): Python
code and the regular expression engine stop at a signal, and so does a read that blocks.
:class:`Overrun` is a ``BaseException``, as ``KeyboardInterrupt`` is: the judges' and
parsers' ``except Exception`` (one bad pair of a pairwise run is an error for that pair)
must not take it for one more bad input and go on unbounded; and the timer rings again
every second until the block is left. The handler is installed once around a loop of
judgements (:func:`alarms`), the timer set and cleared around each (:class:`bounded`): two
system calls per judgement. Signals reach
only a process's main thread, which is where the judge runs (the CLI's process, and each
forked worker of ``judge.stored``); elsewhere, or without ``SIGALRM``, the bound is not kept
and judgements run unbounded, as before.

>>> import time
>>> with alarms():
...     with bounded(0.05):
...         while True:
...             time.sleep(0.01)
Traceback (most recent call last):
...
rackgate.judge.bound.Overrun: judging took longer than its bound of 0.05 s and was stopped
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from rackgate.figures import figure

JUDGE_LIMIT_S = 60.0  # one (node, check): parsing and judging take milliseconds


class Overrun(BaseException):
    """A judgement ran past its bound (module docstring: why not an Exception)."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(f"judging took longer than its bound of {figure(limit_s)} s and "
                         f"was stopped")
        self.limit_s = limit_s


_armed: list[float] = []  # the bound being kept, while a timer runs
_installed: list[bool] = []  # alarms() blocks open in this process's main thread


def _ring(signum: int, frame: FrameType | None) -> None:
    if _armed:
        raise Overrun(_armed[-1])


def _can() -> bool:
    return hasattr(signal, "setitimer") and \
        threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def alarms() -> Iterator[bool]:
    """Judgements in this block can be bounded (True), or not (False: not the main
    thread); the process's own SIGALRM handler is back afterwards."""
    if not _can():
        yield False
        return
    previous = signal.signal(signal.SIGALRM, _ring)
    _installed.append(True)
    try:
        yield True
    finally:
        _installed.pop()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class bounded:  # lower case: used as a context manager, as contextlib's are
    """Raise :class:`Overrun` in the block when it runs longer than ``limit_s`` seconds,
    inside :func:`alarms`; unbounded outside it, or for ``limit_s <= 0``. A class, not a
    generator: it runs once per judgement (about 2 us, against 7 for contextlib's)."""

    __slots__ = ("armed", "limit_s")

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.armed = False

    def __enter__(self) -> None:
        self.armed = bool(_installed) and self.limit_s > 0 and \
            threading.current_thread() is threading.main_thread()
        if self.armed:
            _armed.append(self.limit_s)
            signal.setitimer(signal.ITIMER_REAL, self.limit_s, min(self.limit_s, 1.0))

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            _armed.pop()
