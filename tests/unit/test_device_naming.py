"""RDMA device names against the inventory's naming policy (``rdma_device_naming``).

The patterns (validators/rackgate/fabric/naming.py) are checked on names rdma-core's
rdma_rename gives (kernel-boot/rdma_rename.c: by_onboard, by_pci, by_guid) and against the
rdma role's own copy (roles/rdma/vars/main.yml), which its preflight uses on the inventory.
The plan's check (collect/preflight_naming.py) runs on the example DGX H100 inventory as
Ansible reads it, with the policy changed per test.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackgate.checks import load_profile
from rackgate.collect.preflight import build
from rackgate.collect.preflight_naming import naming_problems
from rackgate.fabric.naming import NAMING_VAR, PATTERNS, misnamed, policy_problem
from rackgate.placement import RunView
from rackgate.selection import prepare

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "inventory" / "example-dgx-h100")
DGX_HCAS = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]


@pytest.mark.parametrize(("policy", "fits", "does_not_fit"), [
    ("kernel", ["mlx5_0", "mlx5_11", "bnxt_re0", "irdma1"], ["ibp24s0", "rocep3s0f1", "ibo3",
                                                            "ibx0c42a10300a1b2c4", "mlx5_"]),
    ("pci", ["ibp24s0", "rocep3s0f1", "ibP1p24s0f1v2", "ibs3", "iwp5s0"],
     ["mlx5_0", "ibo3", "ibx0c42a10300a1b2c4", "ibp24"]),
    ("guid", ["ibx0c42a10300a1b2c4", "rocex525400c0fe123455"], ["mlx5_0", "ibp24s0", "ibx12"]),
    ("onboard", ["ibo3", "opao3", "mlx5_0"], ["ibp24s0", "ibx0c42a10300a1b2c4"]),
    ("fallback", ["ibo3", "ibp24s0", "rocep3s0f1"], ["mlx5_0", "ibx0c42a10300a1b2c4"]),
])
def test_each_policy_accepts_its_names_and_no_other(policy, fits, does_not_fit):
    assert misnamed(fits, policy) == []
    assert misnamed(does_not_fit, policy) == does_not_fit


def test_the_patterns_are_the_rdma_roles():
    role = yaml.safe_load((ROOT / "roles/rdma/vars/main.yml").read_text())

    def expand(text: str) -> str:  # the role composes its patterns from __rdma_name_* parts
        return re.sub(r"\{\{ (__rdma_name_[a-z]+) \}\}", lambda m: expand(role[m[1]]), text)

    assert {p: expand(v) for p, v in role["__rdma_device_name_patterns"].items()} == PATTERNS
    spec = yaml.safe_load((ROOT / "roles/rdma/meta/argument_specs.yml").read_text())
    choices = spec["argument_specs"]["main"]["options"][NAMING_VAR]["choices"]
    assert choices == list(PATTERNS)


def test_an_unknown_policy_is_named():
    assert policy_problem("kernel") is None
    assert policy_problem("NAME_KERNEL") == (
        "rdma_device_naming is 'NAME_KERNEL', not one of kernel, pci, guid, onboard, fallback")


@pytest.fixture(scope="module")
def example() -> Any:
    return prepare([EXAMPLE], load_profile("dgx-h100"))


def with_policy(view: RunView, policy: object) -> RunView:
    return replace(view, hostvars={h: {**v, NAMING_VAR: policy} for h, v in view.hostvars.items()})


def test_the_example_inventory_names_its_devices_as_its_policy_does(example):
    assert {example.view.hostvars[n].get(NAMING_VAR) for n in example.view.nodes} == {"kernel"}
    assert naming_problems(example.view, example.selected) == []


def test_pci_naming_refuses_the_profiles_mlx5_names_in_every_check(example):
    problems = naming_problems(with_policy(example.view, "pci"), example.selected)
    by_check: dict[str, set[str]] = {}
    for p in problems:
        assert p.severity == "error" and p.host in example.view.nodes
        by_check.setdefault(str(p.check), set()).add(p.message.split("RDMA device ")[1].split()[0])
    # compute_nics and rail_hcas name all eight; nccl.fabric_all_reduce is checked although
    # this Kubernetes site launches nothing across the nodes
    assert by_check["topology.gpu_nic_affinity"] == set(DGX_HCAS)
    assert by_check["nccl.fabric_all_reduce"] == set(DGX_HCAS)
    first = next(p for p in problems if p.check == "topology.gpu_nic_affinity")
    assert first.message == (
        "profile dgx-h100, check topology.gpu_nic_affinity: RDMA device mlx5_0 does not fit "
        "rdma_device_naming=pci (the inventory's udev naming policy names devices like "
        "ibp24s0, rocep24s0f1): name the device as the policy does, or set the policy that "
        "gives that name")


def test_the_plan_refuses_a_policy_that_renames_the_profiles_devices(example):
    pre = build(with_policy(example.view, "fallback"), example.selected)
    assert any(p.check == "nccl.fabric_all_reduce" and "rdma_device_naming=fallback"
               in p.message for p in pre.problems)


def test_a_node_without_a_policy_is_not_checked(example):
    view = replace(example.view, hostvars={h: {k: v for k, v in hv.items() if k != NAMING_VAR}
                                           for h, hv in example.view.hostvars.items()})
    view = replace(view, hostvars={**view.hostvars, view.nodes[0]: {
        **view.hostvars[view.nodes[0]], NAMING_VAR: "guid"}})
    problems = naming_problems(view, example.selected)
    assert problems and {p.host for p in problems} == {view.nodes[0]}


def test_a_policy_that_is_no_policy_is_one_error_per_node(example):
    problems = naming_problems(with_policy(example.view, "NAME_PCI"), example.selected)
    assert [(p.host, p.check) for p in problems] == [(n, None) for n in example.view.nodes]
    assert "'NAME_PCI', not one of kernel" in problems[0].message
