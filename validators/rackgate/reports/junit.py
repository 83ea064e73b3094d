"""JUnit XML for CI systems (Jenkins, GitLab), rendered from the JSON report document.

One ``<testsuite>`` per check, one ``<testcase>`` per node x check (classname
``rackgate.<check>``, name = node). pass: a plain case; warn: a passing case (warn does not
block acceptance) whose ``<system-out>`` starts with ``WARN: <message>`` and which carries
the property ``rackgate.status`` = ``warn`` (Jenkins' junit plugin keeps a testcase's
properties when asked to, GitLab ignores them; the other statuses need no property, JUnit's
own elements say them); skip: ``<skipped>``; fail: ``<failure type="threshold">``; error:
``<error type="evidence">``. Every case's ``<system-out>`` names the node's location,
measured and expected values and the evidence file, and for a check that judged several
metrics one ``metric`` line each (its status, figure and band; the failing one first). A
rejected node with no blocking result (no check judged) becomes an ``<error
type="verdict">`` case in the suite ``rackgate.verdict``, so CI cannot go green on a
rejected rack. A case's ``time`` is how long its evidence's command ran (``duration_s``; 0
without one), a suite's and the root's the sum of their cases'. Characters that XML 1.0
forbids are written as ``\\xNN`` text, so the file always parses. Each suite's properties
name the run, the profile and its sha256, the rack verdict, the revision, each overrides
file it was judged with (``overrides_file``: path and sha256, one property a file) and every
threshold an override changed (``threshold_changed``: check, metric, old -> new band, what
it loosens, its basis).

>>> doc = {"run": {"run_id": "r1"}, "profile": {"name": "demo"}, "verdict": "REJECT",
...        "nodes": [{"name": "n1", "location": "r1 u1", "verdict": "REJECT", "results": [
...            {"check": "fio.seq_read", "status": "fail", "message": "slow\\x01",
...             "measured": 42.0, "unit": "MB/s", "expected": ">= 50 MB/s",
...             "duration_s": 12.5}]}]}
>>> import xml.etree.ElementTree as ET
>>> root = ET.fromstring(render_junit(doc).encode())
>>> root.get("name"), root.get("tests"), root.get("failures"), root.get("time")
('rackgate demo r1', '1', '1', '12.500')
>>> root.find("testsuite/testcase/failure").get("message")
'slow\\\\x01'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from rackgate.figures import figure, with_unit
from rackgate.reports import change_line, changed_thresholds, overrides_files, shown_metrics

# Not allowed anywhere in an XML 1.0 document, not even as character references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ELEMENT = {"fail": ("failure", "threshold"), "error": ("error", "evidence"),
            "skip": ("skipped", None)}
_COUNTS = (("failures", "failure"), ("errors", "error"), ("skipped", "skipped"))


def xml_text(value: Any) -> str:
    """Text that XML 1.0 can carry: forbidden characters become visible ``\\xNN``."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100
                        else f"\\u{ord(m[0]):04x}", "" if value is None else str(value))


def _details(node: Mapping[str, Any], r: Mapping[str, Any]) -> str:
    measured = "none" if r.get("measured") is None \
        else with_unit(r["measured"], r.get("unit") or "")
    if r.get("percent_of_limit") is not None:
        measured += f" ({r['percent_of_limit']:.0f}% of the physical limit)"
    evidence = r.get("evidence") or "none"
    if r.get("evidence_sha256"):
        evidence += f" (sha256 {r['evidence_sha256']})"
    lines = [f"{r['status'].upper()}: {r['message']}", f"node: {node['name']}",
             f"location: {node.get('location') or 'unknown'}", f"measured: {measured}",
             f"expected: {r.get('expected') or 'none'}", f"evidence: {evidence}"]
    # a check judging several metrics: each with its own figure and band, failing first
    lines += [f"metric {m['metric']}: {m['status'].upper()} "
              f"{'none' if m.get('measured') is None else with_unit(m['measured'], m['unit'])}"
              f", expected {m.get('expected') or 'none'}" for m in shown_metrics(r)]
    if r.get("details"):
        # "; " between them: a figure's thousands separator is a comma
        lines.append("details: " + "; ".join(f"{k}={_value(v)}" for k, v in r["details"].items()))
    return "\n".join(lines) + "\n"


def _value(v: Any) -> str:
    """A detail's value: a figure as :func:`~rackgate.figures.figure` writes it, else as is.

    >>> _value(19810.4), _value(3), _value("fio-3.33")
    ('19,810', '3', 'fio-3.33')
    """
    return figure(v) if isinstance(v, float) else str(v)


def seconds(r: Mapping[str, Any]) -> str:
    """A case's ``time``: its evidence's ``duration_s`` in seconds, 0 without one.

    >>> seconds({"duration_s": 4.25}), seconds({"duration_s": None}), seconds({})
    ('4.250', '0.000', '0.000')
    """
    value = r.get("duration_s")
    ok = isinstance(value, int | float) and math.isfinite(value) and value >= 0
    return f"{value if ok else 0:.3f}"


# What ElementTree escapes in element text, and in attribute values besides
_CDATA_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))
_ATTR_ESCAPES = (*_CDATA_ESCAPES, ('"', "&quot;"), ("\r", "&#13;"), ("\n", "&#10;"),
                 ("\t", "&#09;"))


def _escaped(value: Any, escapes: tuple[tuple[str, str], ...]) -> str:
    text = xml_text(value)
    for char, entity in escapes:
        if char in text:
            text = text.replace(char, entity)
    return text


