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
  under the node lock wrapper (``collect.task.LOCK_SCRIPT``); a command that found the
  lock held by another run (rc ``LOCK_BUSY_RC``) is recorded as ``not_run``.
- **Nothing outlives an interrupted collection.** ansible-playbook starts through a small
  wrapper that records its pid and start time in the run directory
  (``collect.processes.RECORD_NAME``) and asks the kernel to SIGTERM it if rackgate dies;
  every process of the collection carries ``RACKGATE_COLLECT=<token>`` in its environment.
  On a stop (SIGTERM/SIGINT), on any exception and on ``--resume`` after a crash,
  ``collect.processes`` ends that process and every process carrying the token (SIGTERM,
  bounded wait, SIGKILL), and :func:`release_nodes` ends this run's commands still running
  on the nodes. Every wait is bounded.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from rackgate.checks.base import SECRET_FILE
from rackgate.collect.processes import (
    RECORD_NAME,
    TOKEN_VAR,
    boot_id,
    end_processes,
    private_dir,
)
from rackgate.collect.task import (
    KILL_AFTER_S,
    KILLED_RC,
    LOCK_BUSY_RC,
    TIMEOUT_RC,
    Stop,
    Task,
    run_token,
    under_lock,
    wrapped,
)
from rackgate.store.evidence import EvidenceStore

COLLECT_PLAYBOOK = Path(__file__).parent / "playbooks" / "collect.yml"


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


def ansible_error(res: Mapping[str, Any], default: str = "") -> str:
    """Ansible's own words on an item or task: the first lines of its ``msg`` and, when it
    could not run its module on the host, the module's stderr (else its stdout) on a line
    of its own after ``module stderr: `` (``judge.evidence`` reads it); plain, bounded.

    >>> ansible_error({"msg": "MODULE FAILURE", "module_stderr": "pyenv: python3: not found"})
    'MODULE FAILURE\\nmodule stderr: pyenv: python3: not found'
    """
    said = "\n".join(line[:300] for line in
                     plain(str(res.get("msg") or default)).strip().splitlines()[:5])
    err, out = (plain(str(res.get(k) or "")).strip() for k in ("module_stderr", "module_stdout"))
    if err or out:
        said += f"\nmodule {'stderr' if err else 'stdout'}: {(err or out)[-1500:]}"
    return said.strip()


class _Recorder:
    def __init__(self, tasks: Sequence[Task], store: EvidenceStore, progress: ProgressFn,
                 ran: dict[tuple[str, str], tuple[str, ...]], keep: bool = False):
        self.pending = {(t.host, t.check): t for t in tasks}
        self.store = store
        self.progress = progress
        self.ran = ran  # what was handed to Ansible, per (host, check)
        self.keep = keep  # ansible-runner keeps the events on disk (--keep-artifacts)

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
        message = ansible_error(res)
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
            self.host_failed(host, "unreachable", ansible_error(res, "host unreachable"))
        elif kind == "runner_on_failed":
            self.host_failed(host, "not_run", ansible_error(res, "the collection task failed"))
        return self.keep  # whether ansible-runner keeps the event on disk


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


def _playbook(tasks: Sequence[Task], inventory: Sequence[str], run_dir: Path, *,
              forks: int, handler: Callable[[dict[str, Any]], bool],
              stop: Callable[[], bool], who: str, ran: dict[tuple[str, str], tuple[str, ...]],
              keep_to: Path | None = None) -> tuple[str, str]:
    """Run the collect playbook over ``tasks``: (ansible-runner's status, the end of
    Ansible's output). ``ran`` receives the argv handed to Ansible per (host, check);
    ansible-runner's artifacts are copied to ``keep_to`` when given (:func:`copy_artifacts`)."""
    import ansible_runner  # heavy import, kept out of judging and reporting

    token = run_token(run_dir)
    playbook_bin = shutil.which("ansible-playbook")
    if playbook_bin is None:
        return "failed", "ansible-playbook not found: install ansible-core"
    with private_dir() as pdd:
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
        doc = {"host": socket.gethostname(), "boot_id": boot_id(), "token": token,
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
            if keep_to is not None:
                copy_artifacts(pdd / "artifacts", keep_to)
        finally:
            # Normally nothing is left; after a stop, a timeout or an exception this ends
            # Ansible's workers and the commands they started on this host.
            end_processes(_recorded(record, token), token)
            record.unlink(missing_ok=True)
    return status, tail


# Never "command" (it records rackgate's whole environment), nor anything else of the
# private directory: the credential files, the tasks' vars file.
KEPT_ARTIFACTS = ("stdout", "stderr", "rc", "status", "job_events")


def copy_artifacts(artifacts: Path, dest: Path) -> None:
    """Copy the KEPT_ARTIFACTS of each ansible-runner run under ``artifacts`` (its private
    directory's ``artifacts/``) to ``dest/<ident>/``, before that directory is removed."""
    for run in sorted(artifacts.iterdir()) if artifacts.is_dir() else []:
        for name in KEPT_ARTIFACTS:
            src, to = run / name, dest / run.name / name
            to.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, to, dirs_exist_ok=True)
            elif src.is_file():
                shutil.copy2(src, to)


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
            stop: Stop | None = None, keep_artifacts: bool = False) -> str:
    """Run ``tasks`` and store their evidence; returns ansible-runner's final status.
    With ``keep_artifacts``, ansible-runner's artifacts (its stdout, every job event) go to
    ``RUN_DIR/ansible-artifacts/<ident>/`` too.

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
    recorder = _Recorder(tasks, store, progress, {}, keep=keep_artifacts)
    status, tail = _playbook(tasks, inventory, run_dir, forks=forks, handler=recorder.handle,
                             stop=stop, who=who, ran=recorder.ran,
                             keep_to=run_dir / "ansible-artifacts" if keep_artifacts else None)
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
