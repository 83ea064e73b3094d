"""The run manifest as a model (rackgate.store.manifest.Manifest): what validate writes reads
back unchanged, and a manifest that is wrong anywhere is a Refusal naming the file and the
field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rackgate.checks import load_profile
from rackgate.refusal import Refusal
from rackgate.store.manifest import MANIFEST_SCHEMA, Launched, Manifest, read_manifest

DEMO = load_profile("demo")


def written(tmp_path: Path) -> dict[str, Any]:
    """A manifest as ``run.validate`` writes it when a collection has ended."""
    return {
        "schema": MANIFEST_SCHEMA, "run_id": "20261204T000000Z-demo", "started": "t0",
        "finished": "t1", "resumed": [], "inventory": ["/site/hosts.yml"], "group": "compute",
        "limit": None, "checks": ["fio.seq_read", "mpi.allreduce"],
        "profile": {"name": "demo", "source": "demo.yaml", "sha256": DEMO.sha256,
                    "document": dict(DEMO.raw)},
        "run_dir": str(tmp_path),
        "hosts": [{"name": "n1", "location": "rack r1 u 1", "place": {"rack": "r1", "u": 1},
                   "profile_overrides": None},
                  {"name": "n2", "location": "", "place": None, "profile_overrides": {}}],
        "launch_host": "head", "no_launch_reason": None,
        "launched": {"mpi.allreduce": {"nodes": ["n1"], "left_out": {"n2": "unreachable"}}},
        "revisions": [{"revision": 1, "kind": "validate", "at": "t0", "via": "ansible"}],
        "rackgate_version": "0", "ansible_core_version": "0",
        "ansible_runner_status": "successful"}


def stored(tmp_path: Path, doc: Any) -> Path:
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    return tmp_path


def test_what_validate_writes_reads_back_as_it_was(tmp_path: Path) -> None:
    doc = written(tmp_path)
    manifest = read_manifest(stored(tmp_path, doc))
    assert manifest.to_doc() == doc
    assert manifest.host_names() == ("n1", "n2")
    assert manifest.launched["mpi.allreduce"] == Launched(nodes=("n1",),
                                                          left_out={"n2": "unreachable"})


def test_a_host_written_before_place_and_overrides_existed_is_written_back_without_them(
        tmp_path: Path) -> None:
    """A manifest whose hosts have no ``place`` (nor ``profile_overrides``) is written back
    as it was: a key the file did not have does not appear as null (the report would carry
    it); one it had as null stays null."""
    doc = written(tmp_path)
    doc["hosts"] = [{"name": "n1", "location": "rack r1"},
                    {"name": "n2", "location": "", "place": None, "profile_overrides": None}]
    assert read_manifest(stored(tmp_path, doc)).to_doc()["hosts"] == doc["hosts"]


def test_a_manifest_from_before_revisions_has_its_validate_and_each_resume(
        tmp_path: Path) -> None:
    doc = {k: v for k, v in written(tmp_path).items() if k != "revisions"}
    manifest = Manifest.from_doc({**doc, "resumed": ["t2"]}, "m")
    assert [(r.revision, r.kind, r.at) for r in manifest.revisions] == [
        (1, "validate", "t0"), (2, "resume", "t2")]
    assert manifest.add_revision("retest", nodes=["n2"], checks=["fio.seq_read"],
                                 via="slurm") == 3
    assert manifest.to_doc()["revisions"][2]["nodes"] == ["n2"]


TAMPERINGS: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "another schema": (lambda m: {**m, "schema": "rackgate.manifest/2"}, "field schema"),
    "run_id a number": (lambda m: {**m, "run_id": 7}, "field run_id"),
    "no checks": (lambda m: {**m, "checks": []}, "field checks"),
    "a blank check": (lambda m: {**m, "checks": [" "]}, "field checks[0]"),
    "a check twice": (lambda m: {**m, "checks": ["fio.seq_read"] * 2}, "field checks"),
    "no hosts": (lambda m: {**m, "hosts": []}, "field hosts"),
    "a host twice": (lambda m: {**m, "hosts": m["hosts"][:1] * 2}, "field hosts"),
    "a nameless host": (lambda m: {**m, "hosts": [{**m["hosts"][0], "name": ""}]},
                        "field hosts[0].name"),
    "overrides a list": (lambda m: {**m, "hosts": [{**m["hosts"][0],
                                                     "profile_overrides": []}]},
                         "field hosts[0].profile_overrides"),
    "no profile document": (lambda m: {**m, "profile": {"name": "demo", "source": "x"}},
                            "field profile.document"),
    "a foreign field": (lambda m: {**m, "verdict": "ACCEPT"}, "field verdict"),
    "launched names a stranger": (
        lambda m: {**m, "launched": {"mpi.allreduce": {"nodes": ["n9"], "left_out": {}}}},
        "field launched.mpi.allreduce names host(s) not under test: n9"),
    "launched lists a host twice": (
        lambda m: {**m, "launched": {"mpi.allreduce": {"nodes": ["n1"],
                                                       "left_out": {"n1": "x"}}}},
        "field launched.mpi.allreduce"),
    "revisions out of order": (
        lambda m: {**m, "revisions": [{"revision": 2, "kind": "validate", "at": "t0"}]},
        "field revisions[0]"),
    "an unknown revision kind": (
        lambda m: {**m, "revisions": [{"revision": 1, "kind": "rerun", "at": "t0"}]},
        "field revisions[0].kind"),
    "a blank no_launch_reason": (lambda m: {**m, "no_launch_reason": "  "},
                                 "field no_launch_reason"),
    "a JSON list": (lambda m: [m], "the manifest must be a JSON object, got list"),
}


@pytest.mark.parametrize("tamper", TAMPERINGS, ids=list(TAMPERINGS))
def test_a_wrong_manifest_is_a_refusal_naming_the_file_and_the_field(tmp_path: Path,
                                                                    tamper: str) -> None:
    change, named = TAMPERINGS[tamper]
    run = stored(tmp_path, change(written(tmp_path)))
    with pytest.raises(Refusal) as caught:
        read_manifest(run)
    assert str(caught.value).startswith(f"{run / 'manifest.json'}: ")
    assert named in str(caught.value)


def test_no_manifest_is_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(Refusal, match="is not a rackgate run directory"):
        read_manifest(tmp_path)
