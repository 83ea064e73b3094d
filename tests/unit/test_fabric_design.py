"""The generated rail-optimised fat tree (rackgate.fabric.design): every invariant a
cabling team relies on, read back from the plan itself, and the inputs it refuses."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from rackgate.fabric.design import design, shape
from rackgate.fabric.plan import NODE_DESC, FabricPlan, plan_document
from rackgate.fabric.slurm_topology import SLURM_NAME


def ports_used(plan: FabricPlan) -> Counter[tuple[str, int]]:
    """How many planned cable ends sit on each (switch or HCA, port)."""
    return Counter((end.name, end.port) for link in plan.planned_links()
                   for end in (link.a, link.b))


def cables_between(plan: FabricPlan) -> dict[str, Counter[str]]:
    """For each switch, how many cables go to each switch one level up."""
    level = {"leaf": 1, "spine": 2, "core": 3}
    up: dict[str, Counter[str]] = defaultdict(Counter)
    for link in plan.links:
        a, b = link.a.switch, link.b.switch
        if level[plan.switch[a].role] > level[plan.switch[b].role]:
            a, b = b, a
        assert level[plan.switch[b].role] == level[plan.switch[a].role] + 1, link
        up[a][b] += 1
    return up


def check_invariants(plan: FabricPlan, nodes: int, rails: int, leaf_ports: int,
                     spine_ports: int) -> None:
    su = leaf_ports // 2
    used = ports_used(plan)
    # every port carries at most one cable, and every cable label is unique
    assert max(used.values()) == 1
    cables = [link.cable for link in plan.planned_links()]
    assert len(cables) == len(set(cables))
    # every node has one HCA per rail, HCA r on the rail-r leaf of its SU, port = slot + 1
    assert len(plan.hosts) == nodes and len(plan.nodes) == nodes * rails
    hosts = list(dict.fromkeys(n.host for n in plan.nodes))
    for n in plan.nodes:
        slot = hosts.index(n.host)
        leaf = plan.switch[n.switch]
        assert leaf.role == "leaf" and leaf.rail == n.rail
        assert n.switch == f"su{slot // su + 1}-leaf-r{n.rail}"
        assert n.switch_port == slot % su + 1
        assert n.cable == f"{n.switch}/{n.switch_port}"
    leaves = [s for s in plan.switches if s.role == "leaf"]
    up = cables_between(plan)
    for leaf in leaves:
        # the lower half of a leaf's ports is for nodes, the upper half all cabled up
        down = {p for (name, p) in used if name == leaf.name and p <= su}
        assert all(p in range(1, su + 1) for p in down)
        assert {p for (name, p) in used if name == leaf.name and p > su} == set(
            range(su + 1, leaf_ports + 1))
        # spread evenly: the same number of cables to each spine of its pod
        assert len(set(up[leaf.name].values())) == 1, up[leaf.name]
    spines = [s for s in plan.switches if s.role == "spine"]
    cores = [s for s in plan.switches if s.role == "core"]
    if not cores:  # two levels: every leaf reaches every spine
        assert all(set(up[leaf.name]) == {s.name for s in spines} for leaf in leaves)
    for spine in spines:
        assert max(p for (name, p) in used if name == spine.name) <= spine_ports
        if cores:
            assert len(set(up[spine.name].values())) == 1, up[spine.name]
    for name in [s.name for s in plan.switches]:
        assert SLURM_NAME.match(name) and NODE_DESC.match(name)


def test_the_32_node_8_rail_64_port_plan():
    plan = design(32, 8, 64)
    roles = Counter(s.role for s in plan.switches)
    assert roles == {"leaf": 8, "spine": 4}
    assert len(plan.nodes) == 256 and len(plan.links) == 256
    check_invariants(plan, 32, 8, 64, 64)
    up = cables_between(plan)
    assert all(up[f"su1-leaf-r{r}"] == {f"spine-0{j}": 8 for j in range(1, 5)}
               for r in range(8))
    used = ports_used(plan)
    assert all((f"spine-0{j}", p) in used for j in range(1, 5) for p in range(1, 65))
    assert plan.links[0].cable == "su1-leaf-r0/33"
    assert (plan.links[0].a.port, plan.links[0].b.switch, plan.links[0].b.port) == (
        33, "spine-01", 1)
    assert plan.subnet_manager is None and (plan.width, plan.speed) == ("4X", "HDR")


def test_three_levels_for_512_nodes():
    plan = design(512, 8, 64)
    roles = Counter(s.role for s in plan.switches)
    assert roles == {"leaf": 128, "spine": 128, "core": 64}
    check_invariants(plan, 512, 8, 64, 64)
    up = cables_between(plan)
    # pod 1 holds SUs 1-4; each of its 32 leaves has one cable to each of its 32 spines
    assert set(up["su4-leaf-r7"]) == {f"pod1-spine-{j:02d}" for j in range(1, 33)}
    assert set(up["su5-leaf-r0"]) == {f"pod2-spine-{j:02d}" for j in range(1, 33)}
    # core group j joins spine j of every pod: 2 cores, 16 cables from each spine to each
    assert up["pod3-spine-07"] == {"core-13": 16, "core-14": 16}
    per_core: dict[str, set[str]] = defaultdict(set)
    for spine, cores in up.items():
        for core in cores:
            if core.startswith("core-"):
                per_core[core].add(spine.split("-", 1)[0])
    assert all(pods == {"pod1", "pod2", "pod3", "pod4"} for pods in per_core.values())
    assert len(ports_used(plan)) == 2 * (4096 + 8192)  # every end of every cable, once


def test_a_partial_last_su_keeps_every_uplink():
    plan = design(40, 2, 64)
    check_invariants(plan, 40, 2, 64, 64)
    assert [s.name for s in plan.switches if s.role == "leaf"] == [
        "su1-leaf-r0", "su1-leaf-r1", "su2-leaf-r0", "su2-leaf-r1"]
    assert sum(n.switch == "su2-leaf-r0" for n in plan.nodes) == 8
    assert sum(lnk.a.switch == "su2-leaf-r0" for lnk in plan.links) == 32


def test_uneven_leaf_counts_get_more_spines_not_uneven_cables():
    # 5 leaves x 32 uplinks fit on 3 spines, but 32 does not split evenly in 3: 4 spines
    plan = design(32, 5, 64)
    check_invariants(plan, 32, 5, 64, 64)
    assert sum(s.role == "spine" for s in plan.switches) == 4


def test_the_options_shape_the_names():
    plan = design(2, 2, 4, spine_ports=8, speed="NDR", host_format="dgx{:02d}",
                  hcas=["mlx5_0", "mlx5_3"], name="lab", sm_hosts=["dgx02"], sm_priority=14,
                  rack="r13")
    assert [n.desc for n in plan.nodes] == ["dgx01 mlx5_0", "dgx01 mlx5_3", "dgx02 mlx5_0",
                                            "dgx02 mlx5_3"]
    assert plan.subnet_manager is not None
    assert (plan.subnet_manager.hosts, plan.subnet_manager.priority) == (("dgx02",), 14)
    assert {str(s.location) for s in plan.switches} == {"rack r13"}
    assert (plan.name, plan.speed, plan.switch["spine-01"].ports) == ("lab", "NDR", 8)


def test_the_design_is_deterministic():
    assert plan_document(design(100, 4, 40)) == plan_document(design(100, 4, 40))


def test_the_largest_three_level_fabric_and_one_node_more():
    s = shape(8192, 8, 64, 64)
    assert (s.pods, s.spines_per_pod, s.cores_per_group, s.core_links) == (64, 32, 32, 1)
    with pytest.raises(ValueError, match=r"8193 nodes are too many .* at most 8192 nodes"):
        shape(8193, 8, 64, 64)


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((0, 8, 64), {}, "--nodes must be at least 1"),
    ((32, 0, 64), {}, "--rails must be 1 to 64"),
    ((32, 65, 64), {}, "--rails must be 1 to 64"),
    ((32, 8, 63), {}, "--leaf-ports must be an even number"),
    ((32, 8, 64), {"spine_ports": 33}, "--spine-ports must be an even number"),
    ((32, 8, 256), {}, "--leaf-ports must be an even number from 2 to 254"),
    ((4096, 40, 64), {}, "a three-level pod cannot hold one SU"),
    ((32, 8, 64), {"speed": "HDR100"}, "speed must be one of"),
    ((32, 8, 64), {"host_format": "gpu"}, "same host name twice"),
    ((32, 8, 64), {"host_format": "gpu {:03d}"}, "does not match"),
    ((32, 8, 64), {"hcas": ["mlx5_0"]}, "1 HCA names for 8 rails"),
    ((32, 8, 64), {"sm_hosts": ["head01"]}, "head01 are not among the generated hosts"),
    ((32, 8, 64), {"rack": "rack 1"}, "--rack 'rack 1' does not match"),
    ((32, 8, 64), {"name": "my plan"}, "--name 'my plan' does not match"),
    ((32, 8, 64), {"host_format": "{name}"}, "--host-format cannot number the host names"),
    ((32, 8, 64), {"hca_format": "mlx5_{1}"}, "--hca-format cannot number the HCA names"),
    ((32, 8, 64), {"sm_hosts": ["gpu001"], "sm_priority": 16}, "--sm-priority must be 0 to 15"),
])
def test_impossible_inputs_are_refused(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        design(*args, **kwargs)


def test_a_plan_needing_more_lids_than_one_subnet_has_is_refused():
    # 6144 nodes x 8 rails = 49152 HCA ports: one more than the unicast LIDs 0x0001-0xBFFF
    # before the switches are counted; such a fabric is built as one subnet per rail
    with pytest.raises(ValueError, match=r"49152 HCA ports and \d+ switches need \d+ LIDs, "
                                         r"more than the 49151 unicast LIDs of one subnet"):
        design(6144, 8, 64)
    assert len(design(5120, 8, 64).nodes) == 40960  # 40960 + 3200 switches fit
