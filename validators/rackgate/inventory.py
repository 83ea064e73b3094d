"""Read an Ansible inventory the way Ansible does: through ``ansible-inventory --list``.

Any inventory source Ansible accepts (YAML, INI, directories with group_vars and
host_vars, plugins) works, and variables are merged by Ansible's own precedence.
``--limit`` is resolved by Ansible's own host patterns (:func:`limit_hosts`).
``ansible-inventory`` is the one installed beside rackgate (``rackgate.environment``), and
the demo inventory brings its settings (vault identity, podman configuration) with it.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackgate.documents import load_json
from rackgate.environment import ansible_env, program
from rackgate.refusal import Refusal


class InventoryError(Refusal):
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

    def place(self, host: str) -> dict[str, Any] | None:
        """Rack and unit from ``rackgate_location`` (``{rack: r12, u: 38}``), and the rack's
        height from ``rackgate_rack_height`` when set, for the report's rack elevation;
        None when the rack or unit is missing or malformed (:func:`place_of`)."""
        hv = self.hostvars.get(host, {})
        loc = hv.get("rackgate_location")
        if not isinstance(loc, Mapping):
            return None
        height = hv.get("rackgate_rack_height")
        return place_of({**loc, "rack_height": height} if height is not None else loc)


RACK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_RACK_U = 60  # the tallest racks sold are 58U; a U above this is a typo


def place_of(loc: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{"rack": name, "u": n}`` from a location mapping (``rackgate_location``, or the
    words ``rack X u N`` of its text), with ``rack_height`` as given (``rackgate_rack_height``,
    judged by the report), or None when the rack or unit is missing or not a plain name and
    a whole number. A unit the rack cannot have (0, or above its height) is kept: the
    report flags the node as outside its rack, not as a node without a place.

    >>> place_of({"rack": "r12", "u": 38, "slot": 2}), place_of({"rack": "r12", "u": 0})
    ({'rack': 'r12', 'u': 38}, {'rack': 'r12', 'u': 0})
    >>> place_of({"rack": "r12", "u": "3.5"}) is None, place_of({"u": 4}) is None
    (True, True)
    >>> place_of({"rack": "r12", "u": 44, "rack_height": 48})
    {'rack': 'r12', 'u': 44, 'rack_height': 48}
    """
    rack, u = loc.get("rack"), loc.get("u")
    if isinstance(u, str) and u.isdigit():
        u = int(u)
    if not isinstance(rack, str | int) or isinstance(rack, bool) \
            or not RACK_NAME.fullmatch(str(rack)):
        return None
    if not isinstance(u, int) or isinstance(u, bool):
        return None
    place: dict[str, Any] = {"rack": str(rack), "u": u}
    if loc.get("rack_height") is not None:
        place["rack_height"] = loc["rack_height"]
    return place


def place_from_text(text: str) -> dict[str, Any] | None:
    """The place in a location as :meth:`Inventory.location` writes it (a run recorded
    before places were): ``"rack r12 u 38"``.

    >>> place_from_text("rack demo-r1 u 38"), place_from_text("row 3")
    ({'rack': 'demo-r1', 'u': 38}, None)
    """
    words = text.split()
    pairs = dict(zip(words[::2], words[1::2], strict=False)) if len(words) % 2 == 0 else {}
    return place_of(pairs)


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
    found = program("ansible-inventory")
    if found is None:
        raise InventoryError("ansible-inventory not found beside rackgate nor on PATH: "
                             "install ansible-core (make test / make demo do this in .venv)")
    cmd = [found, "--list"]
    for s in sources:
        cmd += ["-i", s]
    env = {**os.environ, **ansible_env(sources)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False,
                              env=env)
    except FileNotFoundError:
        raise InventoryError(f"{found} could not be started: install ansible-core "
                             "(make test / make demo do this in .venv)") from None
    if proc.returncode != 0:
        raise InventoryError(f"inventory {', '.join(sources)}: ansible-inventory failed "
                             f"(rc {proc.returncode}): {proc.stderr.strip()[-800:]}")
    if "[WARNING]: Unable to parse" in proc.stderr or "No inventory was parsed" in proc.stderr:
        raise InventoryError(f"inventory {', '.join(sources)}: Ansible could not parse it: "
                             f"{proc.stderr.strip()[-800:]}")
    try:
        doc = load_json(proc.stdout)
    except ValueError as exc:
        raise InventoryError(f"inventory {', '.join(sources)}: ansible-inventory's answer is "
                             f"not a JSON document rackgate reads: {exc}") from None
    return parse_inventory_json(doc, sources)


