"""Redundancy checks: power supplies (through the BMC), storage multipath, bonded links.

One family with one module per check, each reading a different tool and spec:

- ``redundancy.psu_ipmi`` (:mod:`.psu`): ``ipmitool sdr elist`` against the node's BMC,
  judged by IPMI v2.0's discrete-state tables: every PSU present without fault,
  redundancy intact, input power plausible.
- ``redundancy.multipath`` (:mod:`.multipath`): ``multipath -ll``: every expected LUN
  mapped, each with its healthy paths, none failed, no foreign map (a listing without
  checker states, as ``multipath -l`` prints, at best warns).
- ``redundancy.bonding`` (:mod:`.bonding`): ``/proc/net/bonding`` (and sysfs), read twice
  a few seconds apart: each expected bond in its mode with exactly its members, all up by
  a link monitor that can tell (MII, or ARP validating their role), each member's link
  failure count within the profile's ``link_failures`` and not rising between the reads,
  and for 802.3ad an LACP partner and every member in the active aggregator.

>>> [c.name for c in CHECKS]
['redundancy.psu_ipmi', 'redundancy.multipath', 'redundancy.bonding']
"""

from __future__ import annotations

from rackgate.checks.redundancy import bonding, multipath, psu
from rackgate.checks.redundancy.bonding import (
    BondingParams,
    ExpectedBond,
    bonding_command,
    judge_bonding,
)
from rackgate.checks.redundancy.multipath import MultipathParams, judge_multipath, multipath_command
from rackgate.checks.redundancy.psu import (
    INPUT_OVER_RATING,
    MAX_PSU_INPUT_W,
    PsuIpmiParams,
    judge_psu_ipmi,
    psu_ipmi_command,
)

CHECKS = (psu.CHECK, multipath.CHECK, bonding.CHECK)

__all__ = ["CHECKS", "INPUT_OVER_RATING", "MAX_PSU_INPUT_W", "BondingParams", "ExpectedBond",
           "MultipathParams", "PsuIpmiParams", "bonding_command", "judge_bonding",
           "judge_multipath", "judge_psu_ipmi", "multipath_command", "psu_ipmi_command"]
