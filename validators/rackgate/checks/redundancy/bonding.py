"""``redundancy.bonding``: the node's bonded links in their mode, every member up, and not
failing.

Every ``/proc/net/bonding/<bond>`` file (the Linux bonding driver's status,
Documentation/networking/bonding.rst; read by ``parsers.bonding``), read twice
``interval_s`` apart (5 s by default) with each bond's ``bonding/arp_validate`` and each
slave's ``bonding_slave/state`` from sysfs. Each expected bond has its mode, exactly its
members, all of them up and, for 802.3ad, an LACP partner on one active aggregator that
holds every member (the driver's ``bond <name> has no active aggregator``, or a member's
``Aggregator ID: N/A``, a port in no aggregator, fails naming it). Each member's ``Link
Failure Count`` (cumulative since it was enslaved) is at most the profile's
``link_failures`` threshold and did not rise between the two reads; a fall is an error.

A member's ``MII Status`` is the link state the bond's monitor keeps. With ``MII Polling
Interval (ms)`` above 0 the MII monitor sets it from the carrier. With 0 only the ARP
monitor can: it needs an ARP (or NS) target, and its "up" proves the link only for the
slave roles arp_validate validates (active: ``active``, ``all``, ``filter_active``;
backup: ``backup``, ``all``, ``filter_backup``); otherwise any received frame keeps a
slave up, and the judge says it cannot tell (``error``). Without either monitor nothing
ever re-checks a member: that is a ``fail``. Evidence of the one-read collector (before
issue 14) is still judged; its message says that whether the counts rise was not judged.

>>> j = judge_bonding(BondingReport(bonds=()), BondingParams(bonds=[ExpectedBond(
...     name="bond0", mode="802.3ad", members=["eth0", "eth1"])]), {}, Hardware())
>>> j.status.label, j.message
('fail', 'bond0: no such bond (found: none)')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rackgate.checks.shared.base import NodeCheck, Params, Scope
from rackgate.figures import figure
from rackgate.model import Judgement, Status
from rackgate.parsers.bonding import NO_PARTNER, Bond, BondingReport, BondSlave, parse_bonding
from rackgate.profile import Hardware, Threshold

MIN_INTERVAL_S = 1.0  # reads closer than this cannot show a link that flaps
# slave role -> the arp_validate values that validate it (bonding.rst, arp_validate)
VALIDATED_BY = {"active": frozenset({"active", "all", "filter_active"}),
                "backup": frozenset({"backup", "all", "filter_backup"})}
_USES_ACTIVE = ("active-backup", "balance-tlb", "balance-alb")  # one active slave at a time


class ExpectedBond(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,15}$")
    mode: str = Field(pattern=r"^(balance-rr|active-backup|balance-xor|broadcast|802\.3ad|"
                              r"balance-tlb|balance-alb)$")
    members: list[str] = Field(min_length=1)


class BondingParams(Params):
    bonds: list[ExpectedBond] = Field(default_factory=list)
    interval_s: int = Field(default=5, ge=1, le=30,
                            description="seconds between the two reads of the counters")
    timeout_s: int = Field(default=30, ge=5)

    @model_validator(mode="after")
    def _timeout_covers_both_reads(self) -> BondingParams:
        if self.timeout_s <= self.interval_s + 5:
            raise ValueError(f"timeout_s {self.timeout_s} must exceed interval_s "
                             f"{self.interval_s} by more than 5 s (two reads and the wait)")
        return self


# Fixed text: the interval comes in as $1, an argument, never spliced into the script.
BONDING_SCRIPT = (
    'n=$1; '
    'show() { [ -r "$1" ] || return 0; echo "==> $1 <=="; cat "$1"; }; '
    'reads() { read -r up _ < /proc/uptime; echo "### rackgate-bonding read=$1 uptime_s=$up"; '
    'for f in /proc/net/bonding/*; do [ -e "$f" ] || continue; show "$f"; '
    'show "/sys/class/net/${f##*/}/bonding/arp_validate"; done; '
    'for f in /sys/class/net/*/bonding_slave/state; do show "$f"; done; }; '
    'reads 1; sleep "$n"; reads 2; echo "### rackgate-bonding done"')


def bonding_command(params: BondingParams, hostvars: Mapping[str, Any]) -> list[str]:
    """A fixed script run twice, ``interval_s`` apart: every bond's /proc file and its sysfs
    files, each after a ``==> path <==`` line, each read after its uptime marker."""
    return ["sh", "-c", BONDING_SCRIPT, "rackgate-bonding", str(params.interval_s)]


def _find(want: ExpectedBond, bonds: Sequence[Bond], expected: int) -> Bond | None:
    for b in bonds:
        if b.name == want.name:
            return b
    if len(bonds) == 1 and expected == 1 and not bonds[0].name:
        return bonds[0]  # a single file read without its name
    return None


def _limit(thresholds: Mapping[str, Threshold]) -> tuple[float | None, str | None, str]:
    """(the most link failures a member may have, an error, a note) from ``link_failures``."""
    t = thresholds.get("link_failures")
    if t is None:
        return None, None, "no link_failures threshold given: counts not compared with a limit"
    if t.upper_bound is None:
        return None, (f"threshold link_failures has no max_ratio, so it sets no limit on a "
                      f"member's link failures ({t.unit})"), ""
    return t.upper_bound, None, ""


def _role(bond: Bond, s: BondSlave) -> str:
    if s.state is not None:
        return s.state
    if bond.mode in _USES_ACTIVE:
        return "active" if s.interface == bond.active_slave else "backup"
    return "active"


def _monitor_findings(want: ExpectedBond, bond: Bond) -> tuple[list[str], list[str]]:
    """Whether the members' "up" is a measurement: (fails, errors)."""
    if bond.miimon_ms is None:
        return [], [f"{want.name}: no 'MII Polling Interval (ms)' line: cannot tell how its "
                    "links are monitored, so 'MII Status: up' proves nothing"]
    if bond.miimon_ms > 0:
        return [], []
    if not bond.arp_interval_ms:
        return [f"{want.name}: no link monitoring (MII Polling Interval 0 and no ARP Polling "
                "Interval): nothing re-checks a member, so its 'MII Status: up' is not a "
                "measurement (bonding.rst: set miimon or arp_interval)"], []
    arp = (f"MII monitoring is off (MII Polling Interval 0) and ARP monitoring every "
           f"{bond.arp_interval_ms} ms sets the members' status")
    if not bond.arp_targets:
        return [f"{want.name}: {arp}, but it has no ARP IP or NS target to probe"], []
    if bond.arp_validate is None:
        return [], [f"{want.name}: cannot tell whether its members are up: {arp}, and the "
                    f"evidence has no /sys/class/net/{want.name}/bonding/arp_validate "
                    "(/proc/net/bonding never prints it; evidence of an older collector?)"]
    unknown, unproven, roles = [], [], set()
    for s in bond.slaves:
        if s.interface not in want.members or not s.mii_up:
            continue
        role = _role(bond, s)
        if role not in VALIDATED_BY:
            unknown.append(f"{s.interface} ({role!r})")
        elif bond.arp_validate not in VALIDATED_BY[role]:
            unproven.append(f"{s.interface} ({role})")
            roles.add(role)
    errors = []
    if unknown:
        errors.append(f"{want.name}: slave state of {', '.join(unknown)} is neither active nor "
                      "backup (bonding_slave/state): cannot tell whether ARP validates it")
    if unproven:
        errors.append(f"{want.name}: cannot tell whether {', '.join(unproven)} "
                      f"{'is' if len(unproven) == 1 else 'are'} up: {arp}, and arp_validate "
                      f"{bond.arp_validate} validates no {' or '.join(sorted(roles))} slave, "
                      "so any frame a slave receives keeps it up")
    return [], errors


