"""``fabric.as_built``: the InfiniBand fabric cabled as its fabric plan says.

Once per fabric, from the fabric host, ``ibnetdiscover -p`` (``parsers.infiniband.ibnetdiscover``)
lists every port the discovery reached. Nodes are matched by node description (stripped)
and port number, as the plan names them. Every planned link must be found; the judge
reports every finding, each with the nodes it bears on (``fabric.findings``):

* two planned cables whose far ends are exchanged: "swapped", both cables named;
* a planned end found elsewhere: on another port of the planned switch (wrong port), an
  HCA on a leaf of another rail, a link on an unexpected switch (or to a non-switch);
* a planned link not found (missing, with what its ports show); a link the plan lacks;
* a planned switch or HCA of which no port is seen;
* a node description on two nodes (or found as another kind than planned): its links
  cannot be told apart, so they are not judged, and that fails; a listing printing one
  port with two peers is an error; so is one with no link at all (the fabric host sees
  no fabric: a wrong ``-C``/``-P``, its cable, or no subnet manager), never a pass.

A switch's SHARP aggregation node (a CA on a port past its external ones) is not judged.

>>> from rackgate.fabric.plan import plan_from_document
>>> plan = plan_from_document({"schema": "rackgate.fabric/1", "name": "t", "speed": "HDR",
...     "switches": [{"name": "leaf-1", "role": "leaf", "ports": 8}],
...     "nodes": [{"host": "gpu001", "hca": "mlx5_0", "switch": "leaf-1", "switch_port": 1,
...                "cable": "C1"}]}, "doc")
>>> d = parse_ibnetdiscover_ports(
...     "CA 1 1 0x0000000000100001 4x HDR - SW 2 3 0x0000000000200000 ( 'gpu001 mlx5_0' -"
...     " 'leaf-1' )\\n")
>>> for f in judge_as_built(d, FabricQueryParams(), {}, plan).findings:
...     print(f.status.label, f.message)  # doctest: +NORMALIZE_WHITESPACE
fail cable C1: "gpu001 mlx5_0"[1] is found on "leaf-1"[3], planned "leaf-1"[1]:
the wrong port; at leaf-1
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import NamedTuple

from rackgate.checks.fabric.query import (
    FabricQueryParams,
    Key,
    at,
    bears_on,
    key,
    link_hosts,
    query_args,
    query_needs,
    whole_fabric_or_union,
)
from rackgate.checks.shared.base import FabricCheck, Scope
from rackgate.fabric.findings import FabricFinding, FabricVerdict
from rackgate.fabric.plan import End, FabricPlan, PlannedLink
from rackgate.model import Status
from rackgate.parsers.infiniband.ibnetdiscover import (
    Discovery,
    Link,
    PortEnd,
    parse_ibnetdiscover_ports,
)
from rackgate.profile import Threshold

TOOL = "ibnetdiscover -p"
KIND = {"SW": "a switch", "CA": "a CA", "RT": "a router", "??": "a node of unknown type"}
# A SHARP aggregation node is a CA inside a switch, on a port past its external ones; every
# one has this description, so they are told apart by GUID and are not the plan's to list.
AGGREGATION_NODE = "Aggregation Node"


class Hit(NamedTuple):
    link: int  # its index in Discovery.links
    far: PortEnd


class _AsBuilt:
    def __init__(self, plan: FabricPlan, record: Discovery) -> None:
        self.plan, self.record = plan, record
        self.planned = plan.planned_links()
        self.hca = plan.hca_host
        self.owner = {key(pl.b): pl.a.host for pl in self.planned if pl.a.host is not None}
        self.findings: list[FabricFinding] = []
        self.used: set[int] = set()  # links explained or matched
        self.skipped: set[int] = set()  # links not judged (untrusted names, contradictions)
        self.explained: set[int] = set()  # planned links (by index) reported on
        self.seen = {e.name for e in record.ends()}
        self.unlinked = {key(p.end) for p in record.ports if p.peer is None}
        self.linked = {key(x): y for k in reversed(record.links)  # every linked port: a peer
                       for x, y in ((k.a, k.b), (k.b, k.a))}
        self.internal = {i for i, k in enumerate(record.links) if self._internal(k)}
        self.untrusted = self._identities()
        self.found, self.conflicted = self._index()

    def add(self, status: Status, message: str, hosts: frozenset[str]) -> None:
        self.findings.append(FabricFinding(status, message, hosts))

    def bears(self, *ends: PortEnd) -> frozenset[str]:
        """Whom a found link bears on: the hosts of its planned HCAs and of the cables
        planned on its switch ports; else those behind its planned leaves; else all."""
        hosts = {self.hca[e.name] for e in ends if e.name in self.hca}
        hosts |= {self.owner[key(e)] for e in ends if key(e) in self.owner}
        return frozenset(hosts) or bears_on(self.plan, (e.name for e in ends))

    def fmt(self, end: PortEnd) -> str:
        known = end.name in self.plan.switch or end.name in self.hca
        return str(end) if known else f"{end} ({end.kind} {end.guid}, not in the plan)"

    def _internal(self, k: Link) -> bool:
        """A link from a planned switch's port past its external ones to its SHARP
        aggregation node."""
        for sw, ca in ((k.a, k.b), (k.b, k.a)):
            s = self.plan.switch.get(sw.name)
            if (s is not None and sw.kind == "SW" and sw.port > s.ports and ca.kind == "CA"
                    and AGGREGATION_NODE in ca.name):
                return True
        return False

    def _identities(self) -> set[str]:
        """Names that do not name one node of the planned kind: findings, and not judged."""
        inside = {(e.guid, e.port) for i in self.internal for e in
                  (self.record.links[i].a, self.record.links[i].b) if e.kind == "CA"}
        by_name: dict[str, list[PortEnd]] = defaultdict(list)
        for e in self.record.ends():
            if (e.guid, e.port) not in inside:
                by_name[e.name].append(e)
        out = set()
        for name, ends in by_name.items():
            kinds = sorted({e.kind for e in ends})
            guids = sorted({e.guid for e in ends})
            ports: dict[int, set[str]] = defaultdict(set)
            for e in ends:
                ports[e.port].add(e.guid)
            planned = "SW" if name in self.plan.switch else "CA" if name in self.hca else None
            advice = "give every node its own description"
            if len(kinds) > 1:
                why = f"is found as {' and as '.join(KIND[k] for k in kinds)}"
            elif kinds == ["SW"] and len(guids) > 1:
                why = f"is found on {len(guids)} switches (GUIDs {', '.join(guids)})"
            elif kinds != ["SW"] and any(len(g) > 1 for g in ports.values()):
                p, g = next((p, sorted(g)) for p, g in sorted(ports.items()) if len(g) > 1)
                why = f"is found on {len(g)} nodes (its port {p}: port GUIDs {', '.join(g)})"
            elif planned is not None and kinds != [planned]:
                why = (f"is found as {KIND[kinds[0]]} ({', '.join(guids)}), planned "
                       f"{'a switch' if planned == 'SW' else 'an HCA'}")
                advice = "see what is cabled in its place"
            else:
                continue
            out.add(name)
            mine = [pl for pl in self.planned if name in (pl.a.name, pl.b.name)]
            cables = [pl.cable for pl in mine]
            found = [self.bears(k.a, k.b) for k in self.record.links
                     if name in (k.a.name, k.b.name)]
            self.add(Status.FAIL, f'node description "{name}" {why}: its links cannot be told '
                     f"apart, so its {len(cables)} planned cable(s) are not judged"
                     f"{' (' + ', '.join(cables) + ')' if cables else ''}; {advice}",
                     whole_fabric_or_union(
                         [*(link_hosts(self.plan, pl) for pl in mine), *found]))
        return out

    def _index(self) -> tuple[dict[Key, Hit], set[Key]]:
        at_port: dict[Key, list[Hit]] = defaultdict(list)
        aggregation: dict[tuple[str, int], list[Hit]] = defaultdict(list)  # by GUID, port
        for i, k in enumerate(self.record.links):
            if i in self.internal:
                self.skipped.add(i)
                ca, sw = (k.a, k.b) if k.a.kind == "CA" else (k.b, k.a)
                aggregation[(ca.guid, ca.port)].append(Hit(i, sw))
            elif k.a.name in self.untrusted or k.b.name in self.untrusted:
                self.skipped.add(i)
            else:
                at_port[key(k.a)].append(Hit(i, k.b))
                at_port[key(k.b)].append(Hit(i, k.a))
        conflicted = {p for p, hits in at_port.items() if len(hits) > 1}
        for hits in aggregation.values():
            if len(hits) > 1:
                k = self.record.links[hits[0].link]
                self._contradiction(key(k.a if k.a.kind == "CA" else k.b), hits)
        for p in sorted(conflicted):
            self._contradiction(p, at_port[p])
        return {p: hits[0] for p, hits in at_port.items() if p not in conflicted}, conflicted

    def _contradiction(self, p: Key, hits: list[Hit]) -> None:
        self.skipped |= {h.link for h in hits}
        readings = " and to ".join(
            f"{self.fmt(h.far)} (line {self.record.links[h.link].lineno})" for h in hits)
        self.add(Status.ERROR, f'{TOOL} contradicts itself: "{p[0]}"[{p[1]}] is printed linked '
                 f"to {readings}: a damaged listing, the cables of that port are not judged",
                 whole_fabric_or_union(
                     [*(self.bears(self.record.links[h.link].a, self.record.links[h.link].b)
                        for h in hits),
                      *(link_hosts(self.plan, pl) for pl in self.planned
                        if p in (key(pl.a), key(pl.b)))]))

    def judgeable(self, pl: PlannedLink) -> bool:  # not covered by an identity finding
        return not ({pl.a.name, pl.b.name} & self.untrusted
                    or {key(pl.a), key(pl.b)} & self.conflicted)

    def free(self, end: End) -> Hit | None:
        hit = self.found.get(key(end))
        return hit if hit is not None and hit.link not in self.used else None

    def swapped(self, open_: list[tuple[int, PlannedLink]]) -> None:
        by_end = {key(e): (j, pl, pos) for j, pl in open_ for pos, e in enumerate((pl.a, pl.b))}
        for j1, l1 in open_:
            for pos, e in enumerate((l1.a, l1.b)):
                hit = self.free(e)
                other = by_end.get(key(hit.far)) if hit is not None else None
                if hit is None or other is None:
                    continue
                j2, l2, pos2 = other
                if j2 == j1 or pos2 == pos or {j1, j2} & self.explained:
                    continue
                back = self.free((l1.a, l1.b)[1 - pos])
                if back is None or key(back.far) != key((l2.a, l2.b)[1 - pos2]):
                    continue
                self.used |= {hit.link, back.link}
                self.explained |= {j1, j2}
                self.add(Status.FAIL, f"cables {l1.cable} and {l2.cable} are swapped: {l1.a} "
                         f"is found on {l2.b} and {l2.a} on {l1.b}, planned {l1.a} <-> {l1.b} "
                         f"and {l2.a} <-> {l2.b}"
                         f"{at(self.plan, l1.a.name, l1.b.name, l2.a.name, l2.b.name)}",
                         whole_fabric_or_union([link_hosts(self.plan, l1),
                                                link_hosts(self.plan, l2)]))
                break

    def moved(self, j: int, pl: PlannedLink, end: End, other: End) -> bool:
        """Report ``end`` of ``pl`` found linked elsewhere; False if it is not."""
        hit = self.free(end)
        if hit is None:
            return False
        x = hit.far
        self.used.add(hit.link)
        self.explained.add(j)
        leaf = self.plan.switch.get(x.name)
        where = at(self.plan, end.name, x.name, other.name)
        if x.name == other.name:
            text = f"is found on {x}, planned {other}: the wrong port{at(self.plan, x.name)}"
        elif (end.kind == "hca" and leaf is not None and leaf.role == "leaf"
              and None not in (leaf.rail, pl.rail) and leaf.rail != pl.rail):
            text = (f"is found on {x}, on rail {leaf.rail}'s leaf {x.name}, planned rail "
                    f"{pl.rail} on {other}{where}")
        elif x.kind == "SW":
            text = f"is found on {self.fmt(x)}, an unexpected switch, planned {other}{where}"
        else:
            text = f"is found linked to {self.fmt(x)}, not to a switch, planned {other}{where}"
        hosts = link_hosts(self.plan, pl)
        if hosts and key(x) in self.owner:  # on another node's planned port: it too
            hosts |= {self.owner[key(x)]}
        self.add(Status.FAIL, f"cable {pl.cable}: {end} {text}", hosts)
        return True

    def state(self, end: End) -> str:
        far = self.linked.get(key(end))
        if far is not None:
            return f"{end} is linked to {self.fmt(far)}"
        if key(end) in self.unlinked:
            return f"{end} has no link"
        return f"{end} is not listed" if end.name in self.seen else f'"{end.name}" is not found'

    def verdict(self) -> FabricVerdict:
        planned = list(enumerate(self.planned))
        judged = [(j, pl) for j, pl in planned if self.judgeable(pl)]
        open_ = []
        for j, pl in judged:
            hit = self.free(pl.a)
            if hit is not None and key(hit.far) == key(pl.b):
                self.used.add(hit.link)
            else:
                open_.append((j, pl))
        self.swapped(open_)
        for j, pl in open_:  # an HCA's cable first: it is the HCA that is found elsewhere
            if j not in self.explained and pl.a.kind == "hca":
                self.moved(j, pl, pl.a, pl.b)
        for j, pl in open_:
            if j not in self.explained and pl.a.kind == "switch":
                _ = self.moved(j, pl, pl.a, pl.b) or self.moved(j, pl, pl.b, pl.a)
        for j, pl in open_:
            if j not in self.explained:
                self.add(Status.FAIL, f"cable {pl.cable} is missing: {pl.a} <-> {pl.b} is not "
                         f"found ({self.state(pl.a)}; {self.state(pl.b)})"
                         f"{at(self.plan, pl.a.name, pl.b.name)}", link_hosts(self.plan, pl))
        self.unseen()
        for i, k in enumerate(self.record.links):
            if i not in self.used and i not in self.skipped:
                self.add(Status.FAIL, f"link not in the plan: {self.fmt(k.a)} <-> "
                         f"{self.fmt(k.b)}{at(self.plan, k.a.name, k.b.name)}",
                         self.bears(k.a, k.b))
        good = len(judged) - len(open_)
        sharp = f", {len(self.internal)} to SHARP aggregation nodes" if self.internal else ""
        scope = (f"{TOOL}: {len(self.record.switches)} switches, {len(self.record.ca_ports)} "
                 f"CA ports, {len(self.record.links)} links{sharp}")
        summary = (f"{good} of " if self.findings else "") + (
            f"{len(planned)} planned links found as planned"
            f"{'; no finding bears on this node' if self.findings else ''} ({scope})")
        return FabricVerdict(tuple(self.findings), summary, float(good), "links")

    def unseen(self) -> None:
        for s in self.plan.switches:
            if s.name not in self.seen:
                self.add(Status.FAIL, f"planned switch {self.plan.where(s.name)} is not found: "
                         f"none of its ports is in the discovery",
                         self.plan.hosts_behind(s.name) if s.role == "leaf" else frozenset())
        for desc, host in self.hca.items():
            if desc not in self.seen:
                self.add(Status.FAIL, f'planned HCA "{desc}" of {host} is not found: none of '
                         f"its ports is in the discovery", frozenset({host}))


def judge_as_built(record: Discovery, params: FabricQueryParams,
                   thresholds: Mapping[str, Threshold], plan: FabricPlan) -> FabricVerdict:
    """Judge one ``ibnetdiscover -p`` listing against the fabric plan (module docstring)."""
    if not record.links:
        planned = len(plan.planned_links())
        return FabricVerdict((FabricFinding(
            Status.ERROR, f"{TOOL} found no link ({len(record.ports)} port line(s), none "
            f"linked): the fabric host's HCA port sees no fabric (a wrong -C/-P, its cable, "
            f"or no subnet manager), so none of the {planned} planned links is judged",
            frozenset()),), f"no link found ({TOOL})")
    return _AsBuilt(plan, record).verdict()


CHECK = FabricCheck(
    name="fabric.as_built",
    scope=Scope.RACK,
    tags=frozenset({"fabric", "infiniband"}),
    description="The InfiniBand fabric cabled as its fabric plan says: every planned link "
                "on its planned ports, none other (ibnetdiscover -p, from the fabric host)",
    params_model=FabricQueryParams,
    metrics=frozenset(),
    command=lambda params, hostvars: ["ibnetdiscover", "-p", *query_args(params)],
    needs=query_needs("ibnetdiscover"),
    parse=parse_ibnetdiscover_ports,
    judge_plan=judge_as_built,
)

CHECKS = (CHECK,)
