"""Read an Ansible inventory the way Ansible does: through ``ansible-inventory --list``.

Any inventory source Ansible accepts (YAML, INI, directories with group_vars and
host_vars, plugins) works, and variables are merged by Ansible's own precedence.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class InventoryError(RuntimeError):
    pass


@dataclass(frozen=True)
class Inventory:
    sources: tuple[str, ...]
    hostvars: Mapping[str, Mapping[str, Any]]
    groups: Mapping[str, frozenset[str]]  # group -> every host in it, children included

    def hosts_in(self, group: str) -> list[str]:
        if group not in self.groups:
            raise InventoryError(f"inventory {', '.join(self.sources)}: no group {group!r} "
                                 f"(groups: {', '.join(sorted(self.groups))})")
        return sorted(self.groups[group])

    def location(self, host: str) -> str:
        """Physical location from ``rackgate_location`` (rack, u, slot), for tickets."""
        loc = self.hostvars.get(host, {}).get("rackgate_location")
        if isinstance(loc, Mapping):
            return " ".join(f"{k} {v}" for k, v in loc.items())
        return str(loc) if loc else ""


def parse_inventory_json(doc: Mapping[str, Any], sources: Sequence[str]) -> Inventory:
    """Build an Inventory from ``ansible-inventory --list`` JSON.

    >>> inv = parse_inventory_json({"_meta": {"hostvars": {"n1": {"a": 1}}},
    ...     "all": {"children": ["compute"]}, "compute": {"hosts": ["n1"]}}, ["x"])
    >>> inv.hosts_in("all"), inv.hostvars["n1"]["a"]
    (['n1'], 1)

    A declared group without hosts is there, and empty:

    >>> parse_inventory_json({"all": {"children": ["gpu"]}}, ["x"]).hosts_in("gpu")
    []
    """
    hostvars: dict[str, Mapping[str, Any]] = dict(doc.get("_meta", {}).get("hostvars", {}))
    direct = {g: v for g, v in doc.items() if g != "_meta" and isinstance(v, Mapping)}

    def members(group: str, seen: frozenset[str]) -> set[str]:
        node = direct.get(group, {})
        hosts = set(node.get("hosts", []))
        for child in node.get("children", []):
            if child not in seen:
                hosts |= members(child, seen | {child})
        return hosts

    # ansible-inventory lists an empty group only among its parent's children.
    named = set(direct) | {c for v in direct.values() for c in v.get("children", [])}
    groups = {g: frozenset(members(g, frozenset({g}))) for g in named}
    for h in set().union(*groups.values()) if groups else set():
        hostvars.setdefault(h, {})
    return Inventory(tuple(sources), hostvars, groups)


def load_inventory(sources: Sequence[str]) -> Inventory:
    cmd = ["ansible-inventory", "--list"]
    for s in sources:
        cmd += ["-i", s]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except FileNotFoundError:
        raise InventoryError("ansible-inventory not found: install ansible-core "
                             "(make test / make demo do this in .venv)") from None
    if proc.returncode != 0:
        raise InventoryError(f"inventory {', '.join(sources)}: ansible-inventory failed "
                             f"(rc {proc.returncode}): {proc.stderr.strip()[-800:]}")
    if "[WARNING]: Unable to parse" in proc.stderr or "No inventory was parsed" in proc.stderr:
        raise InventoryError(f"inventory {', '.join(sources)}: Ansible could not parse it: "
                             f"{proc.stderr.strip()[-800:]}")
    return parse_inventory_json(json.loads(proc.stdout), sources)
