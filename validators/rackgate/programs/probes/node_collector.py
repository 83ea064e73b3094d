"""rackgate's node-side collector, sent to the node as text (``python3 -c``).

Usage: python3 -c <this text> [NODE]    (the tasks, as JSON, on standard input)

Runs this node's acceptance commands one after the other, exactly as the collector
hands them to Ansible one by one (each already under rackgate's node lock and
``timeout``), and prints every command's evidence (argv, rc, start, end, stdout, stderr)
as framed lines on standard output, as soon as the command has ended. The same program
serves both collection paths: Ansible runs it once per host (NODE given), and SLURM runs
it as one task per node of one job (NODE is the task's ``SLURMD_NODENAME``).

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
evidence on the control host (``collect.framing``), never a result.

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
from typing import Any, NoReturn

MARK = "RGEV1"
SCHEMA = "rackgate.node-tasks/1"
CHUNK = 800
KILLED_RC = 137
SUPERSEDED_RC = 76  # the node lock script: a newer attempt of this run holds the node
LOCKED = ("sh", "-c")  # a command under the node lock: sh -c SCRIPT rackgate-node-lock ...
RUNNING: list["subprocess.Popen[bytes]"] = []  # the command now running, for on_term


def frame(node: str, name: str, doc: dict[str, Any]) -> list[str]:
    """``doc`` as framed lines (see the module's docstring)."""
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    payload = base64.b64encode(zlib.compress(raw, 6)).decode("ascii")
    digest = hashlib.sha256(payload.encode("ascii")).hexdigest()[:16]
    parts = [payload[i:i + CHUNK] for i in range(0, len(payload), CHUNK)] or [""]
    return [f"{MARK} {node} {name} {i}/{len(parts)} {digest} {part}"
            for i, part in enumerate(parts, 1)]


def emit(node: str, name: str, doc: dict[str, Any]) -> None:
    sys.stdout.write("".join(line + "\n" for line in frame(node, name, doc)))
    sys.stdout.flush()


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
    argv carries this attempt's ``RUN@NS`` (collect/task.py's lock wrapper)."""
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
    node = args[0] if args else os.environ.get("SLURMD_NODENAME", "")
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
    emit(node, "+begin", {"checks": [t[0] for t in tasks], "pid": os.getpid()})
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
