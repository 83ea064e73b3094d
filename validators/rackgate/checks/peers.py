"""Peer comparison: the node that clears its threshold but lags its peers is the one that
drags a synchronous training job, so it is flagged even though it passed.

A rack-level check (``rack.peer_comparison``). For each check, every node's measured
figure is compared with the median of all nodes' figures using the median absolute
deviation (MAD). A passing node becomes ``warn`` when its modified z-score,
0.6745 (x - median) / MAD (Iglewicz and Hoaglin, 1993), is beyond ``robust_z`` on the bad
side AND it is at least ``min_gap`` worse than the median; the second condition keeps a
tight cluster (tiny MAD) from flagging noise. Fail, error and skip are untouched. At least
``min_peers`` figures are needed for a median to mean anything. The three figures and
their basis are in the profile (``profiles/common/rack.yaml``).

>>> from rackgate.checks import load_profile
>>> from rackgate.model import Result, Status
>>> shipped = PeerParams.model_validate(load_profile("demo").rack_check(NAME).params)
>>> rs = [Result(f"n{i}", "fio.seq_read", Status.PASS, "ok", v, "MB/s", better="higher")
...       for i, v in enumerate([1000, 1010, 990, 1005, 600])]
>>> [r.status.label for r in flag_peer_outliers(rs, shipped)]
['pass', 'pass', 'pass', 'pass', 'warn']
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from statistics import median

from pydantic import BaseModel, ConfigDict, field_validator

from rackgate.checks.shared.base import RackCheck
from rackgate.figures import with_unit
from rackgate.model import Result, Status
from rackgate.profile import Figure

NAME = "rack.peer_comparison"


class PeerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    robust_z: Figure  # the modified z-score beyond which a node is an outlier
    min_gap: Figure  # the fraction of the median a node must also be worse by
    min_peers: Figure  # the fewest figures of one check that are compared

    @field_validator("robust_z", "min_gap", "min_peers")
    @classmethod
    def _positive(cls, f: Figure) -> Figure:
        if not f.value > 0 or f.value == float("inf"):
            raise ValueError(f"must be a positive finite number, got {f.value}")
        return f


def _outlier(x: float, med: float, mad: float, better: str,
             p: PeerParams) -> tuple[bool, float, float]:
    """(is an outlier, relative gap to the median on the bad side, modified z-score)."""
    if med == 0:
        return False, 0.0, 0.0
    sign = 1.0 if better == "higher" else -1.0
    gap = sign * (med - x) / abs(med)
    z = 0.6745 * (x - med) / mad if mad > 0 else (-sign * math.inf if gap > 0 else 0.0)
    limit = p.robust_z.value
    bad_side = z < -limit if better == "higher" else z > limit
    return bad_side and gap >= p.min_gap.value, gap, z


def flag_peer_outliers(results: Sequence[Result], p: PeerParams) -> list[Result]:
    """``results`` with passing peer outliers turned into ``warn`` (same order)."""
    by_check: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(results):
        if r.measured is not None and r.better is not None:
            by_check[r.check].append(i)
    out = list(results)
    for indices in by_check.values():
        if len(indices) < p.min_peers.value:
            continue
        values = [results[i].measured for i in indices]
        med = median(v for v in values if v is not None)
        mad = median(abs(v - med) for v in values if v is not None)
        for i in indices:
            r = results[i]
            if r.status is not Status.PASS or r.measured is None or r.better is None:
                continue
            flagged, gap, z = _outlier(r.measured, med, mad, r.better, p)
            if flagged:
                side = "below" if r.better == "higher" else "above"
                out[i] = replace(
                    r, status=Status.WARN,
                    message=(f"{r.message}; but a peer outlier: {gap:.0%} {side} the median "
                             f"{with_unit(med, r.unit)} of {len(indices)} nodes "
                             f"(robust z {z:.1f})"),
                    details={**r.details, "peer_median": round(med, 3),
                             "peer_robust_z": round(z, 2) if math.isfinite(z) else "inf"})
    return out


CHECKS = [RackCheck(
    name=NAME,
    description="a node that passes but lags the rack's median for the same check by both "
                "cut-offs (robust z and gap) is flagged warn: it would pace a synchronous job",
    params_model=PeerParams,
    judge=flag_peer_outliers,
    revises=True,
)]
