"""The health check's I/O: it runs fixed commands (argv lists, each with a timeout inside
one time budget, output read up to a cap), reads files under a root prefix (``/`` on a
node, a fake tree in tests), runs the items and applies the SLURM decision. Everything it
reads is handed to the pure parsers and judges of :mod:`.gpu`, :mod:`.node` and
:mod:`.decide`.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rackgate import exposition
from rackgate.health import RECORD, ItemResult, error, skipped
from rackgate.health import gpu as g
from rackgate.health import node as n
from rackgate.health.config import HealthConfig
from rackgate.scheduler.slurm import (
    NodeState,
    drain_argv,
    parse_states,
    resume_argv,
    sinfo_argv,
)
from rackgate.store.evidence import atomic_write

BUDGET_S = 9.0  # the whole run, SLURM included (slurmd kills the program at 60 s)
COMMAND_TIMEOUT_S = 4.0  # the most any one command may take
OUTPUT_CAP = 4 * 1024 * 1024  # bytes read of a command's output or a file
# SLURM's commands come last and are given this much of the budget in any case.
SLURM_RESERVE_S = 3.0


@dataclass(frozen=True)
class Ran:
    rc: int | None  # None: timed out, or could not start
    stdout: str
    stderr: str

    def trouble(self, argv: Sequence[str]) -> str | None:
        """None when it ran and exited 0, else one line saying what went wrong."""
        if self.rc == 0:
            return None
        said = " ".join((self.stderr or self.stdout).split())[-160:]
        how = "did not finish" if self.rc is None else f"exited {self.rc}"
        return f"{argv[0]} {how}" + (f": {said}" if said else "")


class Runner(Protocol):
    def __call__(self, argv: Sequence[str], timeout_s: float, keep: str | None = None) -> Ran:
        ...


class Budget:
    """One deadline for the whole run; each command gets what is left, at most its own."""

    def __init__(self, total_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock, self.deadline = clock, clock() + total_s

    def left(self, reserve_s: float = 0.0) -> float:
        return max(0.0, min(COMMAND_TIMEOUT_S, self.deadline - self.clock() - reserve_s))


def _kept(data: bytes, keep: bytes, tail: bytearray, out: bytearray) -> None:
    """Append the complete lines of ``tail + data`` that contain ``keep`` to ``out``; the
    incomplete last line stays in ``tail`` (bounded: a line longer than OUTPUT_CAP is cut)."""
    tail += data
    *lines, rest = bytes(tail).split(b"\n")
    out.extend(b"".join(line + b"\n" for line in lines if keep in line))
    tail[:] = rest[-OUTPUT_CAP:]


def run_command(argv: Sequence[str], timeout_s: float, keep: str | None = None) -> Ran:
    """Run ``argv`` (no shell, its own process group) for at most ``timeout_s``; read at most
    OUTPUT_CAP bytes of each stream (a command that prints more is stopped: its evidence is
    incomplete). With ``keep``, every line of stdout is read but only those containing it
    are kept (the kernel log since boot: all of it scanned, only the XID lines held)."""
    if timeout_s <= 0.05:
        return Ran(None, "", "no time left in the health check's budget")
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return Ran(None, "", f"cannot run: {exc.strerror}")
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    tail, wanted = bytearray(), keep.encode() if keep is not None else None
    deadline, over = time.monotonic() + timeout_s, False
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map() and not over:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.fd == out_fd and wanted is not None:
                    _kept(chunk, wanted, tail, bufs[out_fd])
                else:
                    bufs[key.fd] += chunk
                over = over or len(bufs[key.fd]) > OUTPUT_CAP
    if wanted is not None:
        _kept(b"\n", wanted, tail, bufs[out_fd])
    try:
        rc: int | None = proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        rc = None
    if rc is None or over:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    out, err = (bytes(bufs[fd][:OUTPUT_CAP]).decode("utf-8", "replace") for fd in (out_fd, err_fd))
    if over:
        return Ran(None, out, f"printed more than {OUTPUT_CAP} bytes"
                   + (f" of lines with {keep!r}" if keep else ""))
    return Ran(rc, out, err if rc is not None else f"timed out after {timeout_s:.1f} s")


@dataclass(frozen=True)
class Node:
    """Where the health check reads: files under ``root``, commands through ``run``."""

    root: Path
    run: Runner

    def read(self, path: str) -> str | None:
        """The first OUTPUT_CAP bytes of ``path`` (absolute, under root), None if unreadable."""
        try:
            with (self.root / path.lstrip("/")).open("rb") as f:
                return f.read(OUTPUT_CAP).decode("utf-8", "replace")
        except OSError:
            return None


def _gpu_items(cfg: HealthConfig, node: Node, budget: Budget) -> list[ItemResult]:
    if cfg.gpus == 0:
        why = "no GPU expected on this node (gpus: 0)"
        return [skipped("gpu_count", why), skipped("gpu_ecc", why), skipped("gpu_xid", why)]
    ran = node.run(g.NVIDIA_SMI, budget.left(SLURM_RESERVE_S))
    trouble = ran.trouble(g.NVIDIA_SMI)
    try:
        gpus = None if trouble else g.parse_gpus(ran.stdout)
    except g.GpuParseError as exc:
        trouble = str(exc)
    out = []
    if gpus is None:
        out += [error("gpu_count", f"nvidia-smi: {trouble}"),
                error("gpu_ecc", f"nvidia-smi: {trouble}") if cfg.gpu_ecc else
                skipped("gpu_ecc", "gpu_ecc: false")]
    else:
        out += [g.judge_count(gpus, cfg.gpus),
                g.judge_ecc(gpus) if cfg.gpu_ecc else skipped("gpu_ecc", "gpu_ecc: false")]
    if not cfg.gpu_xid:
        return [*out, skipped("gpu_xid", "gpu_xid: false")]
    log = node.run(g.JOURNAL_KERNEL, budget.left(SLURM_RESERVE_S), keep=g.XID_MARK)
    trouble = log.trouble(g.JOURNAL_KERNEL)
    out.append(error("gpu_xid", f"kernel log: {trouble}") if trouble
               else g.judge_xids(g.parse_xids(log.stdout), cfg.xid_allowed))
    return out


def _ib_ports(cfg: HealthConfig, node: Node) -> ItemResult:
    if not cfg.ib_ports:
        return skipped("ib_ports", "no InfiniBand port configured (ib_ports: [])")
    problems = []
    for p in cfg.ib_ports:
        base = f"/sys/class/infiniband/{p.device}/ports/{p.port}"
        try:
            n.judge_ib_port(p.device, p.port, p.rate_gbps, node.read(f"{base}/state"),
                            node.read(f"{base}/rate"))
        except n.PortProblem as exc:
            problems.append(exc)
    return n.judge_ib_ports(problems, len(cfg.ib_ports))


def _mounts(cfg: HealthConfig, node: Node) -> ItemResult:
    if not cfg.mounts:
        return skipped("mounts", "no mount configured (mounts: [])")
    text = node.read("/proc/self/mountinfo")
    if text is None:
        return error("mounts", "/proc/self/mountinfo is unreadable")
    try:
        return n.judge_mounts(n.parse_mountinfo(text), cfg.mounts)
    except ValueError as exc:
        return error("mounts", f"/proc/self/mountinfo: {exc}")


def _memlock(cfg: HealthConfig, node: Node, budget: Budget) -> ItemResult:
    """slurmd's limits: the MainPID systemd gives for its unit, checked to be slurmd (not
    SlurmdPidFile: Debian 13's SLURM 24.11, started by systemd, left none in the molecule
    scenario)."""
    if cfg.memlock_min is None:
        return skipped("memlock", "memlock_min: null")
    argv = ["systemctl", "show", "--property=MainPID", "--value", "--", cfg.slurmd_unit]
    ran = node.run(argv, budget.left(SLURM_RESERVE_S))
    trouble = ran.trouble(argv)
    if trouble:
        return error("memlock", trouble)
    pid = ran.stdout.strip()
    if not pid.isdigit() or len(pid) > 9 or pid == "0":
        return error("memlock", f"{cfg.slurmd_unit}: no main pid ({pid[:20]!r}): is slurmd up?")
    comm = (node.read(f"/proc/{pid}/comm") or "").strip()
    if comm != "slurmd":
        return error("memlock", f"main pid {pid} of {cfg.slurmd_unit} is "
                     f"{comm or 'not running'!r}, not slurmd")
    limits = node.read(f"/proc/{pid}/limits")
    try:
        soft, hard = n.parse_memlock(limits or "")
    except ValueError as exc:
        return error("memlock", f"/proc/{pid}/limits: {exc}")
    return n.judge_memlock(soft, hard, cfg.memlock_min, f"slurmd (pid {pid})")


def _units(cfg: HealthConfig, node: Node, budget: Budget) -> ItemResult:
    if cfg.units:
        argv = ["systemctl", "is-active", "--", *cfg.units]
        active = node.run(argv, budget.left(SLURM_RESERVE_S))
        if active.rc is None:  # is-active exits 3 when a unit is not active: not trouble
            return error("systemd_units", f"{active.trouble(argv)}")
        states = active.stdout
    else:
        states = ""
    failed = node.run(n.SYSTEMCTL_FAILED, budget.left(SLURM_RESERVE_S))
    trouble = failed.trouble(n.SYSTEMCTL_FAILED)
    if trouble:
        return error("systemd_units", trouble)
    return n.judge_units(cfg.units, states, failed.stdout, cfg.failed_units_allowed)


def run_items(cfg: HealthConfig, node: Node, budget: Budget) -> list[ItemResult]:
    """Every item, in :data:`~rackgate.health.ITEMS` order."""
    return [*_gpu_items(cfg, node, budget), _ib_ports(cfg, node), _mounts(cfg, node),
            _memlock(cfg, node, budget), _units(cfg, node, budget)]


def slurm_state(node_name: str, node: Node, budget: Budget) -> NodeState | None:
    """The node's state and reason as slurmctld sees them; ValueError when sinfo fails."""
    argv = sinfo_argv([node_name])
    ran = node.run(argv, budget.left())
    trouble = ran.trouble(argv)
    if trouble:
        raise ValueError(trouble)
    return parse_states(ran.stdout).get(node_name)


