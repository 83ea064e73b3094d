"""judge_evidence: every way evidence can be bad ends in error, never pass."""

from __future__ import annotations

import pytest

from rackgate.checks import REGISTRY, load_profile
from rackgate.model import Status
from rackgate.placement.evidence import judge_evidence
from rackgate.store.evidence import Evidence

CHECK = REGISTRY["fio.seq_read"]


def ev(**changes) -> Evidence:
    base = dict(host="n1", check="fio.seq_read", argv=("fio",), outcome="completed", rc=0,
                started=None, ended=None, duration_s=1.0, stderr="", message="",
                stdout_file="evidence/n1/fio.seq_read.out", stdout_sha256="0" * 64,
                stdout_bytes=0)
    return Evidence(**{**base, **changes})


@pytest.fixture
def demo():
    return load_profile("demo")


def test_healthy_evidence_is_judged(fixture_text, demo):
    r = judge_evidence(CHECK, ev(), fixture_text("fio/seq-read-healthy.json"), demo)
    assert r.status is Status.PASS
    assert r.evidence == "evidence/n1/fio.seq_read.out"
    assert r.node == "n1" and r.measured > 0


@pytest.mark.parametrize(
    ("changes", "stdout", "message"),
    [
        (dict(outcome="unreachable", rc=None, message="Failed to create temporary directory"),
         "", "nothing collected: n1 did not answer: Ansible could not create its temporary "
             "directory there"),
        (dict(outcome="timeout", rc=124, message="killed after 120 s"), "",
         "command timed out: killed after 120 s"),
        (dict(outcome="not_run", rc=None, message="rackgate_scratch_path must be absolute"), "",
         "command not run: rackgate_scratch_path must be absolute"),
        (dict(rc=1, stderr="fio: pid=0, err=2/file:filesetup.c:174, func=open"), "{}",
         "command exited with rc 1: fio: pid=0, err=2"),
        (dict(rc=2, message="[Errno 2] No such file or directory: b'fio'"), "",
         "command exited with rc 2: [Errno 2] No such file or directory: b'fio'"),
        (dict(), "", "unparseable evidence evidence/n1/fio.seq_read.out: fio JSON: the output "
                     "is empty"),
        (dict(), "Segmentation fault\n", "unparseable evidence"),
    ],
)
def test_bad_evidence_is_error(demo, changes, stdout, message):
    r = judge_evidence(CHECK, ev(**changes), stdout, demo)
    assert r.status is Status.ERROR
    assert message in r.message
    assert r.measured is None


def test_truncated_stdout_with_rc_0_is_error(fixture_text, demo):
    text = fixture_text("fio/seq-read-healthy.json")
    r = judge_evidence(CHECK, ev(), text[: len(text) // 2], demo)
    assert r.status is Status.ERROR and "not valid JSON" in r.message


def test_check_missing_from_profile_is_error(fixture_text, demo):
    other = demo.with_overrides({"checks": {"fio.seq_read": {"enabled": False}}}, "test")
    r = judge_evidence(CHECK, ev(), fixture_text("fio/seq-read-healthy.json"), other)
    assert r.status is Status.SKIP and "disabled" in r.message


def test_missing_tool_is_named(demo):
    r = judge_evidence(CHECK, ev(argv=("timeout", "--kill-after=10", "120", "fio", "--x"),
                                 rc=127, stderr="timeout: failed to run command 'fio': No such "
                                                "file or directory"), "", demo)
    assert r.status is Status.ERROR
    assert r.message.startswith("cannot execute fio on the host (rc 127): is it installed?")
