"""Issue 28, findings 6 and 7: what a collection accepts, and what size empties it.

6. ``--via slurm`` decoded the job's output without binding each task's lines to the node
   it ran on: frames for another node in one task's output were taken as that node's
   records, and a node SLURM never ran (drained) was ACCEPTed on them.
7. The whole SLURM job (and one host's collector with ``--via ansible``) was one Ansible
   result, which ansible-runner empties above its ``MAX_EVENT_RES`` (700,000 characters):
   at 60 nodes every node was "never started (rc None)".

The collections are real: ansible-runner and ansible-playbook over a local launch host
(``ansible_connection: local``), the readiness guard and the node collector as SLURM runs
them, and stand-ins for ``srun`` and ``sinfo`` on PATH (tests/unit/slurm_stub.py) that
run one collector per node with SLURM's task variables and srun's ``--label``. Every
wait is bounded (the collection's own bound, and pytest's subprocess timeouts).
"""

from __future__ import annotations

import base64
import hashlib
import random
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from slurm_stub import install, on_path

from rackgate.collect.ansible import collect
from rackgate.collect.stop import Stop
from rackgate.commands.task import Task
from rackgate.programs.probes.node_collector import frame
from rackgate.store.evidence import EvidenceStore
from rackgate.store.manifest import new_run_dir

ROOT = Path(__file__).resolve().parents[2]
DOC = {"argv": ["timeout", "--kill-after=10", "30", "cat", "x"], "rc": 0,
       "start": "2026-12-03 10:00:00.000000", "end": "2026-12-03 10:00:01.000000",
       "stdout": "healthy, says someone", "stderr": ""}


def inventory(tmp_path: Path, hosts: tuple[str, ...] = ("head",)) -> Path:
    path = tmp_path / "inv.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {
        h: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        for h in hosts}}}))
    return path


def collected(tmp_path: Path, tasks: list[Task], monkeypatch: pytest.MonkeyPatch,
              via_slurm: bool = True, sync: bool = True, bound_s: float = 300,
              **stub: Any) -> EvidenceStore:
    """``tasks`` collected through the stand-in SLURM (``--via slurm``, launch host
    ``head``) or through Ansible (their hosts local); ``sync``: the evidence store's. The
    collection is stopped (and the test fails) after ``bound_s``."""
    monkeypatch.setenv("PATH", on_path(install(tmp_path / "slurm", **stub)))
    monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))
    store = EvidenceStore(new_run_dir(tmp_path / "runs", "t"), sync=sync)
    hosts = ("head",) if via_slurm else tuple(sorted({t.host for t in tasks}))
    stop = Stop()
    timer = threading.Timer(bound_s, stop.set, args=("the test's bound",))
    timer.start()
    try:
        status = collect(tasks, [str(inventory(tmp_path, hosts))], store, forks=5,
                         stop=stop, slurm_host="head" if via_slurm else None)
    finally:
        timer.cancel()
    assert status == "successful", f"{status}: the collection did not end within {bound_s} s"
    return store


def stub_task(node: str, check: str, argv: tuple[str, ...], tmp_path: Path) -> Task:
    return Task(node, check, argv, 120, lock_file=str(tmp_path / f"{node}.lock"))


def outcomes(store: EvidenceStore, tasks: list[Task]) -> Counter[str]:
    return Counter(store.read(t.host, t.check)[0].outcome for t in tasks)


# ---------------------------------------------------------------- finding 6


