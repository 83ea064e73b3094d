"""Write a judged run's reports: ``report.json`` (the record), ``report.html`` (people),
``report.xml`` (JUnit, CI systems), ``summary.md`` (a ticket). One function, one place that
knows the file names; in a run directory each revision's reports are kept too
(``report.rev<N>.json``, ``.html``, ``.xml``: :func:`keep_revision`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackgate.documents import load_json
from rackgate.model import describe
from rackgate.refusal import Refusal
from rackgate.reports.html import render_html
from rackgate.reports.junit import iter_junit
from rackgate.reports.markdown import render_markdown
from rackgate.store.evidence import atomic_write


@dataclass(frozen=True)
class Reports:
    """Where the reports of one judgement are."""

    json: Path
    html: Path
    junit: Path
    summary: Path


def report_paths(out: Path) -> Reports:
    return Reports(out / "report.json", out / "report.html", out / "report.xml",
                   out / "summary.md")


def revision_path(path: Path, revision: int) -> Path:
    """Where revision ``revision``'s copy of a report is kept.

    >>> revision_path(Path("runs/r1/report.json"), 2).name
    'report.rev2.json'
    """
    return path.with_name(f"{path.stem}.rev{revision}{path.suffix}")


def keep_earlier(out: Path) -> None:
    """A run judged before revisions were kept: its report.json (and .html, .xml) kept as
    the revision it records, before the next judgement replaces them."""
    paths = report_paths(out)
    if not paths.json.is_file() or any(out.glob("report.rev*.json")):
        return
    try:
        doc = load_json(paths.json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # nothing readable to keep: the new judgement stands alone
    revision = doc.get("revision", 1) if isinstance(doc, dict) else None
    if isinstance(revision, int) and not isinstance(revision, bool) and revision >= 1:
        keep_revision(out, revision)


def keep_revision(out: Path, revision: int) -> None:
    """Copy the reports in ``out`` (report.json, .html, .xml, those there) to revision
    ``revision``'s names, so that judging the next revision keeps them; Refusal naming
    the file when one cannot be copied."""
    paths = report_paths(out)
    for path in (paths.json, paths.html, paths.junit):
        try:
            if path.is_file():
                atomic_write(revision_path(path, revision), path.read_bytes())
        except OSError as exc:
            raise Refusal(f"cannot keep {path} as revision {revision}: "
                           f"{exc.strerror or exc}") from None


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None, so that the report is
    JSON that any parser accepts (judging already turns such figures into errors; this is
    the last guard for text fields and details).

    >>> json_safe({"a": [1.0, float("nan")], "b": float("-inf")})
    {'a': [1.0, None], 'b': None}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


_NODES = "\0rackgate:nodes\0"  # where the nodes go in the document's JSON


def json_bytes(doc: dict[str, Any]) -> bytearray:
    """``json.dumps(doc, allow_nan=False) + "\\n"``, encoded, built node by node into one
    buffer (never the whole text as a str and then again as bytes); ValueError on a NaN or
    an infinity, as json.dumps.

    >>> doc = {"a": 1, "nodes": [{"n": "x"}, {"n": "y"}], "z": [2.5]}
    >>> bytes(json_bytes(doc)) == (json.dumps(doc, allow_nan=False) + "\\n").encode()
    True
    """
    if not isinstance(doc.get("nodes"), list):
        return bytearray((json.dumps(doc, allow_nan=False) + "\n").encode())
    head, sep, tail = json.dumps({**doc, "nodes": _NODES}, allow_nan=False).partition(
        json.dumps(_NODES))
    if not sep or json.dumps(_NODES) in tail:  # the marker is in the document's own text
        return bytearray((json.dumps(doc, allow_nan=False) + "\n").encode())
    out = bytearray(head.encode())
    out += b"["
    for i, node in enumerate(doc["nodes"]):
        if i:
            out += b", "
        out += json.dumps(node, allow_nan=False).encode()
    out += b"]"
    out += (tail + "\n").encode()
    return out


def junit_bytes(doc: dict[str, Any]) -> bytearray:
    """report.xml, encoded suite by suite into one buffer."""
    out = bytearray()
    for piece in iter_junit(doc):
        out += piece.encode()
    return out


def _encoded(render: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], bytes]:
    return lambda doc: render(doc).encode()


def evidence_base(run_dir: Path | None, out: Path) -> str:
    """The run directory (where the evidence paths start) relative to ``out``, as the
    HTML report's links need it: "" when the reports are written into the run directory.

    >>> evidence_base(Path("/r/runs/r1"), Path("/r/runs/r1")), evidence_base(None, Path("x"))
    ('', '')
    >>> evidence_base(Path("/r/runs/r1"), Path("/r/strict"))
    '../runs/r1'
    """
    if run_dir is None:
        return ""
    rel = os.path.relpath(run_dir.resolve(), out.resolve())
    return "" if rel == "." else Path(rel).as_posix()


def write_reports(doc: dict[str, Any], out: Path, run_dir: Path | None = None) -> Reports:
    """Write every report of ``doc`` into ``out`` (the HTML report's evidence links lead
    into ``run_dir``, the run directory; into ``out`` without one). Refusal when
    report.json cannot be written, or (after writing the others) when a renderer failed."""
    paths = report_paths(out)
    base = evidence_base(run_dir, out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        try:  # compact: the C encoder, 4x faster
            data = json_bytes(doc)
        except ValueError:  # a NaN or infinity got this far: the report carries null instead
            doc = json_safe(doc)
            data = json_bytes(doc)
        atomic_write(paths.json, data)
        del data
    except OSError as exc:
        raise Refusal(f"cannot write {paths.json}: {exc.strerror or exc}") from None
    failed = []
    renderers: tuple[tuple[Path, Callable[[dict[str, Any]], bytes | bytearray]], ...] = (
        (paths.html, _encoded(lambda d: render_html(d, base))), (paths.junit, junit_bytes),
        (paths.summary, _encoded(render_markdown)))
    for path, render in renderers:
        try:
            atomic_write(path, render(doc))
        except Exception as exc:  # the other reports are still written
            failed.append(f"{path.name}: {describe(exc)}")
    if failed:
        raise Refusal(f"{paths.json} written, but not " + "; ".join(failed))
    return paths
