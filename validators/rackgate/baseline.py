"""A site baseline: profile overrides whose references are the figures a site's own golden
nodes measured (``rackgate baseline``), so that ``validate --overrides`` judges every
other node against the site's numbers instead of the profile's nominal ones.

Pure: a report document (``report.json``, schema ``rackgate.report/1``) in, a
:class:`Baseline` out (:meth:`Baseline.document` is the overrides document, which
``rackgate.cli_baseline.overrides_yaml`` writes as YAML). Only the benchmark figures a
check declares (``Check.baseline``: metric -> "measured" or a details key) are baselined;
limits (cooling temperatures, PSU watts, link failures, line rates) stay the profile's.

Per (check, metric): ``ref`` is the median of the chosen nodes' figures (a check launched
across the nodes measured one figure for the whole job: it is taken once). The pass band
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
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rackgate.checks import REGISTRY, profile_from_document
from rackgate.figures import figure, with_unit
from rackgate.placement import ACROSS_NODES, placement_of
from rackgate.profile import ProfileError, Threshold
from rackgate.reports import SCHEMA as REPORT_SCHEMA
from rackgate.store.manifest import manifest_problem

DEFAULT_TOLERANCE = 0.10
RATIO_STEP = 0.001  # pass ratios are written to three decimals, rounded outwards
MAX_NAMED = 8  # a basis names at most this many nodes; the header names them all


class BaselineError(ValueError):
    """Why no baseline can be made from a run, naming the run, node, check and figure."""


@dataclass(frozen=True)
class Baselined:
    """One threshold of a baseline: a check's metric, the figures it was made from (node,
    value; one entry for a job across the nodes) and the threshold that replaces the
    profile's."""

    check: str
    metric: str
    figures: tuple[tuple[str, float], ...]
    threshold: Threshold
    job: bool = False  # a check launched across the nodes: its one figure, taken once


@dataclass(frozen=True)
class Baseline:
    """Profile overrides made from a run's golden nodes."""

    run_id: str
    profile: str  # the run's profile name
    profile_sha256: str
    nodes: tuple[str, ...]
    collected: str  # when the run's evidence was collected (its finished, else started)
    tolerance: float
    thresholds: tuple[Baselined, ...]
    left_out: tuple[tuple[str, str], ...]  # (check, why it was not baselined)
    notes: tuple[str, ...]  # what the reader must know when using it

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


