"""The check registry: one module per check family, each registering its checks here.

The families are listed in :func:`_build_registry`; each module's ``CHECKS`` are the checks
it declares (``checks.base.Check``).
"""

from __future__ import annotations

from rackgate.checks.base import Check


def _build_registry() -> dict[str, Check]:
    from rackgate.checks import (
        conformance,
        cooling,
        fio,
        gpu,
        identity,
        infiniband,
        mpi,
        nccl,
        nccl_fabric,
        pairwise,
        redundancy,
        topology,
    )

    registry: dict[str, Check] = {}
    for module in (identity, conformance, gpu, topology, infiniband, redundancy, cooling, fio,
                   nccl, nccl_fabric, mpi, pairwise):
        for check in module.CHECKS:
            if check.name in registry:
                raise RuntimeError(f"check {check.name} is registered twice")
            registry[check.name] = check
    return registry


REGISTRY: dict[str, Check] = _build_registry()


def select(names_or_tags: list[str] | None) -> list[Check]:
    """Checks named, or tagged, by any of ``names_or_tags`` (all when None)."""
    if not names_or_tags:
        return list(REGISTRY.values())
    unknown = [n for n in names_or_tags
               if n not in REGISTRY and not any(n in c.tags for c in REGISTRY.values())]
    if unknown:
        raise KeyError(f"no check or tag named {', '.join(unknown)} (checks: "
                       f"{', '.join(sorted(REGISTRY))})")
    return [c for c in REGISTRY.values()
            if c.name in names_or_tags or c.tags & set(names_or_tags)]
