"""Verify a report against the evidence beside it: every result's evidence file must exist
under the run directory and hash to the sha256 the report recorded (:func:`verify_report`),
and the report must say what the run's evidence says (:func:`differences`: the report
against the one its run is judged into again, by ``rackgate.verify``). Reads files and
compares documents; never judges.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rackgate.documents import load_json
from rackgate.refusal import Refusal


def verify_report(report_json: Path) -> tuple[int, list[str]]:
    """Check a report against the evidence beside it: (files checked, problems found).

    Every result's evidence file must exist under the run directory and hash to the
    sha256 the report recorded. Only the files the report names: ``rackgate verify``
    (``rackgate.verify``) also re-judges the run and compares (:func:`differences`).
    """
    return check_digests(report_json, read_verified(report_json))


def read_verified(report_json: Path) -> Any:
    """The report document to verify, as JSON; Refusal naming the file when unreadable."""
    try:
        doc = load_json(report_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Refusal(f"{report_json}: cannot read the report: {exc}") from None
    return doc


def check_digests(report_json: Path, doc: Any) -> tuple[int, list[str]]:
    """:func:`verify_report` of a report already read: ``doc``, read from ``report_json``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise Refusal(f"{report_json}: not a rackgate report (no nodes list)")
    run_dir = evidence_dir(report_json, doc)
    checked, problems = 0, []
    for node in doc["nodes"]:
        results = node.get("results") if isinstance(node, dict) else None
        if not isinstance(results, list):
            raise Refusal(f"{report_json}: a node entry has no results list: {node!r:.80}")
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


# what a report may say that no re-judgement repeats: when it was judged, and its diff with
# another report (``--compare``, ``--retest``), which is not the run's own
NOT_COMPARED = frozenset({"generated", "diff"})
# the profile's label: it names where the run directory and the overrides files were when
# the report was judged (an archived or moved copy, a relative path), while the profile is
# its sha256 (of the whole document) and its thresholds, compared; so are the overrides
# files, by their sha256 (their paths are labels too)
_LABEL = "source"
_ABSENT = object()
_SHOWN = 120  # characters of a value a difference shows


def differences(report: Mapping[str, Any], rejudged: Mapping[str, Any]) -> list[str]:
    """Every way ``report`` differs from ``rejudged``, the report its run's manifest and
    evidence judge into now (``rejudge.rejudged_report``): each names the node, the check
    and the field, with the report's value and the re-judged one. Every field is compared
    but those of :data:`NOT_COMPARED` and the profile's ``source`` label; nodes are matched
    by name and results by check, so a node or result missing, added or listed twice is
    named. A report of an earlier revision of the run, or judged with another profile, is
    one difference saying so."""
    revision, now = report.get("revision"), rejudged.get("revision")
    if not _same(revision, now):
        return [f"report.json is of revision {_show(revision)}, the run directory holds "
                f"revision {now} (collected again since: --resume or --retest): it is "
                f"superseded, and its evidence is no longer what the run is judged from "
                f"(rackgate judge RUN_DIR writes the current report)"]
    mine = report.get("profile")
    sha = mine.get("sha256") if isinstance(mine, dict) else None
    if not _same(sha, rejudged["profile"]["sha256"]):
        return [f"report.json was judged with profile sha256 {_show(sha)}, not with "
                f"{rejudged['profile']['source']} (sha256 {rejudged['profile']['sha256']}): "
                f"verify with the --profile and --overrides it was judged with"]
    out: list[str] = []
    for key in sorted((set(report) | set(rejudged)) - NOT_COMPARED - {"nodes"}):
        a, b = report.get(key, _ABSENT), rejudged.get(key, _ABSENT)
        if key == "profile" and isinstance(a, dict):
            a, b = (_unlabelled(p, "overrides" in a) for p in (a, b))
        _compare(out, f"field {key}", a, b)
    nodes = report.get("nodes")
    out += _nodes(nodes if isinstance(nodes, list) else [], rejudged["nodes"])
    return out


