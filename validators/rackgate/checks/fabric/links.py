"""``fabric.links``: every planned link of the fabric up (Active/LinkUp) at its planned
width and speed.

Once per fabric, from the fabric host, ``iblinkinfo -l`` (``parsers.infiniband.iblinkinfo``) prints
one line per port of every node, with the port's width, speed per lane, logical and
physical state and its peer. Each planned link is judged once, from the lines of both of
its ends, which must agree (a link both ends do not print alike is an error):

* logical state Active and physical state LinkUp, or it fails with the states printed
  (Initialize or Armed: no subnet manager has brought it up; Down/Polling: no light);
* its width and speed per lane at least the plan's (``link.width``, ``LANE_GBPS`` of
  ``link.speed``): a link trained below either fails as down-trained, naming both;
  above the plan is a warning (the plan may be out of date);
* a planned link that iblinkinfo does not show fails: this check never passes a link it
  did not see (where the cable really is, is ``fabric.as_built``'s to say). Ports the
  plan does not have are not judged here (``fabric.as_built`` reports them).

Output with no linked port at all is an error: the fabric host sees no fabric.

>>> from rackgate.fabric.plan import plan_from_document
>>> plan = plan_from_document({"schema": "rackgate.fabric/1", "name": "t", "speed": "HDR",
...     "switches": [{"name": "leaf-1", "role": "leaf", "ports": 8}],
...     "nodes": [{"host": "gpu001", "hca": "mlx5_0", "switch": "leaf-1", "switch_port": 1,
...                "cable": "C1"}]}, "doc")
>>> line = ('0x0000000000100001 "gpu001 mlx5_0" 1 1[  ] ==( 1X 53.125 Gbps Active/  LinkUp)'
...         '==>  0x0000000000200000 2 1[  ] "leaf-1" (Could be 4X )\\n'
...         '0x0000000000200000 "leaf-1" 2 1[  ] ==( 1X 53.125 Gbps Active/  LinkUp)'
...         '==>  0x0000000000100001 1 1[  ] "gpu001 mlx5_0" (Could be 4X )\\n')
>>> for f in judge_links(parse_iblinkinfo_ports(line), None, {}, plan).findings:
...     print(f.status.label, f.message)  # doctest: +NORMALIZE_WHITESPACE
fail cable C1: "gpu001 mlx5_0"[1] <-> "leaf-1"[1] is down-trained: 4X planned, 1X found
(iblinkinfo: Could be 4X); at leaf-1
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from rackgate.checks.fabric.query import (
    FabricQueryParams,
    at,
    key,
    link_hosts,
    query_args,
    query_needs,
)
from rackgate.checks.shared.base import FabricCheck, Scope
from rackgate.fabric.findings import FabricFinding, FabricVerdict
from rackgate.fabric.plan import LANE_GBPS, LANES, End, FabricPlan, PlannedLink
from rackgate.model import Status
from rackgate.parsers.infiniband.iblinkinfo import LinkInfo, LinkPort, parse_iblinkinfo_ports
from rackgate.profile import Threshold

TOOL = "iblinkinfo"
NOT_ACTIVATED = ("Initialize", "Armed")  # trained, but no SM has made it Active


def lane_gbps(port: LinkPort) -> float | None:
    """The port's signalling rate per lane: as printed, FDR10's 10.0 read as 10.3125."""
    return LANE_GBPS["FDR10"] if port.fdr10 else port.speed_gbps


def reading(port: LinkPort) -> str:
    """What iblinkinfo says of the port: '4X 53.125 Gbps Active/LinkUp'."""
    return " ".join(x for x in (port.width or "", port.speed_text,
                                f"{port.state}/{port.physical_state}") if x)


def _trained(pl: PlannedLink, port: LinkPort) -> list[tuple[Status, str]]:
    """Width and speed against the plan: (status, text) for each that differs."""
    out: list[tuple[Status, str]] = []
    if port.width is None or port.width not in LANES:
        out.append((Status.ERROR, f"prints a width {port.width!r} that is no width"))
    elif LANES[port.width] != LANES[pl.width]:
        below = LANES[port.width] < LANES[pl.width]
        out.append((Status.FAIL if below else Status.WARN,
                    f"is {'down-trained' if below else 'wider than planned'}: {pl.width} "
                    f"planned, {port.width} found"))
    rate, want = lane_gbps(port), LANE_GBPS[pl.speed]
    if rate is None or not any(math.isclose(rate, r, rel_tol=1e-6) for r in LANE_GBPS.values()):
        out.append((Status.ERROR, f"prints a speed {port.speed_text!r} that is no InfiniBand "
                    f"lane rate ({', '.join(f'{r}' for r in LANE_GBPS.values())} Gb/s)"))
    elif not math.isclose(rate, want, rel_tol=1e-6):
        below = rate < want
        out.append((Status.FAIL if below else Status.WARN,
                    f"is {'down-trained' if below else 'faster than planned'}: {pl.speed} "
                    f"({want} Gb/s per lane) planned, {rate} Gb/s per lane found"))
    return out


def _judge_link(pl: PlannedLink, index: Mapping[tuple[str, int], list[LinkPort]],
                plan: FabricPlan) -> FabricFinding | None:
    def out(status: Status, text: str) -> FabricFinding:
        return FabricFinding(status, f"cable {pl.cable}: {pl.a} <-> {pl.b} {text}"
                             f"{at(plan, pl.a.name, pl.b.name)}", link_hosts(plan, pl))

    ends: list[tuple[End, End, LinkPort | None]] = []
    for end, far in ((pl.a, pl.b), (pl.b, pl.a)):
        lines = index.get(key(end), [])
        if len(lines) > 1:
            return out(Status.ERROR, f"cannot be judged: {TOOL} prints {end} {len(lines)} "
                       f"times (GUIDs {', '.join(sorted({p.guid for p in lines}))}): each "
                       f"node description must name one node")
        ends.append((end, far, lines[0] if lines else None))
    if all(line is None for _, _, line in ends):
        return out(Status.FAIL, f"is not in {TOOL}'s output (neither end's port is "
                   f"listed): it is not up (fabric.as_built says where it is cabled)")
    for end, far, line in ends:
        if line is not None and line.peer is not None and key(line.peer) != key(far):
            return out(Status.FAIL, f"is not cabled as planned: {end} is linked to "
                       f"{line.peer}, planned {far} (fabric.as_built names the cabling)")
    linked = [line for _, _, line in ends if line is not None and line.peer is not None]
    if not linked:
        states = "; ".join(f"{end} {line.state}/{line.physical_state}, no peer"
                           if line is not None else f"{end} is not listed"
                           for end, _, line in ends)
        return out(Status.FAIL, f"is down ({states})")
    (a, _, la), (b, _, lb) = ends
    if la is None or lb is None or len(linked) == 1:
        one = linked[0]
        other, line = (b, lb) if one is la else (a, la)
        seen = "is not listed" if line is None else f"shows no peer ({reading(line)})"
        return out(Status.ERROR, f"is printed at one end only: {one} is linked to {one.peer}"
                   f", but {other} {seen}: its two ends disagree")
    if reading(la) != reading(lb):
        return out(Status.ERROR, f"has ends that disagree: {a} shows {reading(la)}, {b} "
                   f"shows {reading(lb)}")
    if not la.up:
        why = " (no subnet manager has brought it up)" if la.state in NOT_ACTIVATED else ""
        return out(Status.FAIL, f"is {la.state}/{la.physical_state}, not Active/LinkUp{why}")
    issues = _trained(pl, la)
    if not issues:
        return None
    hint = f" ({TOOL}: {la.hint})" if la.hint else ""
    return out(max(s for s, _ in issues), f"{'; '.join(t for _, t in issues)}{hint}")


def judge_links(record: LinkInfo, params: Any, thresholds: Mapping[str, Threshold],
                plan: FabricPlan) -> FabricVerdict:
    """Judge one iblinkinfo listing against the fabric plan (module docstring)."""
    planned = plan.planned_links()
    what = f"{TOOL}{' -l' if record.line_mode else ''}: {len(record.ports)} port lines"
    if not any(p.peer is not None for p in record.ports):
        return FabricVerdict((FabricFinding(
            Status.ERROR, f"{TOOL} shows no linked port ({len(record.ports)} port line(s), "
            f"none with a peer): the fabric host's HCA port sees no fabric (a wrong -C/-P, "
            f"its cable), so none of the {len(planned)} planned links is judged",
            frozenset()),), f"no linked port ({what})")
    index: dict[tuple[str, int], list[LinkPort]] = defaultdict(list)
    for port in record.ports:
        index[key(port)].append(port)
    findings = [f for pl in planned if (f := _judge_link(pl, index, plan)) is not None]
    good = len(planned) - len(findings)
    summary = (f"{len(planned)} planned links Active/LinkUp at their planned width and "
               f"speed, each seen from both ends ({what})" if not findings else
               f"{good} of {len(planned)} planned links Active/LinkUp at their planned width "
               f"and speed; no finding bears on this node ({what})")
    return FabricVerdict(tuple(findings), summary, float(good), "links")


CHECK = FabricCheck(
    name="fabric.links",
    scope=Scope.RACK,
    tags=frozenset({"fabric", "infiniband"}),
    description="Every planned InfiniBand link Active/LinkUp at its planned width and speed, "
                "seen from both ends (iblinkinfo -l, from the fabric host)",
    params_model=FabricQueryParams,
    metrics=frozenset(),
    command=lambda params, hostvars: ["iblinkinfo", "-l", *query_args(params)],
    needs=query_needs("iblinkinfo"),
    parse=parse_iblinkinfo_ports,
    judge_plan=judge_links,
)

CHECKS = (CHECK,)
