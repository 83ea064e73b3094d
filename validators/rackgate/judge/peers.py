"""Peer comparison: the node that clears its threshold but lags its peers is the one that
drags a synchronous training job, so it is flagged even though it passed.

For each check, every node's measured figure is compared with the median of all nodes'
figures using the median absolute deviation (MAD). A passing node becomes ``warn`` when
its modified z-score, 0.6745 (x - median) / MAD (Iglewicz and Hoaglin, 1993), is beyond
3.5 on the bad side AND it is at least 10 % worse than the median; the second condition
keeps a tight cluster (tiny MAD) from flagging noise. Fail, error and skip are untouched.
At least four figures are needed for a median to mean anything.

>>> from rackgate.model import Result, Status
>>> rs = [Result(f"n{i}", "fio.seq_read", Status.PASS, "ok", v, "MB/s", better="higher")
...       for i, v in enumerate([1000, 1010, 990, 1005, 600])]
>>> [r.status.label for r in flag_peer_outliers(rs)]
['pass', 'pass', 'pass', 'pass', 'warn']
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from statistics import median

from rackgate.model import Result, Status

MIN_PEERS = 4
Z_LIMIT = 3.5
MIN_GAP = 0.10


def _outlier(x: float, med: float, mad: float, better: str) -> tuple[bool, float, float]:
    """(is an outlier, relative gap to the median on the bad side, modified z-score)."""
    if med == 0:
        return False, 0.0, 0.0
    sign = 1.0 if better == "higher" else -1.0
    gap = sign * (med - x) / abs(med)
    z = 0.6745 * (x - med) / mad if mad > 0 else (-sign * math.inf if gap > 0 else 0.0)
    bad_side = z < -Z_LIMIT if better == "higher" else z > Z_LIMIT
    return bad_side and gap >= MIN_GAP, gap, z


def flag_peer_outliers(results: Sequence[Result]) -> list[Result]:
    """``results`` with passing peer outliers turned into ``warn`` (same order)."""
    by_check: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(results):
        if r.measured is not None and r.better is not None:
            by_check[r.check].append(i)
    out = list(results)
    for indices in by_check.values():
        if len(indices) < MIN_PEERS:
            continue
        values = [results[i].measured for i in indices]
        med = median(v for v in values if v is not None)
        mad = median(abs(v - med) for v in values if v is not None)
        for i in indices:
            r = results[i]
            if r.status is not Status.PASS or r.measured is None or r.better is None:
                continue
            flagged, gap, z = _outlier(r.measured, med, mad, r.better)
            if flagged:
                side = "below" if r.better == "higher" else "above"
                out[i] = replace(
                    r, status=Status.WARN,
                    message=(f"{r.message}; but a peer outlier: {gap:.0%} {side} the median "
                             f"{med:.4g} {r.unit} of {len(indices)} nodes (robust z {z:.1f})"),
                    details={**r.details, "peer_median": round(med, 3),
                             "peer_robust_z": round(z, 2) if math.isfinite(z) else "inf"})
    return out
