"""``fabric.errors``: no planned link's error counters rise over a window.

The fabric host walks the fabric once (``ibnetdiscover --cache``) and reads every port's
PortCounters on that node set with ``ibqueryerrors`` twice, ``window_s`` apart
(``parsers.infiniband.counters``). Each planned link is judged at BOTH ends: each counter's rise
between the reads, as a rate per hour over the measured window, is compared with its
threshold (``symbol_error_rise`` ...: at most so many per hour). Rules:

* a rise above the threshold fails, naming the counter, both values, the window, the
  link's two ends, its cable and the switch's location; a rise of a counter the profile
  sets no threshold for warns;
* a counter that falls was cleared mid-window (``ibqueryerrors -k``, ``perfquery -R``, a
  port reset): its rise is unknown, an error; so is a counter at its saturation value
  (PortCounters' 16-, 8- and 4-bit fields stop at all ones), which cannot show a rise;
* a counter already non-zero but steady passes: the counters count since they were last
  cleared, which on a new rack includes cabling, firmware updates and every reboot of a
  node (a node's reboot downs its link), none of which says how the link behaves now.
  The summary names the largest such counts;
* a planned end that the walk did not read (not in the ``--counters`` listing, named in a
  failed query, or its node description on two nodes) is an error: "zero" and "not read"
  are never confused. So are thresholds other than 0 in the tool's echo of its threshold
  file, or a judged counter suppressed;
* counters of unplanned ports (unconnected switch ports, foreign nodes: ``fabric.as_built``
  judges those) are only noted in the summary.

>>> fabric_errors_command(FabricErrorsParams(window_s=30), {})[3:]
['rackgate-fabric-errors', '30', '', '']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import Field, model_validator

from rackgate.checks.fabric.query import FabricQueryParams, at, link_hosts, query_needs
from rackgate.checks.shared.base import FabricCheck, HostNeeds, Scope
from rackgate.fabric.findings import FabricFinding, FabricVerdict
from rackgate.fabric.plan import End, FabricPlan, PlannedLink
from rackgate.figures import figure
from rackgate.model import Status
from rackgate.parsers.infiniband.counters import (
    ALL_PORTS,
    ErrorsRead,
    FabricErrorCounters,
    parse_ibcounters,
)
from rackgate.profile import Threshold

# counter -> the metric that bounds its rise (errors per hour); the first four are required
METRIC = {"SymbolErrorCounter": "symbol_error_rise",
          "LinkErrorRecoveryCounter": "link_error_recovery_rise",
          "LinkDownedCounter": "link_downed_rise", "PortRcvErrors": "rcv_error_rise",
          "PortRcvRemotePhysicalErrors": "rcv_remote_physical_error_rise",
          "PortRcvSwitchRelayErrors": "switch_relay_error_rise",
          "PortXmitDiscards": "xmit_discard_rise",
          "PortXmitConstraintErrors": "xmit_constraint_error_rise",
          "PortRcvConstraintErrors": "rcv_constraint_error_rise",
          "LocalLinkIntegrityErrors": "local_link_integrity_error_rise",
          "ExcessiveBufferOverrunErrors": "buffer_overrun_error_rise",
          "VL15Dropped": "vl15_dropped_rise"}
REQUIRED = frozenset(list(METRIC.values())[:4])


class FabricErrorsParams(FabricQueryParams):
    window_s: int = Field(default=30, ge=5, le=600,
                          description="seconds between the two reads of the counters")
    timeout_s: int = Field(default=300, ge=5)

    @model_validator(mode="after")
    def _timeout_covers_the_walks(self) -> FabricErrorsParams:
        if self.timeout_s < self.window_s + 60:
            raise ValueError(f"timeout_s {self.timeout_s} must be at least window_s "
                             f"{self.window_s} + 60 s (the discovery, three reads and the wait)")
        return self


# Fixed text: the window, the CA and its port come in as $1..$3, never spliced into it.
ERRORS_SCRIPT = r"""n=$1 ca=${2-} port=${3-}
m() { echo "### rackgate-fabric-errors $*"; }
q() { t=$1; shift; "$t" ${ca:+-C "$ca"} ${port:+-P "$port"} "$@"; }
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
printf '%s=0\n' SymbolErrorCounter LinkErrorRecoveryCounter LinkDownedCounter PortRcvErrors \
  PortRcvRemotePhysicalErrors PortRcvSwitchRelayErrors PortXmitDiscards \
  PortXmitConstraintErrors PortRcvConstraintErrors LocalLinkIntegrityErrors \
  ExcessiveBufferOverrunErrors VL15Dropped > "$d/thresholds" || exit 1
m discover; q ibnetdiscover --cache "$d/fabric" 2>&1 >/dev/null; m "rc=$?"
m ports; q ibqueryerrors --load-cache "$d/fabric" --counters 2>&1; m "rc=$?"
r() { read -r up _ < /proc/uptime; m "read=$1 uptime_s=$up"
  q ibqueryerrors --load-cache "$d/fabric" --threshold-file "$d/thresholds" \
    -s PortXmitWait 2>&1; m "rc=$?"; }
