"""A small SQLite history of judged runs, so a node's results can be followed over time.

Every judgement of a run (its first, and each re-judgement with another profile) is one
``runs`` row; each of its ``nodes[].results[]`` (docs/report-schema.md) is one ``results``
row. Recording is idempotent: the same report recorded twice adds nothing.

The schema version is ``PRAGMA user_version``; ``_MIGRATIONS[v]`` takes a file from
version ``v`` to ``v + 1``, so a later schema is one more entry, never an edit.

>>> import tempfile
>>> runs_dir = Path(tempfile.mkdtemp())
>>> conn = open_history(default_history_path(runs_dir))
>>> doc = {"schema": "rackgate.report/1", "generated": "2026-05-01T12:00:00+00:00",
...        "run": {"run_id": "r1"}, "profile": {"name": "demo", "sha256": "ab12"},
...        "verdict": "ACCEPT", "summary": {"nodes": 1, "accepted": 1},
...        "nodes": [{"name": "gpu-001", "results": [{
...            "check": "fio.seq_read", "status": "pass", "message": "ok",
...            "measured": 612.5, "unit": "MB/s", "expected": ">= 50 MB/s",
...            "evidence": None, "evidence_sha256": None}]}]}
>>> record_report(conn, doc, runs_dir / "r1") == record_report(conn, doc, runs_dir / "r1")
True
>>> [(h.run_id, h.check, h.status.label, h.measured) for h in node_history(conn, "gpu-001")]
[('r1', 'fio.seq_read', 'pass', 612.5)]
>>> conn.close()
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rackgate.model import Status
from rackgate.refusal import Refusal

REPORT_SCHEMA = "rackgate.report/1"
APPLICATION_ID = 0x52474854  # "RGHT": marks a file as a rackgate history (PRAGMA application_id)

_STATUSES = ", ".join(f"'{s.label}'" for s in Status)

_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 0 -> 1: runs (one row per judgement) and their results.
    (
        """CREATE TABLE runs (
            id             INTEGER PRIMARY KEY,
            run_id         TEXT NOT NULL,
            judged_at      TEXT NOT NULL,   -- report 'generated', ISO 8601 UTC
            run_dir        TEXT NOT NULL,
            profile        TEXT NOT NULL,
            profile_sha256 TEXT NOT NULL,
            verdict        TEXT NOT NULL CHECK (verdict IN ('ACCEPT', 'REJECT')),
            nodes          INTEGER NOT NULL,
            accepted       INTEGER NOT NULL,
            UNIQUE (run_id, judged_at, profile_sha256)
        )""",
        "CREATE INDEX runs_judged_at ON runs (judged_at)",
        f"""CREATE TABLE results (
            run             INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            node            TEXT NOT NULL,
            check_name      TEXT NOT NULL,
            status          TEXT NOT NULL CHECK (status IN ({_STATUSES})),
            measured        REAL,
            unit            TEXT NOT NULL,
            expected        TEXT NOT NULL,
            message         TEXT NOT NULL,
            evidence        TEXT,
            evidence_sha256 TEXT
        )""",
        # Serves lookups by (node) and (node, check_name), and allows one row per judgement.
        "CREATE UNIQUE INDEX results_node_check ON results (node, check_name, run)",
        "CREATE INDEX results_run ON results (run)",
    ),
    # 1 -> 2: the run's revision (each --resume or --retest collects again) and each
    # result's evidence attempt.
    (
        "ALTER TABLE runs ADD COLUMN revision INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE results ADD COLUMN attempt INTEGER",
    ),
    # 2 -> 3: where the run was made: its inventory sources and the racks of its nodes
    # ("" in runs recorded before), for the one line per run that ``rackgate history`` prints.
    (
        "ALTER TABLE runs ADD COLUMN inventory TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN racks TEXT NOT NULL DEFAULT ''",
    ),
)
SCHEMA_VERSION = len(_MIGRATIONS)


class HistoryError(Refusal):
    """The history file is unusable or a report cannot be recorded; the message names which."""


@dataclass(frozen=True)
class HistoryRow:
    """One check's result on one node in one judgement of a run."""

    judged_at: str  # ISO 8601, UTC
    run_id: str
    profile: str
    check: str
    status: Status
    measured: float | None
    unit: str
    expected: str
    message: str
    run_dir: Path
    profile_sha256: str  # tells apart re-judgements with a same-named, overridden profile
    revision: int = 1  # the run's revision judged (each --resume or --retest adds one)
    attempt: int | None = None  # the evidence attempt the result was judged from


