"""A site baseline: profile overrides whose references are the figures a site's own golden
nodes measured (``rackgate baseline``), so that ``validate --overrides`` judges every
other node against the site's numbers instead of the profile's nominal ones.

Pure: a report document (``report.json``, schema ``rackgate.report/1``) in, a
:class:`Baseline` out (:meth:`Baseline.document` is the overrides document, which
``rackgate.cli.baseline.overrides_yaml`` writes as YAML). Only the benchmark figures a
check declares (``Check.baseline``: metric -> "measured" or a details key) are baselined;
limits (cooling temperatures, PSU watts, link failures, line rates) stay the profile's.

A baseline is made from one run or several (:func:`baseline_of`: the same profile, each
run's chosen nodes accepted). Per (check, metric): ``ref`` is the median of the chosen
nodes' figures over every run (a check launched across the nodes measured one figure for
the whole job: it is taken once per run). How much that rests on (nodes, runs, each
figure's spread against its band) is ``rackgate.baseline_sample``'s to say. The pass band
keeps the profile's direction (a floor stays ``min_ratio``, a ceiling ``max_ratio``) at
``tolerance`` from the median, widened where needed so that every chosen node passes its own
baseline. A physical limit (``limit: true``) is kept as ``ceiling``: figures above it stay
implausible evidence. The document is validated as overrides over the run's profile before
it is returned.

>>> band(100.0, [96.0, 100.0, 104.0], 0.10, floor=True)
0.9
>>> band(100.0, [85.5, 100.0], 0.10, floor=True)  # widened: the lowest node passes
0.855
>>> band(2.0, [1.9, 2.5], 0.10, floor=False)
1.25
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rackgate.baseline_input import (
    BaselineError,
    GoldenRun,
    figure_of,
    golden_run,
    inventory_notes,
    names,
)
from rackgate.checks import REGISTRY
from rackgate.figures import figure, with_unit
from rackgate.placement import ACROSS_NODES, placement_of
from rackgate.profile import ProfileError, Threshold

__all__ = [
    "DEFAULT_TOLERANCE",
    "Baseline",
    "BaselineError",
    "Baselined",
    "band",
    "baseline",
    "baseline_of",
]

DEFAULT_TOLERANCE = 0.10
RATIO_STEP = 0.001  # pass ratios are written to three decimals, rounded outwards


@dataclass(frozen=True)
class Baselined:
    """One threshold of a baseline: a check's metric, the figures it was made from (node,
    value; one entry per run for a job across the nodes) and the threshold that replaces
    the profile's."""

    check: str
    metric: str
    figures: tuple[tuple[str, float], ...]
    threshold: Threshold
    job: bool = False  # a check launched across the nodes: its one figure, taken once a run

    @property
    def spread_pct(self) -> float | None:
        """The figures' range as a percentage of their median (None: a single figure)."""
        values = [v for _, v in self.figures]
        if len(values) < 2:
            return None
        return 100 * (max(values) - min(values)) / statistics.median(values)


@dataclass(frozen=True)
class Baseline:
    """Profile overrides made from the golden nodes of one run or several."""

    run_id: str  # the runs' ids, comma-separated
    profile: str  # the runs' profile name
    profile_sha256: str
    nodes: tuple[str, ...]  # every golden node, in the order the runs name them
    collected: str  # when the runs' evidence was collected (each one's finished, else started)
    tolerance: float
    thresholds: tuple[Baselined, ...]
    left_out: tuple[tuple[str, str], ...]  # (check, why it was not baselined)
    notes: tuple[str, ...]  # what the reader must know when using it
    runs: int = 1  # how many runs it was made from

    def document(self) -> dict[str, Any]:
        """The overrides document: ``checks.<check>.thresholds.<metric>``, every field of
        the threshold written out (a null replaces the profile's value in the merge)."""
        checks: dict[str, Any] = {}
        for b in self.thresholds:
            section = checks.setdefault(b.check, {"thresholds": {}})
            section["thresholds"][b.metric] = b.threshold.model_dump()
        return {"checks": checks}


