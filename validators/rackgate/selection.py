"""What a run covers, resolved before anything runs: the nodes (``--group``, ``--limit``),
the checks, each node's profile (the rack's, with its inventory overrides) and where jobs
across the nodes are launched from. ``validate`` and its plan both start from
:func:`prepare`; ``--resume`` and ``--retest`` take the same from the run's manifest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackgate.checks import select
from rackgate.checks.shared.base import Check
from rackgate.fabric.plan import LoadedPlan, PlanError, load_plan
from rackgate.inventory import Inventory, InventoryError, limit_hosts, load_inventory
from rackgate.placement import (
    ACROSS_NODES,
    FABRIC_GROUP,
    FABRIC_HOST_VAR,
    LAUNCH_GROUP,
    LAUNCH_HOST_VAR,
    NO_LAUNCH_VAR,
    ON_FABRIC,
    RunView,
    placement_of,
)
from rackgate.placement.evidence import not_applicable
from rackgate.profile import Profile, ProfileError, deep_merge
from rackgate.refusal import Refusal


def select_hosts(inv: Inventory, group: str, limit: str | None) -> list[str]:
    """The hosts of ``group`` that ``limit`` (Ansible host patterns, as ``ansible-playbook
    --limit`` reads them: ``inventory.limit_hosts``) selects, in the group's sorted order."""
    hosts = inv.hosts_in(group)
    if limit:
        try:
            chosen = set(limit_hosts(inv.sources, group, limit))
        except InventoryError as exc:
            raise Refusal(str(exc)) from None
        hosts = [h for h in hosts if h in chosen]
    if not hosts:
        raise Refusal(f"no host of group {group!r} matches --limit {limit!r}" if limit else
                       f"group {group!r} of inventory {', '.join(inv.sources)} has no host")
    return hosts


def select_checks(profile: Profile, names_or_tags: Sequence[str] | None) -> list[Check]:
    try:
        wanted = select(list(names_or_tags) if names_or_tags else None)
    except KeyError as exc:
        raise Refusal(str(exc.args[0])) from None
    checks = [c for c in wanted if c.name in profile.model.checks]
    if not checks:
        raise Refusal(f"profile {profile.name} defines none of the selected checks "
                       f"({', '.join(c.name for c in wanted)})")
    return checks


def _named_host(inv: Inventory, hosts: Sequence[str], var: str, group: str) -> str | None:
    """The host the nodes' ``var`` names (they must agree), else the first host of
    ``group``, else None."""
    named = sorted({str(v) for h in hosts if (v := inv.hostvars[h].get(var))})
    if len(named) > 1:
        raise Refusal(f"the nodes under test disagree on {var}: {named}")
    if named:
        if named[0] not in inv.hostvars:
            raise Refusal(f"{var} {named[0]!r} is not a host of inventory "
                           f"{', '.join(inv.sources)}")
        return named[0]
    members = sorted(inv.groups.get(group, ()))
    return members[0] if members else None


def launch_host(inv: Inventory, hosts: Sequence[str]) -> str | None:
    """Where multi-node checks are launched from: the nodes' ``rackgate_launch_host``
    (they must agree), else the first host of group ``slurm_controller``, else None."""
    return _named_host(inv, hosts, LAUNCH_HOST_VAR, LAUNCH_GROUP)


def fabric_host(inv: Inventory, hosts: Sequence[str]) -> str | None:
    """Where the fabric is queried from: the nodes' ``rackgate_fabric_host`` (they must
    agree), else the first host of group ``subnet_managers``, else None."""
    return _named_host(inv, hosts, FABRIC_HOST_VAR, FABRIC_GROUP)


FABRIC_PLAN_FILE = "fabric.yml"


def fabric_plan(sources: Sequence[str], given: Path | None = None) -> LoadedPlan | None:
    """The fabric plan: ``given`` (``--fabric-plan``), else the ``fabric.yml`` beside the
    inventory (in an inventory directory, or next to an inventory file), else None.
    Refusal for a plan that cannot be used, or two inventories with one each."""
    if given is None:
        found = sorted({str(f) for src in sources
                        if (f := (Path(src) if Path(src).is_dir() else Path(src).parent)
                            / FABRIC_PLAN_FILE).is_file()})
        if len(found) > 1:
            raise Refusal(f"two fabric plans beside the inventories ({', '.join(found)}): "
                           f"name one with --fabric-plan")
        if not found:
            return None
        given = Path(found[0])
    try:
        return load_plan(given)
    except PlanError as exc:
        raise Refusal(str(exc)) from None


