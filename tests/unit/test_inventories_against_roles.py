"""The shipped inventories against the playbooks and the roles' argument specs.

Ansible checks a role's variables against meta/argument_specs.yml only when the role runs
on a host, and it never notices a misspelt variable (`gpu_driver_verison: ...` is silently
ignored and the default wins). These tests read every inventory under inventory/ through
`ansible-inventory`, work out from playbooks/*.yml which roles each host gets, and check
every `<role>_*` variable the inventory gives a host:

  * its name is an option of that role's spec (a typo or a removed option fails);
  * its value has the spec's type and choices (Ansible's own ArgumentSpecValidator);
  * every group a playbook targets is declared in the inventory, so a misspelt group in a
    play is an error here rather than Ansible's "no hosts matched" warning;
  * every role under roles/ is applied by some layer playbook.

Values that are Jinja expressions are checked by name only: their type is known only when
Ansible templates them on the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from rackgate.inventory import Inventory, load_inventory

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
INVENTORIES = sorted(p for p in (ROOT / "inventory").iterdir() if p.is_dir())


def role_options(role: str) -> dict[str, dict[str, Any]]:
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return dict(spec["argument_specs"]["main"].get("options") or {})


def plays() -> list[tuple[str, list[str], list[str]]]:
    """(playbook file, host groups, role names) for every play of playbooks/*.yml."""
    found = []
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            if "hosts" not in play:  # an import_playbook entry
                continue
            groups = play["hosts"].split(":")
            roles = [r["role"] if isinstance(r, Mapping) else r for r in play.get("roles", [])]
            found.append((path.name, groups, roles))
    return found


def owning_role(variable: str) -> str | None:
    """The role whose prefix a variable carries (longest match: `nccl_` vs a `nccl_x` role)."""
    owners = [r for r in ROLES if variable.startswith(f"{r}_")]
    return max(owners, key=len) if owners else None


def roles_of(inv: Inventory, host: str) -> set[str]:
    applied: set[str] = set()
    for _, groups, roles in plays():
        if any(g == "all" or host in inv.groups.get(g, frozenset()) for g in groups):
            applied.update(roles)
    return applied


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def variable_problems(inv: Inventory, host: str) -> list[str]:
    problems = []
    applied = roles_of(inv, host)
    hostvars = inv.hostvars[host]
    for role in sorted(applied):
        options = role_options(role)
        given = {k: v for k, v in hostvars.items() if owning_role(k) == role}
        for name in sorted(set(given) - set(options)):
            problems.append(f"{host}: `{name}` is not an option of role {role} "
                            f"(roles/{role}/meta/argument_specs.yml)")
        for name in sorted(k for k, o in options.items() if o.get("required") and k not in given):
            problems.append(f"{host}: role {role} requires `{name}`, which the inventory lacks")
        typed = {k: v for k, v in given.items() if k in options and not is_template(v)}
        # Types and choices only; "required" is checked above, defaults are the role's.
        spec = {k: {kk: vv for kk, vv in o.items() if kk not in ("description", "required")}
                for k, o in options.items()}
        result = ArgumentSpecValidator(spec).validate(typed)
        problems += [f"{host}: role {role}: {error}" for error in result.error_messages]
    stray = sorted(k for k in hostvars if owning_role(k) and owning_role(k) not in applied
                   and owning_role(k) != "common")
    problems += [f"{host}: `{k}` is set but no playbook applies role {owning_role(k)} to this host"
                 for k in stray]
    return problems


@pytest.fixture(scope="module", params=[p.name for p in INVENTORIES])
def inventory(request: pytest.FixtureRequest) -> Inventory:
    return load_inventory([str(ROOT / "inventory" / request.param)])


def test_inventory_variables_match_the_role_specs(inventory: Inventory) -> None:
    problems = [p for host in sorted(inventory.hostvars)
                for p in variable_problems(inventory, host)]
    assert problems == []


def test_every_group_a_play_targets_is_declared(inventory: Inventory) -> None:
    targeted = {g for _, groups, _ in plays() for g in groups if g != "all"}
    assert sorted(targeted - set(inventory.groups)) == []


def included_roles(role: str) -> set[str]:
    """The roles a role's tasks include (`include_role`: rackgate_host, the shared plumbing)."""
    found = set()
    for path in sorted((ROOT / "roles" / role / "tasks").glob("*.yml")):
        for task in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            include = task.get("ansible.builtin.include_role") if isinstance(task, dict) else None
            if isinstance(include, dict):
                found.add(include["name"])
    return found


def test_every_role_is_applied_by_a_layer_playbook() -> None:
    """Applied by a play, or included by a role a play applies (the shared rackgate_host)."""
    applied = {r for _, _, roles in plays() for r in roles}
    applied |= {r for role in applied for r in included_roles(role)}
    assert "rackgate_host" in applied
    assert sorted(set(ROLES) - applied) == []


def test_a_misspelt_variable_is_caught(tmp_path: Path) -> None:
    """The check above can fail: a typo in a group variable is named with its host."""
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    base_only:\n      hosts:\n        n1:\n"
        "          common_packges: [fio]\n          common_chrony_local_stratum: ten\n")
    inv = load_inventory([str(tmp_path / "hosts.yml")])
    problems = variable_problems(inv, "n1")
    assert any("`common_packges` is not an option of role common" in p for p in problems)
    assert any("common_chrony_local_stratum" in p and "int" in p for p in problems)
