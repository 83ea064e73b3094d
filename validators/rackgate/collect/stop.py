"""The stop request that ends a collection (the CLI sets it from SIGTERM/SIGINT), and the
refusal it ends in."""

from __future__ import annotations

import threading
from pathlib import Path

from rackgate.refusal import Refusal


class Interrupted(Refusal):
    """Collection was stopped by a signal; what was collected is kept (CLI exit 2)."""

    def __init__(self, signame: str, run_dir: Path | None = None) -> None:
        self.signame, self.run_dir = signame, run_dir
        where = (f"; the evidence collected so far is in {run_dir}: `rackgate validate "
                 f"--resume {run_dir}` collects the rest") if run_dir else ""
        super().__init__(f"interrupted by {signame}: collection stopped and its processes "
                         f"were ended{where}")


class Stop:
    """A stop request (the CLI sets it from SIGTERM/SIGINT), polled by the collector.

    A second request (``hurry``) also skips the bounded clean-up on the nodes."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signame = ""
        self.hurry = False

    def set(self, signame: str = "a stop request") -> None:
        if self._event.is_set():
            self.hurry = True
        self.signame = self.signame or signame
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set()

    def check(self, run_dir: Path | None = None) -> None:
        """Raise :class:`Interrupted` once a stop was requested."""
        if self():
            raise Interrupted(self.signame, run_dir)