def _attr(value: Any) -> str:
    """An attribute value as ElementTree writes it (after :func:`xml_text`)."""
    return _escaped(value, _ATTR_ESCAPES)


def _cdata(value: Any) -> str:
    """Element text as ElementTree writes it (after :func:`xml_text`)."""
    return _escaped(value, _CDATA_ESCAPES)


def _start(tag: str, attrs: Mapping[str, Any], close: str = ">") -> str:
    """``<tag a="v" ...>`` (``close=" />"``: an empty element); None values are left out."""
    return "<" + tag + "".join(f' {k}="{_attr(v)}"' for k, v in attrs.items()
                               if v is not None) + close


_CASE_END = "\n      "  # the indentation inside a testcase (level 3)


def _case(classname: str, node: Mapping[str, Any], r: Mapping[str, Any],
          error_type: str = "evidence") -> tuple[str, str | None]:
    """One indented ``<testcase>`` (without its tail) and the element its status adds
    (failure, error, skipped), if any."""
    body = _details(node, r)
    parts = [_start("testcase", {"classname": classname, "name": node["name"],
                                 "time": seconds(r)}), _CASE_END]
    if r["status"] == "warn":  # passing for JUnit: only the property and system-out say it
        parts += ["<properties>\n        ",
                  _start("property", {"name": "rackgate.status", "value": "warn"}, " />"),
                  "\n      </properties>", _CASE_END]
    tag = None
    if r["status"] in _ELEMENT:
        tag, kind = _ELEMENT[r["status"]]
        kind = error_type if tag == "error" else kind
        attrs = {"message": r["message"], "type": kind}
        if tag == "skipped":
            parts += [_start(tag, attrs, " />"), _CASE_END]
        else:
            parts += [_start(tag, attrs), _cdata(body), f"</{tag}>", _CASE_END]
    parts += ["<system-out>", _cdata(body), "</system-out>\n    </testcase>"]
    return "".join(parts), tag


def _unjudged(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Rejected nodes that have no blocking result to show it (no check was judged)."""
    if doc["verdict"] == "REJECT" and not doc["nodes"]:
        return [{"name": "rack", "location": "", "reasons": doc.get("reasons", [])}]
    return [n for n in doc["nodes"] if n.get("verdict") == "REJECT"
            and not any(r["status"] in ("fail", "error") for r in n["results"])]


def _totals(cases: list[tuple[str, str | None, str]]) -> dict[str, str]:
    """tests, failures, errors, skipped and time of (case, its status element, time)."""
    time = 0.0
    for _, _, t in cases:
        time += float(t)
    tags = [tag for _, tag, _ in cases]
    return {"tests": str(len(cases)),
            **{attr: str(tags.count(tag)) for attr, tag in _COUNTS},
            "time": f"{time:.3f}"}


def iter_junit(doc: Mapping[str, Any]) -> Iterator[str]:
    """The JUnit XML document of :func:`render_junit`, in pieces: one suite at a time, never
    a tree of every case (a large rack has hundreds of thousands). The text is what
    ElementTree writes for that tree, indented by ``ET.indent``."""
    run_id, profile = doc.get("run", {}).get("run_id", ""), doc["profile"]["name"]
    props = [("run_id", run_id), ("profile", profile),
             ("profile_sha256", doc["profile"].get("sha256")), ("rack_verdict", doc["verdict"]),
             ("revision", str(doc.get("revision", 1))),
             *(("overrides_file", f) for f in overrides_files(doc)),
             *(("threshold_changed", change_line(c)) for c in changed_thresholds(doc))]
    plist = "<properties>" + "".join(
        "\n      " + _start("property", {"name": key, "value": value or ""}, " />")
        for key, value in props) + "\n    </properties>"

    by_check: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for n in doc["nodes"]:
        for r in n["results"]:
            by_check.setdefault(r["check"], []).append((n, r))
    suites: list[tuple[str, str, list[tuple[Mapping[str, Any], Mapping[str, Any], str]]]] = [
        (check, f"rackgate.{check}", [(n, r, "evidence") for n, r in rows])
        for check, rows in by_check.items()]
    if unjudged := _unjudged(doc):
        suites.append(("rackgate.verdict", "rackgate.verdict", [
            (n, {"status": "error", "message": "; ".join(n.get("reasons") or
                                                         ["node rejected"])}, "verdict")
            for n in unjudged]))
    # the counts come first, in the root's and each suite's attributes
    overall: list[tuple[str, str | None, str]] = []
    for _, _, rows in suites:
        overall += [("", _ELEMENT[r["status"]][0] if r["status"] in _ELEMENT else None,
                     seconds(r)) for _, r, _ in rows]
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    root = {"name": f"rackgate {profile} {run_id}", **_totals(overall)}
    if not suites:
        yield _start("testsuites", root, " />")
        return
    yield _start("testsuites", root)
    for check, classname, rows in suites:
        cases = []
        for n, r, error_type in rows:
            text, tag = _case(classname, n, r, error_type)
            cases.append((text, tag, seconds(r)))
        yield "\n  " + _start("testsuite", {"name": check, **_totals(cases)})
        yield "\n    " + plist
        for text, _, _ in cases:
            yield "\n    " + text
        yield "\n  </testsuite>"
        del cases
    yield "\n</testsuites>"


def render_junit(doc: Mapping[str, Any]) -> str:
    """The JUnit XML document (UTF-8, with its declaration) for one judged run."""
    return "".join(iter_junit(doc))
