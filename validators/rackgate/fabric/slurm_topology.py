"""SLURM's topology.conf from a fabric plan, for topology/tree and topology/block.

topology.conf(5) (SLURM 22.05 to 25.x): for topology/tree, one ``SwitchName=<name>`` line
per switch with its children, ``Nodes=`` (a leaf switch's nodes) or ``Switches=`` (child
switches), as SLURM hostlists; a node must sit under a leaf switch. For topology/block
(SLURM 23.11 and later), ``BlockName=<name> Nodes=<hostlist>`` per block and
``BlockSizes=<base>[,<base * 2^k>...]``: every block has at least ``base`` nodes, and a
size ``base * 2^k`` lets SLURM join ``2^k`` consecutive blocks (src/plugins/topology/block).

On a rail-optimised fabric a node sits on one leaf *per rail*, so neither form can list
the leaves themselves. Both use the group of leaves that share one set of nodes (a
scalable unit) as SLURM's leaf switch or block, named ``su<k>`` in the order of the plan's
nodes. Above it, every spine and core switch of the plan is listed with the groups or
switches cabled to it. ``BlockSizes`` starts at the smallest group (a partial SU would
otherwise stop slurmctld) and doubles while every run of consecutive groups SLURM would
join still shares a spine, so a joined block never crosses the core.

Names reach SLURM as switch names (``[A-Za-z0-9_.-]``, at most 64 characters): any other
character of a switch's node description becomes ``_``. Host names are the plan's.

>>> from rackgate.fabric.design import design
>>> print(topology_conf(design(4, 2, 4)), end="")  # doctest: +NORMALIZE_WHITESPACE
# SLURM topology.conf (topology/tree) of fabric plan "fabric", written by rackgate fabric
# topology. Leaf level: each group of leaves with the same nodes (one leaf per rail).
# su1: leaves su1-leaf-r0 to su1-leaf-r1
SwitchName=su1 Nodes=gpu[001-002]
# su2: leaves su2-leaf-r0 to su2-leaf-r1
SwitchName=su2 Nodes=gpu[003-004]
SwitchName=spine-01 Switches=su1,su2
SwitchName=spine-02 Switches=su1,su2
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rackgate.fabric.plan import LEVEL, FabricPlan

SLURM_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
_TRAILING_NUMBER = re.compile(r"(.*?)(\d+)\Z")


@dataclass(frozen=True)
class Group:
    """A SLURM leaf switch (or block): the leaves of the plan that share these nodes."""

    name: str
    leaves: tuple[str, ...]
    hosts: tuple[str, ...]  # in plan order


@dataclass(frozen=True)
class TreeSwitch:
    name: str
    nodes: tuple[str, ...] = ()  # hostlist terms: ("gpu[001-032]",)
    switches: tuple[str, ...] = ()  # child switch names


def hostlist(names: Iterable[str]) -> tuple[str, ...]:
    """SLURM hostlist terms for ``names``: a run of names that differ only in a trailing
    number becomes ``prefix[lo-hi,...]`` (zero padding kept); SLURM accepts a range only at
    the end of a name.

    >>> hostlist(["gpu001", "gpu002", "gpu003", "gpu007", "head", "su9", "su10", "gpu100"])
    ('gpu[001-003,007,100]', 'su[9-10]', 'head')
    """
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for name in dict.fromkeys(names):
        m = _TRAILING_NUMBER.match(name)
        if m is None:
            plain.append(name)
            continue
        digits = m.group(2)
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups.setdefault((m.group(1), width), []).append(int(digits))
    for (prefix, width), numbers in list(groups.items()):  # gpu099 and gpu100: gpu[099-100]
        padded = min((w for p, w in groups if p == prefix and w), default=0)
        if width == 0 and padded:
            groups[(prefix, padded)] += [n for n in numbers if len(str(n)) >= padded]
            groups[(prefix, 0)] = [n for n in numbers if len(str(n)) < padded]
    out = []
    for (prefix, width), numbers in groups.items():
        if not numbers:
            continue
        numbers.sort()
        runs: list[list[int]] = []
        for n in numbers:
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        text = ",".join(f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}"
                        for lo, hi in runs)
        out.append(f"{prefix}{text}" if len(numbers) == 1 else f"{prefix}[{text}]")
    return tuple(out + plain)


def groups(plan: FabricPlan) -> list[Group]:
    """The plan's leaves grouped by the set of nodes cabled to them, in node order;
    ValueError when a node is on two groups (SLURM's leaf level must be a partition)."""
    hosts_of: dict[str, list[str]] = {}
    for n in plan.nodes:
        hosts_of.setdefault(n.switch, [])
        if n.host not in hosts_of[n.switch]:
            hosts_of[n.switch].append(n.host)
    by_hosts: dict[frozenset[str], list[str]] = {}
    for leaf, hosts in hosts_of.items():
        by_hosts.setdefault(frozenset(hosts), []).append(leaf)
    first = {h: i for i, h in reversed(list(enumerate(n.host for n in plan.nodes)))}
    ordered = sorted(by_hosts.items(), key=lambda kv: min(first[h] for h in kv[0]))
    found = [Group(f"su{i}", tuple(leaves), tuple(sorted(hosts, key=first.__getitem__)))
             for i, (hosts, leaves) in enumerate(ordered, 1)]
    if not found:
        raise ValueError(f"fabric plan {plan.name!r} cables no node to a leaf: SLURM's "
                         f"topology has nothing to list")
    seen: dict[str, Group] = {}
    for g in found:
        for h in g.hosts:
            if h in seen:
                raise ValueError(
                    f"node {h} is on leaves {', '.join(seen[h].leaves)} and on leaves "
                    f"{', '.join(g.leaves)}, which serve other nodes: SLURM's topology needs "
                    f"every node under one group of leaves that share the same nodes")
            seen[h] = g
    return found


def slurm_name(switch: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", switch)
    if not SLURM_NAME.match(name):
        raise ValueError(f"switch {switch!r} gives SLURM switch name {name!r}, longer "
                         f"than SLURM's 64 characters")
    return name


def tree(plan: FabricPlan) -> list[TreeSwitch]:
    """topology/tree's switches: the groups with their nodes, then every spine and core
    with the groups (or switches) below it that it is cabled to."""
    found = groups(plan)
    group_of = {leaf: g.name for g in found for leaf in g.leaves}
    out = [TreeSwitch(g.name, nodes=hostlist(g.hosts)) for g in found]
    below: dict[str, list[str]] = {}
    for link in plan.links:
        a, b = plan.switch[link.a.switch], plan.switch[link.b.switch]
        if LEVEL[a.role] > LEVEL[b.role]:
            a, b = b, a
        if LEVEL[a.role] < LEVEL[b.role]:
            below.setdefault(b.name, []).append(a.name)
    written = dict(group_of)
    for s in sorted((s for s in plan.switches if s.role != "leaf"),
                    key=lambda s: LEVEL[s.role]):
        children = [written[c] for c in below.get(s.name, []) if c in written]
        if children:
            written[s.name] = slurm_name(s.name)
            out.append(TreeSwitch(written[s.name], switches=tuple(dict.fromkeys(children))))
    names = [t.name for t in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"SLURM switch name(s) {', '.join(twice)} would be given twice: "
                         f"rename the plan's switches")
    return out


def block_sizes(plan: FabricPlan, found: list[Group]) -> list[int]:
    """BlockSizes: the smallest group's size, then doubled while every run of 2^k
    consecutive groups (SLURM joins them in file order) is cabled to a common spine."""
    up: dict[str, set[str]] = {}
    for link in plan.links:
        for lower, upper in ((link.a.switch, link.b.switch), (link.b.switch, link.a.switch)):
            if plan.switch[lower].role == "leaf" and plan.switch[upper].role != "leaf":
                up.setdefault(lower, set()).add(upper)
    spines = [set().union(*(up.get(leaf, set()) for leaf in g.leaves)) for g in found]
    base = min(len(g.hosts) for g in found)
    sizes, run = [base], 2
    while run <= len(found) and all(set.intersection(*spines[i:i + run])
                                    for i in range(0, len(found), run)):
        sizes.append(base * run)
        run *= 2
    return sizes


def topology_conf(plan: FabricPlan, plugin: str = "tree") -> str:
    """The topology.conf text for ``plugin`` ("tree" or "block")."""
    head = (f'# SLURM topology.conf (topology/{plugin}) of fabric plan "{plan.name}", written '
            f"by rackgate fabric\n# topology. ")
    found = groups(plan)
    leaves = {g.name: f"# {g.name}: leaves {g.leaves[0]}" + (
        f" to {g.leaves[-1]}" if len(g.leaves) > 1 else "") for g in found}
    if plugin == "block":
        lines = [f"{leaves[g.name]}\nBlockName={g.name} Nodes={','.join(hostlist(g.hosts))}"
                 for g in found]
        sizes = ",".join(map(str, block_sizes(plan, found)))
        return (head + "Blocks: each group of leaves with the same nodes (one leaf per "
                "rail).\n" + "\n".join(lines) + f"\nBlockSizes={sizes}\n")
    if plugin != "tree":
        raise ValueError(f"--plugin must be tree or block (received {plugin!r})")
    lines = [(f"{leaves[t.name]}\n" if t.name in leaves else "") + _switch_line(t)
             for t in tree(plan)]
    return (head + "Leaf level: each group of leaves with the same nodes (one leaf per "
            "rail).\n" + "\n".join(lines) + "\n")


def _switch_line(t: TreeSwitch) -> str:
    return (f"SwitchName={t.name}" + (f" Nodes={','.join(t.nodes)}" if t.nodes else "")
            + (f" Switches={','.join(t.switches)}" if t.switches else ""))


def topology_vars(plan: FabricPlan, plugin: str = "tree") -> dict[str, Any]:
    """The slurm role's variables for the plan's topology (``rackgate fabric topology
    --vars``): both forms, and ``slurm_topology_plugin`` choosing one."""
    if plugin not in ("tree", "block"):
        raise ValueError(f"--plugin must be tree or block (received {plugin!r})")
    found = groups(plan)
    switches = [{"name": t.name, **({"nodes": list(t.nodes)} if t.nodes else {}),
                 **({"switches": list(t.switches)} if t.switches else {})} for t in tree(plan)]
    return {"slurm_topology_plugin": plugin,
            "slurm_topology_switches": switches,
            "slurm_topology_blocks": [{"name": g.name, "nodes": list(hostlist(g.hosts))}
                                      for g in found],
            "slurm_topology_block_sizes": block_sizes(plan, found)}