def band(ref: float, figures: Sequence[float], tolerance: float, floor: bool) -> float:
    """A pass ratio of ``ref``: ``1 - tolerance`` for a floor (``1 + tolerance`` for a
    ceiling), widened to the lowest (highest) figure so that every figure passes, in
    thousandths rounded outwards."""
    steps = 1 / RATIO_STEP
    if floor:
        ratio = min(round(1 - tolerance, 6), math.floor(min(figures) / ref * steps) / steps)
        while ref * ratio > min(figures):  # float rounding must never fail a golden node
            ratio = round(ratio - RATIO_STEP, 6)
    else:
        ratio = max(round(1 + tolerance, 6), math.ceil(max(figures) / ref * steps) / steps)
        while ref * ratio < max(figures):
            ratio = round(ratio + RATIO_STEP, 6)
    return ratio


def _why_not(check: str, thresholds: Sequence[str]) -> str:
    if check not in REGISTRY:
        return "a rack-level judgement over the other results, not a measurement"
    if thresholds:
        return (f"its thresholds ({', '.join(thresholds)}) are limits (safety, health, counts "
                "or line rates), not site figures")
    return "judged without thresholds: no figure to baseline"


@dataclass(frozen=True)
class _Source:
    """What every threshold's basis says of the runs, and how many there are."""

    runs: tuple[GoldenRun, ...]

    @property
    def text(self) -> str:
        if len(self.runs) == 1:
            return self.runs[0].text
        return "runs " + " and ".join(r.text.removeprefix("run ") for r in self.runs)

    @property
    def named(self) -> str:
        """``run X``, or ``runs X, Y``: how errors name them."""
        ids = [r.run_id for r in self.runs]
        return f"run{'s' if len(ids) > 1 else ''} {', '.join(ids)}"

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for r in self.runs for n in r.nodes))


def _stat(values: Sequence[float], unit: str, source: _Source, job: str | None
          ) -> tuple[str, str]:
    """The statistic a basis names (with its spread) and what the band is a ratio of."""
    if len(values) == 1:
        if job is not None:
            return (f"the job's one figure {with_unit(values[0], unit)} (a check across the "
                    f"nodes measures the whole job once: nodes {job})", "the figure")
        return f"the figure of 1 node, {with_unit(values[0], unit)} (one node: no spread)", \
            "the figure"
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    spread = figure(100 * (max(values) - min(values)) / med)
    runs = len(source.runs)
    of = (f"{len(values)} nodes" if runs == 1 else
          f"{len(values)} jobs, one a run (a check across the nodes measures the whole job "
          f"once: nodes {job})" if job is not None else
          f"{len(values)} figures of {len(source.nodes)} nodes in {runs} runs")
    return (f"median of {of} {with_unit(med, unit)}, range {figure(min(values))}-"
            f"{with_unit(max(values), unit)}, MAD {with_unit(mad, unit)} (spread {spread}% of "
            f"the median)", "median")


def _basis(values: Sequence[float], ratios: Mapping[str, float | None], old: Threshold,
           source: _Source, tolerance: float, job: str | None) -> str:
    """Where a baselined threshold comes from: the runs, their nodes and dates, the
    statistic and its spread, the pass band, the profile's figure it replaces and, where
    the profile has one, the physical ceiling that stays."""
    unit = old.unit
    stat, what = _stat(values, unit, source, job)
    bounds = []
    lo, hi = ratios["min_ratio"], ratios["max_ratio"]
    if lo is not None:
        widened = "" if lo >= round(1 - tolerance, 6) else \
            f", widened so the lowest, {with_unit(min(values), unit)}, passes"
        bounds.append(f">= {figure(lo)} x {what}{widened}")
    if hi is not None:
        widened = "" if hi <= round(1 + tolerance, 6) else \
            f", widened so the highest, {with_unit(max(values), unit)}, passes"
        bounds.append(f"<= {figure(hi)} x {what}{widened}")
    text = (f"site baseline from {source.text}: {stat}; pass at {' and '.join(bounds)} "
            f"(tolerance {figure(100 * tolerance)}%). It replaces the profile's ref "
            f"{with_unit(old.ref, unit)}")
    if old.plausible_max is not None:
        text += (f". Ceiling {with_unit(old.plausible_max, unit)}: the profile's physical "
                 f"limit, above which a figure is implausible evidence "
                 f"({' '.join(old.basis.split())})")
    return text


