"""The SQLite run history: schema, recording judged reports, and a node's results over time."""

from __future__ import annotations

import sqlite3

import pytest

from rackgate.checks import load_profile
from rackgate.model import Result, Status, node_verdict, rack_verdict
from rackgate.reports import report_document
from rackgate.store.history import (
    SCHEMA_VERSION,
    HistoryError,
    default_history_path,
    node_history,
    open_history,
    record_report,
)

SEQ, RAND = "fio.seq_read", "fio.rand_read"  # RAND: a second check name, as a report carries it


def report(run_id, generated, results_by_node, profile=None):
    """A report document as ``judge_run`` would write it, judged at ``generated``."""
    profile = profile or load_profile("demo")
    nodes = [node_verdict(node, [Result(node, check, status, msg, measured, "MB/s",
                                        ">= 50 MB/s", None, f"evidence/{node}/{check}",
                                        {"iops": 1.0})
                                 for check, status, measured, msg in results])
             for node, results in results_by_node.items()]
    digests = {(n.node, r.check): "0" * 64 for n in nodes for r in n.results}
    doc = report_document(rack_verdict(nodes), {"run_id": run_id, "checks": [SEQ, RAND]},
                          profile, {n.node: "rack r1" for n in nodes}, digests)
    return {**doc, "generated": generated}  # report_document stamps "now": fix it


def count(conn, table):
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.fixture
def history(tmp_path):
    conn = open_history(default_history_path(tmp_path))
    yield conn
    conn.close()


@pytest.fixture
def recorded(history, tmp_path):
    """Two runs of two nodes, then run-1 re-judged with a stricter profile."""
    strict = load_profile("demo").with_overrides(
        {"checks": {SEQ: {"thresholds": {"read_bw": {"ref": 1e9}}}}}, "test")
    run1 = {"n1": [(SEQ, Status.PASS, 610.0, "ok"), (RAND, Status.WARN, 90.0, "slowish")],
            "n2": [(SEQ, Status.ERROR, None, "no evidence collected"),
                   (RAND, Status.PASS, 95.0, "ok")]}
    run2 = {"n1": [(SEQ, Status.PASS, 620.0, "ok"), (RAND, Status.PASS, 99.0, "ok")],
            "n2": [(SEQ, Status.PASS, 600.0, "ok"), (RAND, Status.PASS, 97.0, "ok")]}
    rejudged = {"n1": [(SEQ, Status.FAIL, 610.0, "below 9e8"), (RAND, Status.WARN, 90.0, "x")],
                "n2": run1["n2"]}
    docs = {"run1": report("run-1", "2026-05-01T10:00:00+00:00", run1),
            "run2": report("run-2", "2026-05-02T10:00:00+00:00", run2),
            "rejudged": report("run-1", "2026-05-03T10:00:00+00:00", rejudged, strict)}
    ids = {name: record_report(history, doc, tmp_path / doc["run"]["run_id"])
           for name, doc in docs.items()}
    return docs, ids


def test_fresh_file_gets_the_schema(tmp_path):
    path = default_history_path(tmp_path)
    assert path == tmp_path / "history.sqlite" and not path.exists()
    conn = open_history(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"runs", "results"} <= tables and "results_node_check" in indexes
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert node_history(conn, "n1") == []
    conn.close()
    open_history(path).close()  # opening an existing history again changes nothing


def test_node_history_is_newest_first_with_every_judgement(recorded, history, tmp_path):
    rows = node_history(history, "n1")
    assert [(r.judged_at, r.run_id, r.check, r.status) for r in rows] == [
        ("2026-05-03T10:00:00+00:00", "run-1", SEQ, Status.FAIL),  # the re-judgement
        ("2026-05-03T10:00:00+00:00", "run-1", RAND, Status.WARN),
        ("2026-05-02T10:00:00+00:00", "run-2", SEQ, Status.PASS),
        ("2026-05-02T10:00:00+00:00", "run-2", RAND, Status.PASS),
        ("2026-05-01T10:00:00+00:00", "run-1", SEQ, Status.PASS),
        ("2026-05-01T10:00:00+00:00", "run-1", RAND, Status.WARN),
    ]
    newest = rows[0]
    assert newest.profile == "demo" and newest.profile_sha256 != rows[-1].profile_sha256
    assert newest.measured == 610.0 and newest.unit == "MB/s" and newest.message == "below 9e8"
    assert newest.expected == ">= 50 MB/s" and newest.run_dir == tmp_path / "run-1"
    assert len(node_history(history, "n1", limit=3)) == 3
    assert node_history(history, "no-such-node") == []


def test_filter_by_check(recorded, history):
    rows = node_history(history, "n2", check=RAND)
    assert [(r.run_id, r.check, r.measured) for r in rows] == [
        ("run-1", RAND, 95.0), ("run-2", RAND, 97.0), ("run-1", RAND, 95.0)]
    assert node_history(history, "n2", check="no.such.check") == []


def test_recording_the_same_report_again_adds_nothing(recorded, history, tmp_path):
    docs, ids = recorded
    before = count(history, "runs"), count(history, "results")
    assert before == (3, 12)
    for name, doc in docs.items():
        assert record_report(history, doc, tmp_path / doc["run"]["run_id"]) == ids[name]
    assert (count(history, "runs"), count(history, "results")) == before
    assert len(set(ids.values())) == 3  # a re-judgement is a judgement of its own


def test_measured_none_stays_null(recorded, history):
    (row,) = node_history(history, "n2", check=SEQ, limit=1)
    assert row.status is Status.ERROR and row.measured is None
    nulls = history.execute("SELECT count(*) FROM results WHERE node = 'n2' AND "
                            "check_name = ? AND measured IS NULL", (SEQ,)).fetchone()[0]
    assert nulls == 2  # run-1 and its re-judgement; run-2 measured 600


def test_runs_row_carries_the_verdict(recorded, history):
    rows = history.execute("SELECT run_id, verdict, nodes, accepted FROM runs "
                           "ORDER BY judged_at").fetchall()
    assert rows == [("run-1", "REJECT", 2, 1), ("run-2", "ACCEPT", 2, 2),
                    ("run-1", "REJECT", 2, 0)]


def test_garbage_file_names_the_path(tmp_path):
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 100)
    with pytest.raises(HistoryError) as err:
        open_history(path)
    assert str(path) in str(err.value) and "file is not a database" in str(err.value)


def test_newer_schema_is_refused(tmp_path):
    path = default_history_path(tmp_path)
    open_history(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(HistoryError, match=f"{path}.*newer"):
        open_history(path)


def test_a_bad_report_records_nothing(history, tmp_path):
    doc = report("run-x", "2026-05-01T10:00:00+00:00",
                 {"n1": [(SEQ, Status.PASS, 1.0, "ok")], "n2": [(SEQ, Status.PASS, 1.0, "ok")]})
    doc["nodes"][1]["results"][0]["status"] = "splendid"  # rejected by the schema's CHECK
    with pytest.raises(HistoryError, match=f"{tmp_path / 'run-x'}.*nothing was recorded"):
        record_report(history, doc, tmp_path / "run-x")
    assert (count(history, "runs"), count(history, "results")) == (0, 0)
    with pytest.raises(HistoryError, match="schema"):
        record_report(history, {**doc, "schema": "rackgate.report/9"}, tmp_path / "run-x")
