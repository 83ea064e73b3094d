"""The plan's device-naming check (``rackgate validate --plan``): where the inventory sets
``rdma_device_naming`` for a node (the rdma role's udev naming policy), every RDMA device
the profile names for that node must be a name the policy gives (``fabric.naming``), or
the run would look for devices that cannot exist. Pure: the run's view in, problems out.

The devices are those each selected check declares it needs on the node (``HostNeeds``:
topology.gpu_nic_affinity's compute_nics, nccl.fabric_all_reduce's rail_hcas, the CA of
the fabric and link checks, ...), whether or not the check would run on this plan.
"""

from __future__ import annotations

from collections.abc import Sequence

from rackgate.checks.shared.base import Check, CommandError, HostNeeds
from rackgate.collect.preflight_records import Problem
from rackgate.fabric.naming import NAMING_VAR, misnamed, misnamed_message, policy_problem
from rackgate.placement import RunView, command_vars


def needs_on(check: Check, view: RunView, host: str) -> HostNeeds | None:
    """What ``check`` needs on ``host`` under the host's profile; None when the profile has
    no such check, or its command cannot be built (the plan names the missing variable)."""
    cp = view.profiles[host].check(check.name)
    if cp is None:
        return None
    try:
        return check.needs(check.params_model.model_validate(cp.params),
                           command_vars(host, view.hostvars[host], view.profiles[host]))
    except CommandError:
        return None


def naming_problems(view: RunView, checks: Sequence[Check]) -> list[Problem]:
    """One error per (node, check, device) whose name the node's policy does not give, and
    one per node whose policy is no policy."""
    out: list[Problem] = []
    for node in view.nodes:
        policy = view.hostvars.get(node, {}).get(NAMING_VAR)
        if policy is None:
            continue
        if (why := policy_problem(policy)) is not None:
            out.append(Problem(node, None, why))
            continue
        profile = view.profiles[node]
        for check in checks:
            needs = needs_on(check, view, node)
            if needs is None:
                continue
            out += [Problem(node, check.name, misnamed_message(profile.name, check.name, d,
                                                               str(policy)))
                    for d in misnamed(needs.rdma_devices, str(policy))]
    return out