def _count_findings(want: ExpectedBond, bond: Bond,
                    limit: float | None) -> tuple[list[str], list[str]]:
    fails, errors = [], []
    for s in bond.slaves:
        if s.interface not in want.members:
            continue
        n = s.link_failure_count
        if n is None:
            errors.append(f"{want.name}: member {s.interface} has no 'Link Failure Count' "
                          "line: cannot tell whether its link has failed")
        elif limit is not None and n > limit:
            fails.append(f"{want.name}: member {s.interface} link failure count {n} above the "
                         f"limit {figure(limit)} (threshold link_failures): its link failed {n} "
                         "times since it was enslaved")
    return fails, errors


def _read_findings(want: ExpectedBond, bond: Bond, before: Bond | None,
                   interval_s: float) -> tuple[list[str], list[str]]:
    """The first read against the last: same members, up then too, counts not risen."""
    if before is None:
        return [], [f"{want.name}: not in the first read: cannot tell whether its link "
                    "failure counts rose"]
    fails, errors = [], []
    earlier = {s.interface: s for s in before.slaves}
    if before.mode != bond.mode:
        fails.append(f"{want.name}: mode {before.mode} in the first read, {bond.mode} "
                     f"{interval_s:.1f} s later")
    for s in bond.slaves:
        s1 = earlier.get(s.interface)
        if s.interface not in want.members:
            continue
        if s1 is None:
            fails.append(f"{want.name}: member {s.interface} is not enslaved in the first read "
                         f"(slaves then: {', '.join(earlier) or 'none'})")
            continue
        if not s1.mii_up:
            fails.append(f"{want.name}: member {s.interface} MII status {s1.mii_status or '?'} "
                         f"in the first read, {s.mii_status or '?'} {interval_s:.1f} s later")
        if s1.no_aggregator and want.mode == "802.3ad" and not s.no_aggregator:
            fails.append(f"{want.name}: member {s.interface} is in no aggregator in the first "
                         f"read ('Aggregator ID: N/A'), {interval_s:.1f} s before the last")
        c1, c2 = s1.link_failure_count, s.link_failure_count
        if c1 is None:
            errors.append(f"{want.name}: member {s.interface} has no 'Link Failure Count' line "
                          "in the first read: cannot tell whether it rose")
        elif c2 is not None and c2 > c1:
            fails.append(f"{want.name}: member {s.interface} link failure count rose from {c1} "
                         f"to {c2} between the two reads {interval_s:.1f} s apart: the link "
                         "is flapping")
        elif c2 is not None and c2 < c1:
            errors.append(f"{want.name}: member {s.interface} link failure count fell from "
                          f"{c1} to {c2} between the two reads: enslaved again in between, or "
                          "not two reads of one bond")
    foreign = [x for x in earlier if x not in want.members and x not in
               {s.interface for s in bond.slaves}]
    if foreign:
        fails.append(f"{want.name}: {', '.join(foreign)} enslaved in the first read but not an "
                     f"expected member ({', '.join(want.members)})")
    return fails, errors


