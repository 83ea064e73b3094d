"""The run directory: its manifest (what was run, where, with which profile), its lock,
and how a new one is made. The manifest is written when a run starts and when its
collection ends; judging reads it, checked field by field.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from rackgate import __version__
from rackgate.documents import DocumentError, load_json
from rackgate.store.evidence import json_kind

MANIFEST_SCHEMA = "rackgate.manifest/1"


class RunError(RuntimeError):
    """The run could not start or its directory is unusable (CLI exit 2)."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    """The versions a manifest records."""
    try:
        ansible_core = metadata.version("ansible-core")
    except metadata.PackageNotFoundError:
        ansible_core = "not installed"
    return {"rackgate_version": __version__, "ansible_core_version": ansible_core}


def new_stamped_dir(parent: Path, name: str) -> Path:
    """A new directory ``parent/<UTC stamp>-<name>[-<n>]``.

    Each candidate is made with one mkdir that fails if it exists (never exist_ok), so
    directories made in the same second, in threads or processes, each get their own."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 100_000):
        path = parent / (f"{stamp}-{name}" if n == 1 else f"{stamp}-{name}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RunError(f"{parent}: no free directory name for {stamp}-{name}")


def new_run_dir(runs_dir: Path, profile: str) -> Path:
    """A new run directory ``<UTC stamp>-<profile>[-<n>]`` with its ``evidence/``."""
    run_dir = new_stamped_dir(runs_dir, profile)
    (run_dir / "evidence").mkdir()
    return run_dir


RUN_LOCK = ".lock"


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock (flock on RUN_DIR/.lock) while collecting into it and
    judging it: a second ``validate --resume`` of the run refuses, naming the holder. The
    kernel drops the lock when this process ends, however it ends."""
    path = run_dir / RUN_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            raise RunError(f"run directory {run_dir} is in use by {holder or 'another rackgate'}"
                           f": wait for it to finish, or stop it, then resume") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"rackgate pid {os.getpid()} on {socket.gethostname()} since "
                      f"{now()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest.json, checked field by field: a tampered or damaged one is a
    RunError (exit 2) naming the file and the field, never a traceback."""
    path = run_dir / "manifest.json"
    try:
        doc = load_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunError(f"{run_dir} is not a rackgate run directory (no manifest.json)") from None
    except OSError as exc:
        raise RunError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except DocumentError as exc:
        raise RunError(f"{path}: {exc}") from None
    except ValueError as exc:
        raise RunError(f"{path} is not valid JSON: {exc}") from None
    problem = manifest_problem(doc)
    if problem or not isinstance(doc, dict):
        raise RunError(f"{path}: {problem}")
    return doc


def manifest_problem(doc: Any) -> str | None:
    """What is wrong with a manifest document, naming the field, or None.

    >>> manifest_problem([])
    'the manifest must be a JSON object, got list'
    >>> manifest_problem({"schema": MANIFEST_SCHEMA, "run_id": "r", "inventory": [],
    ...     "group": "compute", "checks": ["fio.seq_read"], "hosts": [],
    ...     "profile": {"name": "demo", "source": "demo.yaml", "document": {}}})
    'field hosts: lists no host'
    """
    if not isinstance(doc, dict):
        return f"the manifest must be a JSON object, got {json_kind(doc)}"
    if doc.get("schema") != MANIFEST_SCHEMA:
        return f"unknown manifest schema {doc.get('schema')!r} (expected {MANIFEST_SCHEMA})"
    expect: list[tuple[str, Any, tuple[type, ...]]] = [
        ("run_id", doc.get("run_id"), (str,)), ("group", doc.get("group"), (str,)),
        ("inventory", doc.get("inventory"), (list,)), ("checks", doc.get("checks"), (list,)),
        ("hosts", doc.get("hosts"), (list,)), ("profile", doc.get("profile"), (dict,))]
    for name, value, types in expect:
        if not isinstance(value, types):
            return f"field {name} must be a {types[0].__name__}, got {json_kind(value)}"
    if not all(isinstance(i, str) for i in doc["inventory"]):
        return "field inventory: every source must be a string"
    checks = doc["checks"]
    if not checks or not all(isinstance(c, str) and c for c in checks):
        return "field checks: must list at least one check name (strings)"
    if len(set(checks)) != len(checks):
        return f"field checks: a check is listed twice in {checks}"
    profile = doc["profile"]
    for key, types in (("name", (str,)), ("source", (str,)), ("document", (dict,))):
        if not isinstance(profile.get(key), types):
            return (f"field profile.{key} must be a {types[0].__name__}, "
                    f"got {json_kind(profile.get(key))}")
    if not doc["hosts"]:
        return "field hosts: lists no host"
    names = []
    for i, h in enumerate(doc["hosts"]):
        if not isinstance(h, dict):
            return f"field hosts[{i}] must be an object, got {json_kind(h)}"
        if not isinstance(h.get("name"), str) or not h["name"]:
            return f"field hosts[{i}].name must be a host name, got {h.get('name')!r}"
        if not isinstance(h.get("location"), str):
            return f"field hosts[{i}].location must be a string, got {json_kind(h.get('location'))}"
        if h.get("profile_overrides") is not None and not isinstance(h["profile_overrides"],
                                                                     dict):
            return (f"field hosts[{i}].profile_overrides must be an object or null, got "
                    f"{json_kind(h['profile_overrides'])}")
        names.append(h["name"])
    if len(set(names)) != len(names):
        return f"field hosts: a host is listed twice in {names}"
    launch = doc.get("launch_host")
    if launch is not None and (not isinstance(launch, str) or not launch):
        return f"field launch_host must be a host name or null, got {launch!r}"
    if not isinstance(doc.get("resumed", []), list):
        return f"field resumed must be a list, got {json_kind(doc.get('resumed'))}"
    reason = doc.get("no_launch_reason")
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        return f"field no_launch_reason must be a non-empty string or null, got {reason!r}"
    return _launched_problem(doc.get("launched", {}), set(names)) or _revisions_problem(
        doc.get("revisions", []))


@dataclass(frozen=True)
class Launched:
    """Where one check's latest job across the nodes ran, and who was left out of it (the
    manifest's ``launched``, per check)."""

    nodes: tuple[str, ...]
    left_out: Mapping[str, str] = field(default_factory=dict)  # node -> why

    def to_doc(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "left_out": dict(self.left_out)}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> Launched:
        return cls(tuple(doc["nodes"]), dict(doc["left_out"]))


def _launched_problem(launched: Any, hosts: set[str]) -> str | None:
    """What is wrong with ``launched`` (per check launched across the nodes: the nodes its
    latest job ran on, and those left out of it with the reason), or None."""
    if not isinstance(launched, dict):
        return f"field launched must be an object, got {json_kind(launched)}"
    for check, rec in launched.items():
        where = f"field launched.{check}"
        if not isinstance(rec, dict) or set(rec) != {"nodes", "left_out"}:
            return f"{where} must be an object with nodes and left_out"
        nodes, left = rec["nodes"], rec["left_out"]
        if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
            return f"{where}.nodes must be a list of host names"
        if not isinstance(left, dict) or not all(isinstance(v, str) for v in left.values()):
            return f"{where}.left_out must map host names to reasons"
        strays = sorted((set(nodes) | set(left)) - hosts)
        if strays:
            return f"{where} names host(s) not under test: {', '.join(strays)}"
        if len(set(nodes)) != len(nodes) or set(nodes) & set(left):
            return f"{where}: a host is listed twice"
    return None


REVISION_KINDS = frozenset({"validate", "resume", "retest"})


def _revisions_problem(revisions: Any) -> str | None:
    if not isinstance(revisions, list):
        return f"field revisions must be a list, got {json_kind(revisions)}"
    for i, rev in enumerate(revisions):
        if not isinstance(rev, dict) or rev.get("revision") != i + 1 \
                or rev.get("kind") not in REVISION_KINDS or not isinstance(rev.get("at"), str):
            return (f"field revisions[{i}] must be an object with revision {i + 1}, kind "
                    f"({', '.join(sorted(REVISION_KINDS))}) and at, got {rev!r}")
    return None


def revisions_of(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The run's collections, one per revision: kind (validate, resume, retest), when, and
    for a retest the nodes and checks it collected again. A manifest from before
    revisions were recorded has its validate and each resume."""
    recorded = doc.get("revisions")
    if recorded:
        return [dict(r) for r in recorded]
    return [{"revision": 1, "kind": "validate", "at": str(doc.get("started"))}] + [
        {"revision": i + 2, "kind": "resume", "at": str(at)}
        for i, at in enumerate(doc.get("resumed", []))]


def add_revision(doc: dict[str, Any], kind: str, **what: Any) -> int:
    """Record one more collection of the run (resume, retest) in ``doc``, its manifest;
    returns its number."""
    revisions = doc["revisions"] = revisions_of(doc)
    revisions.append({"revision": len(revisions) + 1, "kind": kind, "at": now(), **what})
    return len(revisions)
