"""The processes and private directories of a collection on the control host, and how
they are ended: nothing outlives an interrupted collection.

ansible-playbook starts through a small wrapper (``collect.ansible``) that records its pid
and start time in the run directory (:data:`RECORD_NAME`); every process of the collection
carries ``RACKGATE_COLLECT=<token>`` in its environment. On a stop, on any exception and on
``--resume`` after a crash, :func:`end_collection` / :func:`end_processes` end that process
and every process carrying the token (SIGTERM, bounded wait, SIGKILL). Every wait is
bounded; a recycled pid is never signalled (pidfd plus start time).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from rackgate.commands.task import run_token
from rackgate.documents import load_json

RECORD_NAME = "collector.json"  # in the run directory while a collection runs
TOKEN_VAR = "RACKGATE_COLLECT"
GRACE_S = 10.0  # SIGTERM, then this long, then SIGKILL


def _stat(pid: int) -> tuple[int, int] | None:
    """(session id, start time in clock ticks since boot) of a live process, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(") ", 1)[-1].split()
    if len(fields) < 20 or fields[0] == "Z":
        return None
    return int(fields[3]), int(fields[19])


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _carrying(token: str) -> dict[int, int]:
    """pid -> start time of every other live process whose environment has our token."""
    mark = f"{TOKEN_VAR}={token}".encode()
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        if mark in env.split(b"\0"):
            st = _stat(int(entry.name))
            if st is not None:
                found[int(entry.name)] = st[1]
    return found


def _signal(pid: int, start: int, sig: int) -> bool:
    """Send ``sig`` to ``pid`` only if it is still the process that started at ``start``
    (a pidfd pins it between the check and the signal: a recycled pid is never hit)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        st = _stat(pid)
        if st is None or st[1] != start:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def end_processes(victims: Mapping[int, int], token: str | None = None,
                  grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM ``victims`` (pid -> start time) and every process carrying ``token``;
    after ``grace_s`` SIGKILL what is left. Returns the pids that were signalled."""
    hit: dict[int, int] = {}
    deadline = time.monotonic() + grace_s
    for round_ in range(3):  # processes started meanwhile are caught on the next round
        todo = dict(victims) if round_ == 0 else {}
        if token:
            todo.update(_carrying(token))
        for pid, start in todo.items():
            if pid not in hit and _signal(pid, start, signal.SIGTERM):
                hit[pid] = start
        while time.monotonic() < deadline and any(
                (st := _stat(p)) is not None and st[1] == s for p, s in hit.items()):
            time.sleep(0.05)
        if not todo:
            break
    for pid, start in hit.items():
        _signal(pid, start, signal.SIGKILL)
    until = time.monotonic() + 5
    while time.monotonic() < until and any(
            (st := _stat(p)) is not None and st[1] == s for p, s in hit.items()):
        time.sleep(0.05)
    return sorted(hit)


def end_collection(run_dir: Path) -> list[str]:
    """End what a killed collection into ``run_dir`` left running on this control host
    (its recorded ansible-playbook and every process carrying the run's token) and remove
    its private directory. Returns what was done, for the run's manifest."""
    path = run_dir / RECORD_NAME
    notes: list[str] = []
    try:
        rec = load_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        rec = None
    token = run_token(run_dir)
    victims: dict[int, int] = {}
    if isinstance(rec, dict):
        if rec.get("host") != socket.gethostname():
            notes.append(f"the collection recorded in {path} ran on {rec.get('host')!r}, "
                         f"not on this host: its processes there cannot be ended from here")
        elif rec.get("boot_id") == boot_id() and isinstance(rec.get("pid"), int) \
                and isinstance(rec.get("start"), int):
            victims[rec["pid"]] = rec["start"]
    ended = end_processes(victims, token)
    if ended:
        notes.append(f"ended {len(ended)} process(es) left by an earlier attempt of this "
                     f"run: pid {', '.join(map(str, ended))}")
    if isinstance(rec, dict) and isinstance(rec.get("private_dir"), str) \
            and _orphaned(Path(rec["private_dir"])):
        shutil.rmtree(rec["private_dir"], ignore_errors=True)
    path.unlink(missing_ok=True)
    return notes


OWNER_NAME = "owner.json"  # in each private directory: the rackgate process it belongs to


def _orphaned(path: Path) -> bool:
    """True when ``path`` is a private directory of ours whose rackgate is gone."""
    try:
        if not path.name.startswith("rackgate-runner-") or path.stat().st_uid != os.getuid():
            return False
        owner = load_json((path / OWNER_NAME).read_text(encoding="utf-8"))
        alive = _stat(int(owner["pid"]))
        return not (owner.get("boot_id") == boot_id() and alive is not None
                    and alive[1] == owner["start"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _remove_stale_private_dirs() -> None:
    """Remove private directories (credential files included) left on this host by a
    rackgate that was killed and never resumed: ours, and their owner is gone."""
    for path in Path(tempfile.gettempdir()).glob("rackgate-runner-*"):
        if _orphaned(path):
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def private_dir() -> Iterator[Path]:
    _remove_stale_private_dirs()
    path = Path(tempfile.mkdtemp(prefix="rackgate-runner-"))  # 0700, ours alone
    me = _stat(os.getpid())
    (path / OWNER_NAME).write_text(json.dumps(
        {"pid": os.getpid(), "start": me[1] if me else None, "boot_id": boot_id()}),
        encoding="utf-8")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
