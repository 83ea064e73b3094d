"""SLURM's topology.conf from a fabric plan (rackgate.fabric.slurm_topology), and the
slurm role rendering the same file from `rackgate fabric topology --vars` after its
preflight has checked those variables (ansible-playbook on this host, connection local)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackgate.fabric.design import design
from rackgate.fabric.plan import SCHEMA, FabricPlan, plan_from_document
from rackgate.fabric.slurm_topology import hostlist, topology_conf, topology_vars

ROOT = Path(__file__).resolve().parents[2]

TREE_32 = """\
# SLURM topology.conf (topology/tree) of fabric plan "fabric", written by rackgate fabric
# topology. Leaf level: each group of leaves with the same nodes (one leaf per rail).
# su1: leaves su1-leaf-r0 to su1-leaf-r7
SwitchName=su1 Nodes=gpu[001-032]
SwitchName=spine-01 Switches=su1
SwitchName=spine-02 Switches=su1
SwitchName=spine-03 Switches=su1
SwitchName=spine-04 Switches=su1
"""


def expand(terms: list[str] | tuple[str, ...]) -> list[str]:
    """SLURM's reading of hostlist terms (src/common/hostlist.c: a range keeps the width
    of its first number), to check what hostlist() writes."""
    out = []
    for term in terms:
        m = re.fullmatch(r"([^\[]*)\[([0-9,-]+)\]", term)
        if not m:
            out.append(term)
            continue
        for part in m[2].split(","):
            lo, _, hi = part.partition("-")
            out += [f"{m[1]}{n:0{len(lo)}d}" for n in range(int(lo), int(hi or lo) + 1)]
    return out


def test_the_32_node_plan_as_topology_tree():
    assert topology_conf(design(32, 8, 64)) == TREE_32


def test_the_32_node_plan_as_topology_block():
    assert topology_conf(design(32, 8, 64), "block") == (
        '# SLURM topology.conf (topology/block) of fabric plan "fabric", written by rackgate '
        "fabric\n# topology. Blocks: each group of leaves with the same nodes (one leaf per "
        "rail).\n# su1: leaves su1-leaf-r0 to su1-leaf-r7\nBlockName=su1 Nodes=gpu[001-032]\n"
        "BlockSizes=32\n")


def test_a_small_three_level_plan_exactly():
    # 2 rails, 4-port leaves: SUs of 2 nodes, 6 leaves; 4-port spines reach only 4, so
    # pods of one SU (2 ports down), 2 spines each; cores in groups of 2 (3 pods x 2 uplinks
    # do not fit one 4-port core), group j joining spine j of every pod
    plan = design(6, 2, 4, spine_ports=4, name="small")
    lines = [ln for ln in topology_conf(plan).splitlines() if not ln.startswith("#")]
    assert lines == [
        "SwitchName=su1 Nodes=gpu[001-002]",
        "SwitchName=su2 Nodes=gpu[003-004]",
        "SwitchName=su3 Nodes=gpu[005-006]",
        "SwitchName=pod1-spine-01 Switches=su1",
        "SwitchName=pod1-spine-02 Switches=su1",
        "SwitchName=pod2-spine-01 Switches=su2",
        "SwitchName=pod2-spine-02 Switches=su2",
        "SwitchName=pod3-spine-01 Switches=su3",
        "SwitchName=pod3-spine-02 Switches=su3",
        "SwitchName=core-01 Switches=pod1-spine-01,pod2-spine-01,pod3-spine-01",
        "SwitchName=core-02 Switches=pod1-spine-01,pod2-spine-01,pod3-spine-01",
        "SwitchName=core-03 Switches=pod1-spine-02,pod2-spine-02,pod3-spine-02",
        "SwitchName=core-04 Switches=pod1-spine-02,pod2-spine-02,pod3-spine-02"]
    block = [ln for ln in topology_conf(plan, "block").splitlines() if not ln.startswith("#")]
    # the SUs share no spine (their pods meet only at the cores): no joined block
    assert block == ["BlockName=su1 Nodes=gpu[001-002]", "BlockName=su2 Nodes=gpu[003-004]",
                     "BlockName=su3 Nodes=gpu[005-006]", "BlockSizes=2"]


def test_block_sizes_double_within_a_pod_and_start_at_the_smallest_su():
    assert topology_vars(design(512, 8, 64))["slurm_topology_block_sizes"] == [32, 64, 128]
    assert topology_vars(design(40, 2, 64))["slurm_topology_block_sizes"] == [8, 16]
    assert topology_vars(design(128, 1, 64))["slurm_topology_block_sizes"] == [32, 64, 128]


def test_the_role_variables_carry_both_forms():
    v = topology_vars(design(64, 2, 64), "block")
    assert v == {
        "slurm_topology_plugin": "block",
        "slurm_topology_switches": [
            {"name": "su1", "nodes": ["gpu[001-032]"]}, {"name": "su2", "nodes": ["gpu[033-064]"]},
            {"name": "spine-01", "switches": ["su1", "su2"]},
            {"name": "spine-02", "switches": ["su1", "su2"]}],
        "slurm_topology_blocks": [{"name": "su1", "nodes": ["gpu[001-032]"]},
                                  {"name": "su2", "nodes": ["gpu[033-064]"]}],
        "slurm_topology_block_sizes": [32, 64]}


@pytest.mark.parametrize("names", [
    ["gpu001", "gpu002", "gpu003", "gpu007"], ["n9", "n10", "n11", "head", "n1"],
    ["gpu099", "gpu100", "gpu101", "gpu05", "gpu5"], ["a-1", "a-01", "a-001", "b"], ["x0", "x00"],
])
def test_hostlists_read_back_as_the_same_names(names):
    assert sorted(expand(hostlist(names))) == sorted(names)


def site_plan(nodes: list[dict[str, Any]]) -> FabricPlan:
    return plan_from_document({
        "schema": SCHEMA, "name": "site", "speed": "HDR",
        "switches": [{"name": "MF0;leaf01:MQM8700/U1", "role": "leaf", "ports": 40},
                     {"name": "MF0;leaf02:MQM8700/U1", "role": "leaf", "ports": 40},
                     {"name": "MF0;spine01:MQM8700/U1", "role": "spine", "ports": 40}],
        "nodes": nodes,
        "links": [{"a": {"switch": f"MF0;leaf0{i}:MQM8700/U1", "port": 40},
                   "b": {"switch": "MF0;spine01:MQM8700/U1", "port": i}, "cable": f"U{i}"}
                  for i in (1, 2)]}, "site")


def node(host: str, hca: str, leaf: int, port: int) -> dict[str, Any]:
    return {"host": host, "hca": hca, "switch": f"MF0;leaf0{leaf}:MQM8700/U1",
            "switch_port": port, "cable": f"{host}-{hca}"}


def test_a_site_plan_with_switch_descriptions_slurm_cannot_take():
    plan = site_plan([node("n1", "mlx5_0", 1, 1), node("n2", "mlx5_0", 2, 1)])
    lines = [ln for ln in topology_conf(plan).splitlines() if not ln.startswith("#")]
    assert lines == ["SwitchName=su1 Nodes=n1", "SwitchName=su2 Nodes=n2",
                     "SwitchName=MF0_spine01_MQM8700_U1 Switches=su1,su2"]


def test_a_node_on_leaves_that_serve_other_nodes_is_refused():
    plan = site_plan([node("n1", "mlx5_0", 1, 1), node("n1", "mlx5_1", 2, 1),
                      node("n2", "mlx5_0", 2, 2)])
    with pytest.raises(ValueError, match="node n1 is on leaves MF0;leaf01:MQM8700/U1 and on "
                                         "leaves MF0;leaf02:MQM8700/U1"):
        topology_conf(plan)


def test_a_plan_without_nodes_and_an_unknown_plugin_are_refused():
    with pytest.raises(ValueError, match="cables no node to a leaf"):
        topology_conf(site_plan([]))
    with pytest.raises(ValueError, match="--plugin must be tree or block"):
        topology_vars(design(2, 1, 4), "dragonfly")


# --- the slurm role: preflight, then topology.conf, for one small cluster per scenario --

SMALL = topology_vars(design(2, 2, 4))  # su1: gpu[001-002], spine-01 above it
SCENARIOS: dict[str, tuple[dict[str, Any], str | None]] = {
    # name: (variables for every host of its cluster, the failed assertion or None)
    "tree": (SMALL, None),
    "block": ({**SMALL, "slurm_topology_plugin": "block", "slurm_package_version": "23.11.4-1"},
              None),
    "hand": ({"slurm_leaf_switch": "leaf1"}, None),
    "block2205": ({**SMALL, "slurm_topology_plugin": "block"}, "__slurm_block_supported"),
    "blockrepo": ({**SMALL, "slurm_topology_plugin": "block",
                   "slurm_apt_repository": "deb http://mirror.site.example/slurm bookworm main"},
                  "__slurm_block_supported"),
    "badname": ({**SMALL, "slurm_topology_switches": [{"name": "su1;reboot",
                                                        "nodes": ["gpu[001-002]"]}]},
                "__slurm_switch_names | reject('match'"),
    "badterm": ({**SMALL, "slurm_topology_switches": [{"name": "su1",
                                                        "nodes": ["gpu[001-002]$(id)"]}]},
                "__slurm_terms | reject('match'"),
    "string": ({**SMALL, "slurm_topology_switches": [{"name": "su1", "nodes": "gpu[001-002]"}]},
               "__slurm_lists | select('string')"),
    "child": ({**SMALL, "slurm_topology_switches": [
        SMALL["slurm_topology_switches"][0], {"name": "spine-01", "switches": ["su9"]}]},
        "__slurm_children | reject('in'"),
    "both": ({**SMALL, "slurm_leaf_switch": "leaf1"}, "not (__slurm_topology_by_hand | bool) "
             "or slurm_topology_switches | length == 0"),
    "missing": ({**SMALL, "slurm_topology_switches": [{"name": "su1", "nodes": ["gpu001"]}]},
                "__slurm_topology_nodes | sort == __slurm_known | sort"),
    "twice": ({**SMALL, "slurm_topology_switches": [{"name": "su1", "nodes": ["gpu[001-002]"]},
                                                     {"name": "su2", "nodes": ["gpu002"]}]},
              "__slurm_topology_nodes | sort == __slurm_known | sort"),
    "sizes": ({**SMALL, "slurm_topology_block_sizes": [2, 6]}, "__slurm_bad_sizes | length"),
    "small": ({**SMALL, "slurm_topology_plugin": "block", "slurm_package_version": "24.05.1",
               "slurm_topology_block_sizes": [4]}, "__slurm_small_blocks | length == 0"),
}

PLAY = """\
- name: The slurm role's preflight, then its topology.conf
  hosts: all
  gather_facts: false
  tasks:
    - name: Set the role's variables and check them
      ansible.builtin.include_role:
        name: slurm
        tasks_from: "{{ item }}"
        public: true
      loop: [set_vars, preflight]
    - name: Render topology.conf as the role does
      ansible.builtin.copy:
        content: "{{ lookup('ansible.builtin.template', role_dir ~ '/templates/topology.conf.j2')
          }}"
        dest: "{{ out_dir }}/{{ inventory_hostname }}.conf"
        mode: "0644"
      when: __slurm_topology_enabled | bool
