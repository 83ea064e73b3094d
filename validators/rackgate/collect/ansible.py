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
- **No size limit empties evidence.** ansible-runner empties any event result longer than
  its ``MAX_EVENT_RES`` (700,000 characters): the node collector's records (and a SLURM
  collection job's whole output) never travel in a result, but as files fetched from a
  private directory on their host (``collect.bundle``); a result that was emptied anyway
  (an item's) is recorded as exactly that (``collect.runner_events``).
- **One benchmark per node at a time.** Every command on a node (or the launch host) runs
  under the node lock wrapper (``commands.task.LOCK_SCRIPT``); a command that found the
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

import math
import os
import shlex
import shutil
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from rackgate.checks.shared.base import SECRET_FILE
from rackgate.collect.bundle import Bundle, bundled, job_name, on_host, slurm_job
from rackgate.collect.processes import (
    RECORD_NAME,
    TOKEN_VAR,
    boot_id,
    end_processes,
    private_dir,
)
from rackgate.collect.runner_events import ProgressFn, Recorder, plain
from rackgate.collect.stop import Stop
from rackgate.commands.failure import ControlSideError, ansible_errors, control_failure, hint
from rackgate.commands.task import KILL_AFTER_S, Task, attempt_token, run_token, wrapped
from rackgate.documents import load_json
from rackgate.environment import ansible_env, program
from rackgate.store.evidence import EvidenceStore

COLLECT_PLAYBOOK = Path(__file__).parent / "playbooks" / "collect.yml"


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


# What one more Ansible fork costs the control host, with a margin: measured here (Ansible
# 2.19, local connections, 2026-12-02), the proportional set size of ansible-playbook's
# processes grew by 15 MiB a fork from 5 to 60 forks (131, 414, 962 MiB at 5, 25, 60); an
# ssh client per connection and a node's evidence held until its result is sent add to it.
FORK_MIB = 64
MAX_FORKS = 500  # beyond this the control host's CPUs, not its memory, are the limit


def available_mib() -> int | None:
    """The control host's available memory (``MemAvailable`` of /proc/meminfo), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_forks(hosts: int, mib: int | None = None) -> int:
    """``--forks`` when none is given: one per host, as many as half of the control host's
    available memory holds at :data:`FORK_MIB` each, at most :data:`MAX_FORKS`.

    >>> default_forks(2, 24000), default_forks(10000, 24000), default_forks(10000, 2000)
    (2, 187, 15)
    """
    mib = available_mib() if mib is None else mib
    by_memory = MAX_FORKS if mib is None else max(1, mib // 2 // FORK_MIB)
    return max(1, min(hosts, by_memory, MAX_FORKS))


def _bound_s(tasks: Sequence[Task], forks: int, bundles: Sequence[Bundle] = ()) -> int:
    """An upper bound for the whole playbook run: each host's commands one after the
    other (lock wait, timeout, kill-after, a minute of connection and module overhead;
    a bundle's directory, fetch and removal three more), hosts ``forks`` at a time."""
    per_host: dict[str, int] = {b.host: b.bound_s() + 240 for b in bundles}
    for t in tasks:
        per_host[t.host] = per_host.get(t.host, 0) + t.timeout_s + KILL_AFTER_S + 60 + (
            t.lock_wait_s + 30 if t.lock_file and not t.on_control else 0)
    return math.ceil(len(per_host) / max(1, forks)) * max(per_host.values()) + 120


def _playbook(tasks: Sequence[Task], inventory: Sequence[str], run_dir: Path, *,
              forks: int, handler: Callable[[dict[str, Any]], bool],
              stop: Callable[[], bool], who: str, attempt: str,
              ran: dict[tuple[str, str], tuple[str, ...]], keep_to: Path | None = None,
              bundles: Sequence[Bundle] = (), fetched_to: dict[str, Path] | None = None
              ) -> tuple[str, str]:
    """Run the collect playbook over ``tasks`` (each an Ansible item, under the node lock
    as attempt ``attempt``: :func:`commands.task.attempt_token`) and ``bundles`` (one
    command each, their members wrapped as the same attempt): (ansible-runner's status,
    Ansible's output, plain). Without ansible-playbook or ansible-runner on the control
    host: ControlSideError. ``ran`` receives the argv handed to Ansible per (host,
    check) of ``tasks``, ``fetched_to`` the directory each bundle's files are fetched to
    (in the private directory: gone after the run); ansible-runner's artifacts are copied
    to ``keep_to`` when given (:func:`copy_artifacts`)."""
    try:
        import ansible_runner  # heavy import, kept out of judging and reporting
    except ImportError as exc:
        raise ControlSideError(f"ansible-runner cannot be imported by {sys.executable} on "
                               f"the control host: {exc}") from None

    token = run_token(run_dir)
    playbook_bin = program("ansible-playbook")
    if playbook_bin is None:
        raise ControlSideError("ansible-playbook not found beside rackgate nor on the control "
                               "host's PATH: install ansible-core")
    with private_dir() as pdd:
        secrets = pdd / "secrets"
        secrets.mkdir(mode=0o700)
        per_host: dict[str, list[dict[str, Any]]] = {}
        for n, t in enumerate(tasks):
            argv = wrapped(t, attempt, who)
            item: dict[str, Any] = {"check": t.check, "local": t.on_control}
            if t.secret_var:
                path = str(secrets / f"{n}.secret")
                argv = tuple(path if a == SECRET_FILE else a for a in argv)
                item |= {"secret_var": t.secret_var, "secret_file": path}
            item["argv"] = list(argv)
            ran[(t.host, t.check)] = argv
            per_host.setdefault(t.host, []).append(item)
        vars_file = pdd / "rackgate-tasks.yml"
        fetch = {b.host: pdd / "fetched" / str(n) for n, b in enumerate(bundles)}
        (pdd / "fetched").mkdir(mode=0o700)
        if fetched_to is not None:
            fetched_to.update(fetch)
        extra = {"rackgate_tasks": per_host, "rackgate_secret_tmp": str(secrets / "tmp"),
                 "rackgate_bundles": {b.host: {"argv": list(b.argv), "stdin": b.stdin,
                                               "files": list(b.files),
                                               "fetch_to": str(fetch[b.host])}
                                      for b in bundles}}
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
            **ansible_env(inventory),  # PATH with rackgate's own bin; the demo's settings
        }
        stopping: list[bool] = []

        def cancel() -> bool:
            if stop() and not stopping:
                stopping.append(True)  # end Ansible gracefully before ansible-runner kills
                end_processes(_recorded(record, token), token)
            return stop()

        status, output = "failed", ""
        try:
            result = ansible_runner.run(
                private_data_dir=str(pdd),
                binary=str(launcher),
                cmdline=" ".join(shlex.quote(a) for a in
                                 ("-e", f"@{vars_file}", str(COLLECT_PLAYBOOK))),
                inventory=[str(Path(i).resolve()) for i in inventory],
                limit=",".join(sorted(set(per_host) | {b.host for b in bundles})),
                forks=forks,
                envvars=envvars,
                quiet=True,
                event_handler=handler,
                cancel_callback=cancel,
                timeout=_bound_s(tasks, forks, bundles),
            )
            status = str(result.status)
            stdout_path = pdd / "artifacts" / str(result.config.ident) / "stdout"
            if stdout_path.is_file():
                output = plain(stdout_path.read_text(errors="replace"))[-100_000:]
            if keep_to is not None:
                copy_artifacts(pdd / "artifacts", keep_to)
        finally:
            # Normally nothing is left; after a stop, a timeout or an exception this ends
            # Ansible's workers and the commands they started on this host.
            end_processes(_recorded(record, token), token)
            record.unlink(missing_ok=True)
    return status, output


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
        rec = load_json(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if isinstance(rec, dict) and rec.get("token") == token and isinstance(rec.get("pid"), int) \
            and isinstance(rec.get("start"), int):
        return {rec["pid"]: rec["start"]}
    return {}


def collect(tasks: Sequence[Task], inventory: Sequence[str], store: EvidenceStore, *,
            forks: int = 20, progress: ProgressFn = lambda h, c, o: None,
            stop: Stop | None = None, keep_artifacts: bool = False,
            slurm_host: str | None = None) -> str:
    """Run ``tasks`` and store their evidence; returns ansible-runner's final status.
    Each host's own commands run through the node collector, once per host; with
    ``slurm_host`` (``--via slurm``: the launch host), the nodes' commands run as one SLURM
    job launched there instead (``collect.bundle``). With ``keep_artifacts``,
    ansible-runner's artifacts (its stdout, every job event) go to
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
    attempt = attempt_token(run_dir)  # every node lock wrapper of this collection carries it
    who = f"rackgate run {run_dir.name} (control host {socket.gethostname()})"
    items = [t for t in tasks if not bundled(t)]
    per_host: dict[str, list[Task]] = {}
    for t in tasks:
        if bundled(t):
            per_host.setdefault(t.host, []).append(t)
    made = ([slurm_job(slurm_host, [t for ts in per_host.values() for t in ts], attempt, who)]
            if slurm_host and per_host else
            [on_host(host, ts, attempt, who) for host, ts in per_host.items()])
    ran = {(t.host, t.check): argv for _, members in made for t, argv in members.items()}
    bundles = {b.host: b for b, _ in made}
    recorder = Recorder(tasks, store, progress, ran, keep=keep_artifacts, bundles=bundles)
    status, output = _playbook(items, inventory, run_dir, forks=forks,
                               handler=recorder.handle, stop=stop, who=who, attempt=attempt,
                               ran=recorder.ran, keep_to=run_dir / "ansible-artifacts"
                               if keep_artifacts else None, bundles=list(bundles.values()),
                               fetched_to=recorder.fetched_to)
    if stop():
        return "canceled"
    tail = ansible_errors(output, 1500)
    if recorder.control:
        raise ControlSideError(control_failure(recorder.control, recorder.origins))
    if status == "failed" and recorder.pending and not recorder.reached:
        raise ControlSideError(f"Ansible failed before it reached any host: nothing was "
                               f"collected, so nothing is judged. Ansible said: "
                               f"{tail or 'nothing'}{hint(tail)}")
    bound = _bound_s(items, forks, list(bundles.values()))
    why = (f"collection stopped after its bound of {bound} s" if status == "timeout" else
           f"ansible-runner ended ({status}) without a result for this command")
    for task in list(recorder.pending.values()):
        recorder.failed(task, "not_run", f"{why}{': ' + tail if tail else ''}")
    return status


def release_nodes(tasks: Sequence[Task], inventory: Sequence[str], run_dir: Path, *,
                  forks: int = 20, wait_s: int = 20, stop: Stop | None = None,
                  slurm_host: str | None = None) -> str:
    """End what this run still runs on the nodes of ``tasks`` (after a stop): on each
    node, a no-op under the node lock, which ends a holder of this run and returns; with
    ``slurm_host``, ``scancel`` there ends this run's collection job too.
    A second stop request (``stop.hurry``) cuts it short."""
    hurry = stop or Stop()
    noop = [replace(t, check="rackgate.release", argv=("true",), timeout_s=10,
                    lock_wait_s=wait_s, secret_var=None)
            for t in {t.host: t for t in tasks if t.lock_file and not t.on_control}.values()]
    if slurm_host:
        noop.append(Task(slurm_host, "rackgate.release.job",
                         ("scancel", f"--name={job_name(run_token(run_dir))}"), 30,
                         lock_file=None))
    if not noop:
        return "successful"
    status, _ = _playbook(noop, inventory, run_dir, forks=forks,
                          handler=lambda e: False, stop=lambda: hurry.hurry,
                          who=f"rackgate run {run_dir.name} (releasing its nodes)",
                          attempt=attempt_token(run_dir), ran={})
    return status