def apply(action: str, node_name: str, reason: str | None, node: Node,
          budget: Budget) -> str | None:
    """Run the drain or resume; None when it worked, else what went wrong."""
    if action == "drain" and reason is not None:
        argv = drain_argv(node_name, reason)
    elif action == "resume":
        argv = resume_argv(node_name)
    else:
        return None
    return node.run(argv, budget.left()).trouble(argv)


def read_record(root: Path) -> str | None:
    """The reason the health check recorded when it last drained the node
    (:data:`~rackgate.health.RECORD` under ``root``); None when there is none. OSError when
    it cannot be read."""
    path = root / RECORD.lstrip("/")
    try:
        text = path.read_bytes()[:1024].decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    return text.rstrip("\n") or None


def write_record(root: Path, reason: str | None) -> None:
    """Record ``reason`` before the health check drains with it, or remove the record
    (``reason`` None) once it resumed the node. OSError when it cannot."""
    path = root / RECORD.lstrip("/")
    if reason is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write(path, (reason + "\n").encode("utf-8"), mode=0o600)


def write_textfile(directory: Path, name: str, text: str) -> None:
    """Write ``directory/name`` (:func:`rackgate.exposition.write_textfile`): checked with
    promtool's rules first (ExpositionError, a ValueError, and the old file stays), then
    atomically (a temporary file in the same directory, synced, then a rename), mode 0644
    so that node_exporter reads it. OSError when it cannot be written."""
    exposition.write_textfile(directory / name, text, 0o644)