def default_history_path(runs_dir: Path) -> Path:
    return runs_dir / "history.sqlite"


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # sqlite may already have rolled back (e.g. disk full)
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _db_path(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row and row[2] else "(in-memory history)"


def open_history(path: Path) -> sqlite3.Connection:
    """Open (creating or migrating as needed) the history at ``path``.

    The connection is in autocommit mode (``isolation_level=None``); this module opens its
    own transactions.
    """
    try:
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    except sqlite3.Error as exc:
        raise HistoryError(f"{path}: cannot open the run history: sqlite says: {exc}") from None
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA foreign_keys = ON")
        with _transaction(conn):
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if app_id not in (0, APPLICATION_ID) or (app_id == 0 and version != 0):
                raise HistoryError(f"{path} is an SQLite database but not a rackgate history "
                                   f"(application_id {app_id:#x}, user_version {version})")
            if version > SCHEMA_VERSION:
                raise HistoryError(f"{path}: history schema version {version} is newer than "
                                   f"this rackgate knows ({SCHEMA_VERSION}); upgrade rackgate")
            for v in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[v]:
                    conn.execute(statement)
            if version < SCHEMA_VERSION:
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except sqlite3.Error as exc:
        conn.close()
        raise HistoryError(f"{path}: cannot open the run history: sqlite says: {exc}") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _utc(stamp: Any, where: str) -> str:
    try:
        when = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        raise HistoryError(f"{where}: 'generated' is not an ISO 8601 time: {stamp!r}") from None
    if when.tzinfo is None:  # the schema says UTC
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat()


def record_report(conn: sqlite3.Connection, doc: Mapping[str, Any], run_dir: Path) -> int:
    """Record one judged report (``rackgate.report/1``) in one transaction; return its
    ``runs.id``. Recording the same judgement again returns the same id and adds nothing."""
    where = f"report of {run_dir}"
    if doc.get("schema") != REPORT_SCHEMA:
        raise HistoryError(f"{where}: schema is {doc.get('schema')!r}, expected {REPORT_SCHEMA}")
    try:
        key = (str(doc["run"]["run_id"]), _utc(doc["generated"], where),
               str(doc["profile"]["sha256"]))
        nodes = list(doc["nodes"])
        run_row = (*key, str(run_dir), str(doc["profile"]["name"]), str(doc["verdict"]),
                   int(doc["summary"]["nodes"]), int(doc["summary"]["accepted"]),
                   int(doc.get("revision", 1)), _inventory(doc), _racks(nodes))
    except (KeyError, TypeError, ValueError) as exc:
        raise HistoryError(f"{where}: missing or malformed field: {exc!r}") from None
    try:
        with _transaction(conn):
            found = conn.execute("SELECT id FROM runs WHERE run_id = ? AND judged_at = ? "
                                 "AND profile_sha256 = ?", key).fetchone()
            if found is not None:
                return int(found[0])
            cur = conn.execute("INSERT INTO runs (run_id, judged_at, profile_sha256, run_dir, "
                               "profile, verdict, nodes, accepted, revision, inventory, "
                               "racks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", run_row)
            run = cur.lastrowid
            conn.executemany(
                "INSERT INTO results (run, node, check_name, status, measured, unit, "
                "expected, message, evidence, evidence_sha256, attempt) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ((run, n["name"], r["check"], r["status"], r["measured"], r["unit"],
                  r["expected"], r["message"], r.get("evidence"), r.get("evidence_sha256"),
                  r.get("attempt"))
                 for n in nodes for r in n["results"]))
    except (KeyError, TypeError) as exc:
        raise HistoryError(f"{where}: missing or malformed result field: {exc!r}; "
                           f"nothing was recorded") from None
    except sqlite3.Error as exc:
        raise HistoryError(f"{where}: cannot record it in {_db_path(conn)}: sqlite says: "
                           f"{exc}; nothing was recorded") from None
    assert run is not None
    return run


def node_history(conn: sqlite3.Connection, node: str, check: str | None = None,
                 limit: int = 50, runs: int | None = None) -> list[HistoryRow]:
    """``node``'s results, newest judgement first (report order within one judgement): at
    most ``limit`` rows, of the newest ``runs`` judgements that hold the node (all: None)."""
    if limit < 1 or (runs is not None and runs < 1):
        raise ValueError(f"limit and runs must be at least 1, got {limit} and {runs}")
    where = "x.node = ?" + ("" if check is None else " AND x.check_name = ?")
    params: tuple[Any, ...] = (node,) if check is None else (node, check)
    if runs is not None:
        where += (f" AND x.run IN (SELECT r2.id FROM runs AS r2 WHERE EXISTS (SELECT 1 FROM "
                  f"results AS x WHERE x.run = r2.id AND {where}) "
                  f"ORDER BY r2.judged_at DESC, r2.id DESC LIMIT ?)")
        params = (*params, *params, runs)
    try:
        rows = conn.execute(
            "SELECT r.judged_at, r.run_id, r.profile, x.check_name, x.status, x.measured, "
            "x.unit, x.expected, x.message, r.run_dir, r.profile_sha256, r.revision, x.attempt "
            f"FROM results AS x JOIN runs AS r ON r.id = x.run WHERE {where} "
            "ORDER BY r.judged_at DESC, r.id DESC, x.rowid LIMIT ?", (*params, limit)).fetchall()
    except sqlite3.Error as exc:
        raise HistoryError(f"{_db_path(conn)}: cannot read the history of {node}: "
                           f"sqlite says: {exc}") from None
    return [HistoryRow(judged_at, run_id, profile, check_name, Status.from_label(status),
                       measured, unit, expected, message, Path(run_dir), sha, revision, attempt)
            for (judged_at, run_id, profile, check_name, status, measured, unit, expected,
                 message, run_dir, sha, revision, attempt) in rows]


