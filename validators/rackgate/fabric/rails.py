"""Rail alignment: the per-rail NCCL run expects GPU i's traffic on HCA i, and HCA i on rail
i (``nccl.fabric_all_reduce``'s ``rail_hcas``); the fabric plan says which HCA of each node
is cabled to which rail. :func:`rail_mismatches` names every node whose plan disagrees, so
the plan before collecting refuses a run that would measure one rail as another.

>>> from rackgate.fabric.design import design
>>> plan = design(2, 2, 4)
>>> rail_mismatches(plan, ["mlx5_0", "mlx5_1"], ["gpu001", "gpu002"])
[]
>>> rail_mismatches(plan, ["mlx5_1", "mlx5_0"], ["gpu001"])[0]
'gpu001: rail_hcas puts GPU 0 on mlx5_1, the fabric plan cables mlx5_1 to rail 1, not rail 0'
"""

from __future__ import annotations

from collections.abc import Sequence

from rackgate.fabric.plan import FabricPlan


def rail_mismatches(plan: FabricPlan, rail_hcas: Sequence[str],
                    hosts: Sequence[str]) -> list[str]:
    """For each of ``hosts`` in the plan: every ``rail_hcas[i]`` must be the HCA the plan
    cables to rail i (hosts the plan does not know are the fabric checks' to report)."""
    rail_of: dict[tuple[str, str], int | None] = {(n.host, n.hca): n.rail for n in plan.nodes}
    known = set(plan.hosts)
    out = []
    for host in hosts:
        if host not in known:
            continue
        for i, hca in enumerate(rail_hcas):
            if (host, hca) not in rail_of:
                out.append(f"{host}: rail_hcas puts GPU {i} on {hca}, which the fabric plan "
                           f"does not cable")
            elif rail_of[(host, hca)] != i:
                rail = rail_of[(host, hca)]
                where = "no rail" if rail is None else f"rail {rail}"
                out.append(f"{host}: rail_hcas puts GPU {i} on {hca}, the fabric plan cables "
                           f"{hca} to {where}, not rail {i}")
    return out
