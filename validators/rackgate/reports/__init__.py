"""Reports read results and the run manifest; they never re-run or re-judge anything.

``report_document`` builds the JSON report (schema ``rackgate.report/1``, see
docs/report-schema.md); the HTML report is rendered from that same document, so the
two cannot disagree. Every threshold an override changed is in it (``profile.changes``,
``nodes[].threshold_changes``), and :func:`changed_thresholds` is how the HTML, Markdown and
JUnit reports list them. ``rack_reasons`` are the verdict's reasons each once
(rackgate.reports.reasons); a result of a check that judged several metrics carries each in
``metrics`` (:func:`shown_metrics`: the order the reports show them in). The overrides files it was
judged with are ``profile.overrides``, and :func:`overrides_line` is how those reports name
them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rackgate.documents import DocumentError, load_json
from rackgate.model import SHOWN_FIRST, RackVerdict, Result, Status
from rackgate.profile import Profile
from rackgate.refusal import Refusal
from rackgate.reports.reasons import MAX_NAMED as MAX_NAMED
from rackgate.reports.reasons import named as named
from rackgate.reports.reasons import of_rack
from rackgate.store.evidence import attempt_of
from rackgate.store.manifest import revisions_of

SCHEMA = "rackgate.report/1"


def _profile_doc(profile: Profile) -> dict[str, Any]:
    gpu = profile.model.hardware.gpu
    cap = gpu.power_cap if gpu is not None else None
    return {
        "name": profile.name,
        "source": profile.source,
        "sha256": profile.sha256,
        "description": profile.model.description,
        # the site's GPU power cap the rack is accepted at (hardware.PowerCap), or None
        "gpu_power_cap": None if cap is None else {"model": gpu.model if gpu else "",
                                                   **cap.model_dump()},
        "checks": {name: cp.model_dump() for name, cp in profile.model.checks.items()},
        "rack": {name: cp.model_dump() for name, cp in profile.model.rack.items()},
        # every threshold an overrides file changed, old and new (ThresholdChange.to_doc)
        "changes": [c.to_doc() for c in profile.changes],
        # the overrides files judged with, in the order merged (none: the profile alone)
        "overrides": [{"path": path, "sha256": digest}
                      for path, digest in profile.overrides_files],
    }


def _own_changes(node_profile: Profile, profile: Profile) -> list[dict[str, Any]]:
    """The thresholds a node's inventory overrides changed beyond the rack's profile."""
    return [c.to_doc() for c in node_profile.changes if c not in profile.changes]


def _result_doc(r: Result, evidence_sha256: Mapping[tuple[str, str], str],
                durations: Mapping[tuple[str, str], float]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "check": r.check,
        "status": r.status.label,
        "message": r.message,
        "measured": r.measured,
        "unit": r.unit,
        "expected": r.expected,
        "percent_of_limit": r.percent_of_limit,
        "evidence": r.evidence,
        "evidence_sha256": evidence_sha256.get((r.node, r.check)),
        "attempt": attempt_of(r.evidence) if r.evidence else None,
        "duration_s": durations.get((r.node, r.check)),
        "details": r.details,
    }
    if r.metrics:  # a check judging several metrics: each with its figure, band, status
        doc["metrics"] = [m.to_doc() for m in r.metrics]
    return doc


def shown_metrics(r: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A result's metrics as the reports show them: the failing figure first, then the
    ones not measured, the warnings, and what passed (``rackgate.model.SHOWN_FIRST``);
    ``[]`` for a result judged on one figure (its ``measured`` and ``expected``)."""
    order = [s.label for s in SHOWN_FIRST]
    metrics = r.get("metrics") or []
    return sorted(metrics, key=lambda m: order.index(m["status"])
                  if m.get("status") in order else len(order))


