from __future__ import annotations

from rackgate.model import Result, Status, Verdict, node_verdict, rack_verdict


def r(node: str, status: Status, check: str = "fio.seq_read") -> Result:
    return Result(node, check, status, f"{status.label} message")


def test_status_order_worst_wins():
    assert Status.PASS < Status.SKIP < Status.WARN < Status.FAIL < Status.ERROR
    assert Status.worst([Status.WARN, Status.PASS]) is Status.WARN
    assert Status.worst([]) is Status.PASS


def test_warn_and_skip_do_not_block_but_fail_and_error_do():
    assert node_verdict("n1", [r("n1", Status.PASS), r("n1", Status.WARN, "x"),
                               r("n1", Status.SKIP, "y")]).verdict is Verdict.ACCEPT
    for bad in (Status.FAIL, Status.ERROR):
        nv = node_verdict("n1", [r("n1", Status.PASS), r("n1", bad, "x")])
        assert nv.verdict is Verdict.REJECT
        assert nv.reasons == (f"x: {bad.label}: {bad.label} message",)


def test_node_without_results_is_rejected():
    nv = node_verdict("n1", [])
    assert nv.verdict is Verdict.REJECT and nv.status is Status.ERROR


def test_rack_accepts_only_when_every_node_does():
    ok = node_verdict("n1", [r("n1", Status.PASS)])
    bad = node_verdict("n2", [r("n2", Status.ERROR)])
    assert rack_verdict([ok]).verdict is Verdict.ACCEPT
    rack = rack_verdict([ok, bad])
    assert rack.verdict is Verdict.REJECT
    assert rack.reasons == ("n2: fio.seq_read: error: error message",)


def test_empty_rack_is_rejected():
    assert rack_verdict([]).verdict is Verdict.REJECT


def test_rack_reasons_name_the_physical_location():
    bad = node_verdict("n7", [r("n7", Status.FAIL)], location="rack r12 u 38")
    assert rack_verdict([bad]).reasons == ("n7 (rack r12 u 38): fio.seq_read: fail: fail message",)
