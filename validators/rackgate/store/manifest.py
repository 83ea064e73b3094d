"""The run directory: its manifest (what was run, where, with which profile), its lock,
and how a new one is made. The manifest (:class:`Manifest`) is written when a run starts and
when each collection ends; whatever reads it validates it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from rackgate import __version__
from rackgate.documents import DocumentError, load_json
from rackgate.refusal import Refusal
from rackgate.store.evidence import json_kind, write_json

MANIFEST_SCHEMA = "rackgate.manifest/1"

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
    raise Refusal(f"{parent}: no free directory name for {stamp}-{name}")


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
            raise Refusal(f"run directory {run_dir} is in use by {holder or 'another rackgate'}"
                           f": wait for it to finish, or stop it, then resume") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"rackgate pid {os.getpid()} on {socket.gethostname()} since "
                      f"{now()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def read_manifest(run_dir: Path) -> Manifest:
    """The run's manifest.json as a :class:`Manifest`: a tampered or damaged one is a
    Refusal (exit 2) naming the file and the field, never a traceback."""
    path = run_dir / "manifest.json"
    try:
        doc = load_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise Refusal(f"{run_dir} is not a rackgate run directory (no manifest.json)") from None
    except OSError as exc:
        raise Refusal(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except DocumentError as exc:
        raise Refusal(f"{path}: {exc}") from None
    except ValueError as exc:
        raise Refusal(f"{path} is not valid JSON: {exc}") from None
    return Manifest.from_doc(doc, str(path))


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    write_json(run_dir / "manifest.json", manifest.to_doc())


class _Record(BaseModel):
    """A part of the manifest: strict types (a JSON number is not a string, a list is not an
    object), nothing foreign, the keys of ``OMITTED_WHEN_NONE`` left out of the document
    while they are None (written only once there is something to say), and those of
    ``OMITTED_WHEN_UNSET`` left out while None and never given (a manifest written before
    the key existed is written back as it was)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    OMITTED_WHEN_NONE: ClassVar[frozenset[str]] = frozenset()
    OMITTED_WHEN_UNSET: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        doc: dict[str, Any] = handler(self)
        return {k: v for k, v in doc.items()
                if v is not None or not (k in self.OMITTED_WHEN_NONE
                                         or (k in self.OMITTED_WHEN_UNSET
                                             and k not in self.model_fields_set))}

    def to_doc(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


HostName = Annotated[str, Field(min_length=1)]
Text = Annotated[str, Field(min_length=1, pattern=r"\S")]


class HostEntry(_Record):
    """One host under test: its name, where it is (the inventory's words and its place in
    the rack) and its inventory overrides of the profile."""

    OMITTED_WHEN_UNSET = frozenset({"place", "profile_overrides"})
    name: HostName
    location: str
    place: dict[str, Any] | None = None
    profile_overrides: dict[str, Any] | None = None


class ProfileEntry(_Record):
    """The profile the run was collected with, as it was (``overrides.profile_record``): its
    overrides files and the threshold changes they made are read by ``overrides``."""

    OMITTED_WHEN_NONE = frozenset({"overrides", "changes"})
    name: str
    source: str
    sha256: str | None = None
    document: dict[str, Any]
    overrides: list[Any] | None = None
    changes: list[Any] | None = None


class FabricEntry(_Record):
    """The fabric plan the fabric checks are judged against, as it was."""

    source: str
    sha256: str
    document: dict[str, Any]


class Launched(_Record):
    """Where one check's latest job across the nodes ran, and who was left out of it (the
    manifest's ``launched``, per check)."""

    model_config = ConfigDict(frozen=True)
    nodes: tuple[HostName, ...]
    left_out: dict[str, str] = Field(default_factory=dict)  # node -> why

    @field_validator("nodes", mode="before")
    @classmethod
    def _listed(cls, nodes: Any) -> Any:
        return tuple(nodes) if isinstance(nodes, list) else nodes  # JSON has lists

    @model_validator(mode="after")
    def _once(self) -> Launched:
        if len(set(self.nodes)) != len(self.nodes) or set(self.nodes) & set(self.left_out):
            raise ValueError("a host is listed twice")
        return self


class Revision(_Record):
    """One collection of the run: which (validate, resume, retest), when, through what, and
    for a retest the nodes and checks it collected again."""

    OMITTED_WHEN_NONE = frozenset({"via", "nodes", "checks"})
    revision: int = Field(ge=1)
    kind: Literal["validate", "resume", "retest"]
    at: str
    via: Literal["ansible", "slurm"] | None = None
    nodes: list[str] | None = None
    checks: list[str] | None = None


class Interruption(_Record):
    at: str
    by: str


class ControlFailure(_Record):
    at: str
    message: str


class Manifest(_Record):
    """The run directory's manifest.json: what was run (checks, hosts, inventory, group and
    limit), with which profile and fabric plan, where the jobs across the nodes ran, and
    each collection of the run (``revisions``). Written when a run starts and when each
    collection ends; validated whenever it is read (``read_manifest``)."""

    OMITTED_WHEN_NONE = frozenset({"fabric", "fabric_host", "control_failure",
                                   "ansible_runner_status", "interrupted", "orphans_ended"})
    schema_: Literal["rackgate.manifest/1"] = Field(alias="schema")
    run_id: str
    started: str | None = None
    finished: str | None = None
    resumed: list[str] = Field(default_factory=list)
    inventory: list[str]
    group: str
    limit: str | None = None
    checks: list[Text] = Field(min_length=1)
    profile: ProfileEntry
    run_dir: str | None = None
    hosts: list[HostEntry] = Field(min_length=1)
    launch_host: HostName | None = None
    no_launch_reason: Text | None = None
    launched: dict[str, Launched] = Field(default_factory=dict)
    fabric: FabricEntry | None = None
    fabric_host: HostName | None = None
    revisions: list[Revision] = Field(default_factory=list)
    rackgate_version: str | None = None
    ansible_core_version: str | None = None
    ansible_runner_status: str | None = None
    control_failure: ControlFailure | None = None
    interrupted: list[Interruption] | None = None
    orphans_ended: list[str] | None = None
    model_config = ConfigDict(populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _with_revisions(cls, doc: Any) -> Any:
        """A manifest from before revisions were recorded has its validate and each
        resume (``revisions_of``)."""
        if isinstance(doc, dict) and not doc.get("revisions"):
            return {**doc, "revisions": revisions_of(doc)}
        return doc

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        if len(set(self.checks)) != len(self.checks):
            raise ValueError(f"field checks: a check is listed twice in {self.checks}")
        names = self.host_names()
        if len(set(names)) != len(names):
            raise ValueError(f"field hosts: a host is listed twice in {list(names)}")
        for check, rec in self.launched.items():
            strays = sorted((set(rec.nodes) | set(rec.left_out)) - set(names))
            if strays:
                raise ValueError(f"field launched.{check} names host(s) not under test: "
                                 f"{', '.join(strays)}")
        for i, rev in enumerate(self.revisions):
            if rev.revision != i + 1:
                raise ValueError(f"field revisions[{i}]: revision {rev.revision}, expected "
                                 f"{i + 1}")
        return self

    @classmethod
    def from_doc(cls, doc: Any, where: str) -> Manifest:
        """``doc`` as a manifest; Refusal naming ``where`` and the (first) field that is
        wrong."""
        if not isinstance(doc, dict):
            raise Refusal(f"{where}: the manifest must be a JSON object, got {json_kind(doc)}")
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            raise Refusal(f"{where}: {_first_problem(exc)}") from None

    def host_names(self) -> tuple[str, ...]:
        return tuple(h.name for h in self.hosts)

    def add_revision(self, kind: Literal["resume", "retest"], **what: Any) -> int:
        """Record one more collection of the run; returns its number."""
        self.revisions.append(Revision.model_validate(
            {"revision": len(self.revisions) + 1, "kind": kind, "at": now(), **what}))
        return len(self.revisions)


def _first_problem(exc: ValidationError) -> str:
    """The first error of a validation as 'field hosts[0].name: <what>'."""
    err = exc.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
    msg = "is missing" if err["type"] == "missing" else err["msg"].removeprefix("Value error, ")
    return f"field {loc}: {msg}" if loc else msg


def revisions_of(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The run's collections, one per revision: kind (validate, resume, retest), when, and
    for a retest the nodes and checks it collected again. A manifest from before
    revisions were recorded has its validate and each resume."""
    recorded = doc.get("revisions")
    if recorded:
        return [dict(r) for r in recorded]
    resumed = doc.get("resumed", [])
    return [{"revision": 1, "kind": "validate", "at": str(doc.get("started"))}] + [
        {"revision": i + 2, "kind": "resume", "at": str(at)}
        for i, at in enumerate(resumed if isinstance(resumed, list) else [])]
