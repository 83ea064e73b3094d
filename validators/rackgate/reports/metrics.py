"""A judged run's results as Prometheus text for node_exporter's textfile collector
(``rackgate export-metrics``; the metrics are listed in docs/metrics.md).

The text follows the Prometheus text exposition format (version 0.0.4): a ``# HELP`` and a
``# TYPE`` line before each metric's samples, all samples of a metric together, label
values escaped (backslash, double quote, line feed), no timestamps on samples (the
textfile collector refuses them). It is read from report.json as ``rackgate judge`` or
``validate`` wrote it and never re-judged: a status or verdict is mapped, not decided.

Rack-scope results: report.json gives every result of a check that runs once for the
rack (a fabric query, a job across the nodes, a rack-level judgement such as
``rack.version_drift``) to each node under test, so those appear as the nodes' own
``rackgate_check_status`` series; the run's own verdict is ``rackgate_run_verdict{run}``
and a node-pair matrix (``pairwise[]``, the HTML report's heatmap) is one
``rackgate_pair_status`` and, where measured, one ``rackgate_pair_value`` series per pair.
A node without a rack (no ``rackgate_location``) has ``rack=""``.

What cannot be a valid textfile is refused, never written (:mod:`rackgate.exposition`): a
label value that is not UTF-8 or holds a control character (a carriage return, say),
named by its field; and the whole text is checked with promtool's rules before it
replaces the old file. So is a report that contradicts itself: a node whose verdict is
not the one its results give (ACCEPT with a failed or errored result, or with nothing
that passed; REJECT with nothing that blocks it), or a run verdict that is not ACCEPT
exactly when every node is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rackgate import exposition as expo
from rackgate.exposition import LABEL_NAME, METRIC_NAME, escape_label

DEFAULT_FILE = "rackgate-acceptance.prom"
STATUS_CODE = {"pass": 0, "warn": 1, "fail": 2, "error": 3, "skip": 4}
VERDICT_VALUE = {"ACCEPT": 1, "REJECT": 0}
_CODES = ", ".join(f"{code} {label}" for label, code in STATUS_CODE.items())

# name -> (help, label names), in the order the text lists them
METRICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "rackgate_run_verdict": (
        "Rack verdict of the acceptance run (report.json verdict): 1 ACCEPT, 0 REJECT.",
        ("run",)),
    "rackgate_run_timestamp_seconds": (
        "When the acceptance run finished (manifest finished; when judged if it has none), "
        "Unix time.", ("run",)),
    "rackgate_node_verdict": (
        "Node verdict of the acceptance run: 1 ACCEPT, 0 REJECT.", ("run", "rack", "node")),
    "rackgate_check_status": (
        f"Status of one check on one node: {_CODES}.", ("run", "node", "check")),
    "rackgate_check_value": (
        "The check's measured figure on the node, in the unit of label unit (only finite "
        "figures).", ("run", "node", "check", "unit")),
    "rackgate_pair_status": (
        f"Status of one node pair of a pairwise check (node_a ran the server): {_CODES}.",
        ("run", "check", "node_a", "node_b")),
    "rackgate_pair_value": (
        "Measured figure of one node pair of a pairwise check, in the unit of label unit "
        "(only measured pairs).", ("run", "check", "node_a", "node_b", "unit")),
}
__all__ = ["DEFAULT_FILE", "LABEL_NAME", "METRICS", "METRIC_NAME", "MetricsError",
           "escape_label", "exposition", "write_textfile"]


class MetricsError(ValueError):
    """A report that cannot be exported, said in one line naming the file and field."""


def _escape_help(text: str) -> str:
    return expo.escape_help(text)


def _number(value: float) -> str:
    """A sample value: integers without a fraction, other floats as Python's repr (which
    Go's ParseFloat reads back exactly)."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 2**53 else repr(
        float(value))


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


