"""The fabric plan: the InfiniBand fabric as designed, as inventory data.

A site keeps it in ``inventory/<site>/fabric.yml`` (``rackgate fabric plan`` writes one to
start from). It names every switch with its role (leaf, spine, core), every node HCA port
with the leaf, leaf port and cable label it is cabled to and the rail it serves, every
inter-switch link with its cable label, the width and speed every link must train at,
and the subnet manager's hosts and priority. Everything else fabric-shaped comes from it:
SLURM's topology.conf, the ibsim net file, and the judges of ``fabric.as_built``,
``fabric.links``, ``fabric.errors`` and ``fabric.sm``.

Nodes of the fabric are named by their InfiniBand *node description*, the name
``ibnetdiscover`` and ``iblinkinfo`` print: a switch's is set on the switch, an HCA's is
``"<host> <hca>"`` by default (rdma-ndd's ``%h %d``). Names are validated strictly: they
reach net files, topology.conf and messages, never a shell.

>>> plan = plan_from_document({
...     "schema": SCHEMA, "name": "tiny", "speed": "HDR",
...     "switches": [{"name": "leaf-1", "role": "leaf", "ports": 8, "rail": 0},
...                  {"name": "spine-1", "role": "spine", "ports": 8}],
...     "nodes": [{"host": "gpu001", "hca": "mlx5_0", "rail": 0, "switch": "leaf-1",
...                "switch_port": 1, "cable": "C1"}],
...     "links": [{"a": {"switch": "leaf-1", "port": 5},
...                "b": {"switch": "spine-1", "port": 1}, "cable": "C2"}]}, "doc")
>>> [(l.a.name, l.a.port, l.b.name, l.b.port, l.cable) for l in plan.planned_links()]
[('gpu001 mlx5_0', 1, 'leaf-1', 1, 'C1'), ('leaf-1', 5, 'spine-1', 1, 'C2')]
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from rackgate.documents import DocumentError, load_yaml

SCHEMA = "rackgate.fabric/1"

# A node description as rackgate accepts it in a plan: printable words of letters, digits
# and ``._:;/+-`` separated by single spaces (a switch's "MF0;leaf01:MQM8700/U1", an HCA's
# "gpu001 mlx5_0"); no quote, no shell character, no leading or trailing blank.
NODE_DESC = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:;/+-]*(?: [A-Za-z0-9._:;/+-]+)*\Z")
HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
HCA = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
CABLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]{0,63}\Z")
RACK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")

Width = Literal["1X", "2X", "4X", "8X", "12X"]
Speed = Literal["SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"]
Role = Literal["leaf", "spine", "core"]
# Gb/s per lane of each speed, as iblinkinfo prints it (IBTA Vol. 2 signalling rates)
LANE_GBPS: Mapping[str, float] = {
    "SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.3125, "FDR": 14.0625,
    "EDR": 25.78125, "HDR": 53.125, "NDR": 106.25, "XDR": 212.5}
LANES: Mapping[str, int] = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}
LEVEL: Mapping[str, int] = {"leaf": 1, "spine": 2, "core": 3}
# Unicast LIDs of one subnet: 0x0001-0xBFFF (IBTA Vol. 1, 4.1.3); every HCA port and every
# switch (its port 0) needs one, at LMC 0
MAX_UNICAST_LIDS = 0xBFFF


class PlanError(ValueError):
    """A fabric plan that cannot be used: the message names the file and what is wrong."""


def _pattern(value: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"{what} {value!r} does not match {pattern.pattern}")
    return value


def _matching(pattern: re.Pattern[str], what: str) -> AfterValidator:
    """A field's check that its text matches ``pattern`` (the error names ``what``)."""
    return AfterValidator(lambda v: _pattern(v, pattern, what))


