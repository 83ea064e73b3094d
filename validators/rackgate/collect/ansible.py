"""Collection: run each check's command on its hosts through ansible-runner and store
the raw output as evidence. Collection never decides pass or fail.

One ansible-runner playbook run covers every (host, check) pair: Ansible fans out over
hosts with ``forks``, each host runs its commands one after the other, and every command
is wrapped in ``timeout``. Unreachable hosts and commands that could not run are recorded
as such, and the run goes on for the others.

What the collector guarantees, and how:

- **Data never executes.** The tasks reach Ansible in a vars file whose every string is
  tagged ``!unsafe`` (``-e @file``), so nothing in an argv is templated, and the evidence
  records the argv the command module ran (its ``cmd``).
- **Secrets stay out of argv, environments and logs.** A check that needs a credential
  names the inventory variable (:attr:`Task.secret_var`) and puts :data:`SECRET_FILE` in
  its argv where the command takes a password file (``ipmitool -f``, ``rackgate.programs.redfish
  --password-file``). The collector replaces that word with the path of a file in its
  private 0700 directory; Ansible writes the value there (``no_log``, mode 0600) and
  removes it after the host's commands, and the directory goes when collection ends (after
  a SIGKILL: at ``--resume``, or at the next collection on this host).
- **One benchmark per node at a time.** Every command on a node (or the launch host) runs
  under :data:`LOCK_SCRIPT`: it takes ``flock`` on the node's lock file (bounded wait),
  writes who holds it, and then execs ``timeout``; the lock stays held while the command
  or anything it left behind lives. A command of another run waits, then gives up naming
  the holder (rc :data:`LOCK_BUSY_RC`, recorded as ``not_run``). A holder from an earlier,
  killed attempt of the same run (same :func:`run_token`) is ended first.
- **Nothing outlives an interrupted collection.** ansible-playbook starts through a small
  wrapper that records its pid and start time in the run directory
  (:data:`RECORD_NAME`) and asks the kernel to SIGTERM it if rackgate dies; every process
  of the collection carries ``RACKGATE_COLLECT=<token>`` in its environment. On
  :class:`Stop` (SIGTERM/SIGINT), on any exception and on ``--resume`` after a crash,
  :func:`end_collection` ends that process and every process carrying the token
  (SIGTERM, bounded wait, SIGKILL), and :func:`release_nodes` ends this run's commands
  still running on the nodes. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from rackgate.checks.base import SECRET_FILE
from rackgate.store.evidence import EvidenceStore

COLLECT_PLAYBOOK = Path(__file__).parent / "playbooks" / "collect.yml"
TIMEOUT_RC = 124  # timeout(1): the command ran out of time
KILLED_RC = 137  # timeout(1) --kill-after: it ignored SIGTERM too
LOCK_BUSY_RC = 75  # the lock script: the node lock was not taken (EX_TEMPFAIL)
KILL_AFTER_S = 10
DEFAULT_LOCK_FILE = "/var/lock/rackgate.lock"
LOCK_WAIT_S = 600  # how long a command waits for another run's benchmark on its node
RECORD_NAME = "collector.json"  # in the run directory while a collection runs
TOKEN_VAR = "RACKGATE_COLLECT"
GRACE_S = 10.0  # SIGTERM, then this long, then SIGKILL

# Run by sh on the node: "$1" lock file, "$2" seconds to wait, "$3" run token, "$4" who,
# then the command (timeout ...). Fixed text: everything variable is a positional
# parameter, never part of the script. The lock fd (9) is inherited by the command, so
# the lock is held for as long as the command, or anything it left behind, lives.
LOCK_SCRIPT = r"""set -f
lock=$1 wait_s=$2 token=$3 who=$4
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
printf 'pgid %s start %s token %s since %s: %s\n' "$$" "$(start_of $$)" "$token" \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$who" >"$lock"
exec "$@"
"""


class Interrupted(RuntimeError):
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


ProgressFn = Callable[[str, str, str], None]  # host, check, outcome


def _duration(start: str | None, end: str | None) -> float | None:
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    try:
        return round((datetime.strptime(end or "", fmt)
                      - datetime.strptime(start or "", fmt)).total_seconds(), 3)
    except ValueError:
        return None


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def plain(text: str) -> str:
    """``text`` without terminal escapes (Ansible's colours) or carriage returns."""
    return _ANSI.sub("", text)


class _Recorder:
    def __init__(self, tasks: Sequence[Task], store: EvidenceStore, progress: ProgressFn,
                 ran: dict[tuple[str, str], tuple[str, ...]]):
        self.pending = {(t.host, t.check): t for t in tasks}
        self.store = store
        self.progress = progress
        self.ran = ran  # what was handed to Ansible, per (host, check)

    def record(self, task: Task, stdout: str, argv: Sequence[str] | None = None,
               **fields: Any) -> None:
        if self.pending.pop((task.host, task.check), None) is None:
            return
        self.store.write(task.host, task.check, stdout,
                         argv=tuple(argv or self.ran[(task.host, task.check)]), **fields)
        self.progress(task.host, task.check, fields["outcome"])

    def item(self, host: str, res: dict[str, Any]) -> None:
        item = res.get("item") or {}
        task = self.pending.get((host, str(item.get("check"))))
        if task is None:
            return
        rc = res.get("rc")
        stderr = plain(str(res.get("stderr", "")))
        outcome = "timeout" if rc in (TIMEOUT_RC, KILLED_RC) else "completed"
        message = plain(str(res.get("msg", "")))
        if res.get("unreachable"):
            outcome = "unreachable"
        elif rc is None:  # the module could not run the command at all
            outcome = "not_run"
        elif rc == LOCK_BUSY_RC and under_lock(self.ran[(task.host, task.check)]) \
                and "rackgate: node lock" in stderr:
            outcome = "not_run"  # the node lock was not taken: the command never started
            message = next(line for line in stderr.splitlines() if "rackgate: node lock" in line)
        elif outcome == "timeout":
            message = f"killed after {task.timeout_s} s (timeout rc {rc})"
        cmd = res.get("cmd")
        ran = cmd if isinstance(cmd, list) and all(isinstance(a, str) for a in cmd) else None
        self.record(task, str(res.get("stdout", "")), argv=ran, outcome=outcome, rc=rc,
                    started=res.get("start"), ended=res.get("end"),
                    duration_s=_duration(res.get("start"), res.get("end")),
                    stderr=stderr[-20000:], message=message)

    def host_failed(self, host: str, outcome: str, message: str) -> None:
        for task in [t for (h, _), t in self.pending.items() if h == host]:
            self.record(task, "", outcome=outcome, rc=None, started=None, ended=None,
                        duration_s=None, stderr="", message=plain(message))

    def handle(self, event: dict[str, Any]) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        host = data.get("host", "")
        res = data.get("res", {}) or {}
        if kind in ("runner_item_on_ok", "runner_item_on_failed"):
            self.item(host, res)
        elif kind == "runner_on_unreachable":
            self.host_failed(host, "unreachable", str(res.get("msg", "host unreachable")))
        elif kind == "runner_on_failed":
            self.host_failed(host, "not_run", str(res.get("msg", "the collection task failed")))
        return False  # ansible-runner need not keep the event on disk


# ------------------------------------------------------------------ processes

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


def _boot_id() -> str:
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
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        rec = None
    token = run_token(run_dir)
    victims: dict[int, int] = {}
    if isinstance(rec, dict):
        if rec.get("host") != socket.gethostname():
            notes.append(f"the collection recorded in {path} ran on {rec.get('host')!r}, "
                         f"not on this host: its processes there cannot be ended from here")
        elif rec.get("boot_id") == _boot_id() and isinstance(rec.get("pid"), int) \
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


_LAUNCHER = """#!{python}
# rackgate's ansible-playbook launcher (rackgate/collect/ansible.py): asks for SIGTERM when
# rackgate dies, records this pid and start time in the run directory, execs Ansible.
import ctypes, json, os, signal, socket, sys
RECORD, PARENT, DOC, PLAYBOOK = {record!r}, {parent!r}, {doc!r}, {playbook!r}
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass
if os.getppid() != PARENT:
    sys.exit("rackgate ended before Ansible started")
with open("/proc/self/stat") as fh:
    DOC["start"] = int(fh.read().rsplit(") ", 1)[1].split()[19])
DOC["pid"] = os.getpid()
with open(RECORD + ".tmp", "w") as fh:
    json.dump(DOC, fh)
os.replace(RECORD + ".tmp", RECORD)
os.execv(PLAYBOOK, [PLAYBOOK, *sys.argv[1:]])
"""


# ------------------------------------------------------------------ the playbook run

class _UnsafeStr(str):
    pass


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    _UnsafeStr, lambda d, s: d.represent_scalar("!unsafe", str(s), style='"'))