def judge_bonding(report: BondingReport, params: BondingParams,
                  thresholds: Mapping[str, Threshold], hardware: Hardware) -> Judgement:
    found = {b.name: b for b in report.bonds}
    if not params.bonds:  # the profile says this node has no bond: one found is foreign
        if found:
            return Judgement(Status.FAIL, f"bond(s) {', '.join(sorted(found))} found, the "
                             "profile expects none (params.bonds): list them to have them "
                             "judged", expected="no bonds")
        return Judgement(Status.PASS, "no bonds expected, none found", expected="no bonds")
    limit, limit_error, note = _limit(thresholds)
    fails: list[str] = []
    errors: list[str] = [limit_error] if limit_error else []
    interval = report.interval_s
    if report.first is not None and interval is not None and interval < MIN_INTERVAL_S:
        errors.append(f"the two reads are only {interval:.1f} s apart (at least "
                      f"{figure(MIN_INTERVAL_S)} s are needed to show a link failure count rising)")
    counts: list[int] = []
    for want in params.bonds:
        bond = _find(want, report.bonds, len(params.bonds))
        if bond is None:
            fails.append(f"{want.name}: no such bond (found: {', '.join(sorted(found)) or 'none'})")
            continue
        fails += _member_findings(want, bond)
        for f, e in (_monitor_findings(want, bond), _count_findings(want, bond, limit)):
            fails += f
            errors += e
        if report.first is not None:
            f, e = _read_findings(want, bond, _find(want, report.first, len(params.bonds)),
                                  interval or 0.0)
            fails += f
            errors += e
        counts += [s.link_failure_count for s in bond.slaves
                   if s.interface in want.members and s.link_failure_count is not None]
    notes = [note] if note else []
    if report.first is None:
        notes.append("read once (evidence without the check's two timed reads): whether the "
                     "link failure counts are rising was not judged")
    expected = "bonds " + ", ".join(f"{b.name} {b.mode} {'+'.join(b.members)}"
                                    for b in params.bonds) \
        + (f"; each member's link failure count <= {figure(limit)}" if limit is not None else "") \
        + ", not rising between two reads"
    details: dict[str, float | str] = {"reads": 1 if report.first is None else 2}
    if counts:
        details["link_failures_max"] = max(counts)
    if interval is not None:
        details["interval_s"] = interval
    if fails or errors:
        return Judgement(Status.FAIL if fails else Status.ERROR,
                         "; ".join(fails + errors), expected=expected, details=details)
    summary = f"link failure counts at most {max(counts, default=0)}"
    summary += f" (limit {figure(limit)})" if limit is not None else ""
    summary += f", unchanged over {interval:.1f} s" if interval is not None else ""
    return Judgement(Status.PASS, f"{len(params.bonds)} bond(s) in mode with all members up: "
                     + ", ".join(b.name for b in params.bonds) + "; "
                     + "; ".join([summary, *notes]), expected=expected, details=details)


