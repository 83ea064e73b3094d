"""The evidence store: a run directory that holds what was collected, before any judging.

Layout::

    RUN_DIR/manifest.json                 what was asked: inventory, profile, hosts, checks
    RUN_DIR/evidence/<host>/<check>.out   the command's raw stdout, byte for byte
    RUN_DIR/evidence/<host>/<check>.json  argv, outcome, rc, timing, stderr, sha256 of .out
    RUN_DIR/evidence/<host>/<check>~2.out  a second attempt (``--resume``, ``--retest``, a
    RUN_DIR/evidence/<host>/<check>~2.json job run again without the node that broke it)

Evidence is never overwritten: collecting a (host, check) again writes its next attempt
(``~2``, ``~3``...), and the highest recorded attempt is the one judged; the earlier ones
stay for the report's list of attempts. Every (host, check) on disk is held against the
run's manifest when the run is judged (``stored``, ``judge.strays``).

Every file is written to a temporary name, flushed and renamed, so a crash never leaves a
half file under the final name. The ``.json`` is written last and records the sha256 of
the ``.out``: a missing ``.json`` means "not collected", and a ``.out`` whose digest does
not match is reported as damaged evidence, never judged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from rackgate.documents import load_json

Outcome = Literal["completed", "timeout", "unreachable", "not_run"]


class EvidenceError(RuntimeError):
    """Evidence is missing, damaged or unreadable."""


@dataclass(frozen=True)
class Evidence:
    host: str
    check: str
    argv: tuple[str, ...]
    outcome: Outcome
    rc: int | None
    started: str | None
    ended: str | None
    duration_s: float | None
    stderr: str
    message: str  # Ansible's or rackgate's note on the outcome (unreachable reason...)
    stdout_file: str  # relative to the run directory
    stdout_sha256: str
    stdout_bytes: int


_FIELDS = tuple(f.name for f in dataclasses.fields(Evidence))
OUTCOMES = frozenset({"completed", "timeout", "unreachable", "not_run"})
_SHA256 = re.compile(r"[0-9a-f]{64}")
_OPTIONAL_TEXT = ("started", "ended")
_TEXT = ("stderr", "message", "stdout_file")


def json_kind(value: Any) -> str:
    """The JSON type name of a decoded value, for messages about a damaged document."""
    return "null" if value is None else type(value).__name__


def record_problem(doc: Any, host: str, check: str) -> str | None:
    """What is wrong with an evidence record (the ``.json`` beside a ``.out``), naming the
    field, or None. Types are exact: ``true`` is not an exit code and ``COMPLETED`` is not
    an outcome, so a hand-edited record is damaged evidence, never a completion.

    >>> record_problem({"host": "n1"}, "n1", "fio.seq_read")
    'field check is missing'
    """
    if not isinstance(doc, dict):
        return f"the record must be a JSON object, got {json_kind(doc)}"
    for name in _FIELDS:
        if name not in doc:
            return f"field {name} is missing"
    extra = sorted(set(doc).difference(_FIELDS))
    if extra:
        return f"unknown field(s) {', '.join(extra)}"
    if doc["host"] != host or doc["check"] != check:
        return (f"it is the record of {doc['host']!r} {doc['check']!r}, not of {host!r} "
                f"{check!r}")
    if not isinstance(doc["argv"], list) or not all(isinstance(a, str) for a in doc["argv"]):
        return "field argv must be a list of strings"
    if doc["outcome"] not in OUTCOMES:
        return f"field outcome {doc['outcome']!r} is not one of {', '.join(sorted(OUTCOMES))}"
    rc = doc["rc"]
    if rc is not None and (type(rc) is not int):
        return f"field rc must be an integer exit status or null, got {rc!r}"
    if doc["outcome"] == "completed" and rc is None:
        return "field rc is null, but the outcome says the command completed"
    for name in _OPTIONAL_TEXT:
        if doc[name] is not None and not isinstance(doc[name], str):
            return f"field {name} must be a string or null, got {json_kind(doc[name])}"
    for name in _TEXT:
        if not isinstance(doc[name], str):
            return f"field {name} must be a string, got {json_kind(doc[name])}"
    duration = doc["duration_s"]
    if duration is not None and (type(duration) not in (int, float) or not math.isfinite(duration)
                                 or duration < 0):
        return f"field duration_s must be a finite number of seconds >= 0, got {duration!r}"
    if not isinstance(doc["stdout_sha256"], str) or not _SHA256.fullmatch(doc["stdout_sha256"]):
        return "field stdout_sha256 must be 64 lower-case hex digits"
    size = doc["stdout_bytes"]
    if type(size) is not int or size < 0:
        return f"field stdout_bytes must be a byte count, got {size!r}"
    return None


def atomic_write(path: Path, data: bytes | bytearray, *, sync: bool = True,
                 mode: int | None = None) -> None:
    """Write ``data`` to a temporary file beside ``path`` and rename it into place.

    ``sync=False`` skips fsync: still never a half file under the final name, but not
    durable across a power loss (for generated data such as benchmarks). ``mode`` sets the
    file's permissions before the rename (mkstemp makes it 0600), for a file another user
    reads, such as node_exporter's textfiles.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, doc: Any, *, sync: bool = True, indent: int | None = 2,
               allow_nan: bool = True) -> None:
    """``doc`` as JSON, atomically; ``allow_nan=False`` raises ValueError before writing
    anything when ``doc`` holds a NaN or an infinity (which strict JSON parsers reject)."""
    atomic_write(path, (json.dumps(doc, indent=indent, allow_nan=allow_nan) + "\n").encode(),
                 sync=sync)


