"""Write a judged run's reports: ``report.json`` (the record), ``report.html`` (people),
``report.xml`` (JUnit, CI systems), ``summary.md`` (a ticket). One function, one place that
knows the file names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackgate.model import describe
from rackgate.reports.html import render_html
from rackgate.reports.junit import render_junit
from rackgate.reports.markdown import render_markdown
from rackgate.store.evidence import atomic_write, write_json
from rackgate.store.manifest import RunError


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


def write_reports(doc: dict[str, Any], out: Path) -> Reports:
    """Write every report of ``doc`` into ``out``. RunError when report.json cannot be
    written, or (after writing the others) when a renderer failed."""
    paths = report_paths(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        try:  # compact: the C encoder, 4x faster
            write_json(paths.json, doc, indent=None, allow_nan=False)
        except ValueError:  # a NaN or infinity got this far: the report carries null instead
            doc = json_safe(doc)
            write_json(paths.json, doc, indent=None, allow_nan=False)
    except OSError as exc:
        raise RunError(f"cannot write {paths.json}: {exc.strerror or exc}") from None
    failed = []
    renderers = ((paths.html, render_html), (paths.junit, render_junit),
                 (paths.summary, render_markdown))
    for path, render in renderers:
        try:
            atomic_write(path, render(doc).encode())
        except Exception as exc:  # the other reports are still written
            failed.append(f"{path.name}: {describe(exc)}")
    if failed:
        raise RunError(f"{paths.json} written, but not " + "; ".join(failed))
    return paths
