"""What collection runs: a :class:`Task` (one check's argv on one host) and the wrapper it
really runs under (the node lock, then ``timeout``).

Every command on a node (or the launch host) runs under :data:`LOCK_SCRIPT`: it takes
``flock`` on the node's lock file (bounded wait), writes who holds it, and then execs
``timeout``; the lock stays held while the command or anything it left behind lives. A
command of another run waits, then gives up naming the holder (rc :data:`LOCK_BUSY_RC`,
recorded as ``not_run``). A holder from an earlier, killed attempt of the same run (same
:func:`run_token`) is ended first. Pure: no I/O here.
"""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_RC = 124  # timeout(1): the command ran out of time
KILLED_RC = 137  # timeout(1) --kill-after: it ignored SIGTERM too
LOCK_BUSY_RC = 75  # the lock script: the node lock was not taken (EX_TEMPFAIL)
SUPERSEDED_RC = 76  # the lock script: a newer attempt of this run holds the node lock
KILL_AFTER_S = 10
DEFAULT_LOCK_FILE = "/var/lock/rackgate.lock"
LOCK_WAIT_S = 600  # how long a command waits for another run's benchmark on its node

# Run by sh on the node: "$1" lock file, "$2" seconds to wait, "$3" RUN@ATTEMPT (the run
# token, and the collection's start in ns: see attempt_token), "$4" who, then the command
# (timeout ...). Fixed text: everything variable is a positional parameter, never part of
# the script. The lock fd (9) is inherited by the command, so the lock is held for as long
# as the command, or anything it left behind, lives. A holder of an earlier attempt of the
# same run is ended; a holder of a newer attempt means this attempt was left behind (its
# rackgate was killed, a --resume runs now): it stops (SUPERSEDED_RC), never fights it.
LOCK_SCRIPT = r"""set -f
lock=$1 wait_s=$2 token=${3%@*} at=${3#*@} who=$4
shift 4
start_of() {
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  s=${s##*) }; set -- $s; printf %s "${20}"
}
after() {
  w=$1; shift
  while [ $# -gt 1 ]; do [ "$1" = "$w" ] && { printf %s "$2"; return 0; }; shift; done
}
if ! command -v flock >/dev/null 2>&1; then
  echo "rackgate: node lock: flock(1) is not installed on this node (util-linux)" >&2
  exit 75
fi
if ! ( : >>"$lock" ) 2>/dev/null; then
  echo "rackgate: node lock: cannot open $lock for writing" >&2; exit 75
fi
exec 9>>"$lock"
if ! flock -n 9; then
  held=$(cat "$lock" 2>/dev/null)
  case " $held " in
  *" token $token "*)
    hat=$(after attempt $held)
    if [ -n "$hat" ] && [ "$hat" -gt "$at" ] 2>/dev/null; then
      echo "rackgate: node lock: a newer attempt of this run holds $lock; this" \
        "attempt stops" >&2
      exit 76
    fi
    pg=$(after pgid $held); st=$(after start $held)
    if [ -n "$pg" ] && [ -n "$st" ] && [ "$(start_of "$pg")" = "$st" ]; then
      echo "rackgate: ending process group $pg, left running on this node" \
        "by an earlier attempt of this run" >&2
      kill -s TERM -- "-$pg" 2>/dev/null
      flock -w 15 9 || kill -s KILL -- "-$pg" 2>/dev/null
    fi ;;
  esac
  t0=$(date +%s)
  if ! flock -w "$wait_s" 9; then
    echo "rackgate: node lock $lock is held by ${held:-an unknown process};" \
      "gave up after $wait_s s" >&2
    exit 75
  fi
  [ -z "$held" ] || echo "rackgate: waited $(( $(date +%s) - t0 )) s for node lock" \
    "$lock, held by $held" >&2
fi
printf 'pgid %s start %s token %s attempt %s since %s: %s\n' "$$" "$(start_of $$)" \
  "$token" "$at" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$who" >"$lock"
exec "$@"
"""



@dataclass(frozen=True)
class Task:
    host: str
    check: str
    argv: tuple[str, ...]
    timeout_s: int
    on_control: bool = False  # run on the control host (BMC queries), not on the node
    # inventory variable holding the credential the command reads from the file that
    # SECRET_FILE stands for in argv (resolved, vault included, by Ansible on the control
    # host only: the value never passes through rackgate)
    secret_var: str | None = None
    # the node's lock file (node and launch-host commands; never on the control host);
    # None: no lock
    lock_file: str | None = DEFAULT_LOCK_FILE
    lock_wait_s: int = LOCK_WAIT_S


def attempt_token(run_dir: Path) -> str:
    """What a collection's node lock wrappers carry: ``RUN@ATTEMPT``, the run's token and
    this collection's start (ns), so a newer attempt of a run ends what an older one left
    running and an older one, left behind, gives way to a newer one."""
    return f"{run_token(run_dir)}@{time.time_ns()}"


def run_token(run_dir: Path) -> str:
    """What marks this run's processes and node locks: the control host and the run
    directory, so every attempt of one run (``--resume``) shares it and no other does."""
    key = f"{socket.gethostname()}\0{run_dir.resolve()}"
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def wrapped(task: Task, token: str = "-", who: str = "rackgate") -> tuple[str, ...]:
    """The argv that really runs: under the node lock (when the task has one), the
    check's command under timeout(1).

    >>> wrapped(Task("n1", "c", ("echo", "hi"), 5, on_control=True))
    ('timeout', '--kill-after=10', '5', 'echo', 'hi')
    >>> wrapped(Task("n1", "c", ("true",), 5))[3:]
    ('rackgate-node-lock', '/var/lock/rackgate.lock', '600', '-', 'rackgate', 'timeout', \
'--kill-after=10', '5', 'true')
    """
    timed = ("timeout", f"--kill-after={KILL_AFTER_S}", str(task.timeout_s), *task.argv)
    if task.lock_file is None or task.on_control:
        return timed
    return (*_LOCKED, task.lock_file,
            str(task.lock_wait_s), token, _printable(who), *timed)


_LOCKED = ("sh", "-c", LOCK_SCRIPT, "rackgate-node-lock")  # the lock wrapper's first words


def under_lock(argv: Sequence[str]) -> bool:
    """Whether ``argv`` runs under the node lock wrapper (:func:`wrapped`)."""
    return tuple(argv[:4]) == _LOCKED


def check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """The check's own command inside a recorded argv (without the lock and timeout).

    >>> check_argv(wrapped(Task("n1", "c", ("fio", "--x"), 5, lock_file="/l")))
    ('fio', '--x')
    >>> check_argv(("ipmitool", "sdr"))
    ('ipmitool', 'sdr')
    """
    argv = tuple(argv)
    if under_lock(argv):
        argv = argv[8:]
    if argv[:1] == ("timeout",) and len(argv) > 3:
        argv = argv[3:]
    return argv
