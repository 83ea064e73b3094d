"""Turning ansible-runner's events into evidence: one record per (host, check), whether
the command ran as an Ansible item or through the node collector (``collect.bundle``).

Whatever did not come back is recorded too, never left out: a host Ansible could not
reach (``unreachable``), a module that could not run, a node whose collector never
started (SLURM's reason when the readiness guard left it out), ended early, or returned a
damaged record (``not_run``, naming what happened): each is judged ``error``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from rackgate.collect.bundle import Bundle
from rackgate.collect.framing import Record, decode
from rackgate.collect.task import (
    KILLED_RC,
    LOCK_BUSY_RC,
    SUPERSEDED_RC,
    TIMEOUT_RC,
    Task,
    under_lock,
)
from rackgate.model import last_words
from rackgate.store.evidence import EvidenceStore

ProgressFn = Callable[[str, str, str], None]  # host, check, outcome
BUNDLE_TASK = "Run this host's node commands through rackgate's node collector"
_NOT_READY = re.compile(r"^rackgate-slurm-ready: not run on (\S+): (.*)$", re.M)
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


def duration(start: str | None, end: str | None) -> float | None:
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    try:
        return round((datetime.strptime(end or "", fmt)
                      - datetime.strptime(start or "", fmt)).total_seconds(), 3)
    except ValueError:
        return None


def outcome_of(task: Task, rc: int | None, stderr: str, argv: Sequence[str]
               ) -> tuple[str, str | None]:
    """A finished command's outcome, and rackgate's message on it (None: the runner's)."""
    if rc is None:  # the command could not run at all
        return "not_run", None
    if rc in (LOCK_BUSY_RC, SUPERSEDED_RC) and under_lock(argv) \
            and "rackgate: node lock" in stderr:
        # the node lock was not taken: the command never started
        return "not_run", next(line for line in stderr.splitlines()
                               if "rackgate: node lock" in line)
    if rc in (TIMEOUT_RC, KILLED_RC):
        return "timeout", f"killed after {task.timeout_s} s (timeout rc {rc})"
    return "completed", None


class Recorder:
    """Records the evidence of ``tasks`` from ansible-runner's events (:meth:`handle`);
    ``bundles`` per host run some of them through the node collector."""

    def __init__(self, tasks: Sequence[Task], store: EvidenceStore, progress: ProgressFn,
                 ran: dict[tuple[str, str], tuple[str, ...]], keep: bool = False,
                 bundles: Mapping[str, Bundle] | None = None):
        self.pending = {(t.host, t.check): t for t in tasks}
        self.store = store
        self.progress = progress
        self.ran = ran  # what was handed to Ansible (or the collector), per (host, check)
        self.keep = keep  # ansible-runner keeps the events on disk (--keep-artifacts)
        self.bundles = dict(bundles or {})

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
        outcome, said = outcome_of(task, rc, stderr, self.ran[(task.host, task.check)])
        if res.get("unreachable"):
            outcome, said = "unreachable", None
        cmd = res.get("cmd")
        ran = cmd if isinstance(cmd, list) and all(isinstance(a, str) for a in cmd) else None
        self.record(task, str(res.get("stdout", "")), argv=ran, outcome=outcome, rc=rc,
                    started=res.get("start"), ended=res.get("end"),
                    duration_s=duration(res.get("start"), res.get("end")),
                    stderr=stderr[-20000:], message=said or ansible_error(res))

    def collected(self, task: Task, rec: Record) -> None:
        """A member's record, as the node collector returned it."""
        outcome, said = outcome_of(task, rec.rc, rec.stderr, rec.argv)
        if rec.rc is None:
            said = last_words(rec.stderr, 300) or "the node collector could not start it"
        self.record(task, rec.stdout, argv=rec.argv, outcome=outcome, rc=rec.rc,
                    started=rec.started, ended=rec.ended,
                    duration_s=duration(rec.started, rec.ended),
                    stderr=rec.stderr[-20000:], message=said or "")

    def bundle(self, host: str, res: dict[str, Any]) -> None:
        """The node collector's (or the SLURM job's) output: each member's record, or why
        there is none."""
        bundle = self.bundles.get(host)
        if bundle is None:
            return
        if "module_stderr" in res or "module_stdout" in res:  # no module ran (failed_when
            self.bundle_failed(host, res)                      # false makes it "ok")
            return
        nodes = bundle.nodes()
        stdout, stderr = str(res.get("stdout", "")), plain(str(res.get("stderr", "")))
        got = decode(stdout, {n: [t.check for t in ts] for n, ts in nodes.items()})
        left_out = dict(_NOT_READY.findall(stderr))
        what = f"the SLURM job {bundle.job} on {host}" if bundle.job else \
            f"rackgate's node collector on {host}"
        tail = last_words(stderr or ansible_error(res), 300)
        for node, members in nodes.items():
            for t in members:
                key = (node, t.check)
                if key in got.records:
                    self.collected(t, got.records[key])
                    continue
                if key in got.damaged:
                    why = f"its evidence record from {what} is damaged: {got.damaged[key]}"
                elif node in left_out:
                    why = f"SLURM did not run it: {node} is {left_out[node]}"
                elif node not in got.begun:
                    why = (f"{what} never started on {node} (rc {res.get('rc')})"
                           f"{': ' + tail if tail else ''}")
                else:
                    early = got.ended.get(node)
                    why = (f"{what} on {node} ended before this check"
                           f"{' (' + early + ')' if early else ''} (rc {res.get('rc')})"
                           f"{': ' + tail if tail else ''}")
                self.failed(t, "not_run", why)

    def bundle_failed(self, host: str, res: dict[str, Any]) -> None:
        """Ansible could not run the collector's command on ``host`` (its module failed:
        no usable Python there): each member keeps Ansible's words and rc, as an item's
        failure would (``judge.evidence.module_failure`` reads them)."""
        bundle = self.bundles.get(host)
        if bundle is None:
            return
        said, rc = ansible_error(res, "the node collector could not run"), res.get("rc")
        for t in bundle.members:
            if bundle.job:
                self.failed(t, "not_run", f"launch host {host}: {said}")
                continue
            outcome, _ = outcome_of(t, rc, "", ())
            self.record(t, "", outcome=outcome, rc=rc, started=res.get("start"),
                        ended=res.get("end"),
                        duration_s=duration(res.get("start"), res.get("end")),
                        stderr=plain(str(res.get("stderr", "")))[-20000:], message=said)

    def failed(self, task: Task, outcome: str, message: str) -> None:
        self.record(task, "", outcome=outcome, rc=None, started=None, ended=None,
                    duration_s=None, stderr="", message=plain(message))

    def host_failed(self, host: str, outcome: str, message: str) -> None:
        """Everything ``host`` was to run: its own commands, and a SLURM job's members on
        the other nodes (``not_run``: they were never reached from here)."""
        for task in [t for (h, _), t in self.pending.items() if h == host]:
            self.failed(task, outcome, message)
        bundle = self.bundles.get(host)
        for task in bundle.members if bundle is not None and bundle.job else ():
            self.failed(task, "not_run", f"launch host {host}: {message}")

    def handle(self, event: dict[str, Any]) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        host = data.get("host", "")
        res = data.get("res", {}) or {}
        if kind in ("runner_item_on_ok", "runner_item_on_failed"):
            self.item(host, res)
        elif kind == "runner_on_ok" and data.get("task") == BUNDLE_TASK:
            self.bundle(host, res)
        elif kind == "runner_on_failed" and data.get("task") == BUNDLE_TASK:
            self.bundle_failed(host, res)
        elif kind == "runner_on_unreachable":
            self.host_failed(host, "unreachable", ansible_error(res, "host unreachable"))
        elif kind == "runner_on_failed":
            self.host_failed(host, "not_run", ansible_error(res, "the collection task failed"))
        return self.keep  # whether ansible-runner keeps the event on disk