def report_document(rack: RackVerdict, manifest: Mapping[str, Any], profile: Profile,
                    locations: Mapping[str, str],
                    evidence_sha256: Mapping[tuple[str, str], str],
                    node_profiles: Mapping[str, Profile] | None = None,
                    pairwise: Sequence[Mapping[str, Any]] = (),
                    places: Mapping[str, Mapping[str, Any] | None] | None = None,
                    durations: Mapping[tuple[str, str], float] | None = None) -> dict[str, Any]:
    """The JSON report as a dict; ``pairwise`` are judged node-pair matrices, already in
    their report form (``rackgate.checks.shared.pairs.PairwiseMatrix.to_doc()``), added only when
    given; ``places`` each node's rack and unit (``inventory.place_of``), ``durations``
    how long each (node, check)'s evidence command ran, in seconds."""
    durations = durations or {}
    statuses = Counter(r.status.label for n in rack.nodes for r in n.results)
    revisions = revisions_of(manifest)
    nodes = []
    for n in rack.nodes:
        node_profile = (node_profiles or {}).get(n.node, profile)
        nodes.append({
            "name": n.node,
            "location": locations.get(n.node, ""),
            "place": dict((places or {}).get(n.node) or {}) or None,
            "verdict": n.verdict.value,
            "status": n.status.label,
            "reasons": list(n.reasons),
            "identity": next((dict(r.details) for r in n.results
                              if r.check == "node.identity"), {}),
            "profile_sha256": node_profile.sha256,
            "overridden": node_profile.sha256 != profile.sha256,
            "threshold_changes": _own_changes(node_profile, profile),
            "results": [_result_doc(r, evidence_sha256, durations) for r in n.results],
        })
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "run": dict(manifest),
        "profile": _profile_doc(profile),
        "revision": len(revisions),
        "attempts": revisions,
        "verdict": rack.verdict.value,
        "reasons": list(rack.reasons),
        # the same reasons, each once: a rack component's fault or a node that did not
        # answer is one reason naming the nodes and checks it stands for (reports.reasons)
        "rack_reasons": [r.to_doc() for r in of_rack(rack)],
        "summary": {
            "nodes": len(rack.nodes),
            "accepted": sum(1 for n in rack.nodes if n.verdict.value == "ACCEPT"),
            "rejected": sum(1 for n in rack.nodes if n.verdict.value == "REJECT"),
            "results": {s.label: statuses.get(s.label, 0) for s in Status},
        },
        "nodes": nodes,
    }
    if pairwise:
        doc["pairwise"] = [dict(m) for m in pairwise]
    return doc


def changed_thresholds(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every threshold an override changed, as the HTML, Markdown and JUnit reports list
    them: the overrides files' (``profile.changes``, on every node, ``nodes`` None), then
    the inventory's (``nodes[].threshold_changes``), one row per change with the nodes it
    was made on."""
    rows = [{**c, "nodes": None} for c in doc["profile"].get("changes") or []]
    by_change: dict[str, dict[str, Any]] = {}
    for n in doc["nodes"]:
        for c in n.get("threshold_changes") or []:
            key = json.dumps({k: v for k, v in c.items() if k != "origin"}, sort_keys=True)
            row = by_change.setdefault(key, {**c, "origin": "rackgate_profile_overrides "
                                                            "(inventory)", "nodes": []})
            row["nodes"].append(n["name"])
    return rows + list(by_change.values())


def change_line(c: Mapping[str, Any]) -> str:
    """One changed threshold in a line: check, metric, old -> new band, what it loosens,
    its basis and who set it (also JUnit's ``threshold_changed`` property)."""
    loosens = f"; LOOSENS {'; '.join(c['loosens'])}" if c["loosens"] else ""
    basis = f"; basis: {' '.join(c['new']['basis'].split())}" if c.get("new") else ""
    nodes = f" on {named(c['nodes'])}" if c.get("nodes") else ""
    return (f"{c['check']} {c['metric']}: {c['old_band'] or 'none'} -> "
            f"{c['new_band'] or 'none'}{loosens}{basis} (set by {c['origin']}{nodes})")


def overrides_files(doc: Mapping[str, Any]) -> list[str]:
    """The overrides files a report was judged with, each as ``PATH (sha256 …)`` (the
    first 12 hex digits), in the order merged; none for a report without any (or one
    written before reports named them)."""
    files = doc["profile"].get("overrides") or []
    return [f"{f.get('path')} (sha256 {str(f.get('sha256'))[:12]})" for f in files
            if isinstance(f, Mapping)]


def overrides_line(doc: Mapping[str, Any]) -> str:
    """``judged with overrides A (sha256 …), B (…)``, or "" when there were none."""
    files = overrides_files(doc)
    return f"judged with overrides {', '.join(files)}" if files else ""


def checks_in(doc: Mapping[str, Any]) -> Sequence[str]:
    seen: dict[str, None] = {}
    for n in doc["nodes"]:
        for r in n["results"]:
            seen.setdefault(r["check"], None)
    return list(seen)


class UnreadableReport(Refusal, ValueError):
    """A report.json that cannot be read, said in one line naming the file."""


def read_report(arg: str | Path) -> tuple[Any, Path]:
    """The report a command-line argument names (a run directory's report.json, or the file
    itself) as a JSON document, and its path: what ``diff``, ``baseline``, ``drain`` and
    ``--compare`` read. report.json is strict JSON (its writer refuses NaN and
    infinities): so is what is read here. UnreadableReport naming the file otherwise."""
    given = Path(arg)
    path = given / "report.json" if given.is_dir() else given
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if given.is_dir():
            raise UnreadableReport(f"{given} has no report.json: judge the run first "
                                   f"(rackgate judge {given})") from None
        raise UnreadableReport(f"{path}: cannot read it: No such file or directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise UnreadableReport(f"{path}: cannot read it: {reason}") from None
    try:
        return load_json(text, finite=True), path
    except DocumentError as exc:
        raise UnreadableReport(f"{path}: {exc}") from None
    except ValueError as exc:
        raise UnreadableReport(f"{path}: not JSON: {exc}") from None