"""


@pytest.fixture(scope="module")
def role_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One ansible-playbook run over every scenario (two compute hosts, gpu001 and gpu002,
    the first also the controller, in groups of their own); the failed assertion of each
    host that failed."""
    tmp = tmp_path_factory.mktemp("slurm-role")
    groups: dict[str, Any] = {}
    for name, (variables, _) in SCENARIOS.items():
        hosts = {f"{name}-{n}": {"slurm_node_name": n, "slurm_controller_group": f"ctl_{name}",
                                 "slurm_compute_group": f"cmp_{name}", **variables}
                 for n in ("gpu001", "gpu002")}
        groups[f"cmp_{name}"] = {"hosts": hosts}
        groups[f"ctl_{name}"] = {"hosts": {f"{name}-gpu001": None}}
    inventory = {"all": {"vars": {"ansible_connection": "local",
                                  "ansible_python_interpreter": sys.executable,
                                  "role_dir": str(ROOT / "roles/slurm"), "out_dir": str(tmp)},
                         "children": groups}}
    (tmp / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp / "play.yml").write_text(PLAY)
    env = {**os.environ, "ANSIBLE_STDOUT_CALLBACK": "default",
           "ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_LOCAL_TEMP": str(tmp / "tmp"),
           "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_NOCOLOR": "1"}
    run = subprocess.run(["ansible-playbook", "-i", str(tmp / "inventory.yml"),
                          str(tmp / "play.yml"), "--forks", "8"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    failed = {}
    for m in re.finditer(r"^fatal: \[(\S+)\]: FAILED! => (\{.*\})$", run.stdout, re.M):
        failed[m[1]] = json.loads(m[2]).get("assertion", m[2])
    recap = re.findall(r"^(\S+)\s+: ok=\d+\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)",
                       run.stdout, re.M)
    assert len(recap) == 2 * len(SCENARIOS), run.stdout[-3000:] + run.stderr[-2000:]
    assert all(unreachable == "0" for _, unreachable, _ in recap), run.stdout[-3000:]
    return tmp, failed


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_role_checks_the_topology_variables(role_run, scenario):
    _, failed = role_run
    expected = SCENARIOS[scenario][1]
    for host in (f"{scenario}-gpu001", f"{scenario}-gpu002"):
        if expected is None:
            assert host not in failed, failed.get(host)
        else:
            assert expected in failed.get(host, "(passed)"), failed.get(host)


@pytest.mark.parametrize(("scenario", "plugin"), [("tree", "tree"), ("block", "block")])
def test_the_role_writes_what_rackgate_fabric_topology_prints(role_run, scenario, plugin):
    out, _ = role_run
    rendered = (out / f"{scenario}-gpu001.conf").read_text()
    assert rendered.startswith(f"# Slurm topology.conf (topology/{plugin}): managed by the "
                               f"rackgate slurm role\n")
    body = [ln for ln in rendered.splitlines() if not ln.startswith("#")]
    assert body == [ln for ln in topology_conf(design(2, 2, 4), plugin).splitlines()
                    if not ln.startswith("#")]


def test_the_role_keeps_the_leaf_switches_set_by_hand(role_run):
    out, _ = role_run
    body = [ln for ln in (out / "hand-gpu001.conf").read_text().splitlines()
            if not ln.startswith("#")]
    assert body == ["SwitchName=leaf1 Nodes=gpu001,gpu002", "SwitchName=spine Switches=leaf1"]
