"""How much a site baseline rests on (``rackgate baseline``): its golden nodes and runs
against the minimums the command asks for, and each threshold's spread against its band.

The minimums (``--min-nodes``, ``--min-runs``) and why:

- **3 golden nodes** (:data:`MIN_NODES`): a reference is the median of the golden figures.
  The median of 2 figures is their mean, so one slow golden node moves the reference by half
  its deficit; from 3 on the median ignores a single outlying node (the median of n figures
  withstands (n - 1) / 2 bad ones), and the spread (range, MAD) says something.
- **2 runs** (:data:`MIN_RUNS`): one run measures each node once, so the run-to-run variation
  of the same healthy node (thermal state, caches, a shared disk's or fabric's other traffic)
  is in none of its figures; a band that holds one run's figures can fail those nodes on the
  next run. Two runs are the fewest that show that variation.

Below either, ``rackgate baseline`` refuses unless ``--allow-small``; then the baseline says
so (:func:`with_caveat`) in its header and in every threshold's basis, which every report
judged with it lists. A threshold whose golden figures spread more than its band
(:func:`wide_spreads`: range over median above the tolerance) is warned about: the golden
nodes disagree among themselves more than the band allows a node to differ from them.

>>> shortfall(2, 1, MIN_NODES, MIN_RUNS)
'2 golden nodes (the minimum is 3) and 1 run (the minimum is 2)'
>>> shortfall(3, 2, MIN_NODES, MIN_RUNS) is None
True
"""

from __future__ import annotations

from dataclasses import replace

from rackgate.baseline import Baseline
from rackgate.figures import figure

MIN_NODES = 3
MIN_RUNS = 2
MIN_NODES_BASIS = ("the reference is the median of the golden figures: the median of 2 is "
                   "their mean, which one slow node moves by half its deficit; from 3 on the "
                   "median ignores one outlying node")
MIN_RUNS_BASIS = ("one run measures each node once and shows none of its run-to-run "
                  "variation (thermal state, caches, a shared disk's or fabric's other "
                  "traffic): a band that holds one run can fail the same healthy nodes on the "
                  "next; 2 runs are the fewest that show it")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def shortfall(nodes: int, runs: int, min_nodes: int, min_runs: int) -> str | None:
    """What a baseline of ``nodes`` golden nodes from ``runs`` runs lacks (None: enough)."""
    parts = []
    if nodes < min_nodes:
        parts.append(f"{_count(nodes, 'golden node')} (the minimum is {min_nodes})")
    if runs < min_runs:
        parts.append(f"{_count(runs, 'run')} (the minimum is {min_runs})")
    return " and ".join(parts) or None


def short_of(b: Baseline, min_nodes: int, min_runs: int) -> str | None:
    """:func:`shortfall` of baseline ``b``."""
    return shortfall(len(b.nodes), b.runs, min_nodes, min_runs)


def spread_text(pct: float | None) -> str:
    """A threshold's spread as the summary shows it."""
    return "no spread (one figure)" if pct is None else f"spread {figure(pct)}%"


def wide_spreads(b: Baseline) -> list[str]:
    """One sentence per threshold whose golden figures spread (range over median) more than
    the band (the tolerance) around their median."""
    out = []
    for t in b.thresholds:
        pct = t.spread_pct
        if pct is None or pct <= 100 * b.tolerance:
            continue
        low, high = min(v for _, v in t.figures), max(v for _, v in t.figures)
        unit = t.threshold.unit
        out.append(f"{t.check} {t.metric}: the golden figures spread {figure(pct)}% of their "
                   f"median ({figure(low)} to {figure(high)} {unit}), more than the "
                   f"{figure(100 * b.tolerance)}% band: the golden nodes disagree more than the "
                   f"band lets a node differ from them (a slow node among them, or noise "
                   f"between runs); check them, add runs, or choose --nodes")
    return out


def with_caveat(b: Baseline, caveat: str) -> Baseline:
    """``b`` with ``caveat`` in its notes and at the end of every threshold's basis."""
    thresholds = tuple(replace(t, threshold=t.threshold.model_copy(
        update={"basis": f"{t.threshold.basis}. {caveat}"})) for t in b.thresholds)
    return replace(b, thresholds=thresholds, notes=(*b.notes, caveat))
