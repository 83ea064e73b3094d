"""What changed between two reports (``rackgate diff``): node by node and check by check,
the verdicts, statuses and figures, the profile's thresholds and sha256, and each node's
identity (serials, BIOS, kernel, OS, machine id, GPU driver, VBIOS, HCA firmware).

Pure: two report documents (report.json's dict, schema ``rackgate.report/1``) in, a diff
document (schema ``rackgate.diff/1``, docs/diff-schema.md) out, which
rackgate.reports.diff_render prints as text and HTML. A report the diff cannot read is
refused with a DiffError naming the report and the field, never half-compared
(rackgate.reports.diff_input).

Nodes are paired by name when the reports share most names (one rack over time), else by
rack position (``place``: two racks of one SKU). Every node that is not paired is listed
(only in A, only in B, or not matchable: no place, or two nodes at one U;
rackgate.reports.diff_pairing).

``changes[]`` holds exactly the (node, check) results whose status changed (a check added
or removed is a status change, from or to none) and those whose figure moved by more than
``figure_threshold_pct`` percent or changed unit; ``show_all`` lists every difference.

Each status and verdict change has a direction (:func:`direction`): ``better`` or
``worse`` in the statuses' worst-wins order (pass < skip < warn < fail < error; a check
absent from a report counts as a skip: nothing measured) and ACCEPT < REJECT; the diff's
own ``direction`` sums them up (``mixed`` when both), so REJECT -> ACCEPT reads as the
improvement it is.

>>> a = {"status": "pass", "measured": 612.3, "unit": "MB/s", "expected": ">= 50 MB/s",
...      "message": "read 612.3 MB/s"}
>>> b = dict(a, measured=598.0, message="read 598 MB/s")
>>> result_change(a, b, 5.0, False) is None  # -2.3 %: within the threshold
True
>>> c = result_change(a, dict(b, status="fail"), 5.0, False)
>>> c["changed"], c["percent_change"]
(['status', 'figure', 'message'], -2.335)
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackgate.model import Status
from rackgate.reports import UnreadableReport, read_report
from rackgate.reports.diff_input import DiffError, check_report
from rackgate.reports.diff_pairing import MATCHES, Match, pair_nodes

SCHEMA = "rackgate.diff/1"
DEFAULT_FIGURE_THRESHOLD_PCT = 5.0
IDENTITY_CHECK = "node.identity"  # its details are the node's ``identity`` object
# Versions and serials other checks record in their details (as rack.version_drift reads
# them): the GPU driver, CUDA, VBIOS and each GPU's bus id, serial, UUID and VBIOS
# (checks/gpu/health.py), each HCA's firmware (checks/fabric/ports.py, ``fw.<device>``).
VERSION_DETAILS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("gpu.health", re.compile(r"(?:driver_version|cuda_version|vbios_versions|gpu\d+)\Z")),
    ("fabric.ports", re.compile(r"fw\..+\Z")),
)


def percent_change(a: float | None, b: float | None) -> float | None:
    """(b - a) / |a| in percent, rounded to four significant digits; None when either is
    None or a is 0 (no ratio: a figure from 0, or none).

    >>> percent_change(612.3, 42.0), percent_change(0, 5), percent_change(50, 50)
    (-93.14, None, 0.0)
    """
    if a is None or b is None or a == 0:
        return None
    pct = (b - a) / abs(a) * 100
    if not math.isfinite(pct):
        return None
    return 0.0 if pct == 0 else round(pct, 3 - math.floor(math.log10(abs(pct))))


def direction(a: str | None, b: str | None) -> str:
    """``better``, ``worse`` or ``same``: a status (None: the check is absent, as a skip)
    or a verdict (ACCEPT < REJECT) from A to B.

    >>> direction("fail", "pass"), direction("pass", None), direction("ACCEPT", "REJECT")
    ('better', 'worse', 'worse')
    """
    def rank(value: str | None) -> int:
        if value in ("ACCEPT", "REJECT"):
            return 0 if value == "ACCEPT" else 1
        return int(Status.SKIP if value is None else Status.from_label(value))

    ra, rb = rank(a), rank(b)
    return "better" if rb < ra else "worse" if rb > ra else "same"


def overall(directions: Iterable[str]) -> str:
    """The directions of every change summed up: ``mixed`` when some are better and some
    worse.

    >>> overall(["same", "better"]), overall(["worse", "better"]), overall([])
    ('better', 'mixed', 'same')
    """
    found = set(directions)
    if {"better", "worse"} <= found:
        return "mixed"
    return "worse" if "worse" in found else "better" if "better" in found else "same"


def result_change(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None,
                  threshold_pct: float, show_all: bool) -> dict[str, Any] | None:
    """One ``changes[]`` entry (without the node names) for one check's results in A and
    B (None: not in that report), or None when it is not listed: same status, and its
    figure moved by at most ``threshold_pct`` percent in the same unit (``show_all``:
    nothing differs)."""
    if a is None and b is None:
        return None
    ra: Mapping[str, Any] = a or {}
    rb: Mapping[str, Any] = b or {}
    status = ra.get("status") != rb.get("status")
    ma, mb = ra.get("measured"), rb.get("measured")
    pct = percent_change(ma, mb)
    unit = a is not None and b is not None and ra["unit"] != rb["unit"]
    moved = a is not None and b is not None and ma != mb
    beyond = moved and (pct is None or abs(pct) > threshold_pct)
    differs = {
        "status": status,
        "figure": moved,
        "unit": unit,
        "expected": a is not None and b is not None and ra["expected"] != rb["expected"],
        "message": (status or show_all) and ra.get("message") != rb.get("message"),
    }
    if not (status or unit or beyond or (show_all and any(differs.values()))):
        return None
    return {
        "kind": "added" if a is None else "removed" if b is None else "changed",
        "changed": [k for k, v in differs.items() if v],
        "direction": direction(ra.get("status"), rb.get("status")),
        **{f"{key}_{side}": r.get(key) for key in ("status", "measured", "unit")
           for side, r in (("a", ra), ("b", rb))},
        "percent_change": pct,
        **{f"{key}_{side}": r.get(key) for key in ("expected", "message")
           for side, r in (("a", ra), ("b", rb))},
    }


def identity_of(node: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Source check -> identity field -> value: the node's ``identity`` object (from
    ``node.identity``) and the versions and serials of :data:`VERSION_DETAILS`; a source
    that recorded none of its fields is absent."""
    out = {IDENTITY_CHECK: {k: str(v) for k, v in node["identity"].items()}}
    for r in node["results"]:
        for check, pattern in VERSION_DETAILS:
            if r["check"] == check:
                out[check] = {k: str(v) for k, v in r.get("details", {}).items()
                              if pattern.match(k)}
    return {source: fields for source, fields in out.items() if fields}


