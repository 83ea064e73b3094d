"""``validate --retest``: a repaired node's failures are collected again in the same run
directory, its earlier evidence kept as attempts, the reports become revision 2 and the
history shows both revisions. Real Ansible (local connection: two inventory hosts on this
machine) and the real fio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from rackgate.checks import load_profile
from rackgate.model import Verdict
from rackgate.refusal import Refusal
from rackgate.run import retest, validate
from rackgate.store.history import default_history_path, node_history, open_history

ROOT = Path(__file__).resolve().parents[2]
SMALL_FIO = {"checks": {"fio.seq_read": {"params": {"size": "16M", "direct": False,
                                                    "runtime_s": 1}}}}


@pytest.fixture
def rack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, Path]]:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}"
                               f"{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    scratch = {n: tmp_path / f"scratch-{n}" for n in ("n1", "n2")}
    scratch["n1"].mkdir()
    scratch["n2"].write_text("a file where the scratch directory should be: fio fails\n")
    hosts = {n: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "rackgate_scratch_path": str(path),
                 "rackgate_node_lock_file": str(tmp_path / f"{n}.lock"),
                 "rackgate_profile_overrides": SMALL_FIO}
             for n, path in scratch.items()}
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": hosts}}}}))
    return inv, scratch


def test_retest_collects_the_failures_again_as_revision_2(rack, tmp_path: Path) -> None:
    inv, scratch = rack
    runs = tmp_path / "runs"
    first = validate([str(inv)], load_profile("demo"), checks=["fio.seq_read"], runs_dir=runs)
    by = {n.node: n for n in first.rack.nodes}
    assert by["n1"].verdict is Verdict.ACCEPT and by["n2"].verdict is Verdict.REJECT
    assert first.revision == 1
    # no fabric plan beside this inventory: the run records no fabric (its report is as it
    # was before fabric plans existed)
    assert not {"fabric", "fabric_host"} & json.loads(
        (first.run_dir / "manifest.json").read_text()).keys()
    with pytest.raises(Refusal, match="nothing to retest"):
        retest(first.run_dir, limit="n1")  # n1 passed: nothing of it to collect again

    scratch["n2"].unlink()  # the repair
    scratch["n2"].mkdir()
    collected: list[tuple[str, str]] = []
    second = retest(first.run_dir, progress=lambda h, c, o: collected.append((h, c)))
    assert collected == [("n2", "fio.seq_read")]  # only the failure
    assert second.run_dir == first.run_dir and second.revision == 2
    assert second.rack.verdict is Verdict.ACCEPT
    evidence = first.run_dir / "evidence"
    assert (evidence / "n2" / "fio.seq_read.json").is_file()  # attempt 1 kept
    assert (evidence / "n2" / "fio.seq_read~2.json").is_file()
    assert not (evidence / "n1" / "fio.seq_read~2.json").exists()

    doc = json.loads(second.report_json.read_text())
    assert doc["revision"] == 2
    assert [(a["revision"], a["kind"]) for a in doc["attempts"]] == [(1, "validate"),
                                                                     (2, "retest")]
    assert doc["attempts"][1]["nodes"] == ["n2"]
    results = {n["name"]: n["results"][0] for n in doc["nodes"]}
    assert results["n2"]["attempt"] == 2 and results["n1"]["attempt"] == 1
    assert "revision 2" in second.report_html.read_text()

    conn = open_history(default_history_path(runs))
    try:
        rows = node_history(conn, "n2", "fio.seq_read")
    finally:
        conn.close()
    assert [(r.revision, r.attempt, r.status.label) for r in rows] == [(2, 2, "pass"),
                                                                       (1, 1, "error")]


def test_a_log_gets_the_unusual_progress_lines_and_one_per_check(rack, tmp_path: Path,
                                                                  capsys) -> None:
    """Issue 16: written to a log (no terminal), validate prints one progress line per check
    when its last node is in, and a line per command only with --show all; the results
    table lists only the problems (n2's fio cannot write its scratch file)."""
    from rackgate.cli.main import main

    inv, _ = rack
    argv = ["validate", "-i", str(inv), "--profile", "demo", "--checks", "fio.seq_read",
            "--runs-dir", str(tmp_path / "runs"), "--no-plan"]
    assert main(argv) == 1
    quiet = capsys.readouterr().out
    assert "[2/2] fio.seq_read: 2 completed" in quiet, quiet
    assert "fio.seq_read n1: completed" not in quiet
    assert "Results: 1 pass, 0 skip, 0 warn, 0 fail, 1 error (2 nodes x 1 check)" in quiet
    assert main([*argv, "--show", "all"]) == 1
    loud = capsys.readouterr().out
    assert "fio.seq_read n1: completed" in loud and "fio.seq_read n2: completed" in loud
