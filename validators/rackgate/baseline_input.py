"""What a site baseline is made from: one judged run's report document read as a golden run
(``rackgate.baseline``). Pure: a report document in, a :class:`GoldenRun` out, or a
:class:`BaselineError` naming the run, node, check and field.

A golden run is a run's report judged with the run's own profile (its manifest records it),
and its chosen nodes: every node, or those ``--nodes`` names; each must be accepted.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rackgate.checks import profile_from_document
from rackgate.profile import Profile, ProfileError
from rackgate.refusal import Refusal
from rackgate.reports import SCHEMA as REPORT_SCHEMA
from rackgate.store.manifest import HostEntry, Launched, Manifest

MAX_NAMED = 8  # a basis names at most this many nodes; the header names them all


class BaselineError(Refusal, ValueError):
    """Why no baseline can be made from a run, naming the run, node, check and figure."""


def names(nodes: Sequence[str]) -> str:
    """Nodes as a basis names them: at most ``MAX_NAMED``, then how many more."""
    if len(nodes) <= MAX_NAMED:
        return ", ".join(nodes)
    return f"{', '.join(nodes[:MAX_NAMED - 2])} and {len(nodes) - MAX_NAMED + 2} more"


def field(doc: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise BaselineError(f"{where}: field {key} must be a {kind.__name__}, got "
                            f"{type(value).__name__}")
    return value


@dataclass(frozen=True)
class GoldenRun:
    """One run's part of a baseline: its id, when it was collected, the profile it was
    judged with, the chosen nodes' results per check, what it launched across the nodes
    and its hosts (with their inventory overrides) as the manifest records them."""

    run_id: str
    collected: str
    profile: Profile
    results: Mapping[str, Mapping[str, Mapping[str, Any]]]  # node -> check -> result
    launched: Mapping[str, Launched]
    hosts: Sequence[HostEntry]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.results)

    @property
    def text(self) -> str:
        """The run as a basis names it: id, nodes and date."""
        return (f"run {self.run_id} (node{'s' if len(self.nodes) > 1 else ''} "
                f"{names(self.nodes)}; collected {self.collected})")

    def job_nodes(self, check: str) -> str:
        """The nodes the run's job of ``check`` (launched across the nodes) ran on."""
        rec = self.launched.get(check)
        return names(list(rec.nodes) if rec is not None and rec.nodes else list(self.nodes))


def _chosen(report: Mapping[str, Any], run_id: str, wanted: Sequence[str] | None,
            elsewhere: bool) -> list[Mapping[str, Any]]:
    """The chosen nodes' entries, in the report's order: each must be in the run and
    accepted (a golden node). With ``elsewhere`` (several runs) a wanted node may be in
    another run instead, but the run must have one of them."""
    nodes = field(report, "nodes", list, "report.json")
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
        if unknown and (not elsewhere or len(unknown) == len(wanted)):
            what = "none of the nodes --nodes names" if elsewhere else \
                f"node(s) {', '.join(unknown)} are not in run {run_id}"
            raise BaselineError(f"{what}{f' are in run {run_id}' if elsewhere else ''} (its "
                                f"nodes: {names(sorted(by_name))})")
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
                                    f"({names(accepted)})" if accepted
                                    else "The run accepted no node"))
    return chosen


def _results(node: Mapping[str, Any], run_id: str) -> dict[str, Mapping[str, Any]]:
    results = field(node, "results", list, f"run {run_id} node {node['name']}")
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


def golden_run(report: Mapping[str, Any], wanted: Sequence[str] | None = None, *,
               elsewhere: bool = False) -> GoldenRun:
    """The golden run ``report`` records: BaselineError for a report that is not a run's,
    one judged with another profile than the run's, a wanted node not in it (with
    ``elsewhere``: when none is) or one that was not accepted."""
    if report.get("schema") != REPORT_SCHEMA:
        raise BaselineError(f"report.json: schema {report.get('schema')!r}, expected "
                            f"{REPORT_SCHEMA}")
    try:
        manifest = Manifest.from_doc(report.get("run"), "report.json: field run (the run's "
                                                        "manifest)")
    except Refusal as exc:
        raise BaselineError(str(exc)) from None
    run_id = manifest.run_id
    recorded, judged = manifest.profile, field(report, "profile", dict, "report.json")
    if judged.get("sha256") != recorded.sha256:
        raise BaselineError(
            f"run {run_id}: report.json was judged with profile {judged.get('source')} "
            f"(sha256 {str(judged.get('sha256'))[:12]}), not the run's own "
            f"{recorded.source} (sha256 {str(recorded.sha256)[:12]}): judge it "
            "with its own profile first (rackgate judge RUN_DIR)")
    try:
        profile = profile_from_document(recorded.document, f"{recorded.source} (as "
                                                           f"recorded in run {run_id})")
    except ProfileError as exc:
        raise BaselineError(str(exc)) from None
    collected = manifest.finished or manifest.started
    if collected is None:
        raise BaselineError(f"report.json of run {run_id}: field run.finished or run.started "
                            "must say when the run was collected")
    chosen = _chosen(report, run_id, wanted, elsewhere)
    return GoldenRun(run_id, collected, profile,
                     {n["name"]: _results(n, run_id) for n in chosen},
                     manifest.launched, manifest.hosts)


def figure_of(result: Mapping[str, Any], source: str, where: str, unit: str) -> float:
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


def inventory_notes(hosts: Sequence[HostEntry],
                    baselined: Sequence[tuple[str, str]]) -> list[str]:
    """Hosts whose inventory overrides a baselined (check, metric): theirs is merged after."""
    notes = []
    for h in hosts:
        over = h.profile_overrides
        checks = over.get("checks") if over is not None else None
        if not isinstance(checks, dict):
            continue
        hit = [f"{check}.{metric}" for check, metric in baselined
               if metric in ((checks.get(check) or {}).get("thresholds") or {})]
        if hit:
            notes.append(f"host {h.name} overrides {', '.join(hit)} in the inventory "
                         "(rackgate_profile_overrides): its own threshold is merged after "
                         "this baseline and wins")
    return notes