def identity_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each identity field that differs, per source both nodes recorded (a source one of
    them lacks is not compared: that check's status change says why); a field only one
    recorded is a change from or to null.

    >>> na = {"identity": {"bios_version": "1.2", "kernel": "6.1"}, "results": []}
    >>> identity_changes(na, {"identity": {"bios_version": "1.3", "kernel": "6.1"},
    ...                       "results": []})
    [{'source': 'node.identity', 'field': 'bios_version', 'a': '1.2', 'b': '1.3'}]
    """
    ia, ib = identity_of(a), identity_of(b)
    out = []
    for source in [s for s in ia if s in ib]:
        fa, fb = ia[source], ib[source]
        for key in list(fa) + [k for k in fb if k not in fa]:
            if fa.get(key) != fb.get(key):
                out.append({"source": source, "field": key, "a": fa.get(key), "b": fb.get(key)})
    return out


def profile_changes(a: Mapping[str, Any], b: Mapping[str, Any], show_all: bool
                    ) -> list[dict[str, Any]]:
    """Differences of the two profiles' checks and rack judgements (enabled, params,
    thresholds), one per leaf field; a check in one profile only is one entry with field
    "" and that check's section as its value. ``basis`` texts only with ``show_all``.

    >>> pa = {"checks": {"fio": {"thresholds": {"read": {"ref": 100, "min_ratio": 0.5,
    ...                                                    "basis": "x"}}}}}
    >>> pb = {"checks": {"fio": {"thresholds": {"read": {"ref": 100, "min_ratio": 0.6,
    ...                                                    "basis": "y"}}}}}
    >>> profile_changes(pa, pb, False)
    [{'section': 'checks', 'name': 'fio', 'field': 'thresholds.read.min_ratio', 'a': 0.5, 'b': 0.6}]
    """
    out = []
    for section in ("checks", "rack"):
        sa, sb = a.get(section, {}), b.get(section, {})
        for name in list(sa) + [n for n in sb if n not in sa]:
            if name not in sa or name not in sb:
                out.append({"section": section, "name": name, "field": "",
                            "a": sa.get(name), "b": sb.get(name)})
                continue
            fa, fb = _flat(sa[name]), _flat(sb[name])
            for key in list(fa) + [k for k in fb if k not in fa]:
                if (show_all or key.rsplit(".", 1)[-1] != "basis") and fa.get(key) != fb.get(key):
                    out.append({"section": section, "name": name, "field": key,
                                "a": fa.get(key), "b": fb.get(key)})
    return out


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted keys; lists and scalars are leaves (an empty object has
    none: ``params: {}`` and no params read the same).

    >>> _flat({"a": {"b": 1, "c": [2]}, "d": None, "e": {}})
    {'a.b': 1, 'a.c': [2], 'd': None}
    """
    if not isinstance(value, dict):
        return {prefix: value}
    out: dict[str, Any] = {}
    for k, v in value.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def _side(doc: Mapping[str, Any], source: str) -> dict[str, Any]:
    return {"source": source, "run_id": doc["run"]["run_id"], "generated": doc["generated"],
            "revision": doc.get("revision"), "verdict": doc["verdict"],
            "profile": {"name": doc["profile"]["name"], "sha256": doc["profile"]["sha256"]},
            "summary": doc["summary"]}