@dataclass
class Exposition:
    """The samples of one report, per metric in ``METRICS`` order."""

    source: str
    samples: dict[str, dict[tuple[str, ...], float]] = field(
        default_factory=lambda: {name: {} for name in METRICS})

    def add(self, name: str, labels: Sequence[str], value: float, where: str) -> None:
        series = self.samples[name]
        key = tuple(labels)
        if key in series:
            raise MetricsError(f"{self.source}: {where}: a second {name} series "
                               f"{self._labels(name, key)}: report.json lists it twice")
        series[key] = value

    @staticmethod
    def _labels(name: str, values: Sequence[str]) -> str:
        names = METRICS[name][1]
        return "{" + ",".join(f'{k}="{escape_label(v)}"'
                              for k, v in zip(names, values, strict=True)) + "}"

    @property
    def series(self) -> int:
        return sum(len(s) for s in self.samples.values())

    def text(self) -> str:
        lines: list[str] = []
        for name, (help_text, _) in METRICS.items():
            series = self.samples[name]
            if not series:
                continue
            lines += [f"# HELP {name} {_escape_help(help_text)}", f"# TYPE {name} gauge"]
            lines += [f"{name}{self._labels(name, k)} {_number(v)}" for k, v in series.items()]
        return "\n".join(lines) + "\n"


def _text(value: Any, where: str, source: str, *, empty: bool = False) -> str:
    """A label value: a (non-empty) string a textfile can carry, else MetricsError."""
    if not isinstance(value, str) or not (value or empty):
        raise MetricsError(f"{source}: {where} is {value!r}, not a "
                           f"{'' if empty else 'non-empty '}string")
    problem = expo.label_problem(value)
    if problem:
        raise MetricsError(f"{source}: {where} {value!r} {problem}")
    return value


def _code(table: Mapping[str, int], value: Any, where: str, source: str) -> int:
    if not isinstance(value, str) or value not in table:
        raise MetricsError(f"{source}: {where} is {value!r}, not one of "
                           f"{', '.join(table)}")
    return table[value]


