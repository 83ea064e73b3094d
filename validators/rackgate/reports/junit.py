"""JUnit XML for CI systems (Jenkins, GitLab), rendered from the JSON report document.

One ``<testsuite>`` per check, one ``<testcase>`` per node x check (classname
``rackgate.<check>``, name = node). pass: a plain case; warn: a passing case (warn does not
block acceptance) whose ``<system-out>`` starts with ``WARN: <message>`` and which carries
the property ``rackgate.status`` = ``warn`` (Jenkins' junit plugin keeps a testcase's
properties when asked to, GitLab ignores them; the other statuses need no property, JUnit's
own elements say them); skip: ``<skipped>``; fail: ``<failure type="threshold">``; error:
``<error type="evidence">``. Every case's ``<system-out>`` names the node's location,
measured and expected values and the evidence file. A rejected node with no blocking result
(no check judged) becomes an ``<error type="verdict">`` case in the suite
``rackgate.verdict``, so CI cannot go green on a rejected rack. A case's ``time`` is how
long its evidence's command ran (``duration_s``; 0 without one), a suite's and the root's
the sum of their cases'. Characters that XML 1.0 forbids are written as ``\\xNN`` text, so
the file always parses.

>>> doc = {"run": {"run_id": "r1"}, "profile": {"name": "demo"}, "verdict": "REJECT",
...        "nodes": [{"name": "n1", "location": "r1 u1", "verdict": "REJECT", "results": [
...            {"check": "fio.seq_read", "status": "fail", "message": "slow\\x01",
...             "measured": 42.0, "unit": "MB/s", "expected": ">= 50 MB/s",
...             "duration_s": 12.5}]}]}
>>> root = ET.fromstring(render_junit(doc).encode())
>>> root.get("name"), root.get("tests"), root.get("failures"), root.get("time")
('rackgate demo r1', '1', '1', '12.500')
>>> root.find("testsuite/testcase/failure").get("message")
'slow\\\\x01'
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from rackgate.figures import figure, with_unit

# Not allowed anywhere in an XML 1.0 document, not even as character references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ELEMENT = {"fail": ("failure", "threshold"), "error": ("error", "evidence"),
            "skip": ("skipped", None)}
_COUNTS = (("failures", "failure"), ("errors", "error"), ("skipped", "skipped"))


def xml_text(value: Any) -> str:
    """Text that XML 1.0 can carry: forbidden characters become visible ``\\xNN``."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100
                        else f"\\u{ord(m[0]):04x}", "" if value is None else str(value))


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: Any) -> ET.Element:
    el = ET.SubElement(parent, tag, {k: xml_text(v) for k, v in attrs.items() if v is not None})
    if text is not None:
        el.text = xml_text(text)
    return el


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


def _case(suite: ET.Element, classname: str, node: Mapping[str, Any], r: Mapping[str, Any],
          error_type: str = "evidence") -> None:
    case = _sub(suite, "testcase", classname=classname, name=node["name"], time=seconds(r))
    body = _details(node, r)
    if r["status"] == "warn":  # passing for JUnit: only the property and system-out say it
        _sub(_sub(case, "properties"), "property", name="rackgate.status", value="warn")
    if r["status"] in _ELEMENT:
        tag, kind = _ELEMENT[r["status"]]
        kind = error_type if tag == "error" else kind
        _sub(case, tag, None if tag == "skipped" else body, message=r["message"], type=kind)
    _sub(case, "system-out", body)


def _count(parent: ET.Element) -> None:
    cases = parent.findall(".//testcase")
    parent.set("tests", str(len(cases)))
    for attr, tag in _COUNTS:
        parent.set(attr, str(sum(1 for c in cases if c.find(tag) is not None)))
    parent.set("time", f"{sum(float(c.get('time') or 0) for c in cases):.3f}")


def _unjudged(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Rejected nodes that have no blocking result to show it (no check was judged)."""
    if doc["verdict"] == "REJECT" and not doc["nodes"]:
        return [{"name": "rack", "location": "", "reasons": doc.get("reasons", [])}]
    return [n for n in doc["nodes"] if n.get("verdict") == "REJECT"
            and not any(r["status"] in ("fail", "error") for r in n["results"])]


def render_junit(doc: Mapping[str, Any]) -> str:
    """The JUnit XML document (UTF-8, with its declaration) for one judged run."""
    run_id, profile = doc.get("run", {}).get("run_id", ""), doc["profile"]["name"]
    root = ET.Element("testsuites", name=xml_text(f"rackgate {profile} {run_id}"))
    props = {"run_id": run_id, "profile": profile,
             "profile_sha256": doc["profile"].get("sha256"), "rack_verdict": doc["verdict"],
             "revision": str(doc.get("revision", 1))}

    def suite(name: str) -> ET.Element:
        el = _sub(root, "testsuite", name=name)
        plist = _sub(el, "properties")
        for key, value in props.items():
            _sub(plist, "property", name=key, value=value or "")
        return el

    by_check: dict[str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]] = {}
    for n in doc["nodes"]:
        for r in n["results"]:
            by_check.setdefault(r["check"], []).append((n, r))
    for check, rows in by_check.items():
        el = suite(check)
        for n, r in rows:
            _case(el, f"rackgate.{check}", n, r)
    if unjudged := _unjudged(doc):
        el = suite("rackgate.verdict")
        for n in unjudged:
            reasons = "; ".join(n.get("reasons") or ["node rejected"])
            _case(el, "rackgate.verdict", n,
                  {"status": "error", "message": reasons}, error_type="verdict")
    for el in [*root.findall("testsuite"), root]:
        _count(el)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
