from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rackgate.inventory import InventoryError, load_inventory, parse_inventory_json

DEMO = Path(__file__).resolve().parents[2] / "inventory" / "demo"


def test_nested_groups_are_resolved():
    doc = {"_meta": {"hostvars": {"a": {"rackgate_location": {"rack": "r1", "u": 3}}}},
           "all": {"children": ["ungrouped", "rack"]},
           "rack": {"children": ["compute"]},
           "compute": {"hosts": ["a", "b"]}}
    inv = parse_inventory_json(doc, ["x"])
    assert inv.hosts_in("rack") == ["a", "b"]
    assert inv.hostvars["b"] == {}
    assert inv.location("a") == "rack r1 u 3"
    assert inv.location("b") == ""
    with pytest.raises(InventoryError, match="no group 'gpu'"):
        inv.hosts_in("gpu")


def test_demo_inventory_through_ansible_inventory():
    inv = load_inventory([str(DEMO)])
    assert inv.hosts_in("compute") == ["rg-node01", "rg-node02"]
    assert inv.hosts_in("head") == ["rg-head"]
    assert inv.hostvars["rg-node01"]["rackgate_scratch_path"] == "/var/tmp/rackgate"
    assert inv.location("rg-node02") == "rack demo-r1 u 37"


def test_missing_inventory_is_refused(tmp_path):
    with pytest.raises(InventoryError, match=r"could not parse|failed"):
        load_inventory([str(tmp_path / "nope.yml")])


def test_ansible_inventory_is_on_path():
    out = subprocess.run(["ansible-inventory", "--version"], capture_output=True, text=True,
                         check=True)
    assert "ansible-inventory" in out.stdout
    json.dumps(out.stdout)


def test_profile_overrides_from_several_variables_are_merged():
    from rackgate.refusal import Refusal
    from rackgate.selection import host_overrides

    hv = {"rackgate_profile_overrides": {"checks": {"fio.seq_read": {"enabled": False}}},
          "rackgate_profile_overrides_bmc": {"checks": {"redundancy.psu_ipmi": {
              "enabled": False}}},
          "rackgate_profile_overridesX": {"ignored": True}}
    assert host_overrides(hv) == {"checks": {"fio.seq_read": {"enabled": False},
                                             "redundancy.psu_ipmi": {"enabled": False}}}
    assert host_overrides({}) == {}
    with pytest.raises(Refusal, match="rackgate_profile_overrides_x must be a mapping"):
        host_overrides({"rackgate_profile_overrides_x": [1]})