def limit_hosts(sources: Sequence[str], group: str, limit: str) -> list[str]:
    """The hosts of ``group`` that the Ansible host pattern ``limit`` selects, sorted: the
    hosts ``ansible-playbook -i SOURCES --limit LIMIT`` runs a play for ``group`` on.

    Ansible's own ``InventoryManager`` resolves the pattern, in this process: a comma list,
    wildcards, ``!host``, ``group:&other``, ``~regex``, ``@retry-file`` (one host per
    line, relative to the working directory) and subscripts (``compute[0:3]``: the first
    four hosts of ``compute``). Only the inventory's structure is read, never its variables,
    so vaulted group_vars need no vault password here. One extension: an element that
    matches nothing and holds a range (``dgx0[01:16]``, ``n[a:c]-ib``) selects the hosts
    that range names, as the same range would define them in an inventory.

    Raises InventoryError naming the group, the limit and what it matched outside the group.
    """
    from ansible.errors import AnsibleError  # type: ignore[import-untyped]
    from ansible.inventory.manager import (  # type: ignore[import-untyped]
        InventoryManager,
        split_host_pattern,
    )
    from ansible.parsing.dataloader import DataLoader  # type: ignore[import-untyped]

    where = ", ".join(sources)
    said = io.StringIO()  # Ansible's warnings: named in errors, never printed (cli prints)
    try:
        with contextlib.redirect_stderr(said):
            manager = InventoryManager(loader=DataLoader(), sources=list(sources))
            if group not in manager.groups:
                raise InventoryError(f"inventory {where}: no group {group!r}")
            patterns = [_range_or_pattern(manager, p) for p in split_host_pattern(limit) if p]
            if not patterns:
                raise InventoryError(f"--limit {limit!r} names no host pattern")
            for p in patterns:
                if p.startswith("@") and not Path(p[1:]).is_file():
                    raise InventoryError(f"--limit {limit!r}: {p[1:]} is not a file (a "
                                         f"retry file names one host per line)")
            manager.subset(patterns)
            chosen = sorted(h.name for h in manager.get_hosts(pattern="all"))
    except AnsibleError as exc:
        raise InventoryError(f"inventory {where}: Ansible cannot resolve --limit {limit!r}: "
                             f"{' '.join(str(exc).split())[:400]}") from None
    members = {h.name for h in manager.groups[group].get_hosts()}
    hosts = [h for h in chosen if h in members]
    if hosts:
        return hosts
    if chosen:
        more = f" and {len(chosen) - 10} more" if len(chosen) > 10 else ""
        found = f"it selects {', '.join(chosen[:10])}{more}, outside the group"
    else:
        found = f"it selects no host of inventory {where}"
    warned = " ".join(" ".join(line.split()) for line in said.getvalue().splitlines()
                      if "Could not match supplied host pattern" not in line)
    raise InventoryError(f"no host of group {group!r} matches --limit {limit!r} ({found})"
                         + (f"; Ansible said: {warned[:300]}" if warned else ""))


def _range_or_pattern(manager: Any, pattern: str) -> str:
    """``pattern``; or, when Ansible matches nothing with it and it holds a range
    (``dgx0[01:03]``, ``!n[a:c]-ib``), a regex pattern naming exactly the hosts of the range,
    expanded by Ansible's own inventory range code, its ``!`` or ``&`` kept."""
    from ansible.errors import AnsibleError
    from ansible.plugins.inventory import expand_hostname_range  # type: ignore[import-untyped]

    op, body = (pattern[0], pattern[1:]) if pattern[:1] in ("!", "&") else ("", pattern)
    if not ("[" in body and ":" in body) or body[:1] in ("~", "@") or manager.list_hosts(body):
        return pattern
    try:
        names = [str(n) for n in expand_hostname_range(body)]
    except (AnsibleError, ValueError):
        return pattern  # not a range after all: Ansible's reading stands
    if not names or any(c in n for n in names for c in ",:"):
        return pattern
    return op + "~(" + "|".join(re.escape(n) for n in names) + ")$"