def _checks(a: Iterable[Mapping[str, Any]], b: Iterable[Mapping[str, Any]]
            ) -> list[tuple[str, Mapping[str, Any] | None, Mapping[str, Any] | None]]:
    ra, rb = {r["check"]: r for r in a}, {r["check"]: r for r in b}
    return [(c, ra.get(c), rb.get(c)) for c in list(ra) + [c for c in rb if c not in ra]]


def diff_reports(a: Mapping[str, Any], b: Mapping[str, Any], *, a_source: str = "A",
                 b_source: str = "B", match: Match = "auto",
                 figure_threshold_pct: float = DEFAULT_FIGURE_THRESHOLD_PCT,
                 show_all: bool = False) -> dict[str, Any]:
    """The diff document of reports A and B (``a_source``/``b_source`` name them in the
    document and in refusals). DiffError when either is not a readable
    ``rackgate.report/1``, or ``figure_threshold_pct`` is negative or not finite."""
    if not math.isfinite(figure_threshold_pct) or figure_threshold_pct < 0:
        raise DiffError(f"figure threshold {figure_threshold_pct!r} % is not a number >= 0")
    if match not in MATCHES:
        raise DiffError(f"match {match!r} is not one of {', '.join(MATCHES)}")
    check_report(a, f"A {a_source}")
    check_report(b, f"B {b_source}")
    pairing = pair_nodes(a["nodes"], b["nodes"], match)
    nodes, changes = [], []
    for na, nb in pairing.pairs:
        found = [dict(node_a=na["name"], node_b=nb["name"], check=check, **entry)
                 for check, ra, rb in _checks(na["results"], nb["results"])
                 if (entry := result_change(ra, rb, figure_threshold_pct, show_all))]
        changes += found
        nodes.append({"a": na["name"], "b": nb["name"],
                      "place_a": na.get("place"), "place_b": nb.get("place"),
                      **{f"{k}_{s}": n[k] for k in ("verdict", "status", "profile_sha256")
                         for s, n in (("a", na), ("b", nb))},
                      "identity": identity_changes(na, nb), "changes": len(found),
                      "direction": direction(na["verdict"], nb["verdict"])})
    count = Counter(k for c in changes for k in c["changed"])
    ways = Counter(c["direction"] for c in changes)
    unpaired = len(pairing.only_in_a) + len(pairing.only_in_b) + len(pairing.unmatched)
    verdicts = sum(n["verdict_a"] != n["verdict_b"] for n in nodes)
    return {
        "schema": SCHEMA,
        "a": _side(a, a_source),
        "b": _side(b, b_source),
        "options": {"match": match, "figure_threshold_pct": figure_threshold_pct,
                    "all": show_all},
        "matching": {"by": pairing.by, "key": pairing.key, "pairs": len(pairing.pairs),
                     "only_in_a": pairing.only_in_a, "only_in_b": pairing.only_in_b,
                     "unmatched": pairing.unmatched},
        "profile_changes": profile_changes(a["profile"], b["profile"], show_all),
        "nodes": nodes,
        "changes": changes,
        "counts": {"changes": len(changes), "status": count["status"],
                   "figure": count["figure"], "unit": count["unit"],
                   "node_verdicts": verdicts,
                   "identity": sum(len(n["identity"]) for n in nodes),
                   "node_profile_sha256": sum(n["profile_sha256_a"] != n["profile_sha256_b"]
                                              for n in nodes),
                   "not_paired": unpaired, "better": ways["better"],
                   "worse": ways["worse"]},
        "direction": overall([direction(a["verdict"], b["verdict"]),
                              *(n["direction"] for n in nodes),
                              *(c["direction"] for c in changes)]),
        "changed": bool(a["verdict"] != b["verdict"] or verdicts or count["status"]
                        or unpaired),
    }


