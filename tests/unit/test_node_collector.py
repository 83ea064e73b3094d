"""Issue 19: the node collector (programs/probes/node_collector.py) and its framing.

The collector runs for real here, as Ansible and SLURM run it: ``python3 -c <text>`` with
the tasks on stdin, real commands under rackgate's real node lock and ``timeout``. Its
output is then cut, shuffled, corrupted and duplicated the ways a job's output can be,
and ``collect.framing.decode`` must call every such record damaged, never a result. The
SLURM side (one job across the nodes, the readiness guard leaving nodes out) is run
against the demo rack's real slurmctld in tests/e2e/test_collect_via_slurm.py.
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest

from rackgate.collect.bundle import ERRORS, RECORDS, Bundle, on_host, slurm_job
from rackgate.collect.framing import decode
from rackgate.collect.runner_events import BUNDLE_TASK, FETCH_TASK, Recorder
from rackgate.collect.slurm_records import decode_job
from rackgate.commands.task import Task
from rackgate.programs.probes.node_collector import frame
from rackgate.store.evidence import EvidenceStore
from rackgate.store.manifest import new_run_dir


def run_collector(tasks: list[Task], tmp_path: Path, node: str = "n1",
                  timeout: int = 60) -> tuple[subprocess.CompletedProcess[str], str]:
    """The collector run as Ansible runs it, in a directory of its own (the playbook's
    private directory): its result, and the records it wrote there."""
    bundle, _ = on_host(node, tasks, "tok", "test")
    where = Path(tempfile.mkdtemp(dir=tmp_path))
    proc = subprocess.run([sys.executable, *bundle.argv[1:]], input=bundle.stdin,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=where)
    return proc, (where / RECORDS).read_text()


def start_collector(bundle: Bundle, tmp_path: Path, lock_holds: str
                    ) -> tuple[subprocess.Popen[str], Path]:
    """The collector of ``bundle`` started in the background, once the node lock's record
    holds ``lock_holds`` (its first command has taken the lock); bounded wait. Returns
    the process and the records file it writes."""
    import time

    where = Path(tempfile.mkdtemp(dir=tmp_path))
    (where / "stdin.json").write_text(bundle.stdin)
    with (where / "stdin.json").open() as stdin:
        proc = subprocess.Popen([sys.executable, *bundle.argv[1:]], stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=where)
    lock = tmp_path / "node.lock"
    deadline = time.monotonic() + 30
    while lock_holds not in (lock.read_text() if lock.exists() else ""):
        assert time.monotonic() < deadline, f"the node lock never held {lock_holds!r}"
        time.sleep(0.1)
    return proc, where / RECORDS


def task(check: str, argv: tuple[str, ...], tmp_path: Path, timeout_s: int = 20) -> Task:
    return Task("n1", check, argv, timeout_s, lock_file=str(tmp_path / "node.lock"),
                lock_wait_s=5)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Task]]:
    tmp = tmp_path_factory.mktemp("collector")
    tasks = [task("t.ok", ("printf", "hello\\nworld\\n"), tmp),
             task("t.fails", ("sh", "-c", "echo out; echo err >&2; exit 3"), tmp),
             task("t.slow", ("sleep", "30"), tmp, timeout_s=1),
             task("t.missing", ("rackgate-no-such-tool",), tmp),
             task("t.big", ("head", "-c", "200000", "/dev/urandom"), tmp)]
    proc, records = run_collector(tasks, tmp)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # every record is in the file
    return records, tasks


def test_every_command_comes_back_as_it_ran(collected: tuple[str, list[Task]]) -> None:
    text, tasks = collected
    got = decode(text, {"n1": [t.check for t in tasks]})
    assert got.damaged == {} and got.foreign == []
    assert got.begun == {"n1"} and got.ended == {"n1": ""}
    recs = {c: got.records[("n1", c)] for _, c in got.records}
    assert (recs["t.ok"].rc, recs["t.ok"].stdout) == (0, "hello\nworld")  # as Ansible strips
    assert (recs["t.fails"].rc, recs["t.fails"].stdout, recs["t.fails"].stderr) == (3, "out", "err")
    assert recs["t.slow"].rc == 124  # timeout(1), inside the node lock
    assert recs["t.missing"].rc == 127
    assert len(recs["t.big"].stdout) > 100_000  # many lines, reassembled
    assert recs["t.ok"].argv[:2] == ("sh", "-c")  # the node lock wrapper ran it
    assert recs["t.ok"].argv[-2:] == ("printf", "hello\\nworld\\n")
    for line in text.splitlines():
        assert len(line) < 1000, "a line SLURM could split"


def test_a_record_cut_short_is_damaged(collected: tuple[str, list[Task]]) -> None:
    text, tasks = collected
    lines = text.splitlines()
    big = [i for i, line in enumerate(lines) if " t.big " in line]
    del lines[big[len(big) // 2]]
    got = decode("\n".join(lines), {"n1": [t.check for t in tasks]})
    assert got.damaged[("n1", "t.big")].startswith("cut short:")
    assert ("n1", "t.big") not in got.records
    # the job's output ending half-way: every record after the cut is missing, and the
    # node never said it ended
    half = decode("\n".join(text.splitlines()[:big[0] + 1]), {"n1": [t.check for t in tasks]})
    assert "n1" not in half.ended and ("n1", "t.big") in half.damaged


def test_a_changed_line_fails_the_digest(collected: tuple[str, list[Task]]) -> None:
    text, tasks = collected
    lines = text.splitlines()
    i = next(i for i, line in enumerate(lines) if " t.ok " in line)
    head, _, chunk = lines[i].rpartition(" ")
    lines[i] = f"{head} {chunk[:-4]}AAAA"
    got = decode("\n".join(lines), {"n1": [t.check for t in tasks]})
    assert got.damaged[("n1", "t.ok")] == "its lines do not match its digest"


def test_interleaved_labelled_tasks_decode_and_foreign_ones_are_named() -> None:
    """A SLURM job's output: the guard's line, then every task's lines behind srun's
    label, interleaved; srun's own words and unlabelled frames are not any node's."""
    doc = {"argv": ["x"], "rc": 0, "start": "s", "end": "e", "stdout": "o" * 5000, "stderr": ""}
    lines = [f"{n}: {line}" for n, node in enumerate(("a", "b"))
             for line in frame(node, "+begin", {"task": n})
             + frame(node, "c", {**doc, "stdout": node * 5000})]
    lines += [*frame("stranger", "c", doc), "srun: error: something SLURM said"]
    random.Random(19).shuffle(lines)
    head = 'rackgate-slurm-ready {"ready":["a","b"],"left_out":{}}'
    job = decode_job("\n".join([head, *lines]), {"a": ["c"], "b": ["c"]})
    got = job.decoded
    assert got.records[("a", "c")].stdout == "a" * 5000
    assert got.records[("b", "c")].stdout == "b" * 5000
    assert got.foreign == ["stranger c"] and got.refused == {}


def test_two_different_records_for_one_command_are_damaged() -> None:
    doc = {"argv": ["x"], "rc": 0, "start": "s", "end": "e", "stdout": "", "stderr": ""}
    text = "\n".join(frame("a", "c", doc) + frame("a", "c", {**doc, "rc": 1}))
    assert decode(text, {"a": ["c"]}).damaged == {("a", "c"): "two different records came "
                                                               "back for it"}
    same = "\n".join(frame("a", "c", doc) * 2)  # one line forwarded twice is harmless
    assert decode(same, {"a": ["c"]}).records[("a", "c")].rc == 0


def test_a_record_of_the_wrong_shape_is_damaged() -> None:
    bad = {"argv": "x", "rc": 0, "start": "s", "end": "e", "stdout": "", "stderr": ""}
    got = decode("\n".join(frame("a", "c", bad) + frame("a", "d", {**bad, "argv": ["x"],
                                                                   "rc": True})),
                 {"a": ["c", "d"]})
    assert got.damaged == {("a", "c"): "field argv is not a list of strings",
                           ("a", "d"): "field rc is not an exit status: True"}


def job_event(task: str, res: dict[str, object]) -> dict[str, object]:
    return {"event": "runner_on_ok", "event_data": {"host": "head", "task": task, "res": res}}


def test_what_did_not_come_back_is_recorded_not_run(tmp_path: Path) -> None:
    """The recorder, on a SLURM job's files fetched from the launch host: a node the
    readiness guard left out (SLURM's reason), one whose task never started, one cut
    short; none of them is a result."""
    store = EvidenceStore(new_run_dir(tmp_path / "runs", "t"))
    tasks = [Task(n, "c", ("true",), 5) for n in ("a", "b", "d", "e")]
    bundle, ran = slurm_job("head", tasks, "tok", "test")
    doc = {"argv": ["true"], "rc": 0, "start": "2026-12-02 10:00:00.000000",
           "end": "2026-12-02 10:00:01.500000", "stdout": "ok", "stderr": ""}
    lines = [f"0: {x}" for x in frame("a", "+begin", {"task": 0}) + frame("a", "c", doc)
             + frame("a", "+end", {"why": ""})]
    noise = os.urandom(3000).hex()  # does not compress: several lines
    lines += [f"2: {x}" for x in frame("e", "+begin", {"task": 2})
              + frame("e", "c", {**doc, "stdout": noise})[:1]]
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    (fetched / RECORDS).write_text(
        'rackgate-slurm-ready {"ready":["a","d","e"],"left_out":{"b":"drained (bad PSU)"}}\n'
        + "\n".join(lines) + "\n")
    (fetched / ERRORS).write_text("srun: error: d: task 1: Exited with exit code 1\n")
    seen: list[tuple[str, str, str]] = []
    rec = Recorder(tasks, store, lambda h, c, o: seen.append((h, c, o)),
                   {(t.host, t.check): a for t, a in ran.items()}, bundles={"head": bundle})
    rec.fetched_to["head"] = fetched
    rec.handle(job_event(BUNDLE_TASK, {"rc": 1, "stdout": "", "stderr": ""}))
    assert seen == []  # the records come with the files
    rec.handle(job_event(FETCH_TASK, {"changed": True}))
    assert sorted(seen) == [("a", "c", "completed"), ("b", "c", "not_run"),
                            ("d", "c", "not_run"), ("e", "c", "not_run")]
    ev, out = store.read("a", "c")
    assert (ev.rc, out, ev.duration_s) == (0, "ok", 1.5)
    assert store.read("b", "c")[0].message == "SLURM did not run it: b is drained (bad PSU)"
    assert store.read("d", "c")[0].message == (
        "the SLURM job rackgate-collect-tok on head never started on d (rc 1): srun: error: "
        "d: task 1: Exited with exit code 1")
    assert "is damaged: cut short" in store.read("e", "c")[0].message


def test_the_input_of_a_rack_stays_small() -> None:
    """Every node of a 10,000-node job gets the whole input: each argv and each list of
    tasks is written once, and the whole is compressed (a node with its own profile
    override has a list of its own)."""
    nodes = [f"gpu{i:05d}" for i in range(10_000)]
    size = {("gpu00007", 0): "2G"}  # one node's override of one check
    tasks = [Task(n, f"c{k}", ("fio", f"--size={size.get((n, k), '1G')}", str(k)), 600,
                  lock_file="/var/lock/rackgate.lock") for n in nodes for k in range(20)]
    bundle, _ = slurm_job("head", tasks, "run@1", "who")
    doc = json.loads(zlib.decompress(base64.b64decode(bundle.stdin)))
    assert len(doc["argvs"]) == 21 and len(doc["lists"]) == 2
    assert doc["lists"][doc["nodes"]["gpu00007"]] != doc["lists"][doc["nodes"]["gpu00001"]]
    assert len(bundle.stdin) < 100_000, len(bundle.stdin)


def test_a_command_ended_from_outside_stops_the_collector(tmp_path: Path) -> None:
    """A newer attempt of the run ends the command its node lock names (its whole process
    group, SIGTERM): the collector of the older attempt records it and runs nothing more,
    so an orphaned collector never goes on beside the attempt that replaced it."""
    import signal

    tasks = [task("t.long", ("sleep", "60"), tmp_path), task("t.next", ("true",), tmp_path)]
    bundle, _ = on_host("n1", tasks, "tok", "test")
    proc, records = start_collector(bundle, tmp_path, "pgid")
    lock = tmp_path / "node.lock"
    os.killpg(int(lock.read_text().split()[1]), signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    got = decode(records.read_text(), {"n1": ["t.long", "t.next"]})
    assert got.records[("n1", "t.long")].rc == -15
    assert ("n1", "t.next") not in got.records
    assert got.ended["n1"] == "t.long was ended by signal 15 from outside; the rest was not run"


def test_an_older_attempt_gives_way_to_a_newer_one(tmp_path: Path) -> None:
    """Two attempts of one run on a node (the older one's rackgate was killed, a --resume
    runs now): the newer ends what the older one runs, and the older one, finding a newer
    attempt's record on the node lock, runs nothing more, instead of ending the newer's
    commands in turn (the same run token: only the attempt orders them)."""
    import signal

    lock = tmp_path / "node.lock"
    older = [task("t.long", ("sleep", "60"), tmp_path), task("t.next", ("true",), tmp_path)]
    newer = [task("t.long", ("true",), tmp_path), task("t.next", ("sleep", "1"), tmp_path)]
    old_bundle, _ = on_host("n1", older, "run@1000", "older")
    new_bundle, _ = on_host("n1", newer, "run@2000", "newer")
    old, old_records = start_collector(old_bundle, tmp_path, "attempt 1000")
    where = Path(tempfile.mkdtemp(dir=tmp_path))
    subprocess.run([sys.executable, *new_bundle.argv[1:]], input=new_bundle.stdin,
                   capture_output=True, text=True, timeout=60, check=False, cwd=where)
    old.communicate(timeout=60)
    got_new = decode((where / RECORDS).read_text(), {"n1": ["t.long", "t.next"]})
    assert [got_new.records[("n1", c)].rc for c in ("t.long", "t.next")] == [0, 0]
    assert "earlier attempt of this run" in got_new.records[("n1", "t.long")].stderr
    got_old = decode(old_records.read_text(), {"n1": ["t.long", "t.next"]})
    assert got_old.records[("n1", "t.long")].rc == -signal.SIGTERM
    assert ("n1", "t.next") not in got_old.records
    assert "attempt 2000" in lock.read_text()
