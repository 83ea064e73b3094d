"""Turning ansible-runner's events into evidence: one record per (host, check), whether
the command ran as an Ansible item or through the node collector (``collect.bundle``).

A bundle's records come in the files Ansible fetched from its host
(``collect.bundle_records``), read when the fetch task's event arrives; its command's
own result only gives its rc and stderr.

Whatever did not come back is recorded too, never left out: a host Ansible could not
reach (``unreachable``), a module that could not run, a node whose collector never
started (SLURM's reason when the readiness guard left it out), ended early, returned a
damaged record or one its output was not entitled to carry, and a result that
ansible-runner emptied because it was longer than its ``MAX_EVENT_RES`` (``not_run``,
naming what happened): each is judged ``error``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from rackgate.collect.bundle import Bundle, bundled
from rackgate.collect.bundle_records import Ran, emptied_note, outcomes
from rackgate.collect.framing import Record
from rackgate.commands.failure import MODULE_FAILED, NOT_EXECUTABLE_RC, control_side
from rackgate.commands.task import (
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
_ORIGIN = re.compile(r"^Origin: (\S+:\d+(?::\d+)?)\s*$", re.M)  # Ansible 2.19's display
_OWN = "rackgate/collect/playbooks/collect.yml:"  # the playbook's own origins: not the cause
# The task names of playbooks/collect.yml that the recorder reads the events of
ITEM_TASK = "Run acceptance commands"
DIR_TASK = "Make the private directory of this host's evidence records"
BUNDLE_TASK = "Run this host's node commands through rackgate's node collector"
FETCH_TASK = "Fetch this host's evidence records"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def plain(text: str) -> str:
    """``text`` without terminal escapes (Ansible's colours) or carriage returns."""
    return _ANSI.sub("", text)


def ansible_error(res: Mapping[str, Any], default: str = "", whole: bool = False) -> str:
    """Ansible's own words on an item or task: the first lines of its ``msg`` (``whole``:
    all of it, uncut, up to 8,000 characters: what the evidence of an unreachable host
    keeps) and, when it could not run its module on the host, the module's stderr (else
    its stdout) on a line of its own after ``module stderr: `` (``placement.evidence`` reads
    it); plain, bounded.

    >>> ansible_error({"msg": "MODULE FAILURE", "module_stderr": "pyenv: python3: not found"})
    'MODULE FAILURE\\nmodule stderr: pyenv: python3: not found'
    """
    msg = plain(str(res.get("msg") or default)).strip()
    said = msg[:8000] if whole else "\n".join(line[:300] for line in msg.splitlines()[:5])
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
        # where Ansible fetches each bundle's files (the playbook run fills it in)
        self.fetched_to: dict[str, Path] = {}
        self.results: dict[str, Ran] = {}  # what each bundle's command returned
        # each host's items in the order Ansible runs them, and how many have come back
        self.items: dict[str, list[Task]] = {}
        for t in tasks:
            if not bundled(t):
                self.items.setdefault(t.host, []).append(t)
        self.items_seen: dict[str, int] = {}
        # failures on the control host's side (the vault, the inventory, a connection
        # plugin, its Python or tools): (host, task, Ansible's words); collection then
        # raises ControlSideError and nothing of their hosts is recorded as evidence
        self.control: list[tuple[str, str, str]] = []
        # where Ansible located them (its display's "Origin: FILE:LINE:COL", inventory
        # files first): its events' results do not carry them
        self.origins: list[str] = []
        self.reached = False  # whether Ansible got as far as any host

    def record(self, task: Task, stdout: str, argv: Sequence[str] | None = None,
               **fields: Any) -> None:
        if self.pending.pop((task.host, task.check), None) is None:
            return
        self.store.write(task.host, task.check, stdout,
                         argv=tuple(argv or self.ran[(task.host, task.check)]), **fields)
        self.progress(task.host, task.check, fields["outcome"])

    def item(self, host: str, res: dict[str, Any]) -> None:
        seen = self.items_seen[host] = self.items_seen.get(host, 0) + 1
        if not res:  # emptied: the loop runs a host's items in order, one event each
            mine = self.items.get(host, [])
            if seen <= len(mine):
                self.failed(mine[seen - 1], "not_run", f"{emptied_note(ITEM_TASK, host)}: "
                            f"its output is lost")
            return
        item = res.get("item") or {}
        task = self.pending.get((host, str(item.get("check"))))
        if task is None:
            return
        rc = res.get("rc")
        stderr = plain(str(res.get("stderr", "")))
        failed = _control_host_failed(res, rc, stderr) if item.get("local") else None
        if failed:
            self.control.append((host, f"{ITEM_TASK} ({task.check}, on the control host)",
                                 failed))
            return
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
        """The bundle's command ended: keep its rc and stderr for :meth:`fetched` (its
        records come in files), or record why it could not run."""
        if "module_stderr" in res or "module_stdout" in res:  # no module ran (failed_when
            self.bundle_failed(host, res)                      # false makes it "ok")
            return
        rc = res.get("rc")
        self.results[host] = Ran(note=emptied_note(BUNDLE_TASK, host)) if not res else \
            Ran(rc if type(rc) is int else None, plain(str(res.get("stderr") or "")))

    def fetched(self, host: str, failed: dict[str, Any] | None = None) -> None:
        """The bundle's files have been fetched (or could not be: ``failed``, Ansible's
        result): each member's record, or why there is none."""
        bundle, where = self.bundles.get(host), self.fetched_to.get(host)
        if bundle is None or where is None:
            return
        ran = self.results.get(host, Ran(note="no result came back for its command"))
        if failed is not None:
            ran = replace(ran, stderr=f"{ran.stderr}\nfetching its files failed: "
                                      f"{ansible_error(failed, 'no reason given')}")
        for task, got in outcomes(bundle, where, ran):
            if isinstance(got, Record):
                self.collected(task, got)
            else:
                self.failed(task, "not_run", got)

    def bundle_failed(self, host: str, res: dict[str, Any]) -> None:
        """Ansible could not run the collector's command on ``host`` (its module failed:
        no usable Python there): each member keeps Ansible's words and rc, as an item's
        failure would (``placement.evidence.module_failure`` reads them)."""
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
        task = data.get("task")
        self.reached = self.reached or (bool(host) and kind.startswith("runner_"))
        if kind in ("runner_on_failed", "runner_item_on_failed", "runner_on_unreachable") \
                and (host in {h for h, _, _ in self.control} or control_side(_said(res))):
            if control_side(plain(str(res.get("msg") or ""))):
                self.control.append((host, str(task), ansible_error(res, whole=True)))
            self.origins += [o for o in _ORIGIN.findall(plain(str(event.get("stdout") or "")))
                             if o not in self.origins and _OWN not in o]
        elif kind in ("runner_item_on_ok", "runner_item_on_failed"):
            if task == ITEM_TASK:
                self.item(host, res)
        elif kind == "runner_on_ok" and task == BUNDLE_TASK:
            self.bundle(host, res)
        elif kind in ("runner_on_ok", "runner_on_failed") and task == FETCH_TASK:
            self.fetched(host, res if kind == "runner_on_failed" else None)
        elif kind == "runner_on_failed" and task in (BUNDLE_TASK, DIR_TASK):
            self.bundle_failed(host, res)
        elif kind == "runner_on_unreachable":  # the evidence keeps Ansible's words uncut
            self.host_failed(host, "unreachable", ansible_error(res, "host unreachable",
                                                                whole=True))
        elif kind == "runner_on_failed":
            self.host_failed(host, "not_run", ansible_error(res, "the collection task failed"))
        return self.keep  # whether ansible-runner keeps the event on disk


def _control_host_failed(res: Mapping[str, Any], rc: Any, stderr: str) -> str | None:
    """Why a command on the control host never started there (Ansible could not run its
    module: the control host's Python; timeout(1) could not run the tool), or None."""
    if "module_stderr" in res or "module_stdout" in res \
            or str(res.get("msg") or "").startswith(MODULE_FAILED):
        return ansible_error(res, "Ansible could not run its module")
    if rc in NOT_EXECUTABLE_RC and "timeout: failed to run command" in stderr:
        return stderr.strip()[-1500:]
    return None


def _said(res: Mapping[str, Any]) -> str:
    """Ansible's messages in a result: its own, and those of its items (``results``)."""
    items = res.get("results")
    return plain("\n".join([str(res.get("msg") or "")] + [
        str(r.get("msg") or "") for r in (items if isinstance(items, list) else [])
        if isinstance(r, Mapping)]))