def no_launch_reason(inv: Inventory, hosts: Sequence[str]) -> str | None:
    """Why the site launches no job across its nodes (``rackgate_no_launch_reason``: its
    multi-node checks are then skipped with that reason), or None. Every node must say so,
    in the same words: a site half declared is a mistake, and its checks stay errors."""
    reasons = {str(inv.hostvars[h].get(NO_LAUNCH_VAR) or "").strip() for h in hosts}
    if len(reasons) == 1 and (reason := reasons.pop()):
        return reason
    return None


OVERRIDES_VAR = "rackgate_profile_overrides"


def host_overrides(hostvars: Mapping[str, Any]) -> dict[str, Any]:
    """A host's profile overrides: ``rackgate_profile_overrides`` and every
    ``rackgate_profile_overrides_<suffix>`` variable, deep-merged in name order, so that
    group_vars, host_vars and extra inventory files can each contribute one (Ansible would
    otherwise let one variable of the same name hide the others)."""
    merged: dict[str, Any] = {}
    for key in sorted(k for k in hostvars
                      if k == OVERRIDES_VAR or k.startswith(OVERRIDES_VAR + "_")):
        value = hostvars[key]
        if value:
            if not isinstance(value, Mapping):
                raise Refusal(f"inventory variable {key} must be a mapping (a partial "
                               f"profile), got {type(value).__name__}")
            merged = deep_merge(merged, value)
    return merged


def node_profiles(profile: Profile, overrides: Mapping[str, Any]) -> dict[str, Profile]:
    """Each host's profile: the rack's, with the host's inventory overrides merged in.

    Hosts with the same overrides (usually set per group) share one Profile object.
    """
    out = {}
    seen: dict[str, Profile] = {}
    for host, over in overrides.items():
        key = json.dumps(over or {}, sort_keys=True, default=str)
        if key not in seen:
            try:
                seen[key] = profile.with_overrides(over or {}, f"rackgate_profile_overrides "
                                                               f"of inventory host {host}")
            except ProfileError as exc:
                raise Refusal(str(exc)) from None
        out[host] = seen[key]
    return out


def refuse_if_nothing_applies(selected: Sequence[Check], profiles: Mapping[str, Profile]) -> None:
    """Refusal when every selected check is disabled or not applicable on every node: such a
    run could only skip, and skips never accept a node."""
    why: dict[str, str] = {}
    for host, prof in profiles.items():
        for check in selected:
            skipped = not_applicable(host, check, prof)
            if skipped is None:
                return
            why.setdefault(check.name, skipped.message)
    raise Refusal("nothing to run: every selected check is skipped on every node ("
                   + "; ".join(f"{name}: {msg}" for name, msg in why.items()) + ")")




@dataclass(frozen=True)
class Prepared:
    """A fresh run before anything runs: what the plan and the collection both start from."""

    inv: Inventory
    hosts: list[str]
    selected: list[Check]
    overrides: dict[str, Any]
    profiles: dict[str, Profile]
    launch_host: str | None
    fabric: LoadedPlan | None = None
    fabric_host: str | None = None

    @property
    def view(self) -> RunView:
        return RunView(tuple(self.hosts), self.inv.hostvars, tuple(self.inv.sources),
                       self.profiles, self.launch_host,
                       fabric=self.fabric.plan if self.fabric else None,
                       fabric_host=self.fabric_host)


def prepare(inventory: Sequence[str], profile: Profile, *, group: str = "compute",
            limit: str | None = None, checks: Sequence[str] | None = None,
            fabric_plan_file: Path | None = None, need_launch_host: bool = False) -> Prepared:
    """Resolve the inventory, the hosts, the checks, each node's profile, the launch host
    (when a check is launched across the nodes, or ``need_launch_host``: collecting through
    SLURM), the fabric plan and the fabric host; Refusal on bad overrides or a bad plan,
    or a run in which nothing would run."""
    inv = load_inventory(inventory)
    hosts = select_hosts(inv, group, limit)
    selected = select_checks(profile, checks)
    overrides = {h: host_overrides(inv.hostvars[h]) for h in hosts}
    profiles = node_profiles(profile, overrides)
    refuse_if_nothing_applies(selected, profiles)
    launcher = (launch_host(inv, hosts) if need_launch_host
                or any(placement_of(c) is ACROSS_NODES for c in selected) else None)
    plan = fabric_plan(inv.sources, fabric_plan_file)
    fabric = (fabric_host(inv, hosts)
              if any(placement_of(c) is ON_FABRIC for c in selected) else None)
    return Prepared(inv, hosts, selected, overrides, profiles, launcher, plan, fabric)