def _figures(check: str, metric: str, source_key: str, unit: str, source: _Source,
             per_run: Sequence[tuple[GoldenRun, Mapping[str, Mapping[str, Any]]]],
             job: bool) -> list[tuple[str, float]]:
    """The (node, figure) pairs of one metric over every run (a job: one a run)."""
    out: list[tuple[str, float]] = []
    for run, per_node in per_run:
        figures = [(n, figure_of(r, source_key, f"run {run.run_id} node {n} check {check} "
                                                f"metric {metric}", unit))
                   for n, r in per_node.items()]
        in_run = "" if len(source.runs) == 1 else f" in run {run.run_id}"
        if job:
            if len({v for _, v in figures}) > 1:
                got = ", ".join(f"{n} {with_unit(v, unit)}" for n, v in figures)
                raise BaselineError(f"run {run.run_id} check {check} metric {metric}: the "
                                    f"nodes of one job report different figures ({got}): "
                                    "not one job's evidence")
            figures = [(f"job across {run.job_nodes(check)}{in_run}", figures[0][1])]
        out += [(f"{n}{in_run}", v) for n, v in figures] if not job else figures
    return out


def _baseline_check(check: str,
                    per_run: Sequence[tuple[GoldenRun, Mapping[str, Mapping[str, Any]]]],
                    thresholds: Mapping[str, Threshold], source: _Source,
                    tolerance: float) -> list[Baselined] | str:
    """The check's baselined thresholds, or why it was left out."""
    declared = [(m, src) for m, src in REGISTRY[check].baseline if m in thresholds]
    if not declared:
        metrics = ", ".join(m for m, _ in REGISTRY[check].baseline)
        return f"the profile sets no threshold for {metrics}"
    results = [(run.run_id, n, r) for run, per_node in per_run for n, r in per_node.items()]
    skipped = [(n, r) for _, n, r in results if r.get("status") == "skip"]
    if len(skipped) == len(results):
        node, r = skipped[0]
        return f"skipped on every chosen node ({node}: {r.get('message')})"
    job = placement_of(REGISTRY[check]) is ACROSS_NODES
    jobs = "; ".join(f"{run.job_nodes(check)}" for run, _ in per_run) if job else None
    out = []
    for metric, key in declared:
        old = thresholds[metric]
        figures = _figures(check, metric, key, old.unit, source, per_run, job)
        values = [v for _, v in figures]
        ref = float(f"{statistics.median(values):.6g}")
        if ref <= 0:
            raise BaselineError(f"{source.named} check {check} metric {metric}: "
                                f"the median is {with_unit(ref, old.unit)}: no pass band is a "
                                "ratio of it")
        if old.plausible_max is not None and ref > old.plausible_max:
            raise BaselineError(
                f"{source.named} check {check} metric {metric}: the median "
                f"{with_unit(ref, old.unit)} is above the profile's physical limit "
                f"{with_unit(old.plausible_max, old.unit)}: the evidence or the profile's "
                "limit is wrong, and no baseline may sit above a physical limit")
        ratios = {
            "min_ratio": None if old.min_ratio is None else band(ref, values, tolerance, True),
            "max_ratio": None if old.max_ratio is None else band(ref, values, tolerance, False)}
        basis = _basis(values, ratios, old, source, tolerance, jobs)
        out.append(Baselined(check, metric, tuple(figures), Threshold(
            unit=old.unit, ref=ref, min_ratio=ratios["min_ratio"],
            max_ratio=ratios["max_ratio"], limit=False, ceiling=old.plausible_max,
            basis=basis), job))
    return out


