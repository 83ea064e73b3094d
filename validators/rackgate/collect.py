"""Collection: run each check's command on its hosts through ansible-runner and store
the raw output as evidence. Collection never decides pass or fail.

One ansible-runner playbook run covers every (host, check) pair: Ansible fans out over
hosts with ``forks``, each host runs its commands one after the other (benchmarks on one
node must not overlap), and every command is wrapped in ``timeout``. Unreachable hosts
and commands that could not run are recorded as such, and the run goes on for the others.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rackgate.evidence import EvidenceStore

COLLECT_PLAYBOOK = Path(__file__).parent / "ansible" / "collect.yml"
TIMEOUT_RC = 124  # timeout(1): the command ran out of time
KILLED_RC = 137  # timeout(1) --kill-after: it ignored SIGTERM too


@dataclass(frozen=True)
class Task:
    host: str
    check: str
    argv: tuple[str, ...]
    timeout_s: int
    on_control: bool = False  # run on the control host (BMC queries), not on the node
    # environment variable -> name of the inventory variable with its value (secrets):
    # resolved by Ansible on the control side, so values never pass through rackgate
    secret_env: tuple[tuple[str, str], ...] = ()


def wrapped(task: Task) -> tuple[str, ...]:
    """The argv that really runs: the check's command under timeout(1)."""
    return ("timeout", "--kill-after=10", str(task.timeout_s), *task.argv)


ProgressFn = Callable[[str, str, str], None]  # host, check, outcome


def _duration(start: str | None, end: str | None) -> float | None:
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    try:
        return round((datetime.strptime(end or "", fmt)
                      - datetime.strptime(start or "", fmt)).total_seconds(), 3)
    except ValueError:
        return None


class _Recorder:
    def __init__(self, tasks: Sequence[Task], store: EvidenceStore, progress: ProgressFn):
        self.pending = {(t.host, t.check): t for t in tasks}
        self.store = store
        self.progress = progress

    def record(self, task: Task, stdout: str, **fields: Any) -> None:
        if self.pending.pop((task.host, task.check), None) is None:
            return
        self.store.write(task.host, task.check, stdout, argv=wrapped(task), **fields)
        self.progress(task.host, task.check, fields["outcome"])

    def item(self, host: str, res: dict[str, Any]) -> None:
        item = res.get("item") or {}
        task = self.pending.get((host, str(item.get("check"))))
        if task is None:
            return
        rc = res.get("rc")
        outcome = "timeout" if rc in (TIMEOUT_RC, KILLED_RC) else "completed"
        message = str(res.get("msg", ""))
        if res.get("unreachable"):
            outcome = "unreachable"
        elif rc is None:  # the module could not run the command at all
            outcome = "not_run"
        elif outcome == "timeout":
            message = f"killed after {task.timeout_s} s (timeout rc {rc})"
        self.record(task, str(res.get("stdout", "")), outcome=outcome, rc=rc,
                    started=res.get("start"), ended=res.get("end"),
                    duration_s=_duration(res.get("start"), res.get("end")),
                    stderr=str(res.get("stderr", ""))[-20000:], message=message)

    def host_failed(self, host: str, outcome: str, message: str) -> None:
        for task in [t for (h, _), t in self.pending.items() if h == host]:
            self.record(task, "", outcome=outcome, rc=None, started=None, ended=None,
                        duration_s=None, stderr="", message=message)

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


def collect(tasks: Sequence[Task], inventory: Sequence[str], store: EvidenceStore, *,
            forks: int = 20, progress: ProgressFn = lambda h, c, o: None) -> str:
    """Run ``tasks`` and store their evidence; returns ansible-runner's final status."""
    import ansible_runner  # heavy import, kept out of judging and reporting

    if not tasks:
        return "successful"
    per_host: dict[str, list[dict[str, Any]]] = {}
    for t in tasks:
        per_host.setdefault(t.host, []).append({"check": t.check, "argv": list(wrapped(t)),
                                                "local": t.on_control,
                                                "env": dict(t.secret_env)})
    recorder = _Recorder(tasks, store, progress)
    with tempfile.TemporaryDirectory(prefix="rackgate-runner-") as pdd:
        envvars = {
            "ANSIBLE_PYTHON_INTERPRETER": os.environ.get("ANSIBLE_PYTHON_INTERPRETER",
                                                         "auto_silent"),
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_TIMEOUT": os.environ.get("ANSIBLE_TIMEOUT", "30"),
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
        }
        result = ansible_runner.run(
            private_data_dir=pdd,
            playbook=str(COLLECT_PLAYBOOK),
            inventory=[str(Path(i).resolve()) for i in inventory],
            limit=",".join(sorted(per_host)),
            extravars={"rackgate_tasks": per_host},
            forks=forks,
            envvars=envvars,
            quiet=True,
            event_handler=recorder.handle,
        )
        status = str(result.status)
        tail = ""
        if recorder.pending:
            stdout_path = Path(pdd) / "artifacts" / str(result.config.ident) / "stdout"
            if stdout_path.is_file():
                tail = stdout_path.read_text(errors="replace")[-600:].strip()
    for (host, _check), _task in list(recorder.pending.items()):
        recorder.host_failed(host, "not_run",
                             f"ansible-runner ended ({status}) without a result for this "
                             f"command{': ' + tail if tail else ''}")
    return status
