from __future__ import annotations

import os

import pytest

from rackgate.store.evidence import EvidenceError, EvidenceStore, atomic_write

FIELDS = dict(argv=("fio", "--x"), outcome="completed", rc=0, started="s", ended="e",
              duration_s=1.5, stderr="", message="")


def test_round_trip(tmp_path):
    store = EvidenceStore(tmp_path)
    ev = store.write("n1", "fio.seq_read", '{"jobs": []}\n', **FIELDS)
    got, stdout = store.read("n1", "fio.seq_read")
    assert got == ev and stdout == '{"jobs": []}\n'
    assert ev.stdout_file == "evidence/n1/fio.seq_read.out"
    assert store.has_usable("n1", "fio.seq_read")


def test_missing_evidence_is_an_error(tmp_path):
    with pytest.raises(EvidenceError, match=r"no evidence collected \(evidence/n1/c.json"):
        EvidenceStore(tmp_path).read("n1", "c")


def test_truncated_evidence_is_detected(tmp_path):
    store = EvidenceStore(tmp_path)
    store.write("n1", "c", "0123456789" * 100, **FIELDS)
    out = tmp_path / "evidence/n1/c.out"
    out.write_bytes(out.read_bytes()[:500])
    with pytest.raises(EvidenceError, match="is damaged: 500 bytes"):
        store.read("n1", "c")
    assert not store.has_usable("n1", "c")


def test_unreadable_record(tmp_path):
    store = EvidenceStore(tmp_path)
    store.write("n1", "c", "x", **FIELDS)
    (tmp_path / "evidence/n1/c.json").write_text('{"host": "n1"')
    with pytest.raises(EvidenceError, match="unreadable"):
        store.read("n1", "c")


def test_timeout_is_not_usable(tmp_path):
    store = EvidenceStore(tmp_path)
    store.write("n1", "c", "", **{**FIELDS, "outcome": "timeout", "rc": 124})
    assert not store.has_usable("n1", "c")


@pytest.mark.parametrize("name", ["..", "a/b", ""])
def test_path_escape_is_refused(tmp_path, name):
    with pytest.raises(EvidenceError, match="unsafe name"):
        EvidenceStore(tmp_path).write(name, "c", "x", **FIELDS)


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    atomic_write(target, b"old")

    def crash(fd):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="disk gone"):
        atomic_write(target, b"new content")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]
