"""rackgate healthcheck's SLURM decisions (pure: the node's sinfo state and reason, the
reason it recorded when it last drained the node, and the check's result -> drain / resume /
nothing), its drain reason and its textfile."""

from __future__ import annotations

import pytest

from rackgate.health import DRAIN_MARK, Health, ItemResult
from rackgate.health.decide import (
    REASON_MAX,
    Decision,
    decide,
    drain_reason,
    drained_after,
    textfile,
)
from rackgate.scheduler.slurm import NodeState

OURS = f"{DRAIN_MARK}systemd_units: munge.service: inactive (expected active)"
FAILING = f"{DRAIN_MARK}mounts: /lustre: not mounted (expected lustre)"
# what an older health check wrote, and what a person may type
LEGACY = "rackgate healthcheck: systemd_units: munge.service: inactive (expected active)"


def st(state: str, reason: str = "") -> NodeState:
    return NodeState("gpu001", state, reason)


@pytest.mark.parametrize(("state", "reason", "result", "action"), [
    # healthy
    (st("idle"), "", None, "none"),
    (st("drained", OURS), OURS, None, "resume"),
    (st("drained*", OURS), OURS, None, "resume"),
    (st("draining", OURS), OURS, None, "resume"),
    (st("drained", "operator: test"), "", None, "none"),
    (st("drained", "rackgate 20261202T031500Z-demo: fio.seq_read: slow"), "", None, "none"),
    (st("drained", f"rackgate/drain[r1]: {OURS}"), "", None, "none"),
    (st("drained", LEGACY), "", None, "none"),
    (st("drained", FAILING), "", None, "none"),  # the marker, not the reason recorded
    (st("down*", "Not responding"), "", None, "none"),
    (st("down", OURS), "", None, "none"),  # never resumes a down node
    # unhealthy
    (st("idle"), "", FAILING, "drain"),
    (st("mixed"), "", FAILING, "drain"),
    (st("allocated"), "", FAILING, "drain"),
    (st("idle~"), "", FAILING, "drain"),
    (st("idle*", "Not responding"), "", FAILING, "drain"),
    (st("drained", OURS), "", OURS, "none"),
    (st("drained", OURS), "", FAILING, "drain"),  # the reason changes
    (st("drained", FAILING), "", FAILING, "none"),  # the marker, not the reason recorded
    (st("drained", LEGACY), "", FAILING, "none"),
    (st("drained", "operator: test"), "", FAILING, "none"),
    (st("draining", "operator: test"), "", FAILING, "none"),
    (st("drained", "rackgate r1-demo: gpu.health: no GPU"), "", FAILING, "none"),
    (st("down", "operator: cable"), "", FAILING, "none"),
    (st("down*", "Not responding"), "", FAILING, "none"),
    (st("inval"), "", FAILING, "none"),
    (st("unknown"), "", FAILING, "none"),
    (st("future"), "", FAILING, "none"),
    (None, "", FAILING, "none"),
    (None, "", None, "none"),
])
def test_decisions(state, reason, result, action):
    d = decide(state, result, OURS)  # the health check recorded OURS when it drained
    assert d.action == action, d.why


def test_an_operator_reason_is_named_in_why():
    d = decide(st("drained", "operator: test"), FAILING, OURS)
    assert "operator: test" in d.why and "someone else's" in d.why


def test_a_reason_that_only_contains_the_prefix_is_not_ours():
    assert decide(st("drained", f"see {DRAIN_MARK}x"), None, f"see {DRAIN_MARK}x").action \
        == "none"


def test_without_a_record_no_drain_is_the_health_checks():
    d = decide(st("drained", OURS), None, None)
    assert d.action == "none" and "no record of a drain" in d.why


def test_drained_after():
    drain, resume, none = Decision("drain", ""), Decision("resume", ""), Decision("none", "")
    assert drained_after(st("idle"), drain, True, None)
    assert not drained_after(st("idle"), drain, False, None)
    assert not drained_after(st("drained", OURS), resume, True, OURS)
    assert drained_after(st("drained", OURS), resume, False, OURS)
    assert drained_after(st("drained", OURS), none, True, OURS)
    assert not drained_after(st("drained", OURS), none, True, None)
    assert not drained_after(st("drained", "operator: test"), none, True, OURS)
    assert not drained_after(None, none, True, OURS)


def test_drain_reason_is_the_first_failure_sanitised_and_bounded():
    results = [ItemResult("gpu_count", Health.SKIP, "no GPU"),
               ItemResult("mounts", Health.FAIL, "/scr`x`\n; rm -rf / " + "y" * 300),
               ItemResult("memlock", Health.ERROR, "unreadable")]
    reason = drain_reason(results)
    assert reason is not None
    assert reason.startswith(f"{DRAIN_MARK}mounts: /scr?x? ; rm -rf / yyy")
    assert reason.endswith("... (+1 more)") and len(reason) <= REASON_MAX
    assert all(c.isprintable() and c not in "`$'\"\\\n" for c in reason)


def test_no_failure_no_reason():
    assert drain_reason([ItemResult("mounts", Health.PASS, "ok"),
                         ItemResult("gpu_xid", Health.SKIP, "off")]) is None


def test_textfile_has_every_metric_and_no_sample_for_a_skipped_item():
    results = [ItemResult("systemd_units", Health.FAIL, "x"),
               ItemResult("gpu_count", Health.PASS, "8"),
               ItemResult("ib_ports", Health.SKIP, "none configured"),
               ItemResult("memlock", Health.ERROR, "no pid")]
    lines = textfile(results, True, 1764662400.5, 1.25).splitlines()
    samples = [line for line in lines if not line.startswith("#")]
    assert samples == [
        "rackgate_healthcheck_ok 0",
        'rackgate_healthcheck_item_ok{item="gpu_count"} 1',
        'rackgate_healthcheck_item_ok{item="memlock"} 0',
        'rackgate_healthcheck_item_ok{item="systemd_units"} 0',
        "rackgate_healthcheck_drained 1",
        "rackgate_healthcheck_last_run_timestamp_seconds 1764662400.500",
        "rackgate_healthcheck_duration_seconds 1.250",
    ]
    assert sum(line.startswith("# TYPE ") for line in lines) == 5