@dataclass(frozen=True)
class RunRow:
    """One judgement of a run, as ``rackgate history`` lists it; with a node, that node's
    verdict in it and the checks that kept it out (fail or error)."""

    judged_at: str  # ISO 8601, UTC
    run_id: str
    revision: int
    run_dir: Path
    inventory: str  # the inventory sources, comma-separated ("" when recorded before)
    racks: str  # the racks of its nodes, comma-separated ("" when none or recorded before)
    profile: str
    verdict: str  # the rack's: ACCEPT or REJECT
    nodes: int
    accepted: int
    node_verdict: str | None = None
    node_blocking: tuple[str, ...] = ()


_BLOCKS = ", ".join(f"'{s.label}'" for s in Status if s.blocks_accept)
_RAN = ", ".join(f"'{s.label}'" for s in (Status.PASS, Status.WARN))
_RUN_COLUMNS = ("r.judged_at, r.run_id, r.revision, r.run_dir, r.inventory, r.racks, "
                "r.profile, r.verdict, r.nodes, r.accepted")


def run_history(conn: sqlite3.Connection, node: str | None = None,
                runs: int = 20) -> list[RunRow]:
    """The newest ``runs`` judgements, newest first; with ``node``, those that judged it,
    with its verdict as ``model.node_verdict`` gives it: REJECT when a result blocks
    acceptance (fail, error) or none ran (pass, warn), else ACCEPT."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    try:
        if node is None:
            found = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs AS r ORDER BY "
                                 "r.judged_at DESC, r.id DESC LIMIT ?", (runs,)).fetchall()
            return [_run_row(row) for row in found]
        found = conn.execute(
            f"SELECT {_RUN_COLUMNS}, SUM(x.status IN ({_BLOCKS})), SUM(x.status IN ({_RAN})), "
            f"GROUP_CONCAT(CASE WHEN x.status IN ({_BLOCKS}) THEN x.check_name END, ',') "
            "FROM runs AS r JOIN results AS x ON x.run = r.id WHERE x.node = ? "
            "GROUP BY r.id ORDER BY r.judged_at DESC, r.id DESC LIMIT ?", (node, runs)).fetchall()
    except sqlite3.Error as exc:
        raise HistoryError(f"{_db_path(conn)}: cannot read the run history: sqlite says: "
                           f"{exc}") from None
    return [replace(_run_row(row[:10]),
                    node_verdict="REJECT" if row[10] or not row[11] else "ACCEPT",
                    node_blocking=tuple(row[12].split(",")) if row[12] else ())
            for row in found]


def _run_row(row: Sequence[Any]) -> RunRow:
    judged_at, run_id, revision, run_dir, inventory, racks, profile, verdict, nodes, ok = row
    return RunRow(judged_at, run_id, revision, Path(run_dir), inventory, racks, profile,
                  verdict, nodes, ok)


def _inventory(doc: Mapping[str, Any]) -> str:
    """The run's inventory sources (its manifest's), comma-separated."""
    sources = doc["run"].get("inventory") or []
    return ",".join(str(s) for s in sources) if isinstance(sources, list) else str(sources)


def _racks(nodes: Sequence[Mapping[str, Any]]) -> str:
    """The racks the nodes' places name, sorted, comma-separated."""
    return ",".join(sorted({str(p["rack"]) for n in nodes
                            if isinstance(p := n.get("place"), Mapping) and p.get("rack")}))


def later_runs(conn: sqlite3.Connection, nodes: Sequence[str], after: str,
               run_id: str) -> list[tuple[str, str, list[str]]]:
    """The runs other than ``run_id`` first judged after ``after`` (ISO 8601) that judged any
    of ``nodes``: (run id, run directory, the nodes of ``nodes`` it judged), oldest first."""
    since = _utc(after, f"run {run_id}")
    try:
        rows = conn.execute(
            "SELECT r.run_id, MIN(r.judged_at) AS first, MAX(r.run_dir), "
            "GROUP_CONCAT(DISTINCT x.node) FROM runs AS r JOIN results AS x ON x.run = r.id "
            "WHERE r.run_id != ? AND x.node IN (SELECT value FROM json_each(?)) "
            "GROUP BY r.run_id HAVING first > ? ORDER BY first",
            (run_id, json.dumps(list(nodes)), since)).fetchall()
    except sqlite3.Error as exc:
        raise HistoryError(f"{_db_path(conn)}: cannot read the runs after {run_id}: "
                           f"sqlite says: {exc}") from None
    return [(str(rid), str(run_dir), sorted(str(names).split(",")))
            for rid, _, run_dir, names in rows]
