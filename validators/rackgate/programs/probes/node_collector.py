"""rackgate's node-side collector, sent to the node as text (``python3 -c``).

Usage: python3 -c <this text> [--records FILE NODE]   (the tasks on standard input)

Runs this node's acceptance commands one after the other, exactly as the collector
hands them to Ansible one by one (each already under rackgate's node lock and
``timeout``), and writes every command's evidence (argv, rc, start, end, stdout, stderr)
as framed lines, as soon as the command has ended. The same program serves both
collection paths:

- Ansible runs it once per host, with ``--records FILE NODE``: the records go to FILE
  (created, never an existing file or a link; mode 0600), which Ansible then fetches to
  the control host. However large the outputs, no Ansible result carries them.
- SLURM runs it as one task per node of one job (NODE is the task's ``SLURMD_NODENAME``):
  the records go to standard output, which srun (``--label``) writes to a file on the
  launch host, every line behind the number of the task that printed it. The ``+begin``
  record names the task (``SLURM_PROCID``), so the control host binds each task's lines
  to the node it ran on (``collect.slurm_records``).

Commands run in ``/`` on both paths (the collector changes to it once its output is open).

Input (``rackgate.node-tasks/1``), zlib-compressed JSON in base64 (SLURM sends it whole
to every node of the job)::

    {"schema": "rackgate.node-tasks/1",
     "argvs": [[argv word, ...], ...],                  each distinct argv once
     "lists": [[["CHECK", argv index, bound_s], ...]],  each distinct list of tasks once
     "nodes": {"NODE": list index}}

Output: one record per command, a node's ``+begin`` first and ``+end`` last, each record
framed as lines of at most about 900 characters (below the 1 KiB SLURM forwards at a
time, so lines of several nodes interleave whole, never mixed)::

    RGEV1 NODE NAME I/N DIGEST CHUNK

where NAME is the check (or ``+begin``/``+end``), the record is zlib-compressed JSON in
base64 cut into N chunks, and DIGEST the first 16 hex digits of the sha256 of the whole
base64 text. A record missing a chunk, or whose digest or JSON does not match, is damaged
evidence on the control host (``collect.framing``), never a result. ``+begin`` holds
``{"checks": [...], "pid": PID, "task": SLURM_PROCID or null}``, ``+end``
``{"done": N, "why": "" or why the collector stopped early}``.

``bound_s`` backs up ``timeout`` (lock wait, timeout, kill-after, a margin): a command
still running then has its process group killed. The collector stops before the next
command when it is orphaned (Ansible or the SLURM step ended) or sent SIGTERM, ending
the running command's process group first, and after a command whose wrapper was killed
from outside (a negative rc): a newer attempt of the same run ended it through the node
lock, and the rest of this attempt must not go on beside that one. Only Python's
standard library is used.
"""

import base64
import contextlib
import datetime
import hashlib
import json
import os
import signal
import subprocess
import sys
import zlib
from collections.abc import Iterator
from typing import Any, NoReturn, TextIO

MARK = "RGEV1"
SCHEMA = "rackgate.node-tasks/1"
CHUNK = 800
KILLED_RC = 137
SUPERSEDED_RC = 76  # the node lock script: a newer attempt of this run holds the node
LOCKED = ("sh", "-c")  # a command under the node lock: sh -c SCRIPT rackgate-node-lock ...
RUNNING: list["subprocess.Popen[bytes]"] = []  # the command now running, for on_term
OUT: list[TextIO] = [sys.stdout]  # where the records go