def _golden_runs(reports: Sequence[Mapping[str, Any]],
                 nodes: Sequence[str] | None) -> tuple[GoldenRun, ...]:
    """Each report as a golden run; several must share one profile and each run name one
    of ``nodes`` (every name in one run at least)."""
    if not reports:
        raise BaselineError("no run to baseline")
    runs = tuple(golden_run(r, nodes, elsewhere=len(reports) > 1) for r in reports)
    seen = [r.run_id for r in runs]
    if len(set(seen)) != len(seen):
        twice = sorted({i for i in seen if seen.count(i) > 1})
        raise BaselineError(f"run {', '.join(twice)} is given twice: a second copy of a run "
                            "is not a second run")
    first = runs[0]
    for r in runs[1:]:
        if r.profile.sha256 != first.profile.sha256:
            raise BaselineError(
                f"run {r.run_id} was collected with profile {r.profile.name} (sha256 "
                f"{r.profile.sha256[:12]}), run {first.run_id} with {first.profile.name} "
                f"(sha256 {first.profile.sha256[:12]}): a baseline is made over one profile")
    missing = [n for n in nodes or () if not any(n in r.results for r in runs)]
    if missing:
        raise BaselineError(f"node(s) {', '.join(missing)} are in none of runs "
                            f"{', '.join(seen)}")
    return runs


def baseline(report: Mapping[str, Any], nodes: Sequence[str] | None = None,
             tolerance: float = DEFAULT_TOLERANCE) -> Baseline:
    """The baseline of ``nodes`` (default: every node) of the run ``report`` records:
    :func:`baseline_of` one run."""
    return baseline_of([report], nodes, tolerance)


def baseline_of(reports: Sequence[Mapping[str, Any]], nodes: Sequence[str] | None = None,
                tolerance: float = DEFAULT_TOLERANCE) -> Baseline:
    """The baseline of ``nodes`` (default: every node) of the runs ``reports`` record.

    BaselineError for a report that is not a run's, runs of different profiles or given
    twice, a node in none of them or not accepted, a baselined metric without a finite
    figure on a chosen node, a median above a physical limit, or a document that the
    runs' profile refuses as overrides."""
    if not 0 < tolerance < 1:
        raise BaselineError(f"tolerance {tolerance} must be above 0 and below 1 (0.10: pass "
                            "at >= 0.9 x the median)")
    source = _Source(_golden_runs(reports, nodes))
    profile = source.runs[0].profile
    checks = list(dict.fromkeys(c for run in source.runs for rs in run.results.values()
                                for c in rs))
    baselined: list[Baselined] = []
    left_out: list[tuple[str, str]] = []
    for check in checks:
        cp = profile.check(check)
        thresholds = dict(cp.thresholds) if cp is not None else {}
        if check not in REGISTRY or not REGISTRY[check].baseline:
            left_out.append((check, _why_not(check, sorted(thresholds))))
            continue
        per_run = []
        for run in source.runs:
            have = {n: rs[check] for n, rs in run.results.items() if check in rs}
            missing = [n for n in run.nodes if n not in have]
            if have and missing:
                raise BaselineError(f"run {run.run_id} check {check}: no result on chosen "
                                    f"node(s) {', '.join(missing)}: no figure to baseline")
            if have:
                per_run.append((run, have))
        made = _baseline_check(check, per_run, thresholds, source, tolerance)
        if isinstance(made, str):
            left_out.append((check, made))
        else:
            baselined += made
    if not baselined:
        raise BaselineError(f"{source.named}: no figure to baseline on "
                            f"{names(source.nodes)} ("
                            + "; ".join(f"{c}: {why}" for c, why in left_out) + ")")
    keys = [(b.check, b.metric) for b in baselined]
    notes = [note for run in source.runs for note in inventory_notes(run.hosts, keys)]
    made_baseline = Baseline(
        ", ".join(r.run_id for r in source.runs), profile.name, profile.sha256, source.nodes,
        ", ".join(r.collected for r in source.runs), tolerance, tuple(baselined),
        tuple(left_out), tuple(dict.fromkeys(notes)), len(source.runs))
    try:
        profile.with_overrides(made_baseline.document(),
                               f"the baseline of {source.named}")
    except ProfileError as exc:
        raise BaselineError(str(exc)) from None
    return made_baseline
