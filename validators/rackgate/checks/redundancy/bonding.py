"""``redundancy.bonding``: the node's bonded links in their mode, every member up.

Every ``/proc/net/bonding/<bond>`` file (the Linux bonding driver's status,
Documentation/networking/bonding.rst; read by ``parsers.bonding``): each expected bond has
its mode, exactly its members, all of them MII up and, for 802.3ad, an LACP partner on
one active aggregator.

>>> j = judge_bonding(BondingReport(bonds=()), BondingParams(bonds=[ExpectedBond(
...     name="bond0", mode="802.3ad", members=["eth0", "eth1"])]), {}, Hardware())
>>> j.status.label, j.message
('fail', 'bond0: no such bond (found: none)')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rackgate.checks.base import Check, Params, Scope
from rackgate.model import Judgement, Status
from rackgate.parsers.bonding import NO_PARTNER, Bond, BondingReport, parse_bonding
from rackgate.profile import Hardware, Threshold


class ExpectedBond(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,15}$")
    mode: str = Field(pattern=r"^(balance-rr|active-backup|balance-xor|broadcast|802\.3ad|"
                              r"balance-tlb|balance-alb)$")
    members: list[str] = Field(min_length=1)


class BondingParams(Params):
    bonds: list[ExpectedBond] = Field(default_factory=list)
    timeout_s: int = Field(default=30, ge=5)


BONDING_SCRIPT = ('for f in /proc/net/bonding/*; do [ -e "$f" ] || continue; '
                  'echo "==> $f <=="; cat "$f"; done')


def bonding_command(params: BondingParams, hostvars: Mapping[str, Any]) -> list[str]:
    """A fixed script: every bond's /proc file, each after a ``==> path <==`` line."""
    return ["sh", "-c", BONDING_SCRIPT]


def judge_bonding(report: BondingReport, params: BondingParams,
                  thresholds: Mapping[str, Threshold], hardware: Hardware) -> Judgement:
    found = {b.name: b for b in report.bonds}
    if not params.bonds:
        extra = f" (found {', '.join(sorted(found))}, not judged)" if found else ""
        return Judgement(Status.PASS, f"no bonds expected{extra}")
    fails: list[str] = []
    for want in params.bonds:
        bond = found.get(want.name)
        if bond is None and len(report.bonds) == 1 and len(params.bonds) == 1 \
                and not report.bonds[0].name:
            bond = report.bonds[0]  # a single file read without its name
        if bond is None:
            fails.append(f"{want.name}: no such bond (found: {', '.join(sorted(found)) or 'none'})")
            continue
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
    if fails:
        return Judgement(Status.FAIL, "; ".join(fails), expected="bonds "
                         + ", ".join(f"{b.name} {b.mode} {'+'.join(b.members)}"
                                     for b in params.bonds))
    return Judgement(Status.PASS, f"{len(params.bonds)} bond(s) in mode with all members up: "
                     + ", ".join(b.name for b in params.bonds))


def _lacp_findings(want: ExpectedBond, bond: Bond) -> list[str]:
    fails = []
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


CHECK = Check(
    name="redundancy.bonding",
    scope=Scope.NODE,
    tags=frozenset({"redundancy", "network", "bonding"}),
    description="Bonds in their expected mode, every member up, LACP partner present",
    params_model=BondingParams,
    metrics=frozenset(),
    command=bonding_command,
    parse=parse_bonding,
    judge=judge_bonding,
)

__all__ = ["BONDING_SCRIPT", "CHECK", "BondingParams", "ExpectedBond", "bonding_command",
           "judge_bonding"]
