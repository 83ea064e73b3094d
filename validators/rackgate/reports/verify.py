"""Verify a report against the evidence beside it: every result's evidence file must exist
under the run directory and hash to the sha256 the report recorded, so a report can be
trusted (or not) long after the run. Reads files; never re-judges.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rackgate.documents import load_json
from rackgate.store.manifest import RunError


def verify_report(report_json: Path) -> tuple[int, list[str]]:
    """Check a report against the evidence beside it: (files checked, problems found).

    Every result's evidence file must exist under the run directory and hash to the
    sha256 the report recorded, so a report can be trusted (or not) long after the run.
    """
    try:
        doc = load_json(report_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{report_json}: cannot read the report: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise RunError(f"{report_json}: not a rackgate report (no nodes list)")
    run_dir = evidence_dir(report_json, doc)
    checked, problems = 0, []
    for node in doc["nodes"]:
        results = node.get("results") if isinstance(node, dict) else None
        if not isinstance(results, list):
            raise RunError(f"{report_json}: a node entry has no results list: {node!r:.80}")
        for r in results:
            if not isinstance(r, dict) or not r.get("evidence") or not r.get("evidence_sha256"):
                continue
            checked += 1
            where = f"{node.get('name')} {r.get('check')}"
            path = run_dir / str(r["evidence"])
            if not path.resolve().is_relative_to(run_dir.resolve()):
                problems.append(f"{where}: evidence path {r['evidence']!r} leaves {run_dir}")
                continue
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as exc:
                problems.append(f"{where}: {path}: {exc.strerror}")
                continue
            if digest != r["evidence_sha256"]:
                problems.append(f"{where}: {path} has sha256 {digest[:16]}, the report "
                                f"recorded {str(r['evidence_sha256'])[:16]}")
    return checked, problems


def evidence_dir(report_json: Path, doc: Mapping[str, Any]) -> Path:
    """Where a report's evidence is: the report's own directory when it holds the run
    (a copy or an archive is verified against its own files), else the run directory the
    report names (``rackgate judge --out`` writes reports away from the evidence).

    The recorded path is only a hint: it is used only when the report's directory has no
    ``evidence/`` of its own.
    """
    here = report_json.resolve().parent
    if (here / "evidence").is_dir():
        return here
    run = doc.get("run")
    hint = run.get("run_dir") if isinstance(run, dict) else None
    return Path(hint) if isinstance(hint, str) and hint else here