@dataclass(frozen=True)
class Compared:
    """A report to compare a new judgement with (``--compare``, or the report a retest
    replaces): its document, already checked (``diff_input.check_report``), and its path."""

    doc: Mapping[str, Any]
    source: str


def compared(arg: str | Path) -> Compared:
    """The report ``arg`` names (a run directory or a report.json), read and checked;
    DiffError naming the file and field otherwise."""
    try:
        doc, path = read_report(arg)
    except UnreadableReport as exc:
        raise DiffError(str(exc)) from None
    check_report(doc, str(path))
    return Compared(doc, str(path))


def previous_report(run_dir: Path) -> Compared | None:
    """The report a run directory holds before it is judged again (a retest's previous
    revision), or None when it has none that the diff can read."""
    try:
        return compared(run_dir / "report.json")
    except DiffError:
        return None


def first_report(run_dir: Path) -> Compared | None:
    """What a retest compares with: the run's first revision's report (kept as
    ``report.rev1.json``), so that its report tells the story since the run began; else
    the report it replaces; None when neither can be read."""
    first = run_dir / "report.rev1.json"
    try:
        return compared(first) if first.is_file() else previous_report(run_dir)
    except DiffError:
        return previous_report(run_dir)


def with_diff(doc: dict[str, Any], compare: Compared) -> dict[str, Any]:
    """``doc`` with its ``diff`` against ``compare`` (report.json's optional field; the
    HTML report shows it as a section)."""
    return {**doc, "diff": diff_reports(compare.doc, doc, a_source=compare.source,
                                        b_source="this report")}