def _field(doc: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise BaselineError(f"{where}: field {key} must be a {kind.__name__}, got "
                            f"{type(value).__name__}")
    return value


def _names(nodes: Sequence[str]) -> str:
    if len(nodes) <= MAX_NAMED:
        return ", ".join(nodes)
    return f"{', '.join(nodes[:MAX_NAMED - 2])} and {len(nodes) - MAX_NAMED + 2} more"


def _chosen(report: Mapping[str, Any], run_id: str,
            wanted: Sequence[str] | None) -> list[Mapping[str, Any]]:
    """The chosen nodes' entries, in the report's order: each must be in the run and
    accepted (a golden node)."""
    nodes = _field(report, "nodes", list, "report.json")
    by_name: dict[str, Any] = {n["name"]: n for n in nodes
                               if isinstance(n, dict) and isinstance(n.get("name"), str)}
    if len(by_name) != len(nodes):
        raise BaselineError(f"report.json of run {run_id}: field nodes names a node twice "
                            "or has an entry without a name")
    if wanted is not None:
        if not wanted:
            raise BaselineError("--nodes names no node")
        twice = sorted(n for n, count in Counter(wanted).items() if count > 1)
        unknown = [n for n in wanted if n not in by_name]
        if twice:
            raise BaselineError(f"--nodes names {', '.join(twice)} twice")
        if unknown:
            raise BaselineError(f"node(s) {', '.join(unknown)} are not in run {run_id} (its "
                                f"nodes: {_names(sorted(by_name))})")
    picked = set(wanted or ())
    chosen = nodes if wanted is None else [n for n in nodes if n["name"] in picked]
    rejected = [n for n in chosen if n.get("verdict") != "ACCEPT"]
    if rejected:
        accepted = [n["name"] for n in nodes if n.get("verdict") == "ACCEPT"]
        why = "; ".join(f"{n['name']}: {n.get('verdict')} ("
                        f"{'; '.join(str(r) for r in (n.get('reasons') or [])[:3])})"
                        for n in rejected[:5])
        raise BaselineError(
            f"run {run_id}: a golden node must be accepted, and {len(rejected)} chosen node(s) "
            f"were not: {why}. " + (f"Choose accepted nodes with --nodes "
                                    f"({_names(accepted)})" if accepted
                                    else "The run accepted no node"))
    return chosen


def _results(node: Mapping[str, Any], run_id: str) -> dict[str, Mapping[str, Any]]:
    results = _field(node, "results", list, f"run {run_id} node {node['name']}")
    out: dict[str, Mapping[str, Any]] = {}
    for r in results:
        check = r.get("check") if isinstance(r, dict) else None
        if not isinstance(check, str):
            raise BaselineError(f"run {run_id} node {node['name']}: a result without a check")
        if check in out:
            raise BaselineError(f"run {run_id} node {node['name']}: check {check} has two "
                                "results: not one judgement's report")
        out[check] = r
    return out


def _figure(result: Mapping[str, Any], source: str, where: str, unit: str) -> float:
    """A result's figure from ``source`` ("measured" or a details key): a finite number."""
    if source == "measured":
        value, named = result.get("measured"), "measured"
        if value is not None and result.get("unit") != unit:
            raise BaselineError(f"{where}: measured in {result.get('unit')!r}, the profile's "
                                f"threshold is in {unit!r}")
    else:
        details = result.get("details")
        value = details.get(source) if isinstance(details, dict) else None
        named = f"details.{source}"
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value):
        raise BaselineError(f"{where}: no finite figure ({named} is {value!r}; status "
                            f"{result.get('status')}: {result.get('message')})")
    return float(value)


def _why_not(check: str, thresholds: Sequence[str]) -> str:
    if check not in REGISTRY:
        return "a rack-level judgement over the other results, not a measurement"
    if thresholds:
        return (f"its thresholds ({', '.join(thresholds)}) are limits (safety, health, counts "
                "or line rates), not site figures")
    return "judged without thresholds: no figure to baseline"


def _basis(values: Sequence[float], ratios: Mapping[str, float | None], old: Threshold,
           run: str, tolerance: float, job: str | None) -> str:
    """Where a baselined threshold comes from: the run, its nodes and date (``run``), the
    statistic and its spread, the pass band, the profile's figure it replaces and, where
    the profile has one, the physical ceiling that stays."""
    unit = old.unit
    if job is not None:
        stat = (f"the job's one figure {with_unit(values[0], unit)} (a check across the "
                f"nodes measures the whole job once: nodes {job})")
        what = "the figure"
    elif len(values) == 1:
        stat = f"the figure of 1 node, {with_unit(values[0], unit)} (one node: no spread)"
        what = "the figure"
    else:
        med = statistics.median(values)
        mad = statistics.median(abs(v - med) for v in values)
        spread = figure(100 * (max(values) - min(values)) / med)
        stat = (f"median of {len(values)} nodes {with_unit(med, unit)}, range "
                f"{figure(min(values))}-{with_unit(max(values), unit)}, MAD "
                f"{with_unit(mad, unit)} (spread {spread}% of the median)")
        what = "median"
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
    text = (f"site baseline from {run}: {stat}; pass at {' and '.join(bounds)} (tolerance "
            f"{figure(100 * tolerance)}%). It replaces the profile's ref "
            f"{with_unit(old.ref, unit)}")
    if old.plausible_max is not None:
        text += (f". Ceiling {with_unit(old.plausible_max, unit)}: the profile's physical "
                 f"limit, above which a figure is implausible evidence "
                 f"({' '.join(old.basis.split())})")
    return text


