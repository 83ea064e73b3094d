"""Reports read results and the run manifest; they never re-run or re-judge anything.

``report_document`` builds the JSON report (schema ``rackgate.report/1``, see
docs/report-schema.md); the HTML report is rendered from that same document, so the
two cannot disagree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rackgate.documents import DocumentError, load_json
from rackgate.model import RackVerdict, Status
from rackgate.profile import Profile
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
    }


def report_document(rack: RackVerdict, manifest: Mapping[str, Any], profile: Profile,
                    locations: Mapping[str, str],
                    evidence_sha256: Mapping[tuple[str, str], str],
                    node_profiles: Mapping[str, Profile] | None = None,
                    pairwise: Sequence[Mapping[str, Any]] = (),
                    places: Mapping[str, Mapping[str, Any] | None] | None = None,
                    durations: Mapping[tuple[str, str], float] | None = None) -> dict[str, Any]:
    """The JSON report as a dict; ``pairwise`` are judged node-pair matrices, already in
    their report form (``rackgate.checks.pairs.PairwiseMatrix.to_doc()``), added only when
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
            "results": [{
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
            } for r in n.results],
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


def checks_in(doc: Mapping[str, Any]) -> Sequence[str]:
    seen: dict[str, None] = {}
    for n in doc["nodes"]:
        for r in n["results"]:
            seen.setdefault(r["check"], None)
    return list(seen)


class UnreadableReport(ValueError):
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

