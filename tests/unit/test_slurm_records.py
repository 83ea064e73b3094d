"""Issue 28: a SLURM collection job's output bound task by task to the nodes it ran on
(collect/slurm_records.py), and the files the collector and the readiness guard write.

The job's output is built here as srun writes it with ``--label`` (srun(1): the task's
number, right-aligned to the width of the highest, then ``: ``), from the node
collector's own ``frame``, after the readiness guard's first line. Every way a line can
claim to be another node's must leave that node without a record.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rackgate.collect.bundle import RECORDS, on_host
from rackgate.collect.framing import decode
from rackgate.collect.slurm_records import decode_job
from rackgate.commands.launch import when_slurm_ready
from rackgate.commands.task import Task
from rackgate.programs.probes.node_collector import frame

DOC = {"argv": ["true"], "rc": 0, "start": "s", "end": "e", "stdout": "ok", "stderr": ""}
EXPECTED = {"a": ["c"], "b": ["c"]}


def head(ready: list[str], left_out: dict[str, str] | None = None) -> str:
    return "rackgate-slurm-ready " + json.dumps({"ready": ready, "left_out": left_out or {}})


def task(n: int, node: str, claimed: int | None = None, label: bool = True) -> list[str]:
    """Task ``n``'s lines, as its collector on ``node`` prints them (its +begin naming task
    ``claimed``, by default ``n``)."""
    lines = (frame(node, "+begin", {"task": n if claimed is None else claimed})
             + frame(node, "c", {**DOC, "stdout": f"{node} ok"})
             + frame(node, "+end", {"why": ""}))
    return [f"{n}: {x}" if label else x for x in lines]


def job(*tasks: list[str], first: str | None = None) -> str:
    return "\n".join([head(["a", "b"]) if first is None else first,
                      *[x for t in tasks for x in t]])


def test_every_task_bound_to_its_node() -> None:
    got = decode_job(job(task(0, "a"), task(1, "b")), EXPECTED).decoded
    assert {k: r.stdout for k, r in got.records.items()} == {("a", "c"): "a ok",
                                                            ("b", "c"): "b ok"}
    assert (got.foreign, got.refused) == ([], {})


def test_two_tasks_claiming_one_node_are_both_refused() -> None:
    got = decode_job(job(task(0, "a"), task(1, "a")), EXPECTED).decoded
    assert got.records == {}
    assert got.refused == {"a": "tasks 0, 1 of the job each claim to be a"}


def test_a_first_record_naming_another_task_binds_nothing() -> None:
    got = decode_job(job(task(0, "a", claimed=1), task(1, "b")), EXPECTED).decoded
    assert list(got.records) == [("b", "c")]
    assert got.refused == {"a": "task 0's first record names task 1: srun labelled its "
                                "lines 0"}


def test_frames_without_a_label_are_nobodys() -> None:
    got = decode_job(job(task(0, "a", label=False), task(1, "b")), EXPECTED).decoded
    assert list(got.records) == [("b", "c")]
    assert got.foreign == ["a +begin", "a +end", "a c"]
    assert "a" not in got.begun


def test_a_task_number_the_job_does_not_have_binds_nothing() -> None:
    got = decode_job(job(task(0, "a"), task(7, "b", claimed=7)), EXPECTED).decoded
    assert list(got.records) == [("a", "c")]
    assert got.refused["b"] == "task 7 is not a task of the job (it has 2)"


def test_without_the_guards_line_no_node_ran() -> None:
    for first, why in (("srun: error: x", "does not begin with the readiness guard's line"),
                       ("rackgate-slurm-ready {", "line is unreadable"),
                       (head(["a", "z"]), "names nodes not asked for, or a node twice (z)"),
                       (head(["a", "a"]), "names nodes not asked for, or a node twice"),
                       (head(["a"], {"a": "drained"}), "or a node twice")):
        got = decode_job(job(task(0, "a"), task(1, "b"), first=first), EXPECTED)
        assert got.ready is None and why in got.problem, (first, got.problem)


def test_a_node_the_guard_left_out_has_no_task() -> None:
    lines = job(task(0, "a"), task(1, "b"), first=head(["a"], {"b": "drained (PSU)"}))
    got = decode_job(lines, EXPECTED)
    assert got.left_out == {"b": "drained (PSU)"} and list(got.decoded.records) == [("a", "c")]
    assert got.decoded.foreign == ["b +begin", "b +end", "b c"]


def test_labels_padded_as_srun_pads_them_and_long_lines_skipped() -> None:
    """srun pads a label to the width of the highest task number (`` 3: ``); a line longer
    than any frame (a flood on a task's output) is skipped without stopping the rest."""
    nodes = [f"n{i}" for i in range(12)]
    lines = [head(nodes), "x" * 100_000]
    for i, node in enumerate(nodes):
        lines += [f"{i:>2}: {x}"
                  for x in frame(node, "+begin", {"task": i}) + frame(node, "c", DOC)]
    got = decode_job("\n".join(lines), {n: ["c"] for n in nodes}).decoded
    assert len(got.records) == 12 and got.refused == {}


def test_a_hosts_collector_output_may_carry_its_own_records_only() -> None:
    """--via ansible: a frame of another node in one host's records file refuses them all."""
    text = "\n".join(frame("a", "+begin", {}) + frame("a", "c", DOC) + frame("b", "c", DOC))
    got = decode(text, {"a": ["c"]})
    assert got.foreign == ["b c"] and got.records == {}
    assert got.refused["a"] == ("the output of a's collector also carried records that are "
                                "not its node's (b c): something on a wrote into it")
    assert list(decode("\n".join(frame("a", "c", DOC)), {"a": ["c"]}).records) == [("a", "c")]


def test_the_collector_never_writes_into_an_existing_file_or_link(tmp_path: Path) -> None:
    bundle, _ = on_host("n1", [Task("n1", "c", ("true",), 5, lock_file=None)], "t@1", "me")
    (tmp_path / "elsewhere").write_text("keep me")
    (tmp_path / RECORDS).symlink_to(tmp_path / "elsewhere")
    proc = subprocess.run([sys.executable, *bundle.argv[1:]], input=bundle.stdin, text=True,
                          capture_output=True, timeout=60, check=False, cwd=tmp_path)
    assert proc.returncode == 1 and f"cannot create {RECORDS}" in proc.stderr
    assert (tmp_path / "elsewhere").read_text() == "keep me"


def sinfo(tmp_path: Path, lines: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text(f"#!/bin/sh\nprintf '{lines}'\n")
    (bin_dir / "sinfo").chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_the_guard_writes_its_decision_and_the_jobs_output_to_its_files(
        tmp_path: Path) -> None:
    env = sinfo(tmp_path, "n1|idle|none\\nn2|drained|bad PSU\\n")
    argv = when_slurm_ready(("n1", "n2"), ["sh", "-c", "echo out; echo err >&2", "x"],
                            some=True, files=("rec", "err"))
    proc = subprocess.run([sys.executable, *argv[1:]], env=env, cwd=tmp_path, text=True,
                          capture_output=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert (tmp_path / "rec").read_text().splitlines() == [
        'rackgate-slurm-ready {"ready":["n1"],"left_out":{"n2":"drained (bad PSU)"}}', "out"]
    assert (tmp_path / "err").read_text().splitlines() == [
        "rackgate-slurm-ready: not run on n2: drained (bad PSU)", "err"]
    again = subprocess.run([sys.executable, *argv[1:]], env=env, cwd=tmp_path, text=True,
                           capture_output=True, timeout=60, check=False)
    assert again.returncode == 3 and "cannot create the job's output files" in again.stderr


def test_a_record_nested_too_deep_is_damaged_not_a_crash() -> None:
    """A record (any JSON) nested deeper than documents.MAX_DEPTH is damaged evidence."""
    import base64
    import hashlib
    import zlib

    payload = base64.b64encode(zlib.compress(b"[" * 100_000 + b"]" * 100_000)).decode()
    digest = hashlib.sha256(payload.encode()).hexdigest()[:16]
    lines = [f"RGEV1 a c {i + 1}/{len(payload) // 800 + 1} {digest} {payload[p:p + 800]}"
             for i, p in enumerate(range(0, len(payload), 800))]
    got = decode("\n".join(lines), {"a": ["c"]})
    assert got.damaged[("a", "c")].startswith("unreadable (DocumentError: nested more than")
