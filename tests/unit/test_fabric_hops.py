"""Pairwise bandwidth by hop class: with a fabric plan, the pairwise matrix groups its
pairs by how far apart the nodes are on the rail under test (same leaf, across a spine,
across the core), and the schedule still covers every pair once in N-1 rounds."""

from __future__ import annotations

from itertools import combinations

from rackgate.checks import REGISTRY
from rackgate.checks.shared.pairs import round_robin
from rackgate.fabric.design import design
from rackgate.fabric.hops import ACROSS_CORE, ACROSS_SPINE, SAME_LEAF, by_hop_class, hop_class

PAIRWISE = REGISTRY["fabric.pairwise_bw"]


def test_two_su_fabric_has_same_leaf_and_spine_pairs():
    plan = design(8, 2, 8)  # SUs of 4 nodes: gpu001-004 and gpu005-008, one leaf per rail
    assert hop_class(plan, "gpu001", "gpu004", "mlx5_0") == SAME_LEAF
    assert hop_class(plan, "gpu001", "gpu005", "mlx5_1") == ACROSS_SPINE
    assert hop_class(plan, "gpu001", "gpu099", "mlx5_0") == "not in the plan"


def test_three_level_fabric_has_core_pairs():
    plan = design(512, 8, 64)  # more leaves than a spine has ports: pods under a core layer
    assert {s.role for s in plan.switches} == {"leaf", "spine", "core"}
    assert hop_class(plan, "gpu001", "gpu512", "mlx5_3") == ACROSS_CORE


def test_the_pairwise_section_gains_hop_classes_and_every_pair_is_scheduled_once():
    plan = design(8, 2, 8)
    nodes = list(plan.hosts)
    rounds = round_robin(nodes)
    assert len(rounds) == len(nodes) - 1
    scheduled = [frozenset(p) for rnd in rounds for p in rnd]
    assert sorted(map(sorted, scheduled)) == sorted(map(sorted, combinations(nodes, 2)))
    # a weak uplink: every pair across the spine at half rate, the same-leaf pairs full
    same = {(a, b): hop_class(plan, a, b, "mlx5_0") == SAME_LEAF
            for a, b in combinations(nodes, 2)}
    pairs = [{"a": a, "b": b, "status": "pass" if near else "fail",
              "measured_gbps": 190.0 if near else 95.0} for (a, b), near in same.items()]
    params = PAIRWISE.params_model.model_validate({"device": "mlx5_0"})
    assert PAIRWISE.plan_section is not None
    section = PAIRWISE.plan_section({"check": PAIRWISE.name, "pairs": pairs}, params, plan)
    classes = {c["hop_class"]: c for c in section["hop_classes"]}
    assert classes[SAME_LEAF]["pairs"] == 2 * 6 and classes[SAME_LEAF]["median_gbps"] == 190.0
    assert classes[ACROSS_SPINE]["pairs"] == 16 and classes[ACROSS_SPINE]["min_gbps"] == 95.0
    assert classes[ACROSS_SPINE]["statuses"] == {"fail": 16}
    assert section["pairs"] == pairs  # the matrix itself is untouched


def test_pairs_without_a_figure_are_counted_not_averaged():
    plan = design(4, 1, 8)
    pairs = [{"a": "gpu001", "b": "gpu002", "status": "error", "measured_gbps": None}]
    [only] = by_hop_class(plan, pairs, "mlx5_0")
    assert (only["pairs"], only["measured"], only["median_gbps"]) == (1, 0, None)