def _unix_time(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.timestamp() if when.tzinfo is not None else None


def _rack(node: Mapping[str, Any], where: str, source: str) -> str:
    place = node.get("place")
    rack = place.get("rack") if isinstance(place, Mapping) else None
    return _text(rack, f"{where}.place.rack", source) if isinstance(rack, str) else ""


_BLOCKING, _PASSING = frozenset({"fail", "error"}), frozenset({"pass", "warn"})


def _node_contradiction(verdict: str, statuses: Sequence[str]) -> str | None:
    """Why a node's verdict is not the one its result statuses give (model.node_verdict:
    ACCEPT exactly when none failed or errored and at least one passed), or None."""
    blocking = sorted(_BLOCKING.intersection(statuses))
    if verdict == "ACCEPT" and blocking:
        return f"is ACCEPT with a {' and '.join(blocking)} result"
    if verdict == "ACCEPT" and not _PASSING.intersection(statuses):
        return "is ACCEPT without a result that passed"
    if verdict == "REJECT" and not blocking and _PASSING.intersection(statuses):
        return "is REJECT without a failed or errored result"
    return None


def _pairs(out: Exposition, run: str, matrices: Any) -> None:
    if not isinstance(matrices, list):
        raise MetricsError(f"{out.source}: pairwise is {type(matrices).__name__}, not a list")
    for i, m in enumerate(matrices):
        where = f"pairwise[{i}]"
        if not isinstance(m, Mapping) or not isinstance(m.get("pairs"), list):
            raise MetricsError(f"{out.source}: {where} has no list of pairs")
        check = _text(m.get("check"), f"{where}.check", out.source)
        unit = _text(m.get("unit", ""), f"{where}.unit", out.source, empty=True)
        for j, p in enumerate(m["pairs"]):
            at = f"{where}.pairs[{j}]"
            if not isinstance(p, Mapping):
                raise MetricsError(f"{out.source}: {at} is not an object")
            a, b = (_text(p.get(k), f"{at}.{k}", out.source) for k in ("a", "b"))
            out.add("rackgate_pair_status", (run, check, a, b),
                    _code(STATUS_CODE, p.get("status"), f"{at}.status", out.source), at)
            figure = finite(p.get("measured_gbps"))
            if figure is not None:
                out.add("rackgate_pair_value", (run, check, a, b, unit), figure, at)


def exposition(doc: Any, source: str) -> Exposition:
    """Every series of report document ``doc`` (``source``: its path, for errors).
    MetricsError naming the field when the document is not a report as judge writes it."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("run"), Mapping):
        raise MetricsError(f"{source}: not a rackgate report (no run object)")
    if not isinstance(doc.get("nodes"), list):
        raise MetricsError(f"{source}: nodes is not a list")
    out = Exposition(source)
    run = _text(doc["run"].get("run_id"), "run.run_id", source)
    run_verdict = _code(VERDICT_VALUE, doc.get("verdict"), "verdict", source)
    out.add("rackgate_run_verdict", (run,), run_verdict, "verdict")
    when = _unix_time(doc["run"].get("finished"))
    when = when if when is not None else _unix_time(doc.get("generated"))
    if when is None:
        raise MetricsError(f"{source}: neither run.finished "
                           f"({doc['run'].get('finished')!r}) nor generated "
                           f"({doc.get('generated')!r}) is an ISO 8601 time with a zone")
    out.add("rackgate_run_timestamp_seconds", (run,), when, "run.finished")
    for i, n in enumerate(doc["nodes"]):
        if not isinstance(n, Mapping) or not isinstance(n.get("results"), list):
            raise MetricsError(f"{source}: nodes[{i}] has no list of results")
        node = _text(n.get("name"), f"nodes[{i}].name", source)
        verdict = _code(VERDICT_VALUE, n.get("verdict"), f"nodes[{i}].verdict", source)
        out.add("rackgate_node_verdict", (run, _rack(n, f"nodes[{i}]", source), node),
                verdict, f"nodes[{i}] ({node})")
        for j, r in enumerate(n["results"]):
            where = f"nodes[{i}].results[{j}] ({node})"
            if not isinstance(r, Mapping):
                raise MetricsError(f"{source}: {where} is not an object")
            check = _text(r.get("check"), f"{where}.check", source)
            out.add("rackgate_check_status", (run, node, check),
                    _code(STATUS_CODE, r.get("status"), f"{where}.status", source), where)
            figure = finite(r.get("measured"))
            if figure is not None:
                unit = _text(r.get("unit") or "", f"{where}.unit", source, empty=True)
                out.add("rackgate_check_value", (run, node, check, unit), figure, where)
        said = _node_contradiction(n["verdict"], [r["status"] for r in n["results"]])
        if said:
            raise MetricsError(f"{source}: nodes[{i}] ({node}) {said}: the report "
                               f"contradicts itself")
    verdicts = out.samples["rackgate_node_verdict"].values()
    if run_verdict != int(bool(verdicts) and all(verdicts)):
        raise MetricsError(f"{source}: verdict is {doc['verdict']} with "
                           f"{sum(v == 0 for v in verdicts)} of {len(verdicts)} node(s) "
                           f"REJECTed: the report contradicts itself")
    _pairs(out, run, doc.get("pairwise", []))
    return out


def write_textfile(path: Path, text: str, mode: int = 0o644) -> None:
    """``text`` to ``path`` (:func:`rackgate.exposition.write_textfile`): checked with
    promtool's rules first (MetricsError, and the old file stays), then written atomically,
    so a scrape reads the old file or the new one, never half of one, never an invalid
    one."""
    try:
        expo.write_textfile(path, text, mode)
    except expo.ExpositionError as exc:
        raise MetricsError(f"{path}: not written: {exc}") from None


def check_text(text: str, source: str) -> None:
    """MetricsError when ``text`` breaks a rule of the format (for text bound for stdout)."""
    try:
        expo.check_text(text)
    except expo.ExpositionError as exc:
        raise MetricsError(f"{source}: {exc}") from None
