"""The check registry: one module per check family, each registering its checks here.

The families are listed in :func:`_build_registry`; each module's ``CHECKS`` are the checks
it declares: checks that collect evidence (``checks.shared.base.Check``) and rack-level
judgements over every node's results (``checks.shared.base.RackCheck``). Profiles are validated
against :data:`CATALOG`; :func:`load_profile` and :func:`profile_from_document` are
``rackgate.profile``'s, given this catalog.
"""

from __future__ import annotations

import difflib
from collections import ChainMap
from collections.abc import Mapping, Sequence
from typing import Any

from rackgate import profile as _profile
from rackgate.checks.shared.base import Check, RackCheck
from rackgate.profile import CheckSpec, Profile


def _build_registry() -> tuple[dict[str, Check], dict[str, RackCheck]]:
    from rackgate.checks import conformance, cooling, drift, identity, mpi, peers, redundancy
    from rackgate.checks.fabric import (
        as_built,
        errors,
        links,
        nic_pcie,
        pairwise,
        ports,
        sm,
    )
    from rackgate.checks.gpu import health, nvbandwidth, nvlink_errors, topology
    from rackgate.checks.nccl import fabric as nccl_fabric
    from rackgate.checks.nccl import local as nccl
    from rackgate.checks.storage import disk_health, fio

    registry: dict[str, Check] = {}
    rack: dict[str, RackCheck] = {}
    for module in (identity, conformance, health, topology, ports, nic_pcie, redundancy,
                   cooling, fio, nccl, nccl_fabric, mpi, pairwise, as_built, links, errors, sm,
                   peers, drift, nvlink_errors, disk_health, nvbandwidth):
        for check in module.CHECKS:
            if check.name in registry or check.name in rack:
                raise RuntimeError(f"check {check.name} is registered twice")
            if isinstance(check, RackCheck):
                rack[check.name] = check
            else:
                registry[check.name] = check
    # the judgements that revise results (peer comparison) run before those that read them
    rack = dict(sorted(rack.items(), key=lambda kv: not kv[1].revises))
    return registry, rack


REGISTRY: dict[str, Check]  # what collection runs: name -> check
RACK_REGISTRY: dict[str, RackCheck]  # what is judged across the nodes, in the order it runs
REGISTRY, RACK_REGISTRY = _build_registry()
# every check a profile may name (a live view: a check registered later is seen too)
CATALOG: Mapping[str, CheckSpec] = ChainMap[str, Any](REGISTRY, RACK_REGISTRY)


def load_profile(name_or_path: str) -> Profile:
    """A shipped profile by name, or a profile file by path, validated against CATALOG."""
    return _profile.load_profile(name_or_path, CATALOG)


def profile_from_document(raw: Mapping[str, Any], source: str) -> Profile:
    """A profile document (a recorded one, an inventory's partial one merged in) validated
    against CATALOG."""
    return _profile.profile_from_document(raw, source, CATALOG)



def did_you_mean(name: str, tags: Sequence[str] = ()) -> str:
    """``: did you mean X?`` with the registered check name or tag (of ``tags``) closest to
    ``name`` and any as close within 0.05 (difflib's ratio), or "" when none is close.

    >>> did_you_mean("fio.seq_raed"), did_you_mean("redundancy.psu", ["redundancy"])
    (': did you mean fio.seq_read?', ': did you mean redundancy.psu_ipmi or redundancy?')
    """
    scored = sorted(((difflib.SequenceMatcher(None, name, w).ratio(), w)
                     for w in [*REGISTRY, *tags]), reverse=True)
    close = [w for score, w in scored if score >= max(0.6, scored[0][0] - 0.05)] if scored \
        else []
    return f": did you mean {' or '.join(close[:3])}?" if close else ""


def select(names_or_tags: list[str] | None) -> list[Check]:
    """Checks named, or tagged, by any of ``names_or_tags`` (all when None)."""
    if not names_or_tags:
        return list(REGISTRY.values())
    tags = sorted({t for c in REGISTRY.values() for t in c.tags})
    unknown = [n for n in names_or_tags if n not in REGISTRY and n not in tags]
    if unknown:
        raise KeyError("; ".join(f"no check or tag named {n!r}{did_you_mean(n, tags)}"
                                 for n in unknown)
                       + " (`rackgate list checks` lists them)")
    return [c for c in REGISTRY.values()
            if c.name in names_or_tags or c.tags & set(names_or_tags)]
