"""Version drift across the rack: one node on another driver, VBIOS, HCA firmware, BIOS
or kernel than its peers is a node that will behave differently in the same job (NCCL and
the driver must match across ranks; mixed firmware is a classic source of flaky links).

A rack-level check (``rack.version_drift``): it reads the versions that other checks
already recorded in their details (which ones: the profile's ``versions``, by default
``profiles/common/rack.yaml``), finds each version's most common value across the rack,
and gives every node a result: ``pass`` when it matches, ``fail`` naming the version, its
value and the rack's when it does not. Pure: results in, results out.

>>> from rackgate.model import Result, Status
>>> rs = [Result(n, "node.identity", Status.PASS, "ok", details={"kernel": k})
...       for n, k in (("n1", "6.1.0-21"), ("n2", "6.1.0-21"), ("n3", "6.1.0-18"))]
>>> kernel = DriftParams(versions=[{"check": "node.identity", "detail": "kernel",
...                                 "label": "kernel"}])
>>> [(r.node, r.status.label) for r in version_drift(rs, kernel)]
[('n1', 'pass'), ('n2', 'pass'), ('n3', 'fail')]
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from rackgate.checks.shared.base import RackCheck
from rackgate.model import Result, Status

CHECK = "rack.version_drift"


class Version(BaseModel):
    """One version compared across the rack: a detail another check records."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    check: str = Field(min_length=1, description="the check whose result records it")
    detail: str = Field(min_length=1, description='its details key; ending in ".": every '
                                                   "key with that prefix (one per HCA)")
    label: str = Field(min_length=1, description="what the report calls it")


class DriftParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    versions: list[Version] = Field(min_length=1)


def _versions(r: Result, p: DriftParams) -> dict[str, str]:
    out = {}
    for v in p.versions:
        check, key, label = v.check, v.detail, v.label
        if r.check != check:
            continue
        if key.endswith("."):
            fws = sorted({str(v) for k, v in r.details.items() if k.startswith(key) and v})
            if fws:
                out[label] = ", ".join(fws)
        elif r.details.get(key):
            out[label] = str(r.details[key])
    return out


def version_drift(results: Sequence[Result], p: DriftParams) -> list[Result]:
    """One ``rack.version_drift`` result per node that recorded any version."""
    per_node: dict[str, dict[str, str]] = defaultdict(dict)
    for r in results:
        if r.status in (Status.ERROR, Status.SKIP):
            continue
        per_node[r.node].update(_versions(r, p))
    rack: dict[str, Counter[str]] = defaultdict(Counter)
    for versions in per_node.values():
        for label, value in versions.items():
            rack[label][value] += 1
    out = []
    for node, versions in per_node.items():
        if not versions:
            continue
        findings = []
        for label, value in sorted(versions.items()):
            counts = rack[label]
            (common, n), *rest = counts.most_common()
            if value != common or (rest and rest[0][1] == n):
                findings.append(f"{label} {value} differs from the rack's {common} "
                                f"({n} of {sum(counts.values())} nodes)")
        details: dict[str, float | str] = dict(sorted(versions.items()))
        if findings:
            out.append(Result(node, CHECK, Status.FAIL, "; ".join(findings), details=details))
        else:
            out.append(Result(node, CHECK, Status.PASS, "same versions as the rack: " + ", ".join(
                f"{k} {v}" for k, v in sorted(versions.items())), details=details))
    return out


CHECKS = [RackCheck(
    name=CHECK,
    description="every node runs the rack's most common driver, VBIOS, HCA firmware, BIOS "
                "and kernel: ranks of one job must match",
    params_model=DriftParams,
    judge=version_drift,
)]