SwitchName = Annotated[str, _matching(NODE_DESC, "switch name")]
NodeDesc = Annotated[str, _matching(NODE_DESC, "node_desc")]
Host = Annotated[str, _matching(HOST, "host")]
SmHost = Annotated[str, _matching(HOST, "subnet manager host")]
PlanName = Annotated[str, _matching(HOST, "plan name")]
HcaName = Annotated[str, _matching(HCA, "hca")]
Cable = Annotated[str, _matching(CABLE, "cable label")]
RackName = Annotated[str, _matching(RACK, "rack")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Location(_Strict):
    """Where a switch sits: rack and U (for the people who go and re-seat the cable)."""

    rack: RackName
    u: int | None = Field(default=None, ge=1, le=60)

    def __str__(self) -> str:
        return f"rack {self.rack}" + (f" U{self.u}" if self.u is not None else "")


class Switch(_Strict):
    name: SwitchName = Field(description="the switch's node description")
    role: Role
    ports: int = Field(ge=1, le=254, description="external ports (the highest port number)")
    rail: int | None = Field(default=None, ge=0, le=63,
                             description="a rail-optimised leaf: the rail it serves")
    location: Location | None = None


class SwitchPort(_Strict):
    switch: str
    port: int = Field(ge=1, le=254)


class NodePort(_Strict):
    """One HCA port of a node and the cable from it to its leaf."""

    host: Host
    hca: HcaName = Field(description="the RDMA device (ibv_devices), e.g. mlx5_0")
    port: int = Field(default=1, ge=1, le=2)
    rail: int | None = Field(default=None, ge=0, le=63)
    switch: str
    switch_port: int = Field(ge=1, le=254)
    cable: Cable
    node_desc: NodeDesc | None = Field(default=None, description='default "<host> <hca>"')

    @property
    def desc(self) -> str:
        return self.node_desc or f"{self.host} {self.hca}"


class SwitchLink(_Strict):
    a: SwitchPort
    b: SwitchPort
    cable: Cable
    width: Width | None = None
    speed: Speed | None = None


class SubnetManager(_Strict):
    hosts: tuple[SmHost, ...] = Field(min_length=1, description="hosts an SM may run on")
    priority: int = Field(ge=0, le=15, description="the master's SM priority")


@dataclass(frozen=True)
class End:
    """One end of a planned link, as the tools name it: node description and port."""

    name: str
    port: int
    kind: Literal["switch", "hca"]
    host: str | None = None  # the node of an HCA end

    def __str__(self) -> str:
        return f'"{self.name}"[{self.port}]'


@dataclass(frozen=True)
class PlannedLink:
    """A cable of the plan: its ends (an HCA end first; else the lower switch level first),
    label, and the width and speed it must train at."""

    a: End
    b: End
    cable: str
    width: str
    speed: str
    rail: int | None = None  # a node link's rail

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset(h for h in (self.a.host, self.b.host) if h)

    @property
    def rate_gbps(self) -> float:
        return LANES[self.width] * LANE_GBPS[self.speed]


class FabricPlan(_Strict):
    schema_: Literal["rackgate.fabric/1"] = Field(alias="schema")
    name: PlanName
    width: Width = "4X"
    speed: Speed
    subnet_manager: SubnetManager | None = None
    switches: tuple[Switch, ...] = Field(min_length=1)
    nodes: tuple[NodePort, ...] = ()
    links: tuple[SwitchLink, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> FabricPlan:
        problems = list(_problems(self))
        if problems:
            raise ValueError("; ".join(problems[:20]) + (
                f" (and {len(problems) - 20} more)" if len(problems) > 20 else ""))
        return self

    @cached_property
    def switch(self) -> Mapping[str, Switch]:
        return {s.name: s for s in self.switches}

    @cached_property
    def hosts(self) -> tuple[str, ...]:
        return tuple(sorted({n.host for n in self.nodes}))

    def planned_links(self) -> list[PlannedLink]:
        """Every cable of the plan: node links first, then the inter-switch links."""
        out = [PlannedLink(End(n.desc, n.port, "hca", n.host),
                           End(n.switch, n.switch_port, "switch"), n.cable,
                           self.width, self.speed, n.rail) for n in self.nodes]
        for link in self.links:
            a, b = link.a, link.b
            if LEVEL[self.switch[a.switch].role] > LEVEL[self.switch[b.switch].role]:
                a, b = b, a
            out.append(PlannedLink(End(a.switch, a.port, "switch"),
                                   End(b.switch, b.port, "switch"), link.cable,
                                   link.width or self.width, link.speed or self.speed))
        return out

    @cached_property
    def hca_host(self) -> Mapping[str, str]:
        """The host of each planned HCA port, by its node description."""
        return {n.desc: n.host for n in self.nodes}

    @cached_property
    def _behind(self) -> Mapping[str, frozenset[str]]:
        behind: dict[str, set[str]] = {}
        for n in self.nodes:
            behind.setdefault(n.switch, set()).add(n.host)
        return {switch: frozenset(hosts) for switch, hosts in behind.items()}

    def hosts_behind(self, switch: str) -> frozenset[str]:
        """The nodes cabled to ``switch`` (a leaf), for naming whom a fault bears on."""
        return self._behind.get(switch, frozenset())

    def where(self, switch: str) -> str:
        """A switch with its location, for a message: 'leaf-r1 (rack r01 U40)'."""
        loc = self.switch[switch].location if switch in self.switch else None
        return f"{switch} ({loc})" if loc else switch


def _problems(plan: FabricPlan) -> Iterator[str]:
    names = Counter(s.name for s in plan.switches)
    yield from (f"switch {n!r} is listed twice" for n, k in sorted(names.items()) if k > 1)
    switch = {s.name: s for s in plan.switches}
    descs = Counter(n.desc for n in plan.nodes)
    yield from (f"node port {d!r} is listed twice" for d, k in sorted(descs.items()) if k > 1)
    yield from (f"node port {d!r} has the name of a switch" for d in sorted(descs)
                if d in switch)
    used: dict[tuple[str, int], str] = {}
    cables: dict[str, str] = {}

    def take(sw: str, port: int, what: str, cable: str) -> Iterator[str]:
        s = switch.get(sw)
        if s is None:
            yield f"{what}: no switch {sw!r} in the plan"
            return
        if port > s.ports:
            yield f"{what}: switch {sw!r} has {s.ports} ports, not port {port}"
        if (sw, port) in used:
            yield f"{what}: switch {sw!r} port {port} is already taken by {used[(sw, port)]}"
        used[(sw, port)] = what
        if cables.get(cable, what) != what:  # a link's two ends carry the same label
            yield f"{what}: cable label {cable!r} is already on {cables[cable]}"
        cables[cable] = what

    for n in plan.nodes:
        what = f"node port {n.desc!r}"
        yield from take(n.switch, n.switch_port, what, n.cable)
        s = switch.get(n.switch)
        if s is not None and s.role != "leaf":
            yield f"{what} is cabled to {s.role} {s.name!r}: nodes are cabled to leaves"
        if s is not None and s.rail is not None and n.rail is not None and s.rail != n.rail:
            yield f"{what} serves rail {n.rail} but leaf {s.name!r} serves rail {s.rail}"
    for link in plan.links:
        what = f"link {link.a.switch}[{link.a.port}]-{link.b.switch}[{link.b.port}]"
        if link.a.switch == link.b.switch:
            yield f"{what} joins a switch to itself"
        yield from take(link.a.switch, link.a.port, what, link.cable)
        yield from take(link.b.switch, link.b.port, what, link.cable)
    endpoints = len(plan.nodes) + len(plan.switches)
    if endpoints > MAX_UNICAST_LIDS:
        yield (f"{len(plan.nodes)} HCA ports and {len(plan.switches)} switches need "
               f"{endpoints} LIDs, more than the {MAX_UNICAST_LIDS} unicast LIDs of one "
               f"subnet: plan the rails as separate subnets (one plan each)")
    if plan.subnet_manager is not None:
        hosts = {n.host for n in plan.nodes}
        yield from (f"subnet manager host {h!r} has no HCA port in the plan"
                    for h in plan.subnet_manager.hosts if h not in hosts)


def plan_from_document(doc: Any, source: str) -> FabricPlan:
    """A plan from its parsed YAML/JSON document; PlanError naming ``source`` and the field."""
    if not isinstance(doc, Mapping):
        raise PlanError(f"fabric plan {source}: not a mapping (schema {SCHEMA})")
    try:
        return FabricPlan.model_validate(doc)
    except ValidationError as exc:
        lines = [f"{'.'.join(str(p) for p in e['loc']) or '(plan)'}: {e['msg']}"
                 for e in exc.errors()[:10]]
        raise PlanError(f"fabric plan {source}: " + "; ".join(lines)) from None


@dataclass(frozen=True)
class LoadedPlan:
    """A plan with where it came from and its document's digest (recorded in a run)."""

    plan: FabricPlan
    source: str
    sha256: str
    document: Mapping[str, Any]


def load_plan(path: Path) -> LoadedPlan:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(f"fabric plan {path}: {exc.strerror}") from None
    try:
        doc = load_yaml(text)
    except yaml.YAMLError as exc:
        raise PlanError(f"fabric plan {path}: not YAML: {exc}") from None
    except DocumentError as exc:
        raise PlanError(f"fabric plan {path}: {exc}") from None
    return LoadedPlan(plan_from_document(doc, str(path)), str(path),
                      hashlib.sha256(text.encode()).hexdigest(), doc)


def plan_document(plan: FabricPlan) -> dict[str, Any]:
    """The plan as a document (what ``rackgate fabric plan`` writes and a run records)."""
    return plan.model_dump(mode="json", by_alias=True, exclude_none=True)