r 1; sleep "$n"; r 2; m done
"""


def fabric_errors_command(params: FabricErrorsParams, hostvars: Mapping[str, Any]) -> list[str]:
    """The fixed script with the window and the query port as its arguments ("" unset)."""
    return ["sh", "-c", ERRORS_SCRIPT, "rackgate-fabric-errors", str(params.window_s),
            params.ca or "", "" if params.port is None else str(params.port)]


def _needs(params: FabricErrorsParams, hostvars: Mapping[str, Any]) -> HostNeeds:
    """The tools the script runs, the query HCA and root (``query_needs``)."""
    needs: HostNeeds = query_needs("ibqueryerrors")(params, hostvars)
    return replace(needs, tools=("ibnetdiscover", "ibqueryerrors", "mktemp", "sleep"))


def link_text(plan: FabricPlan, link: PlannedLink) -> str:
    """'cable C1 ("gpu001 mlx5_0"[1] <-> "leaf-1"[1])', for the start of a message."""
    return f"cable {link.cable} ({link.a} <-> {link.b})"


@dataclass
class _Tally:
    findings: list[FabricFinding] = field(default_factory=list)
    steady: list[tuple[int, str]] = field(default_factory=list)  # (count, "name on end")
    within: int = 0  # counters that rose within their limit


def _evidence_findings(rec: FabricErrorCounters, params: FabricErrorsParams,
                       thresholds: Mapping[str, Threshold]) -> list[FabricFinding]:
    """Problems with the evidence as a whole: every node is told (hosts empty)."""
    out = []
    for read in (rec.first, rec.second):
        high = [f"{n} = {v}" for n, v in read.walk.thresholds if v != 0]
        if high:
            out.append(f"read {read.number} was taken with ibqueryerrors thresholds above 0 "
                       f"({', '.join(high)}): counts at or below them are not printed, so a "
                       "zero cannot be told from a count under the threshold")
        hidden = sorted(set(read.walk.suppressed) & set(METRIC))
        if hidden:
            out.append(f"read {read.number} suppressed judged counters {', '.join(hidden)}")
        if read.walk.pma_failures > len(read.walk.failed):
            out.append(f"read {read.number}: ibqueryerrors counts {read.walk.pma_failures} "
                       f"failed PMA queries but names {len(read.walk.failed)}: "
                       + ("; ".join(read.walk.said[-3:]) or "no warning"))
    if rec.window_s < params.window_s - 1:
        out.append(f"the two reads are {rec.window_s:.1f} s apart, params.window_s is "
                   f"{params.window_s} s: not this check's evidence")
    for metric in sorted(REQUIRED - set(thresholds)):
        out.append(f"no {metric} threshold in the profile")
    for metric, t in sorted(thresholds.items()):
        if t.upper_bound is None:
            out.append(f"threshold {metric} has no max_ratio, so it sets no limit ({t.unit})")
    return [FabricFinding(Status.ERROR, m) for m in out]


def _not_read(end: End, rec: FabricErrorCounters, guids: Mapping[str, set[str]]) -> str | None:
    """Why ``end``'s counters were not read in both reads, or None."""
    if len(guids.get(end.name, ())) > 1:
        return (f"two nodes answer to {end.name!r} (GUIDs "
                f"{', '.join(sorted(guids[end.name]))}): their counters cannot be told apart")
    if not any(p.node == end.name and p.port == end.port for p in rec.ports):
        return (f"{end} is not among the {len(rec.ports)} ports the walk read (ibqueryerrors "
                "--counters), so its counters were not read")
    for read in (rec.first, rec.second):
        if (end.name, end.port) in read.walk.failed or (end.name, ALL_PORTS) in read.walk.failed:
            said = "; ".join(s for s in read.walk.said if end.name in s)
            return f"the counters of {end} could not be read in read {read.number} ({said})"
    return None