def _unsafe(value: Any) -> Any:
    """``value`` with every string (not mapping keys) tagged ``!unsafe`` when dumped."""
    if isinstance(value, str):
        return _UnsafeStr(value)
    if isinstance(value, Mapping):
        return {str(k): _unsafe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_unsafe(v) for v in value]
    return value


def _bound_s(tasks: Sequence[Task], forks: int) -> int:
    """An upper bound for the whole playbook run: each host's commands one after the
    other (lock wait, timeout, kill-after, a minute of connection and module overhead),
    hosts ``forks`` at a time."""
    per_host: dict[str, int] = {}
    for t in tasks:
        per_host[t.host] = per_host.get(t.host, 0) + t.timeout_s + KILL_AFTER_S + 60 + (
            t.lock_wait_s + 30 if t.lock_file and not t.on_control else 0)
    return math.ceil(len(per_host) / max(1, forks)) * max(per_host.values()) + 120


OWNER_NAME = "owner.json"  # in each private directory: the rackgate process it belongs to


def _orphaned(path: Path) -> bool:
    """True when ``path`` is a private directory of ours whose rackgate is gone."""
    try:
        if not path.name.startswith("rackgate-runner-") or path.stat().st_uid != os.getuid():
            return False
        owner = json.loads((path / OWNER_NAME).read_text(encoding="utf-8"))
        alive = _stat(int(owner["pid"]))
        return not (owner.get("boot_id") == _boot_id() and alive is not None
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
def _private_dir() -> Iterator[Path]:
    _remove_stale_private_dirs()
    path = Path(tempfile.mkdtemp(prefix="rackgate-runner-"))  # 0700, ours alone
    me = _stat(os.getpid())
    (path / OWNER_NAME).write_text(json.dumps(
        {"pid": os.getpid(), "start": me[1] if me else None, "boot_id": _boot_id()}),
        encoding="utf-8")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _playbook(tasks: Sequence[Task], inventory: Sequence[str], run_dir: Path, *,
              forks: int, handler: Callable[[dict[str, Any]], bool],
              stop: Callable[[], bool], who: str,
              ran: dict[tuple[str, str], tuple[str, ...]]) -> tuple[str, str]:
    """Run the collect playbook over ``tasks``: (ansible-runner's status, the end of
    Ansible's output). ``ran`` receives the argv handed to Ansible per (host, check)."""
    import ansible_runner  # heavy import, kept out of judging and reporting

    token = run_token(run_dir)
    playbook_bin = shutil.which("ansible-playbook")
    if playbook_bin is None:
        return "failed", "ansible-playbook not found: install ansible-core"
    with _private_dir() as pdd:
        secrets = pdd / "secrets"
        secrets.mkdir(mode=0o700)
        per_host: dict[str, list[dict[str, Any]]] = {}
        for n, t in enumerate(tasks):
            argv = wrapped(t, token, who)
            item: dict[str, Any] = {"check": t.check, "local": t.on_control}
            if t.secret_var:
                path = str(secrets / f"{n}.secret")
                argv = tuple(path if a == SECRET_FILE else a for a in argv)
                item |= {"secret_var": t.secret_var, "secret_file": path}
            item["argv"] = list(argv)
            ran[(t.host, t.check)] = argv
            per_host.setdefault(t.host, []).append(item)
        vars_file = pdd / "rackgate-tasks.yml"
        extra = {"rackgate_tasks": per_host, "rackgate_secret_tmp": str(secrets / "tmp")}
        vars_file.write_text(yaml.dump(_unsafe(extra), Dumper=_Dumper, allow_unicode=True,
                                       width=1 << 20), encoding="utf-8")
        record = run_dir.resolve() / RECORD_NAME
        launcher = pdd / "ansible-playbook"
        doc = {"host": socket.gethostname(), "boot_id": _boot_id(), "token": token,
               "private_dir": str(pdd), "rackgate_pid": os.getpid()}
        launcher.write_text(_LAUNCHER.format(python=sys.executable, record=str(record),
                                             parent=os.getpid(), doc=doc,
                                             playbook=playbook_bin), encoding="utf-8")
        launcher.chmod(0o700)
        (pdd / "tmp").mkdir(mode=0o700)
        envvars = {
            "ANSIBLE_PYTHON_INTERPRETER": os.environ.get("ANSIBLE_PYTHON_INTERPRETER",
                                                         "auto_silent"),
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_TIMEOUT": os.environ.get("ANSIBLE_TIMEOUT", "30"),
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_LOCAL_TEMP": str(pdd / "tmp"),
            TOKEN_VAR: token,
        }
        stopping: list[bool] = []

        def cancel() -> bool:
            if stop() and not stopping:
                stopping.append(True)  # end Ansible gracefully before ansible-runner kills
                end_processes(_recorded(record, token), token)
            return stop()

        status, tail = "failed", ""
        try:
            result = ansible_runner.run(
                private_data_dir=str(pdd),
                binary=str(launcher),
                cmdline=" ".join(shlex.quote(a) for a in
                                 ("-e", f"@{vars_file}", str(COLLECT_PLAYBOOK))),
                inventory=[str(Path(i).resolve()) for i in inventory],
                limit=",".join(sorted(per_host)),
                forks=forks,
                envvars=envvars,
                quiet=True,
                event_handler=handler,
                cancel_callback=cancel,
                timeout=_bound_s(tasks, forks),
            )
            status = str(result.status)
            stdout_path = pdd / "artifacts" / str(result.config.ident) / "stdout"
            if stdout_path.is_file():
                tail = plain(stdout_path.read_text(errors="replace"))[-600:].strip()
        finally:
            # Normally nothing is left; after a stop, a timeout or an exception this ends
            # Ansible's workers and the commands they started on this host.
            end_processes(_recorded(record, token), token)
            record.unlink(missing_ok=True)
    return status, tail


def _recorded(record: Path, token: str) -> dict[int, int]:
    try:
        rec = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if isinstance(rec, dict) and rec.get("token") == token and isinstance(rec.get("pid"), int) \
            and isinstance(rec.get("start"), int):
        return {rec["pid"]: rec["start"]}
    return {}


def collect(tasks: Sequence[Task], inventory: Sequence[str], store: EvidenceStore, *,
            forks: int = 20, progress: ProgressFn = lambda h, c, o: None,
            stop: Stop | None = None) -> str:
    """Run ``tasks`` and store their evidence; returns ansible-runner's final status.

    After a stop request nothing is recorded for the commands that had not finished
    (they were not collected: ``--resume`` collects them)."""
    stop = stop or Stop()
    if not tasks:
        return "successful"
    for t in tasks:
        if t.secret_var and SECRET_FILE not in t.argv:
            raise ValueError(f"{t.host} {t.check}: needs {t.secret_var} but its argv names "
                             f"no {SECRET_FILE} for it")
    run_dir = store.run_dir
    who = f"rackgate run {run_dir.name} (control host {socket.gethostname()})"
    recorder = _Recorder(tasks, store, progress, {})
    status, tail = _playbook(tasks, inventory, run_dir, forks=forks, handler=recorder.handle,
                             stop=stop, who=who, ran=recorder.ran)
    if stop():
        return "canceled"
    bound = _bound_s(tasks, forks)
    why = (f"collection stopped after its bound of {bound} s" if status == "timeout" else
           f"ansible-runner ended ({status}) without a result for this command")
    for (host, _check), _task in list(recorder.pending.items()):
        recorder.host_failed(host, "not_run", f"{why}{': ' + tail if tail else ''}")
    return status


def release_nodes(tasks: Sequence[Task], inventory: Sequence[str], run_dir: Path, *,
                  forks: int = 20, wait_s: int = 20, stop: Stop | None = None) -> str:
    """End what this run still runs on the nodes of ``tasks`` (after a stop): on each
    node, a no-op under the node lock, which ends a holder of this run and returns.
    A second stop request (``stop.hurry``) cuts it short."""
    hurry = stop or Stop()
    noop = [replace(t, check="rackgate.release", argv=("true",), timeout_s=10,
                    lock_wait_s=wait_s, secret_var=None)
            for t in {t.host: t for t in tasks if t.lock_file and not t.on_control}.values()]
    if not noop:
        return "successful"
    status, _ = _playbook(noop, inventory, run_dir, forks=forks,
                          handler=lambda e: False, stop=lambda: hurry.hurry,
                          who=f"rackgate run {run_dir.name} (releasing its nodes)", ran={})
    return status