def _safe(part: str) -> str:
    if not part or part in {".", ".."} or "/" in part or "\0" in part or "~" in part:
        raise EvidenceError(f"unsafe name for an evidence path: {part!r}")
    return part


def _stem(check: str, attempt: int) -> str:
    """The file name of ``check``'s evidence of one attempt, without its suffix."""
    return check if attempt == 1 else f"{check}~{attempt}"


def attempt_of(path: str) -> int:
    """The attempt an evidence file path is of (``fio.seq_read~2.out``: 2).

    >>> attempt_of("evidence/n1/fio.seq_read.out"), attempt_of("evidence/n1/fio.seq_read~3.out")
    (1, 3)
    """
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    _, sep, n = stem.rpartition("~")
    return int(n) if sep and n.isdigit() else 1


MAX_ATTEMPTS = 1000  # a bound on the attempts looked for (each is a collection of its own)


def _latest(stem: str) -> int:
    """The highest attempt N >= 1 whose ``<stem>~N.json`` is recorded (1: only the first)."""
    n = 1
    while n < MAX_ATTEMPTS and os.path.exists(f"{stem}~{n + 1}.json"):
        n += 1
    return n


class EvidenceStore:
    def __init__(self, run_dir: Path, *, sync: bool = True) -> None:
        self.run_dir = run_dir
        self.sync = sync

    def _path(self, host: str, check: str, suffix: str, attempt: int = 1) -> Path:
        return self.run_dir / "evidence" / _safe(host) / f"{_stem(_safe(check), attempt)}{suffix}"

    def meta_path(self, host: str, check: str, attempt: int = 1) -> Path:
        return self._path(host, check, ".json", attempt)

    def attempt(self, host: str, check: str) -> int:
        """The highest recorded attempt of (host, check): 0 when none was recorded."""
        stem = os.path.join(str(self.run_dir), "evidence", _safe(host), _safe(check))
        return _latest(stem) if os.path.exists(stem + ".json") else 0

    def write(self, host: str, check: str, stdout: str, **fields: Any) -> Evidence:
        """Record (host, check) as its next attempt; earlier attempts stay as they are."""
        attempt = self.attempt(host, check) + 1
        if attempt > MAX_ATTEMPTS:
            raise EvidenceError(f"{host} {check}: {MAX_ATTEMPTS} attempts recorded already")
        out = self._path(host, check, ".out", attempt)
        data = stdout.encode("utf-8", errors="surrogateescape")
        atomic_write(out, data, sync=self.sync)
        ev = Evidence(host=host, check=check, stdout_file=str(out.relative_to(self.run_dir)),
                      stdout_sha256=hashlib.sha256(data).hexdigest(), stdout_bytes=len(data),
                      **fields)
        doc = asdict(ev)
        doc["argv"] = list(ev.argv)
        write_json(self.meta_path(host, check, attempt), doc, sync=self.sync)
        return ev

    def read(self, host: str, check: str, attempt: int | None = None) -> tuple[Evidence, str]:
        """The evidence of the latest attempt (or of ``attempt``) and its stdout;
        EvidenceError when absent or damaged.

        Called once per (node, check) when a run is judged, so it sticks to plain string
        paths and few system calls (10,000 nodes x 20 checks is 400,000 files).
        """
        base = str(self.run_dir)
        if attempt is None:
            attempt = _latest(os.path.join(base, "evidence", _safe(host), _safe(check)))
        name = _stem(_safe(check), attempt)
        rel_meta = f"evidence/{_safe(host)}/{name}.json"
        rel_out = f"evidence/{host}/{name}.out"
        try:
            with open(os.path.join(base, rel_meta), "rb") as fh:
                doc = load_json(fh.read())
        except FileNotFoundError:
            raise EvidenceError(f"no evidence collected ({rel_meta} is missing)") from None
        except (OSError, ValueError) as exc:
            raise EvidenceError(f"evidence record {rel_meta} is unreadable: {exc}") from None
        problem = record_problem(doc, host, check)
        if problem:
            raise EvidenceError(f"evidence record {rel_meta} is damaged: {problem}")
        doc["argv"] = tuple(doc["argv"])
        ev = Evidence(**doc)
        if ev.stdout_file != rel_out:  # never follow a path the record could point anywhere
            raise EvidenceError(f"evidence record {rel_meta} names {ev.stdout_file!r}, "
                                f"expected {rel_out!r}")
        try:
            with open(os.path.join(base, rel_out), "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise EvidenceError(f"evidence file {rel_out} is unreadable: "
                                f"{exc.strerror}") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != ev.stdout_sha256 or len(data) != ev.stdout_bytes:
            raise EvidenceError(f"evidence file {rel_out} is damaged: {len(data)} bytes "
                                f"with sha256 {digest[:12]}, the record says "
                                f"{ev.stdout_bytes} bytes with sha256 {ev.stdout_sha256[:12]}")
        return ev, data.decode("utf-8", errors="replace")

    def stored(self) -> set[tuple[str, str]]:
        """Every (host, check) with evidence on disk: each ``evidence/<host>/`` and each
        ``<check>.json``/``.out`` (any attempt) in it, so judging can hold them against the
        manifest. Hidden names (an interrupted write's temporary file) are not evidence.

        One directory listing per host: 10,000 hosts cost a few tenths of a second."""
        out: set[tuple[str, str]] = set()
        try:
            hosts = [e for e in os.scandir(os.path.join(self.run_dir, "evidence"))
                     if not e.name.startswith(".")]
        except FileNotFoundError:
            return out
        for host in hosts:
            if not host.is_dir():
                out.add((host.name, ""))  # a file where a host's directory belongs
                continue
            for entry in os.scandir(host.path):
                stem, dot, suffix = entry.name.rpartition(".")
                if entry.name.startswith(".") or not dot or suffix not in ("json", "out"):
                    continue
                check, tilde, n = stem.rpartition("~")
                out.add((host.name, check if tilde and n.isdigit() else stem))
        return out

    def has_usable(self, host: str, check: str) -> bool:
        """True when evidence exists, is intact, and the command completed in time with rc 0.

        Everything else is collected again by ``rackgate validate --resume``.
        """
        try:
            ev, _ = self.read(host, check)
        except EvidenceError:
            return False
        return ev.outcome == "completed" and ev.rc == 0