def _judge_end(end: End, link: PlannedLink, rec: FabricErrorCounters, plan: FabricPlan,
               thresholds: Mapping[str, Threshold], tally: _Tally) -> None:
    one, two = rec.first.errors(end.name, end.port), rec.second.errors(end.name, end.port)
    window, hosts = rec.window_s, link_hosts(plan, link)
    head, tail = link_text(plan, link), at(plan, link.a.name, link.b.name)

    def add(status: Status, what: str) -> None:
        tally.findings.append(FabricFinding(status, f"{head}: {what}{tail}", hosts))

    for name, metric in METRIC.items():
        v1, v2 = (p.value(name) if p else 0 for p in (one, two))
        if v1 == v2 == 0:
            continue
        top = max(p.saturation(name) for p in (one, two) if p is not None)
        moved = f"{name} of {end} {{}} from {v1} to {v2} in {window:.1f} s"
        if v2 < v1:
            add(Status.ERROR, moved.format("fell") + ": cleared between the reads, so its "
                "rise is unknown")
            continue
        rate = (v2 - v1) * 3600.0 / window
        t = thresholds.get(metric)
        limit = t.upper_bound if t is not None else None
        if v2 >= top and (limit is None or rate <= limit):
            add(Status.ERROR, f"{name} of {end} is at its maximum {top} (read {v1}, then "
                f"{v2}): a saturated counter cannot show a rise; clear it (perfquery -R) and "
                "run again")
        elif v2 == v1:
            tally.steady.append((v1, f"{name} {v1} on {end}"))
        elif t is None or limit is None:
            add(Status.WARN, moved.format("rose") + f" ({_rate(rate)}/h; the profile sets no "
                f"{metric} limit, so it is not judged)")
        elif rate > limit:
            least = "at least " if v2 >= top else ""
            add(Status.FAIL, moved.format("rose") + f" ({least}{_rate(rate)} {t.unit}, above "
                f"the {figure(limit)} {t.unit} limit of {metric})")
        else:
            tally.within += 1


def _rate(per_h: float) -> str:
    """A rate for a message: whole numbers from 10 on, about four digits below.

    >>> _rate(28800.4), _rate(12.6), _rate(0.0123456)
    ('28,800', '13', '0.01235')
    """
    return figure(round(per_h) if per_h >= 10 else per_h)


def judge_fabric_errors(rec: FabricErrorCounters, params: FabricErrorsParams,
                        thresholds: Mapping[str, Threshold], plan: FabricPlan) -> FabricVerdict:
    tally = _Tally(_evidence_findings(rec, params, thresholds))
    guids: dict[str, set[str]] = {}
    for p in rec.ports:
        guids.setdefault(p.node, set()).add(p.guid)
    links = plan.planned_links()
    if not links:
        tally.findings.append(FabricFinding(Status.ERROR, f"fabric plan {plan.name} plans no "
                                            "link: there is no port to judge"))
    planned = set()
    for link in links:
        for end in (link.a, link.b):
            planned.add((end.name, end.port))
            why = _not_read(end, rec, guids)
            if why is not None:
                tally.findings.append(FabricFinding(
                    Status.ERROR, f"{link_text(plan, link)}: {why}"
                    f"{at(plan, link.a.name, link.b.name)}", link_hosts(plan, link)))
            else:
                _judge_end(end, link, rec, plan, thresholds, tally)
    return FabricVerdict(tuple(tally.findings), _summary(rec, links, planned, tally))


def _summary(rec: FabricErrorCounters, links: list[PlannedLink],
             planned: set[tuple[str, int]], tally: _Tally) -> str:
    text = (f"{len(links)} planned links: the error counters of both ends read twice "
            f"{rec.window_s:.1f} s apart, none rising above its limit")
    if tally.within:
        text += f" ({tally.within} rose within it)"
    if tally.steady:
        top = sorted(tally.steady, reverse=True)[:3]
        text += (f"; {len(tally.steady)} count(s) non-zero but steady (counted since the "
                 f"last clear), largest: {', '.join(s for _, s in top)}")
    unplanned = _unplanned(rec.first, rec.second, planned)
    if unplanned:
        text += (f"; counters rose on {len(unplanned)} unplanned port(s), not judged here "
                 f"(fabric.as_built judges unplanned links): {', '.join(unplanned[:3])}")
    return text


def _unplanned(one: ErrorsRead, two: ErrorsRead, planned: set[tuple[str, int]]) -> list[str]:
    out = []
    for p in two.ports:
        if (p.node, p.port) in planned:
            continue
        before = one.errors(p.node, p.port)
        rose = [f"{n} +{v - (before.value(n) if before else 0)}" for n, v in p.counters
                if n in METRIC and v > (before.value(n) if before else 0)]
        if rose:
            out.append(f'"{p.node}"[{p.port}] {" ".join(rose)}')
    return out


CHECK = FabricCheck(
    name="fabric.errors",
    scope=Scope.RACK,
    tags=frozenset({"fabric", "infiniband"}),
    description="No planned link's port error counters (symbol errors, link recoveries, "
                "link downs, receive errors, ...) rise over a window, at either end",
    params_model=FabricErrorsParams,
    metrics=REQUIRED,
    optional_metrics=frozenset(METRIC.values()) - REQUIRED,
    better={m: "lower" for m in METRIC.values()},  # a rise of an error counter
    command=fabric_errors_command,
    parse=parse_ibcounters,
    judge_plan=judge_fabric_errors,
    needs=_needs,
)
CHECKS = (CHECK,)

__all__ = ["CHECK", "CHECKS", "ERRORS_SCRIPT", "METRIC", "REQUIRED", "FabricErrorsParams",
           "fabric_errors_command", "judge_fabric_errors", "link_text"]
