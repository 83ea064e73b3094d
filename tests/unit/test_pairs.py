"""The round-robin schedule of node-pair tests and the N x N bandwidth matrix judge."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks.shared.pairs import (
    DEFAULT_MIN_RATIO,
    judge_pairwise,
    line_rate_threshold,
    node_results,
    round_robin,
)
from rackgate.model import Status
from rackgate.profile import Hardware, NicSpec

SRC = "DGX H100/H200 User Guide, Table 1 (test copy)"
NDR = Hardware(nics=[NicSpec(role="compute", count=8, rate_gbps=400, link_layer="InfiniBand",
                             source=SRC)])
T = line_rate_threshold(NDR)


def assert_tournament(nodes: list[str]) -> None:
    rounds = round_robin(nodes)
    n = len(nodes)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [frozenset(p) for rnd in rounds for p in rnd]
    assert len(seen) == len(set(seen)), "a pair met twice"
    assert set(seen) == {frozenset(p) for p in combinations(nodes, 2)}, "a pair never met"
    for rnd in rounds:
        busy = [x for p in rnd for x in p]
        assert len(busy) == len(set(busy)), f"a node twice in one round: {rnd}"
        assert len(rnd) == n // 2, "odd N: exactly one bye per round; even N: none"
        assert all(a != b for a, b in rnd)


@pytest.mark.parametrize("n", range(2, 65))
def test_every_pair_exactly_once_no_node_twice_in_a_round(n):
    assert_tournament([f"node{i:02d}" for i in range(n)])


@pytest.mark.parametrize("n", range(3, 65, 2))
def test_odd_n_every_node_rests_exactly_once(n):
    nodes = [f"n{i}" for i in range(n)]
    rests = [next(x for x in nodes if all(x not in p for p in rnd)) for rnd in round_robin(nodes)]
    assert sorted(rests) == sorted(nodes)


@settings(max_examples=80, deadline=None)
@given(nodes=st.lists(st.text(min_size=1, max_size=8), min_size=0, max_size=40, unique=True))
def test_schedule_property_and_determinism(nodes):
    if len(nodes) < 2:
        assert round_robin(nodes) == []
        return
    assert_tournament(nodes)
    assert round_robin(nodes) == round_robin(list(nodes))


def test_duplicates_refused():
    with pytest.raises(ValueError, match="listed twice: a"):
        round_robin(["a", "b", "a"])


def test_threshold_from_profile():
    assert T.ref == 400 and T.min_ratio == DEFAULT_MIN_RATIO and T.lower_bound == 360
    assert "96.6" in T.basis and T.limit
    with pytest.raises(ValueError, match="exactly one compute NIC rate"):
        line_rate_threshold(Hardware())


def full(nodes, value=391.0):
    return {p: value for rnd in round_robin(nodes) for p in rnd}


def test_healthy_matrix_passes():
    nodes = [f"n{i}" for i in range(8)]
    m = judge_pairwise(nodes, full(nodes), T)
    assert m.status is Status.PASS and not m.weak and m.culprit is None
    assert len(m.pairs) == 28 and "28 of 28 pairs" in m.message
    assert all(p.percent_of_line_rate == 97.8 for p in m.pairs)


def test_one_bad_node_is_one_low_row_and_named_culprit():
    nodes = [f"n{i}" for i in range(8)]
    measured = full(nodes)
    for k in measured:
        if "n5" in k:
            measured[k] = 193.4  # its port trained at HDR
    m = judge_pairwise(nodes, measured, T)
    assert m.status is Status.FAIL and len(m.weak) == 7 and m.culprit == "n5"
    assert all("n5" in (p.a, p.b) for p in m.weak)
    w = m.weak[0]
    assert (w.measured_gbps, w.expected_gbps, w.percent_of_line_rate) == (193.4, 360, 48.4)
    assert "n5" in w.name and "48.4% of the 400 Gb/s line rate" in w.message
    assert "likely culprit n5" in m.message
    assert dict(m.weak_counts)["n5"] == 7
    results = {r.node: r for r in node_results(m)}
    assert results["n5"].status is Status.FAIL and results["n5"].measured == 193.4
    assert "likely culprit" in results["n5"].message
    # its partners' weak pair is n5's fault: they warn, they are not rejected for it
    assert results["n0"].status is Status.WARN
    assert "weak only with n5" in results["n0"].message


def test_spread_weakness_names_no_culprit():
    nodes = ["a", "b", "c", "d"]
    weak = {frozenset(("a", "b")): 200.0, frozenset(("c", "d")): 210.0}
    measured = {k: weak.get(frozenset(k), 391.0) for k in full(nodes)}
    m = judge_pairwise(nodes, measured, T)
    assert len(m.weak) == 2 and m.culprit is None and m.status is Status.FAIL


def test_missing_pair_is_error_never_pass():
    nodes = ["a", "b", "c"]
    measured = full(nodes)
    del measured[("a", "b")]
    m = judge_pairwise(nodes, measured, T, errors={("b", "c"): "ib_write_bw: Couldn't connect"})
    by = {frozenset((p.a, p.b)): p for p in m.pairs}
    assert by[frozenset(("a", "b"))].status is Status.ERROR
    assert "pair missing from the run" in by[frozenset(("a", "b"))].message
    assert m.status is Status.ERROR and "1 pair(s) without a measurement" in m.message
    m2 = judge_pairwise(nodes, {**full(nodes), ("b", "c"): None}, T,
                        errors={("c", "b"): "Couldn't connect to c:18515"})
    assert "Couldn't connect" in m2.cell("c", "b").message  # type: ignore[union-attr]


def test_reverse_direction_and_over_line_rate():
    m = judge_pairwise(["a", "b"], {("b", "a"): 390.0, ("a", "b"): 380.0}, T)
    assert m.pairs[0].measured_gbps == 380.0, "both directions: the lower one is judged"
    over = judge_pairwise(["a", "b"], {("a", "b"): 3138.0}, T)
    # above the 400 Gb/s line rate (a limit) by more than 5 %: not a measurement
    assert over.status is Status.ERROR and "implausible evidence" in over.pairs[0].message
    assert over.pairs[0].measured_gbps is None


def test_unknown_nodes_and_too_few():
    with pytest.raises(ValueError, match="not in the list: z"):
        judge_pairwise(["a", "b"], {("a", "z"): 1.0}, T)
    m = judge_pairwise(["a"], {}, T)
    assert m.status is Status.ERROR and "no pair to measure" in m.message


def test_report_form_round_trips_the_figures():
    nodes = ["a", "b", "c"]
    doc = judge_pairwise(nodes, {**full(nodes), ("a", "c"): 100.0}, T).to_doc()
    assert doc["line_rate_gbps"] == 400 and doc["min_ratio"] == 0.9 and doc["unit"] == "Gb/s"
    assert [(w["a"], w["b"], w["percent_of_line_rate"]) for w in doc["weak"]] == \
        [("a", "c", 25.0)]
    assert doc["status"] == "fail" and doc["culprit"] is None


def test_a_bw_threshold_without_a_floor_is_refused_never_passes_every_pair():
    from rackgate.profile import Threshold

    ceiling_only = Threshold(unit="Gb/s", ref=400, max_ratio=1.0, basis="a ceiling, no floor")
    with pytest.raises(ValueError, match="has no min_ratio"):
        judge_pairwise(["a", "b"], {("a", "b"): 1.0}, ceiling_only)