@dataclass(frozen=True)
class _Run:
    """What every threshold's basis says of the run: id, nodes and date."""

    run_id: str
    nodes: tuple[str, ...]
    collected: str
    launched: Mapping[str, Any]

    @property
    def text(self) -> str:
        return (f"run {self.run_id} (node{'s' if len(self.nodes) > 1 else ''} "
                f"{_names(self.nodes)}; collected {self.collected})")

    def job_nodes(self, check: str, results: Sequence[str]) -> str:
        rec = self.launched.get(check)
        nodes = rec.get("nodes") if isinstance(rec, dict) else None
        return _names([str(n) for n in nodes] if isinstance(nodes, list) and nodes
                      else list(results))


def _baseline_check(check: str, per_node: Mapping[str, Mapping[str, Any]],
                    thresholds: Mapping[str, Threshold], run: _Run,
                    tolerance: float) -> list[Baselined] | str:
    """The check's baselined thresholds, or why it was left out."""
    declared = [(m, src) for m, src in REGISTRY[check].baseline if m in thresholds]
    if not declared:
        names = ", ".join(m for m, _ in REGISTRY[check].baseline)
        return f"the profile sets no threshold for {names}"
    skipped = {n: r for n, r in per_node.items() if r.get("status") == "skip"}
    if len(skipped) == len(per_node):
        node, r = next(iter(skipped.items()))
        return f"skipped on every chosen node ({node}: {r.get('message')})"
    job = placement_of(REGISTRY[check]) is ACROSS_NODES
    out = []
    for metric, source in declared:
        old = thresholds[metric]
        figures = [(n, _figure(r, source, f"run {run.run_id} node {n} check {check} metric "
                                          f"{metric}", old.unit)) for n, r in per_node.items()]
        if job:
            if len({v for _, v in figures}) > 1:
                got = ", ".join(f"{n} {with_unit(v, old.unit)}" for n, v in figures)
                raise BaselineError(f"run {run.run_id} check {check} metric {metric}: the "
                                    f"nodes of one job report different figures ({got}): "
                                    "not one job's evidence")
            figures = [(f"job across {run.job_nodes(check, list(per_node))}", figures[0][1])]
        values = [v for _, v in figures]
        ref = float(f"{statistics.median(values):.6g}")
        if ref <= 0:
            raise BaselineError(f"run {run.run_id} check {check} metric {metric}: the median "
                                f"is {with_unit(ref, old.unit)}: no pass band is a ratio of it")
        if old.plausible_max is not None and ref > old.plausible_max:
            raise BaselineError(
                f"run {run.run_id} check {check} metric {metric}: the median "
                f"{with_unit(ref, old.unit)} is above the profile's physical limit "
                f"{with_unit(old.plausible_max, old.unit)}: the evidence or the profile's "
                "limit is wrong, and no baseline may sit above a physical limit")
        ratios = {
            "min_ratio": None if old.min_ratio is None else band(ref, values, tolerance, True),
            "max_ratio": None if old.max_ratio is None else band(ref, values, tolerance, False)}
        basis = _basis(values, ratios, old, run.text, tolerance,
                       run.job_nodes(check, list(per_node)) if job else None)
        out.append(Baselined(check, metric, tuple(figures), Threshold(
            unit=old.unit, ref=ref, min_ratio=ratios["min_ratio"],
            max_ratio=ratios["max_ratio"], limit=False, ceiling=old.plausible_max,
            basis=basis), job))
    return out


def _inventory_notes(hosts: Any, baselined: Sequence[Baselined]) -> list[str]:
    """Hosts whose inventory overrides a baselined threshold: theirs is merged after."""
    notes = []
    for h in hosts if isinstance(hosts, list) else []:
        over = h.get("profile_overrides") if isinstance(h, dict) else None
        checks = over.get("checks") if isinstance(over, dict) else None
        if not isinstance(checks, dict):
            continue
        hit = [f"{b.check}.{b.metric}" for b in baselined
               if b.metric in ((checks.get(b.check) or {}).get("thresholds") or {})]
        if hit:
            notes.append(f"host {h.get('name')} overrides {', '.join(hit)} in the inventory "
                         "(rackgate_profile_overrides): its own threshold is merged after "
                         "this baseline and wins")
    return notes


