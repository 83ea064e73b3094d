#!/usr/bin/env python3
"""Check every role's meta/argument_specs.yml against its defaults/main.yml.

Ansible keeps a role's argument specs apart from its defaults, so nothing stops the two
from drifting (CONTRIBUTING.md, "Ansible roles": argument_specs covers every public
variable). For every role under roles/ this script reports:

  * a variable in defaults/main.yml that the `main` entry point's options lack;
  * an option with no default in defaults/main.yml (unless it is `required: true`);
  * an option without `type` or `description`, or a `type: list` without `elements`;
  * an option whose spec `default` differs from the value in defaults/main.yml;
  * an option not named `<role>_*` (the options of every entry point: `main` and the
    task files callers include with `tasks_from`);
  * a `<role>_*` name used in the role's README.md or molecule/ YAML that the spec lacks
    (a test or document that sets or describes a variable nothing reads). Facts the role
    sets for its callers with `set_fact` in tasks/ (e.g. `<role>_reboot_required`) are
    outputs, not options, and may be documented; so may the inventory group names that
    `<role>_*_group` options default to (`slurm_controller`).

Usage: scripts/check-argument-specs.py [ROLES_DIR]   (default: roles/ next to scripts/)
Exit status: 0 all roles agree, 1 differences found (listed on stderr), 2 unreadable input.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

ENTRY_POINT = "main"


class InputError(Exception):
    """A file could not be read or parsed."""


def load_yaml(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as stream:
            return yaml.safe_load(stream)
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: {exc}") from exc


def check_role(role_dir: Path) -> list[str]:
    """Return the problems found in one role, each naming the file and the variable."""
    role = role_dir.name
    defaults_path = role_dir / "defaults" / "main.yml"
    specs_path = role_dir / "meta" / "argument_specs.yml"
    problems: list[str] = []

    defaults = load_yaml(defaults_path) if defaults_path.is_file() else {}
    if defaults is None:
        defaults = {}
    if not isinstance(defaults, dict):
        return [f"{defaults_path}: expected a mapping, got {type(defaults).__name__}"]

    if not specs_path.is_file():
        return [f"{specs_path}: missing (every role documents its variables there)"]
    specs = load_yaml(specs_path) or {}
    entry = (specs.get("argument_specs") or {}).get(ENTRY_POINT)
    if not isinstance(entry, dict):
        return [f"{specs_path}: no argument_specs.{ENTRY_POINT} entry point"]
    options = entry.get("options") or {}
    if not isinstance(options, dict):
        return [f"{specs_path}: argument_specs.{ENTRY_POINT}.options is not a mapping"]

    for name in sorted(set(defaults) - set(options)):
        problems.append(f"{specs_path}: `{name}` is in defaults/main.yml but not in the spec")

    for name in sorted(set(options) - set(defaults)):
        if not (options[name] or {}).get("required", False):
            problems.append(
                f"{defaults_path}: spec option `{name}` has no default here "
                "(add one, or mark it `required: true`)"
            )

    # Other entry points (a role's tasks_from files, e.g. rackgate_host's `skip`) take
    # options of their own: they are held to the same rules, and named in the README.
    entries = specs.get("argument_specs") or {}
    others = {name: option for point, spec in sorted(entries.items()) if point != ENTRY_POINT
              for name, option in ((spec or {}).get("options") or {}).items()}
    for name, option in sorted({**others, **options}.items()):
        option = option or {}
        where = f"{specs_path}: option `{name}`"
        if not name.startswith(f"{role}_"):
            problems.append(f"{where} is not prefixed `{role}_`")
        for key in ("type", "description"):
            if not option.get(key):
                problems.append(f"{where} has no `{key}`")
        if option.get("type") == "list" and "elements" not in option:
            problems.append(f"{where} is a list without `elements`")
        if "default" in option and name in defaults and option["default"] != defaults[name]:
            problems.append(
                f"{where} default {option['default']!r} differs from "
                f"defaults/main.yml: {defaults[name]!r}"
            )

    # Inventory group names the role reads (options `<role>_*_group`, e.g. slurm's
    # `slurm_controller_group: slurm_controller`) may look like variables; they are not.
    groups = {str(o["default"]) for n, o in options.items()
              if n.endswith("_group") and isinstance(o, dict) and o.get("default")}
    problems.extend(check_mentions(role_dir, set(options) | set(others) | groups))
    return problems


def output_facts(role_dir: Path) -> set[str]:
    """`<role>_*` names the role's tasks set with set_fact: results its callers may read."""
    role = role_dir.name
    names: set[str] = set()
    for path in sorted((role_dir / "tasks").glob("*.yml")):
        for task in _tasks(load_yaml(path)):
            facts = task.get("ansible.builtin.set_fact") or task.get("set_fact")
            if isinstance(facts, dict):
                names |= {k for k in facts if k.startswith(f"{role}_")}
    return names


def _tasks(doc: Any) -> list[dict[str, Any]]:
    """Every task of a task file, blocks (block/rescue/always) flattened."""
    found: list[dict[str, Any]] = []
    for item in doc or []:
        if not isinstance(item, dict):
            continue
        found.append(item)
        for key in ("block", "rescue", "always"):
            found.extend(_tasks(item.get(key)))
    return found


def check_mentions(role_dir: Path, options: set[str]) -> list[str]:
    """Report `<role>_*` names in the README and molecule YAML that are neither options of the
    spec nor facts the role sets."""
    role = role_dir.name
    options = options | output_facts(role_dir)
    pattern = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(role)}_[a-z0-9_]*[a-z0-9]")
    files = [role_dir / "README.md"]
    molecule_dir = role_dir / "molecule"
    if molecule_dir.is_dir():
        files += sorted(molecule_dir.rglob("*.yml")) + sorted(molecule_dir.rglob("*.yaml"))
    problems = []
    for path in files:
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{path}: {exc}") from exc
        for lineno, line in enumerate(text.splitlines(), start=1):
            for name in sorted(set(pattern.findall(line)) - options):
                problems.append(f"{path}:{lineno}: `{name}` is not an option in the spec")
    return problems


def main(argv: list[str]) -> int:
    roles_dir = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "roles"
    if not roles_dir.is_dir():
        print(f"check-argument-specs: {roles_dir} is not a directory", file=sys.stderr)
        return 2
    role_dirs = sorted(p for p in roles_dir.iterdir() if p.is_dir() and (p / "tasks").is_dir())
    if not role_dirs:
        print(
            f"check-argument-specs: no roles (directories with tasks/) in {roles_dir}",
            file=sys.stderr,
        )
        return 2

    failed = False
    for role_dir in role_dirs:
        try:
            problems = check_role(role_dir)
        except InputError as exc:
            print(f"check-argument-specs: {exc}", file=sys.stderr)
            return 2
        if problems:
            failed = True
            print(f"{role_dir.name}: {len(problems)} problem(s)", file=sys.stderr)
            for problem in problems:
                print(f"  {problem}", file=sys.stderr)
        else:
            print(f"{role_dir.name}: defaults and argument_specs agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
