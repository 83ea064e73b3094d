"""Placements: where a check's command runs, and how its evidence becomes node results.

A check's kind says where it runs (``checks.shared.base``: one type per kind);
:func:`placement_of` turns that into one of four placements:

- :data:`ON_NODE` (a ``NodeCheck``): the command runs on each node under test, under the
  node's lock; each node is judged from its own evidence.
- :data:`ON_CONTROL_HOST` (a ``ControlCheck``): the command runs on the host running
  rackgate, once per node and about that node (its BMC: the BMC network is reached from
  there). rackgate's own programs (``python3 -m rackgate.…``) run with rackgate's
  interpreter there.
- :data:`ACROSS_NODES` (an ``AcrossCheck``): the command runs once per run on the launch
  host and starts a job across every node under test (srun, mpirun); its command is given
  the nodes as a typed :class:`~rackgate.commands.launch.Across`, and every node is judged
  from that one evidence file. It runs after every node's own benchmarks (``phase`` 1): a
  job across the nodes would load the very nodes fio is measuring.
- :data:`ON_FABRIC` (a ``FabricCheck``): the command runs once per fabric, on the fabric
  host, and is judged against the fabric plan: every node under test gets the findings that
  bear on it.

A placement plans its part of a run (:meth:`Placement.plan`: tasks to run, records of
what cannot run, skips) from a :class:`RunView`, and judges its part of a stored run
through an evidence reader: node by node (:meth:`OnNode.judge_node`) or once for every
node (:meth:`JudgedOnce.judge`). Both are pure apart from that reader: planning is
unit-tested without Ansible or a run directory. The shared pieces are in ``base``; each
placement has its module (``node``, ``across``, ``fabric``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rackgate.checks.shared.base import AcrossCheck, Check, ControlCheck, FabricCheck, NodeCheck
from rackgate.placement.across import AcrossNodes
from rackgate.placement.base import (
    LAUNCH_GROUP,
    LAUNCH_HOST_VAR,
    MIN_NODES_ACROSS,
    NO_LAUNCH_HOST,
    NO_LAUNCH_VAR,
    EvidenceReader,
    Judged,
    JudgedOnce,
    JudgeJob,
    NotRun,
    Placement,
    Planned,
    RunView,
    Skipped,
    Usable,
    command_vars,
    lock_file,
    params_mismatch,
)
from rackgate.placement.fabric import (
    FABRIC_GROUP,
    FABRIC_HOST_VAR,
    NO_FABRIC_HOST,
    NO_PLAN,
    OnFabric,
)
from rackgate.placement.node import OnControlHost, OnNode

__all__ = [
    "ACROSS_NODES",
    "FABRIC_GROUP",
    "FABRIC_HOST_VAR",
    "LAUNCH_GROUP",
    "LAUNCH_HOST_VAR",
    "MIN_NODES_ACROSS",
    "NO_FABRIC_HOST",
    "NO_LAUNCH_HOST",
    "NO_LAUNCH_VAR",
    "NO_PLAN",
    "ON_CONTROL_HOST",
    "ON_FABRIC",
    "ON_NODE",
    "PLACEMENTS",
    "AcrossNodes",
    "EvidenceReader",
    "JudgeJob",
    "Judged",
    "JudgedOnce",
    "NotRun",
    "OnControlHost",
    "OnFabric",
    "OnNode",
    "Placement",
    "Planned",
    "RunView",
    "Skipped",
    "Usable",
    "command_vars",
    "lock_file",
    "params_mismatch",
    "placement_of",
]

ON_NODE = OnNode()
ON_CONTROL_HOST = OnControlHost()
ACROSS_NODES = AcrossNodes()
ON_FABRIC = OnFabric()
PLACEMENTS: Mapping[str, Placement[Any]] = {p.name: p for p in (ON_NODE, ON_CONTROL_HOST,
                                                           ACROSS_NODES, ON_FABRIC)}
_OF_KIND: Mapping[type[Check], Placement[Any]] = {NodeCheck: ON_NODE, ControlCheck: ON_CONTROL_HOST,
                                             AcrossCheck: ACROSS_NODES, FabricCheck: ON_FABRIC}


def placement_of(check: Check) -> Placement[Any]:
    """Where ``check`` runs: the placement of its kind.

    >>> from rackgate.checks import REGISTRY
    >>> placement_of(REGISTRY["fabric.links"]).where
    'once, on the fabric host'
    """
    return _OF_KIND[type(check)]
