"""Printing a diff document (schema ``rackgate.diff/1``, made by rackgate.reports.diff):
:func:`render_text` for a terminal, one line per change, node and check first, every value
on one printable line, each status and verdict change marked ``(better)`` or ``(worse)``
(and, with ``colour``, green or red); :func:`render_html` as one self-contained page, every
value escaped; :data:`FILTERS` for any Jinja environment that renders the diff's section.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from rackgate.figures import figure, with_unit
from rackgate.reports.diff import direction

_TEMPLATES = Path(__file__).parent / "templates"


def place_text(place: Mapping[str, Any] | None) -> str:
    """``rack r7 u 3`` (as inventory locations read), or ``no place``.

    >>> place_text({"rack": "r7", "u": 3}), place_text(None)
    ('rack r7 u 3', 'no place')
    """
    return f"rack {place['rack']} u {place['u']}" if place else "no place"


def measured_text(value: float | None, unit: str | None) -> str:
    """A figure with its unit, or ``none``.

    >>> measured_text(19810.4, "MB/s"), measured_text(None, "MB/s")
    ('19,810 MB/s', 'none')
    """
    return "none" if value is None else with_unit(value, unit or "")


def percent_text(pct: float | None) -> str:
    """A signed percentage, or "" when there is none.

    >>> percent_text(-93.14), percent_text(16.67), percent_text(None)
    ('-93.14%', '+16.67%', '')
    """
    return "" if pct is None else f"{'+' if pct > 0 else ''}{figure(pct)}%"


def value_text(value: Any) -> str:
    """A profile or identity value on one line: figures through :func:`figure`, objects
    and lists as compact JSON.

    >>> value_text(0.6), value_text(None), value_text(True), value_text({"ref": 50})
    ('0.6', 'none', 'true', '{"ref": 50}')
    """
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):  # a bool returned above
        return figure(value)
    if isinstance(value, str):
        return one_line(value)
    return one_line(json.dumps(value, sort_keys=True, ensure_ascii=False))


def one_line(text: str) -> str:
    """``text`` as one printable line: whitespace runs become one space, other control
    characters are escaped (a message cannot break the one-line-per-change form or drive
    the terminal).

    >>> one_line("a\\n  b\\x1b[31m")
    'a b\\\\x1b[31m'
    """
    text = " ".join(text.split())
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def node_label(a: str, b: str) -> str:
    """A pair's name: the name, or ``A-name/B-name`` when they differ.

    >>> node_label("n1", "n1"), node_label("gpu001", "gpu101")
    ('n1', 'gpu001/gpu101')
    """
    return a if a == b else f"{a}/{b}"


def marked(direction: str) -> str:
    """`` (better)``, `` (worse)``, or "" when the same."""
    return "" if direction == "same" else f" ({direction})"


def change_text(c: Mapping[str, Any]) -> str:
    """One ``changes[]`` entry as one line, node and check first; a changed message shows
    both sides.

    >>> print(*change_text({"node_a": "n2", "node_b": "n2", "check": "fio.seq_read",
    ...     "kind": "changed", "changed": ["status", "figure", "message"],
    ...     "direction": "worse",
    ...     "status_a": "pass", "status_b": "fail", "measured_a": 612.3, "measured_b": 42.0,
    ...     "unit_a": "MB/s", "unit_b": "MB/s", "percent_change": -93.14,
    ...     "expected_a": ">= 50 MB/s", "expected_b": ">= 50 MB/s",
    ...     "message_a": "ok", "message_b": "slow"}).split("; "), sep="\\n")
    n2 fio.seq_read: status pass -> fail (worse)
    measured 612.3 MB/s -> 42 MB/s (-93.14%)
    message "ok" -> "slow"
    """
    head = f"{node_label(c['node_a'], c['node_b'])} {c['check']}: "
    if c["kind"] != "changed":
        side = "b" if c["kind"] == "added" else "a"
        return (f"{head}{c['kind']} ({c[f'status_{side}']}, "
                f"{measured_text(c[f'measured_{side}'], c[f'unit_{side}'])})"
                f"{marked(c['direction'])}: {one_line(c[f'message_{side}'])}")
    parts = []
    if "status" in c["changed"]:
        parts.append(f"status {c['status_a']} -> {c['status_b']}{marked(c['direction'])}")
    if {"figure", "unit"} & set(c["changed"]):
        pct = percent_text(c["percent_change"])
        parts.append(f"measured {measured_text(c['measured_a'], c['unit_a'])} -> "
                     f"{measured_text(c['measured_b'], c['unit_b'])}"
                     + (f" ({pct})" if pct else ""))
    if "expected" in c["changed"]:
        parts.append(f"expected {one_line(c['expected_a']) or 'none'} -> "
                     f"{one_line(c['expected_b']) or 'none'}")
    if "message" in c["changed"]:
        parts.append(f'message "{one_line(c["message_a"])}" -> "{one_line(c["message_b"])}"')
    return head + "; ".join(parts)


def _side_text(label: str, s: Mapping[str, Any]) -> str:
    revision = f" revision {s['revision']}" if s["revision"] is not None else ""
    return (f"{label}: {one_line(s['source'])}: run {one_line(s['run_id'])}{revision}, judged "
            f"{one_line(s['generated'])}, profile {one_line(s['profile']['name'])} (sha256 "
            f"{s['profile']['sha256'][:12]}), {s['verdict']}, {s['summary']['accepted']} of "
            f"{s['summary']['nodes']} nodes accepted")


def _unpaired_text(m: Mapping[str, Any]) -> list[str]:
    lines = [f"only in {side}: {n['name']} ({place_text(n['place'])})"
             for side, key in (("A", "only_in_a"), ("B", "only_in_b")) for n in m[key]]
    return lines + [f"not matched in {n['report']}: {n['name']} ({place_text(n['place'])}): "
                    f"{n['reason']}" for n in m["unmatched"]]


COLOURS = {"better": "\x1b[32m", "worse": "\x1b[31m", "mixed": "\x1b[31m"}  # ANSI SGR
RESET = "\x1b[0m"

_OVERALL = {"better": "better: nothing got worse",
            "worse": "worse: a verdict or status got worse",
            "mixed": "mixed: some verdicts or statuses got better, some worse",
            "same": "same: no verdict or status changed"}


def overall_text(diff: Mapping[str, Any]) -> str:
    """The diff's direction as a sentence, with the nodes not paired.

    >>> overall_text({"direction": "better", "counts": {"not_paired": 0}})
    'overall: better: nothing got worse'
    """
    unpaired = diff["counts"]["not_paired"]
    return (f"overall: {_OVERALL[diff['direction']]}"
            + (f"; {unpaired} node(s) not paired" if unpaired else ""))


def render_text(diff: Mapping[str, Any], colour: bool = False) -> str:
    """The diff for a terminal: the two runs, the rack verdict, how nodes were paired,
    profile changes, then per node its verdict, profile and identity changes and one line
    per changed result (node and check first), the nodes not paired, a summary and the
    overall direction. With ``colour``, a better line is green and a worse one red."""
    lines, ways = _text_lines(diff)
    if colour:
        lines = [f"{COLOURS[w]}{line}{RESET}" if w in COLOURS else line
                 for line, w in zip(lines, ways, strict=True)]
    return "\n".join(lines) + "\n"


def _text_lines(diff: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """render_text's lines, and the direction of each (``same`` for those without one)."""
    a, b, m = diff["a"], diff["b"], diff["matching"]
    rack = direction(a["verdict"], b["verdict"])
    lines = [_side_text("A", a), _side_text("B", b),
             f"rack verdict: {a['verdict']} -> {b['verdict']}{marked(rack)}"
             if a["verdict"] != b["verdict"] else f"rack verdict: {a['verdict']} (unchanged)",
             f"nodes paired by {m['key']}: {m['pairs']} pair(s), {len(m['only_in_a'])} only in "
             f"A, {len(m['only_in_b'])} only in B, {len(m['unmatched'])} not matched"]
    if a["profile"]["name"] != b["profile"]["name"]:
        lines.append(f"profile: {a['profile']['name']} -> {b['profile']['name']}")
    if a["profile"]["sha256"] != b["profile"]["sha256"]:
        lines.append(f"profile sha256: {a['profile']['sha256']} -> {b['profile']['sha256']}")
    lines += [f"profile {p['section']} {p['name']}{' ' + p['field'] if p['field'] else ''}: "
              + ("added" if p["a"] is None and not p["field"] else
                 "removed" if p["b"] is None and not p["field"] else
                 f"{value_text(p['a'])} -> {value_text(p['b'])}")
              for p in diff["profile_changes"]]
    ways = ["same", "same", rack] + ["same"] * (len(lines) - 3)
    by_pair: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for c in diff["changes"]:
        by_pair.setdefault((c["node_a"], c["node_b"]), []).append(c)
    for n in diff["nodes"]:
        label = node_label(n["a"], n["b"])
        if n["verdict_a"] != n["verdict_b"]:
            lines.append(f"{label}: verdict {n['verdict_a']} -> {n['verdict_b']}"
                         f"{marked(n['direction'])}")
            ways.append(n["direction"])
        if n["profile_sha256_a"] != n["profile_sha256_b"]:
            lines.append(f"{label}: profile sha256 {n['profile_sha256_a'][:12]} -> "
                         f"{n['profile_sha256_b'][:12]}")
            ways.append("same")
        lines += [f"{label}: identity {i['source']} {one_line(i['field'])}: "
                  f"{value_text(i['a'])} -> {value_text(i['b'])}" for i in n["identity"]]
        ways += ["same"] * len(n["identity"])
        changes = by_pair.get((n["a"], n["b"]), [])
        lines += [change_text(c) for c in changes]
        ways += [c["direction"] for c in changes]
    unpaired = _unpaired_text(m)
    lines += unpaired
    ways += ["worse"] * len(unpaired)
    k = diff["counts"]
    threshold = "--all" if diff["options"]["all"] else \
        f"figure threshold {figure(diff['options']['figure_threshold_pct'])}%"
    lines.append(f"{k['changes']} changed result(s) ({k['status']} status: {k['better']} "
                 f"better, {k['worse']} worse; {k['figure']} figure; {threshold}), "
                 f"{k['node_verdicts']} node verdict(s), {k['identity']} identity field(s), "
                 f"{k['not_paired']} node(s) not paired")
    lines.append(overall_text(diff))
    ways += ["same", diff["direction"]]
    return lines, ways


FILTERS = {"diff_measured": measured_text, "diff_percent": percent_text,
           "diff_value": value_text, "diff_place": place_text, "diff_node": node_label}
"""Filters the diff section's template uses: give them to the Jinja environment that
renders it (``env.filters.update(FILTERS)``)."""


def render_html(diff: Mapping[str, Any]) -> str:
    """The diff as one self-contained HTML page (``templates/diff.html.j2``: the report's
    look, the section ``templates/diff_section.html.j2`` renders); every value escaped."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters.update(FILTERS)
    return env.get_template("diff.html.j2").render(diff=diff)