def baseline(report: Mapping[str, Any], nodes: Sequence[str] | None = None,
             tolerance: float = DEFAULT_TOLERANCE) -> Baseline:
    """The baseline of ``nodes`` (default: every node) of the run ``report`` records.

    BaselineError for a report that is not a run's, a node not in it or not accepted, a
    baselined metric without a finite figure on a chosen node, a median above a physical
    limit, or a document that the run's profile refuses as overrides."""
    if not 0 < tolerance < 1:
        raise BaselineError(f"tolerance {tolerance} must be above 0 and below 1 (0.10: pass "
                            "at >= 0.9 x the median)")
    if report.get("schema") != REPORT_SCHEMA:
        raise BaselineError(f"report.json: schema {report.get('schema')!r}, expected "
                            f"{REPORT_SCHEMA}")
    manifest: Any = report.get("run")
    if problem := manifest_problem(manifest):
        raise BaselineError(f"report.json: field run (the run's manifest): {problem}")
    run_id = manifest["run_id"]
    recorded, judged = manifest["profile"], _field(report, "profile", dict, "report.json")
    if judged.get("sha256") != recorded.get("sha256"):
        raise BaselineError(
            f"run {run_id}: report.json was judged with profile {judged.get('source')} "
            f"(sha256 {str(judged.get('sha256'))[:12]}), not the run's own "
            f"{recorded.get('source')} (sha256 {str(recorded.get('sha256'))[:12]}): judge it "
            "with its own profile first (rackgate judge RUN_DIR)")
    try:
        profile = profile_from_document(recorded["document"], f"{recorded['source']} (as "
                                                              f"recorded in run {run_id})")
    except ProfileError as exc:
        raise BaselineError(str(exc)) from None
    collected = manifest.get("finished") or manifest.get("started")
    if not isinstance(collected, str):
        raise BaselineError(f"report.json of run {run_id}: field run.finished or run.started "
                            "must say when the run was collected")
    chosen = _chosen(report, run_id, nodes)
    run = _Run(run_id, tuple(n["name"] for n in chosen), collected,
               manifest.get("launched") or {})
    results = {n["name"]: _results(n, run_id) for n in chosen}
    checks = list(dict.fromkeys(c for r in results.values() for c in r))
    baselined: list[Baselined] = []
    left_out: list[tuple[str, str]] = []
    for check in checks:
        cp = profile.check(check)
        thresholds = dict(cp.thresholds) if cp is not None else {}
        if check not in REGISTRY or not REGISTRY[check].baseline:
            left_out.append((check, _why_not(check, sorted(thresholds))))
            continue
        missing = [n for n, r in results.items() if check not in r]
        if missing:
            raise BaselineError(f"run {run_id} check {check}: no result on chosen node(s) "
                                f"{', '.join(missing)}: no figure to baseline")
        made = _baseline_check(check, {n: r[check] for n, r in results.items()}, thresholds,
                               run, tolerance)
        if isinstance(made, str):
            left_out.append((check, made))
        else:
            baselined += made
    if not baselined:
        raise BaselineError(f"run {run_id}: no figure to baseline on {_names(run.nodes)} ("
                            + "; ".join(f"{c}: {why}" for c, why in left_out) + ")")
    made_baseline = Baseline(run_id, profile.name, profile.sha256, run.nodes, collected,
                             tolerance, tuple(baselined), tuple(left_out),
                             tuple(_inventory_notes(manifest.get("hosts"), baselined)))
    try:
        profile.with_overrides(made_baseline.document(), f"the baseline of run {run_id}")
    except ProfileError as exc:
        raise BaselineError(str(exc)) from None
    return made_baseline