def _member_findings(want: ExpectedBond, bond: Bond) -> list[str]:
    """Mode, exactly the expected members, each up; for 802.3ad, the LACP partner."""
    fails = []
    if bond.mode != want.mode:
        fails.append(f"{want.name}: mode {bond.mode} ({bond.mode_text}), expected {want.mode}")
    slaves = {s.interface: s for s in bond.slaves}
    for member in want.members:
        s = slaves.get(member)
        if s is None:
            fails.append(f"{want.name}: member {member} is not enslaved "
                         f"(slaves: {', '.join(slaves) or 'none'})")
        elif not s.mii_up:
            fails.append(f"{want.name}: member {member} MII status {s.mii_status or '?'} "
                         f"(link failures {s.link_failure_count})")
    foreign = [x for x in slaves if x not in want.members]
    if foreign:
        fails.append(f"{want.name}: {', '.join(foreign)} enslaved but not an expected "
                     f"member ({', '.join(want.members)})")
    if want.mode == "802.3ad" and bond.mode == "802.3ad":
        fails += _lacp_findings(want, bond)
    return fails


def _lacp_findings(want: ExpectedBond, bond: Bond) -> list[str]:
    fails = []
    if bond.no_active_aggregator:
        fails.append(f"{want.name}: no active aggregator (the driver prints 'bond "
                     f"{bond.name or want.name} has no active aggregator'): the bond carries "
                     "no 802.3ad traffic")
    alone = [s.interface for s in bond.slaves if s.interface in want.members and s.no_aggregator]
    if alone:
        many = len(alone) > 1
        fails.append(f"{want.name}: member{'s' if many else ''} {', '.join(alone)} "
                     f"{'are' if many else 'is'} in no aggregator ('Aggregator ID: N/A'): "
                     f"not aggregated, {'they carry' if many else 'it carries'} none of the "
                     "bond's traffic")
    if bond.partner_mac == NO_PARTNER:
        fails.append(f"{want.name}: no LACP partner (active aggregator "
                     f"{bond.active_aggregator_id}, partner MAC {NO_PARTNER}): the switch "
                     "ports are not negotiating 802.3ad")
    members = [s for s in bond.slaves if s.interface in want.members]
    no_partner = [s.interface for s in members if s.partner_mac == NO_PARTNER and s.mii_up]
    if no_partner and bond.partner_mac != NO_PARTNER:
        fails.append(f"{want.name}: no LACP partner on {', '.join(no_partner)}")
    aggregators = {s.aggregator_id for s in members if s.aggregator_id is not None}
    active = bond.active_aggregator_id
    outside = [f"{s.interface} (aggregator {s.aggregator_id})" for s in members
               if s.aggregator_id is not None and
               (s.aggregator_id != active if active is not None else len(aggregators) > 1)]
    if outside:
        fails.append(f"{want.name}: members outside the active aggregator "
                     f"{active if active is not None else ''}: {', '.join(outside)}".replace(
                         "aggregator :", "aggregator:"))
    return fails


CHECK = NodeCheck(
    name="redundancy.bonding",
    scope=Scope.NODE,
    tags=frozenset({"redundancy", "network", "bonding"}),
    description="Bonds in their expected mode, every member up and monitored, link failure "
                "counts under the limit and not rising, LACP partner present",
    params_model=BondingParams,
    metrics=frozenset({"link_failures"}),
    better={"link_failures": "lower"},
    command=bonding_command,
    parse=parse_bonding,
    judge=judge_bonding,
)

__all__ = ["BONDING_SCRIPT", "CHECK", "MIN_INTERVAL_S", "VALIDATED_BY", "BondingParams",
           "ExpectedBond", "bonding_command", "judge_bonding"]