def frames(node: str, name: str, doc: dict[str, Any]) -> Iterator[str]:
    """``doc`` as framed lines (see the module's docstring), one at a time."""
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    payload = base64.b64encode(zlib.compress(raw, 6))
    del raw
    digest = hashlib.sha256(payload).hexdigest()[:16]
    count = max(1, -(-len(payload) // CHUNK))
    for i in range(count):
        part = payload[i * CHUNK:(i + 1) * CHUNK].decode("ascii")
        yield f"{MARK} {node} {name} {i + 1}/{count} {digest} {part}"


def frame(node: str, name: str, doc: dict[str, Any]) -> list[str]:
    """``doc`` as framed lines, in a list."""
    return list(frames(node, name, doc))


def emit(node: str, name: str, doc: dict[str, Any]) -> None:
    for line in frames(node, name, doc):
        OUT[0].write(line + "\n")
    OUT[0].flush()


def now() -> str:
    # the format of Ansible's command module (its start and end), in local time
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")


def text(data: bytes) -> str:
    # as Ansible's command module returns it: trailing newlines stripped
    return data.decode("utf-8", errors="replace").rstrip("\r\n")


def end_group(proc: "subprocess.Popen[bytes]", sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, sig)


def run(argv: list[str], bound_s: float) -> dict[str, Any]:
    """One command's record. It runs in a session of its own, so the node lock's record
    of its process group (pgid = its pid) is right and the group can be ended whole."""
    start = now()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return {"argv": argv, "rc": None, "start": start, "end": now(), "stdout": "",
                "stderr": f"rackgate node collector: cannot start {argv[0]}: {exc}"}
    RUNNING[:] = [proc]
    try:
        out, err = proc.communicate(timeout=bound_s)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        end_group(proc)
        out, err = proc.communicate()
        rc = KILLED_RC  # as timeout(1) --kill-after reports a command it had to kill
        err += (f"\nrackgate node collector: still running after its bound of {bound_s} s;"
                f" its process group was killed").encode()
    finally:
        RUNNING[:] = []
    return {"argv": argv, "rc": rc, "start": start, "end": now(), "stdout": text(out),
            "stderr": text(err)}


def superseded(argv: list[str]) -> bool:
    """Whether a newer attempt of this run has held this command's node lock since: the
    lock file keeps its last holder's record (``token RUN attempt NS``), and the command's
    argv carries this attempt's ``RUN@NS`` (commands/task.py's lock wrapper)."""
    if tuple(argv[:2]) != LOCKED or len(argv) < 7 or argv[3] != "rackgate-node-lock":
        return False
    run, _, mine = argv[6].partition("@")
    try:
        with open(argv[4], encoding="utf-8", errors="replace") as fh:
            words = fh.read().split()
    except OSError:
        return False
    held = {words[i]: words[i + 1] for i in range(len(words) - 1)
            if words[i] in ("token", "attempt")}
    try:
        return held.get("token") == run and int(held.get("attempt", "0")) > int(mine)
    except ValueError:
        return False


def on_term(signum: int, frame_: object) -> NoReturn:
    for proc in RUNNING:
        end_group(proc, signal.SIGTERM)
    sys.exit(143)


def main(args: list[str]) -> None:
    parent = os.getppid()
    signal.signal(signal.SIGTERM, on_term)
    try:  # SIGTERM when the parent (Ansible's module, slurmstepd) dies: PR_SET_PDEATHSIG
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))
    except (OSError, AttributeError):
        pass
    records = args[1] if args[:1] == ["--records"] and len(args) == 3 else None
    if args and records is None:
        sys.exit("rackgate node collector: usage: [--records FILE NODE]")
    node = args[2] if records else os.environ.get("SLURMD_NODENAME", "")
    if not node:
        sys.exit("rackgate node collector: no node name (argument or SLURMD_NODENAME)")
    try:
        spec = json.loads(zlib.decompress(base64.b64decode(sys.stdin.read().strip())))
        if spec.get("schema") != SCHEMA:
            raise ValueError(f"schema {spec.get('schema')!r}, not {SCHEMA}")
        argvs, tasks = spec["argvs"], spec["lists"][spec["nodes"][node]]
    except KeyError:
        sys.exit(f"rackgate node collector: node {node} has no tasks in its input")
    except (ValueError, TypeError, AttributeError, IndexError, zlib.error) as exc:
        sys.exit(f"rackgate node collector: unreadable input: {exc}")
    if records:
        try:
            fd = os.open(records, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o600)
        except OSError as exc:
            sys.exit(f"rackgate node collector: cannot create {records}: {exc}")
        OUT[0] = os.fdopen(fd, "w", encoding="utf-8", buffering=1 << 16)
    os.chdir("/")
    task = os.environ.get("SLURM_PROCID", "") if not records else ""
    emit(node, "+begin", {"checks": [t[0] for t in tasks], "pid": os.getpid(),
                          "task": int(task) if task.isdigit() else None})
    for done, (check, index, bound_s) in enumerate(tasks):
        if os.getppid() != parent:
            emit(node, "+end", {"done": done, "why": "orphaned: its parent ended"})
            sys.exit(143)
        if superseded(argvs[index]):
            emit(node, "+end", {"done": done, "why": "a newer attempt of this run has held "
                                "the node lock since: this one stops"})
            sys.exit(143)
        record = run(argvs[index], bound_s)
        emit(node, check, record)
        rc = record["rc"]
        if isinstance(rc, int) and (rc < 0 or rc == SUPERSEDED_RC):
            # its wrapper (timeout) was killed from outside (by a newer attempt of this run,
            # through the node lock, or by a stop), or the lock found a newer attempt
            why = (f"{check} was ended by signal {-rc} from outside" if rc < 0 else
                   f"a newer attempt of this run holds the node lock ({check})")
            emit(node, "+end", {"done": done + 1, "why": f"{why}; the rest was not run"})
            sys.exit(143)
    emit(node, "+end", {"done": len(tasks), "why": ""})


if __name__ == "__main__":
    main(sys.argv[1:])