def _unlabelled(profile: Mapping[str, Any], files: bool) -> dict[str, Any]:
    """A report's profile as compared: without its labels (``source``, each overrides
    file's path), and without ``overrides`` unless ``files`` (the report names them: one
    written before reports did is not compared on them)."""
    out = {k: v for k, v in profile.items() if k not in (_LABEL, "overrides")}
    given = profile.get("overrides", _ABSENT)
    if files:
        out["overrides"] = [f.get("sha256") if isinstance(f, dict) else f for f in given] \
            if isinstance(given, list) else given
    return out


def _by(entries: Sequence[Any], key: str, what: str, out: list[str]) -> dict[Any, Any]:
    """``entries`` by their ``key`` field; one listed twice is a difference."""
    seen: dict[Any, Any] = {}
    for e in entries:
        name = e.get(key) if isinstance(e, dict) else None
        if name in seen or name is None:
            out.append(f"{what} {_show(name)}: listed twice in report.json" if name in seen
                       else f"{what} {_show(e)}: an entry without a {key} in report.json")
            continue
        seen[name] = e
    return seen


def _nodes(nodes: Sequence[Any], rejudged: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    mine = _by(nodes, "name", "node", out)
    for node in rejudged:
        name = node["name"]
        if name not in mine:
            out.append(f"node {name}: judged {node['verdict']} from the run's evidence, "
                       f"missing from report.json")
            continue
        own = mine[name]
        for key in sorted((set(own) | set(node)) - {"results"}):
            _compare(out, f"node {name} field {key}", own.get(key, _ABSENT),
                     node.get(key, _ABSENT))
        out += _results(name, own.get("results"), node["results"])
    names = [n["name"] for n in rejudged]
    known = set(names)
    out += [f"node {_show(n)}: in report.json, not a node of the run" for n in mine
            if n not in known]
    if not out and list(mine) != names:
        out.append("field nodes: report.json lists the run's nodes in another order")
    return out


def _results(node: str, results: Any, rejudged: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    mine = _by(results if isinstance(results, list) else [], "check", f"node {node} check",
               out)
    for r in rejudged:
        check = r["check"]
        if check not in mine:
            out.append(f"node {node} check {check}: re-judged {r['status']} "
                       f"({_show(r['message'])}), missing from report.json")
            continue
        for key in sorted(set(mine[check]) | set(r)):
            _compare(out, f"node {node} check {check} field {key}",
                     mine[check].get(key, _ABSENT), r.get(key, _ABSENT))
    checks = {r["check"] for r in rejudged}
    out += [f"node {node} check {_show(c)}: in report.json ({_show(mine[c].get('status'))}), "
            f"not a result the run's evidence gives" for c in mine if c not in checks]
    if not out and list(mine) != [r["check"] for r in rejudged]:
        out.append(f"node {node} field results: report.json lists them in another order")
    return out


def _compare(out: list[str], where: str, mine: Any, rejudged: Any) -> None:
    if isinstance(mine, dict) and isinstance(rejudged, dict):
        for key in sorted(set(mine) | set(rejudged), key=str):
            _compare(out, f"{where}.{key}", mine.get(key, _ABSENT), rejudged.get(key, _ABSENT))
    elif isinstance(mine, list) and isinstance(rejudged, list) and len(mine) == len(rejudged):
        for i, (a, b) in enumerate(zip(mine, rejudged, strict=True)):
            _compare(out, f"{where}[{i}]", a, b)
    elif not _same(mine, rejudged):
        out.append(f"{where}: report.json has {_show(mine)}, re-judged from the evidence: "
                   f"{_show(rejudged)}")


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: ``true`` is not ``1``, ``1`` is ``1.0``."""
    return type(a) in _KIND and _KIND[type(a)] == _KIND.get(type(b)) and a == b


_KIND = {bool: "bool", int: "number", float: "number", str: "str", type(None): "null",
         list: "list", dict: "dict"}


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "nothing"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."