def test_sound2_6_a_drained_node_is_not_run_whatever_the_job_printed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Something on node a writes frames for b (drained: SLURM never ran it) into a's
    task output: b is not run, with SLURM's reason; a's own records are refused (its
    output carried another node's); c, untouched, is collected."""
    tasks = [stub_task(n, "c1", ("echo", f"{n} measured"), tmp_path) for n in "abc"]
    forged = frame("b", "+begin", {"checks": ["c1"], "pid": 1, "task": 0}) + \
        frame("b", "c1", DOC) + frame("b", "+end", {"done": 1, "why": ""})
    store = collected(tmp_path, tasks, monkeypatch, states={"b": ("drained", "bad PSU")},
                      inject={"a": forged})
    b, out = store.read("b", "c1")
    assert (b.outcome, out) == ("not_run", "")
    assert b.message.startswith("SLURM did not run it: b is drained (bad PSU); the job's "
                                "output carried records for it (b +begin, b +end, b c1)")
    a, _ = store.read("a", "c1")
    assert a.outcome == "not_run"
    assert a.message.startswith("its evidence from the SLURM job rackgate-collect-")
    assert a.message.endswith(" on head was refused: task 0's output claims to be a and b")
    c, out = store.read("c", "c1")
    assert (c.outcome, c.rc, out) == ("completed", 0, "c measured")


def test_sound2_6_a_task_cannot_give_another_node_its_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frames for c (which SLURM ran) in a's task output: c keeps the records its own
    task printed, the forged ones are foreign; a's records are refused."""
    tasks = [stub_task(n, "c1", ("echo", f"{n} measured"), tmp_path) for n in "ac"]
    store = collected(tmp_path, tasks, monkeypatch, inject={"a": frame("c", "c1", DOC)})
    c, out = store.read("c", "c1")
    assert (c.outcome, c.rc, out) == ("completed", 0, "c measured")
    a, _ = store.read("a", "c1")
    assert a.outcome == "not_run" and "(c c1): something on a wrote into it" in a.message


def test_sound2_6_control_every_node_slurm_ran_is_collected(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: nothing foreign, three nodes, two checks each: every record is the
    node's own, in the node's own words."""
    tasks = [stub_task(n, c, ("echo", f"{n} {c}"), tmp_path) for n in "abc" for c in ("x", "y")]
    store = collected(tmp_path, tasks, monkeypatch)
    for t in tasks:
        ev, out = store.read(t.host, t.check)
        assert (ev.outcome, ev.rc, out) == ("completed", 0, f"{t.host} {t.check}"), ev.message
        assert ev.argv[-2:] == ("echo", f"{t.host} {t.check}")


# ---------------------------------------------------------------- finding 7


def outputs(tmp_path: Path, nodes: list[str], checks: int, size: int
            ) -> dict[tuple[str, int], Path]:
    """Per (node, check) a file of ``size`` characters that does not compress much (the
    base64 of random bytes, as a benchmark's varied figures), without a final newline
    (the collector strips it, as Ansible does)."""
    rng = random.Random(28)
    files = {}
    for node in nodes:
        for k in range(checks):
            path = tmp_path / "out" / f"{node}.{k}"
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(base64.b64encode(rng.randbytes(size * 3 // 4)))
            files[(node, k)] = path
    return files


def test_sound2_7_sixty_nodes_two_fio_sized_checks_via_slurm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """60 nodes x 2 checks of 8 KB each (about what fio's JSON is): every record comes
    back whole, where the job's one Ansible result used to be emptied."""
    nodes = [f"gpu{i:03d}" for i in range(60)]
    files = outputs(tmp_path, nodes, 2, 8000)
    tasks = [stub_task(n, f"fio.{k}", ("cat", str(files[(n, k)])), tmp_path)
             for n in nodes for k in range(2)]
    store = collected(tmp_path, tasks, monkeypatch)
    for t in tasks:
        ev, out = store.read(t.host, t.check)
        assert ev.outcome == "completed", f"{t.host} {t.check}: {ev.message}"
        assert out == files[(t.host, int(t.check[-1]))].read_text()


def test_sound2_7_thousand_stub_nodes_twenty_checks_every_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The acceptance of issue 28: 1,000 nodes x 20 checks through ``--via slurm``, every
    record present and each node's own (its time: bench/collect_slurm_stub.py,
    docs/performance.md). No lock file, and no fsync of the 40,000 evidence files: the
    lock wrappers and the disk would be most of the time, and neither is what is tested."""
    nodes = [f"n{i:04d}" for i in range(1000)]
    tasks = [Task(n, f"c{k:02d}", ("echo", f"{n} c{k:02d}"), 60, lock_file=None)
             for n in nodes for k in range(20)]
    store = collected(tmp_path, tasks, monkeypatch, sync=False, bound_s=900, parallel=16)
    wrong = []
    for t in tasks:
        ev, out = store.read(t.host, t.check)
        if (ev.outcome, ev.rc, out) != ("completed", 0, f"{t.host} {t.check}"):
            wrong.append(f"{t.host} {t.check}: {ev.outcome} {ev.message[:200]}")
    assert not wrong, f"{len(wrong)} of {len(tasks)} records wrong, first: {wrong[:3]}"


def big_output(tmp_path: Path) -> tuple[Path, str]:
    """A 64 MiB output that compresses little (the base64 of random bytes, in lines of
    76 characters), and its sha256."""
    path = tmp_path / "big.out"
    data = base64.encodebytes(random.Random(7).randbytes(48 << 20)).rstrip(b"\n")
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("via_slurm", [False, True], ids=["via_ansible", "via_slurm"])
def test_sound2_7_256_mib_of_output_on_one_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, via_slurm: bool) -> None:
    """One host whose four checks print 64 MiB each (256 MiB together): every byte of
    each comes back (the evidence's sha256 is the output's), on both paths."""
    path, sha = big_output(tmp_path)
    tasks = [stub_task("n1", f"big.{k}", ("cat", str(path)), tmp_path) for k in range(4)]
    store = collected(tmp_path, tasks, monkeypatch, via_slurm=via_slurm)
    for t in tasks:
        ev = store.read(t.host, t.check)[0]
        assert ev.outcome == "completed", ev.message
        assert (ev.stdout_bytes, ev.stdout_sha256) == (path.stat().st_size, sha)


def test_sound2_7_a_result_ansible_runner_emptied_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every event result over ansible-runner's MAX_EVENT_RES (set to 50 characters
    here), the node collector's records still come back (they travel as files), and a
    command run as an Ansible item, whose output is its result, is recorded as emptied
    by ansible-runner, never as a command that did not start."""
    monkeypatch.setenv("MAX_EVENT_RES", "50")
    tasks = [stub_task("n1", "node.own", ("echo", "from the node"), tmp_path),
             Task("n1", "bmc.query", ("echo", "from the BMC"), 30, on_control=True)]
    store = collected(tmp_path, tasks, monkeypatch, via_slurm=False)
    ev, out = store.read("n1", "node.own")
    assert (ev.outcome, out) == ("completed", "from the node")
    ev, _ = store.read("n1", "bmc.query")
    assert ev.outcome == "not_run"
    assert ev.message == ("ansible-runner emptied the result of 'Run acceptance commands' on "
                          "n1: it was longer than its MAX_EVENT_RES of 50 characters: its "
                          "output is lost")
