"""A rail-optimised fat tree as a fabric plan: what ``rackgate fabric plan`` writes.

The design follows the scalable-unit (SU) layout of rail-optimised GPU fabrics:

* an SU is ``leaf_ports / 2`` nodes; it has one leaf per rail, and leaf *r* of an SU takes
  HCA *r* of every node of the SU, on port *i + 1* for the SU's *i*-th node (0-based); the
  last SU may be partial (its leaves keep every uplink, so it can grow without recabling);
* every leaf uses its lower half of ports for nodes and its upper half for uplinks;
* **two levels** when every leaf can reach every spine (leaves <= spine ports): the fewest
  spines that take every uplink with the same number of cables from each leaf to each
  spine (a divisor of the uplinks per leaf); a leaf's uplinks go round-robin over the
  spines;
* **three levels** beyond that: pods of whole SUs, each pod a two-level tree whose spines
  use their lower half of ports for the pod's leaves and their upper half for cores;
  core group *j* joins spine *j* of every pod, its cores spread evenly over them the
  same way (every core reaches every pod).

Names (node descriptions; they also satisfy SLURM's ``[A-Za-z0-9_.-]+``): leaves
``su<s>-leaf-r<rail>``, spines ``spine-<nn>`` (three levels: ``pod<p>-spine-<nn>``), cores
``core-<nn>``. A cable is labelled after the port of its lower-level end, ``<switch>/<port>``
(the leaf port of a node cable or of an uplink, the spine port of a spine-core cable):
unique, since every switch port carries one cable, and it tells where the cable plugs in.

>>> plan = design(32, 8, 64)
>>> [sum(s.role == r for s in plan.switches) for r in ("leaf", "spine", "core")]
[8, 4, 0]
>>> len(plan.nodes), len(plan.links)
(256, 256)
>>> n = plan.nodes[9]
>>> (n.desc, n.switch, n.switch_port, n.cable)
('gpu002 mlx5_1', 'su1-leaf-r1', 2, 'su1-leaf-r1/2')
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rackgate.fabric.plan import (
    HCA,
    HOST,
    LANE_GBPS,
    LANES,
    RACK,
    SCHEMA,
    FabricPlan,
    plan_from_document,
)

MAX_RAILS = 64  # a leaf's rail is 0..63 in the plan
MAX_PORTS = 254  # the plan's (and InfiniBand's) highest port number


@dataclass(frozen=True)
class Shape:
    """The counts a design follows from, before anything is named."""

    sus: int  # scalable units (the last may be partial)
    su_nodes: int  # nodes of a full SU (leaf_ports / 2)
    leaves: int
    pods: int  # 1 for a two-level tree
    sus_per_pod: int  # pod p holds SUs p * sus_per_pod onwards (two levels: every SU)
    spines_per_pod: int  # spines of a pod (of the fabric, for two levels)
    leaf_links: int  # cables from each leaf to each spine of its pod
    cores_per_group: int  # 0 for two levels
    core_links: int  # cables from each pod spine to each core of its group

    @property
    def levels(self) -> int:
        return 3 if self.cores_per_group else 2


def _spread(cables: int, fanout_min: int) -> int:
    """The fewest switches, at least ``fanout_min``, that ``cables`` (one switch's uplinks)
    spread over evenly: the smallest divisor of ``cables`` not below ``fanout_min``."""
    return next(d for d in range(max(fanout_min, 1), cables + 1) if cables % d == 0)


def shape(nodes: int, rails: int, leaf_ports: int, spine_ports: int) -> Shape:
    """The design's counts; ValueError for what no rail-optimised fat tree can be."""
    if nodes < 1:
        raise ValueError(f"--nodes must be at least 1 (received {nodes})")
    if not 1 <= rails <= MAX_RAILS:
        raise ValueError(f"--rails must be 1 to {MAX_RAILS} (received {rails})")
    for what, ports in (("--leaf-ports", leaf_ports), ("--spine-ports", spine_ports)):
        if not 2 <= ports <= MAX_PORTS or ports % 2:
            raise ValueError(f"{what} must be an even number from 2 to {MAX_PORTS}: half the "
                             f"ports go down, half up (received {ports})")
    su_nodes, up = leaf_ports // 2, leaf_ports // 2
    sus = math.ceil(nodes / su_nodes)
    leaves = sus * rails
    if leaves <= spine_ports:  # every leaf reaches every spine
        spines = _spread(up, math.ceil(leaves * up / spine_ports))
        return Shape(sus, su_nodes, leaves, 1, sus, spines, up // spines, 0, 0)
    down = spine_ports // 2
    sus_per_pod = down // rails
    if sus_per_pod < 1:
        raise ValueError(
            f"{nodes} nodes on {rails} rails need {leaves} leaves, more than a {spine_ports}"
            f"-port spine reaches, and a three-level pod cannot hold one SU: its spines "
            f"have {down} ports down for the SU's {rails} leaves")
    pods = math.ceil(sus / sus_per_pod)
    most = spine_ports * sus_per_pod * su_nodes
    if pods > spine_ports:
        raise ValueError(
            f"{nodes} nodes are too many for three levels of {leaf_ports}-port leaves and "
            f"{spine_ports}-port spines and cores: at most {most} nodes ({spine_ports} pods "
            f"of {sus_per_pod} SU(s) of {su_nodes} nodes)")
    spines = _spread(up, math.ceil(sus_per_pod * rails * up / down))
    cores = _spread(down, math.ceil(pods * down / spine_ports))
    return Shape(sus, su_nodes, leaves, pods, sus_per_pod, spines, up // spines, cores,
                 down // cores)


def design(nodes: int, rails: int, leaf_ports: int, *, spine_ports: int | None = None,
           speed: str = "HDR", width: str = "4X", host_format: str = "gpu{:03d}",
           hca_format: str = "mlx5_{}", hcas: Sequence[str] | None = None,
           name: str = "fabric", sm_hosts: Sequence[str] = (), sm_priority: int = 15,
           rack: str | None = None) -> FabricPlan:
    """The plan of a rail-optimised fat tree (module docstring) for ``nodes`` nodes named
    ``host_format.format(1..nodes)``, each with one HCA per rail, named
    ``hca_format.format(rail)`` or ``hcas[rail]``. ``sm_hosts`` (generated hosts) run the
    subnet manager at ``sm_priority``; ``rack`` places every switch in that rack."""
    spine_ports = leaf_ports if spine_ports is None else spine_ports
    if speed not in LANE_GBPS or width not in LANES:
        raise ValueError(f"speed must be one of {', '.join(LANE_GBPS)} and width one of "
                         f"{', '.join(LANES)} (received {speed!r}, {width!r})")
    s = shape(nodes, rails, leaf_ports, spine_ports)
    _numbering(host_format, "host", "--host-format")
    hosts = _names(host_format.format, range(1, nodes + 1), HOST, "host", "--host-format")
    if hcas is None:
        _numbering(hca_format, "HCA", "--hca-format")
    cas = (_names(lambda r: hcas[r], range(len(hcas)), HCA, "HCA", "--hcas") if hcas is not None
           else _names(hca_format.format, range(rails), HCA, "HCA", "--hca-format"))
    if len(cas) != rails:
        raise ValueError(f"{len(cas)} HCA names for {rails} rails: give one per rail")
    for what, value, pattern in (("--name", name, HOST), ("--rack", rack, RACK)):
        if value is not None and not pattern.match(value):
            raise ValueError(f"{what} {value!r} does not match {pattern.pattern}")
    if not 0 <= sm_priority <= 15:
        raise ValueError(f"--sm-priority must be 0 to 15 (received {sm_priority})")
    sm_hosts = list(dict.fromkeys(sm_hosts))
    unknown = [h for h in sm_hosts if h not in hosts]
    if unknown:
        raise ValueError(f"subnet manager host(s) {', '.join(unknown)} are not among the "
                         f"generated hosts ({hosts[0]} ... {hosts[-1]})")
    doc: dict[str, Any] = {"schema": SCHEMA, "name": name, "width": width, "speed": speed,
                           "switches": [], "nodes": [], "links": []}
    if sm_hosts:
        doc["subnet_manager"] = {"hosts": list(sm_hosts), "priority": sm_priority}
    where = {"location": {"rack": rack}} if rack is not None else {}

    def switch(name: str, role: str, ports: int, **extra: Any) -> str:
        doc["switches"].append({"name": name, "role": role, "ports": ports, **extra, **where})
        return name

    leaves = [[switch(f"su{su + 1}-leaf-r{r}", "leaf", leaf_ports, rail=r)
               for r in range(rails)] for su in range(s.sus)]
    for i, host in enumerate(hosts):
        su, slot = divmod(i, s.su_nodes)
        for r, ca in enumerate(cas):
            doc["nodes"].append({"host": host, "hca": ca, "rail": r, "switch": leaves[su][r],
                                 "switch_port": slot + 1, "cable": f"{leaves[su][r]}/{slot + 1}"})
    w = max(2, len(str(s.spines_per_pod)))
    prefix = ["spine-"] if s.levels == 2 else [f"pod{p + 1}-spine-" for p in range(s.pods)]
    spines = [[switch(f"{pod}{j + 1:0{w}d}", "spine", spine_ports)
               for j in range(s.spines_per_pod)] for pod in prefix]
    for su, su_leaves in enumerate(leaves):
        pod, first = divmod(su, s.sus_per_pod)
        for r, leaf in enumerate(su_leaves):
            _uplinks(doc, leaf, leaf_ports // 2, spines[pod], s.leaf_links,
                     (first * rails + r) * s.leaf_links)
    if s.cores_per_group:
        wc = max(2, len(str(s.spines_per_pod * s.cores_per_group)))
        groups = [[switch(f"core-{j * s.cores_per_group + c + 1:0{wc}d}", "core", spine_ports)
                   for c in range(s.cores_per_group)] for j in range(s.spines_per_pod)]
        for p, pod_spines in enumerate(spines):
            for j, spine in enumerate(pod_spines):
                _uplinks(doc, spine, spine_ports // 2, groups[j], s.core_links, p * s.core_links)
    return plan_from_document(doc, f"design of {nodes} nodes, {rails} rails")


def _uplinks(doc: dict[str, Any], lower: str, first_up: int, uppers: Sequence[str],
             per_pair: int, offset: int) -> None:
    """Cable ``lower``'s up ports (``first_up + 1`` onwards) round-robin over ``uppers``,
    ``per_pair`` cables to each, on the upper ports after ``offset``."""
    for u in range(len(uppers) * per_pair):
        upper, link = uppers[u % len(uppers)], u // len(uppers)
        port = first_up + u + 1
        doc["links"].append({"a": {"switch": lower, "port": port},
                             "b": {"switch": upper, "port": offset + link + 1},
                             "cable": f"{lower}/{port}"})


# what may follow the colon of a numbering field: an integer's format, at most 99 wide
_NUMBER_SPEC = re.compile(r"(?:[^{}]?[<>=^])?[-+ ]?#?0?(?:[1-9][0-9]?)?[,_]?[bdoxX]?\Z")


def _numbering(fmt: str, what: str, option: str) -> None:
    """Refuse a format string that is not text with numbering fields (``{}``, ``{0}``,
    ``{:03d}``...), before it is used: no attribute, index, conversion or nested field,
    and an integer's format at most 99 wide (``{:>999999999999}`` would need terabytes).

    >>> _numbering("gpu{:03d}", "host", "--host-format")
    >>> _numbering("gpu{:>999999999999}", "host", "--host-format")
    Traceback (most recent call last):
    ...
    ValueError: --host-format cannot number the host names: field {:>999999999999} of \
'gpu{:>999999999999}' is not an integer's format at most 99 wide (e.g. {:03d})
    """
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(fmt)
                  if name is not None]
    except ValueError as exc:
        raise ValueError(f"{option} cannot number the {what} names: {fmt!r}: {exc}") from None
    for name, spec, conv in fields:
        field = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
        if name not in ("", "0") or conv is not None:
            raise ValueError(f"{option} cannot number the {what} names: field {field} of "
                             f"{fmt!r} is not {{}} or {{0}}: the number is the only value")
        if not _NUMBER_SPEC.match(spec or ""):
            raise ValueError(f"{option} cannot number the {what} names: field {field} of "
                             f"{fmt!r} is not an integer's format at most 99 wide "
                             f"(e.g. {{:03d}})")


def _names(make: Callable[[int], str], numbers: range, pattern: re.Pattern[str], what: str,
           option: str) -> list[str]:
    """The names ``make`` gives ``numbers``; ValueError naming ``option`` for a format that
    fails, a name that does not match ``pattern``, or a name given twice."""
    try:
        names = [make(i) for i in numbers]
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"{option} cannot number the {what} names: {exc!r}") from None
    bad = [n for n in names if not pattern.match(n)]
    if bad:
        raise ValueError(f"{option} gives {what} name {bad[0]!r}, which does not match "
                         f"{pattern.pattern}")
    if len(set(names)) != len(names):
        raise ValueError(f"{option} gives the same {what} name twice ({names[:3]} ...): "
                         f"put a placeholder such as {{:03d}} in it")
    return names
