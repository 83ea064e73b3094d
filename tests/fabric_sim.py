"""A simulated InfiniBand fabric for tests: Debian's ibsim serving a net file, the real
opensm as its subnet manager, and the real infiniband-diags tools run against it.

``ibsim`` simulates the fabric a net file describes; ``ibsim-run CMD`` runs CMD with
libumad2sim preloaded, which routes libibumad's MADs to the simulator instead of a kernel
HCA (this machine has no RDMA in its kernel). Every instance has its own socket name
(``IBSIM_SOCKNAME``), so tests never meet. The console takes fault commands while tools
run (``Unlink``, ``PerformanceSet``, ...): :meth:`SimFabric.console` writes one and waits
for the simulator's prompt.

Every wait here is bounded and says what it waited for; :meth:`SimFabric.close` stops the
SM and the simulator (killed if they do not stop within seconds).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

PROMPT = "sim> "
SIM_READY = "Network simulator ready."
SUBNET_UP = "SUBNET UP"
PRELOAD = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"


def missing_tools() -> list[str]:
    """The programs and the preload library these tests need that this machine lacks."""
    tools = ["ibsim", "ibsim-run", "opensm", "ibnetdiscover", "iblinkinfo", "perfquery",
             "sminfo"]
    out = [t for t in tools if shutil.which(t) is None]
    return out + ([PRELOAD] if not Path(PRELOAD).exists() else [])


class SimError(RuntimeError):
    pass


class SimFabric:
    """One running ibsim (and, after :meth:`start_sm`, one opensm) in ``workdir``."""

    def __init__(self, net: str, workdir: Path) -> None:
        self.workdir = workdir
        self.sock = f"rg-{uuid.uuid4().hex[:12]}"
        self.env = {**os.environ, "IBSIM_SOCKNAME": self.sock}
        self.env.pop("SIM_HOST", None)
        (workdir / "net").write_text(net, encoding="utf-8")
        self._sim = subprocess.Popen(
            ["ibsim", "-s", str(workdir / "net")], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env, cwd=workdir)
        self._sm: subprocess.Popen[bytes] | None = None
        self._starts = 0
        # ibsim writes to its console while the SM sweeps: a reader drains it always (a
        # full pipe would stop the simulator), and waits read what it gathered
        self.log = ""
        self._cursor = 0  # how much of the log an earlier wait has consumed
        self._grew = threading.Condition()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self._read_until(SIM_READY, 20, "ibsim to parse the net file")
        self._read_until(PROMPT, 5, "ibsim's console prompt")

    def _drain(self) -> None:
        assert self._sim.stdout is not None
        fd = self._sim.stdout.fileno()
        while chunk := os.read(fd, 65536):
            with self._grew:
                self.log += chunk.decode(errors="replace")
                self._grew.notify_all()

    def _read_until(self, mark: str, timeout_s: float, what: str) -> str:
        """The simulator's output from the last wait's end up to and including ``mark``;
        SimError after ``timeout_s`` or if ibsim exits."""
        deadline = time.monotonic() + timeout_s
        with self._grew:
            start = self._cursor
            while mark not in self.log[start:]:
                left = deadline - time.monotonic()
                if left <= 0 or self._sim.poll() is not None:
                    state = "exited" if self._sim.poll() is not None else "running"
                    raise SimError(f"waited {timeout_s} s for {what} ({mark!r}); ibsim "
                                   f"{state}; its output: {self.log[-800:]!r}")
                self._grew.wait(min(left, 0.2))
            self._cursor = self.log.index(mark, start) + len(mark)
            return self.log[start:self._cursor]

    def console(self, command: str, timeout_s: float = 5) -> str:
        """Run one console command (``Unlink "leaf-1"[3]``) and return what ibsim said."""
        assert self._sim.stdin is not None
        self._sim.stdin.write(command.encode() + b"\n")
        self._sim.stdin.flush()
        return self._read_until(PROMPT, timeout_s, f"ibsim to take {command!r}")

    def tool(self, argv: Sequence[str], host: str | None = None,
             timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a real tool under the preload, attached as node ``host`` (its node
        description; default: the net file's first node)."""
        env = dict(self.env)
        if host is not None:
            env["SIM_HOST"] = host
        return subprocess.run(["ibsim-run", *argv], env=env, cwd=self.workdir,
                              capture_output=True, text=True, timeout=timeout_s, check=False)

    def start_sm(self, host: str | None = None, priority: int = 15,
                 timeout_s: float = 120) -> str:
        """Start opensm attached as ``host`` at ``priority``; wait for its first sweep to
        bring the subnet up (its log, ``-f``, says SUBNET UP; ``-d2`` flushes each line, or
        the line would wait in opensm's buffer). Returns the log so far."""
        cache = self.workdir / "opensm-cache"
        cache.mkdir(exist_ok=True)
        env = {**self.env, "OSM_CACHE_DIR": str(cache)}
        if host is not None:
            env["SIM_HOST"] = host
        self._starts += 1  # each SM started has its own log: an earlier one's SUBNET UP is
        log = self.workdir / f"opensm-{self._starts}.log"  # no answer for this one
        out = open(log.with_suffix(".out"), "wb")  # noqa: SIM115 (closed with the SM)
        self._sm = subprocess.Popen(
            ["ibsim-run", "opensm", "-f", str(log), "-d2", "-p",
             str(priority)], stdout=out, stderr=subprocess.STDOUT, env=env,
            cwd=self.workdir)
        out.close()
        deadline = time.monotonic() + timeout_s
        text = ""
        while SUBNET_UP not in text:
            if self._sm.poll() is not None or time.monotonic() > deadline:
                raise SimError(f"waited {timeout_s} s for opensm to report {SUBNET_UP!r}; "
                               f"opensm {'exited' if self._sm.poll() is not None else 'ran'}"
                               f": {text[-800:]!r}")
            time.sleep(0.2)
            text = log.read_text(errors="replace") if log.exists() else ""
        return text

    def stop_sm(self) -> None:
        if self._sm is not None:
            _stop(self._sm)
            self._sm = None

    def close(self) -> None:
        self.stop_sm()
        _stop(self._sim)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


@contextmanager
def sim_fabric(net: str, workdir: Path, sm_host: str | None = None,
               sm_priority: int | None = 15) -> Iterator[SimFabric]:
    """A running simulated fabric with its SM up (``sm_priority`` None: no SM)."""
    fabric = SimFabric(net, workdir)
    try:
        if sm_priority is not None:
            fabric.start_sm(sm_host, sm_priority)
        yield fabric
    finally:
        fabric.close()
