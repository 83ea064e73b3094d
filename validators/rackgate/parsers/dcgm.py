"""Parsers for ``dcgmi diag -r N`` results: the JSON form (``-j``) and the text table.

JSON (NVIDIA DCGM user guide, "DCGM Diagnostics", JSON output). One object with the test
tree under ``"DCGM GPU Diagnostic"`` (DCGM 2.x/3.x) or ``"DCGM Diagnostic"`` (DCGM 4.x):
``test_categories`` (Deployment, Integration, Hardware, Stress, ...) -> ``tests`` (``name``)
-> ``results``: one object per GPU or group of GPUs with ``status`` (Pass, Fail, Warn, Skip,
Not Run; DCGM 1.x wrote them in capitals), ``info`` (a string in 3.x, a list in 4.x) and
``warnings`` (objects with a ``warning`` text, or plain strings). 3.x names the GPUs in
``gpu_ids`` (``"0"`` or ``"0,1,2"``); 4.x in ``entity_group`` / ``entity_id``. Results
without a GPU (the Deployment checks in 3.x) apply to the whole node. Version fields sit
under ``metadata`` (4.x) or at the top level (3.x).

Text (``dcgmi diag -r N`` without ``-j``): a ``|``-bordered table, a ``-----  Category ---``
row per category, ``| Test name | Pass - GPUs: 1, 2 |`` rows with continuation rows for other
GPU sets, and ``Warning`` / ``Error`` / ``Info`` rows whose text wraps over several rows. A
table without its closing ``+---`` border is marked incomplete: it can show a failure but
is no evidence that every test ran.

>>> d = parse_dcgm_diag('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware",'
...     ' "tests": [{"name": "memory", "results": [{"entity_group": "GPU", "entity_id": 3,'
...     ' "status": "Fail", "warnings": [{"warning": "DBE on GPU 3"}]}]}]}]}}')
>>> r = d.results[0]
>>> (r.category, r.test, r.gpus, r.status, r.warnings)
('Hardware', 'memory', (3,), 'fail', ('DBE on GPU 3',))
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from rackgate.parsers import ParseError
from rackgate.parsers.strict_json import decode

DiagStatus = Literal["pass", "fail", "warn", "skip"]
_STATUS: dict[str, DiagStatus] = {"pass": "pass", "fail": "fail", "warn": "warn",
                                  "warning": "warn", "skip": "skip", "not run": "skip",
                                  "notrun": "skip", "not_run": "skip"}
_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
JSON_FORMAT = "dcgmi diag -j JSON"
TEXT_FORMAT = "dcgmi diag text table"


@dataclass(frozen=True)
class DiagResult:
    """One test's result for a set of GPUs (empty ``gpus``: the whole node)."""

    category: str
    test: str
    gpus: tuple[int, ...]
    status: DiagStatus
    info: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DcgmDiag:
    form: Literal["json", "text"]
    results: tuple[DiagResult, ...]
    complete: bool  # False for a text table cut before its closing border
    version: str | None = None


def _status(value: Any, where: str, fmt: str) -> DiagStatus:
    status = _STATUS.get(str(value).strip().lower()) if isinstance(value, str) else None
    if status is None:
        raise ParseError(f"{fmt}: {where}.status is {value!r}, not Pass, Fail, Warn, Skip or "
                         "Not Run")
    return status


def _texts(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [] if value is None else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("warning", item.get("info", json.dumps(item, sort_keys=True)))
        out.append(str(item))
    return tuple(out)


def _gpus(result: dict[str, Any], where: str) -> tuple[int, ...]:
    ids = result.get("gpu_ids")
    if isinstance(ids, int) and not isinstance(ids, bool):
        return (ids,)
    if isinstance(ids, str) and ids.strip():
        parts = [x.strip() for x in ids.split(",")]
        if not all(re.fullmatch(r"[0-9]{1,4}", x) for x in parts):
            raise ParseError(f"{JSON_FORMAT}: {where}.gpu_ids is {ids[:60]!r}, not a list of "
                             "GPU indices")
        return tuple(int(x) for x in parts)
    entity = result.get("entity_id")
    group = str(result.get("entity_group", "GPU"))
    if isinstance(entity, int) and not isinstance(entity, bool) and group.upper() == "GPU":
        return (entity,)
    return ()


def _list(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if not isinstance(value, list):
        raise ParseError(f"{JSON_FORMAT}: {where}.{key} is missing or not a list")
    return value


def _parse_json(doc: Any) -> DcgmDiag:
    if not isinstance(doc, dict):
        raise ParseError(f"{JSON_FORMAT}: the top level is not an object")
    root = next((doc[k] for k in _ROOTS if k in doc), None)
    if not isinstance(root, dict):
        raise ParseError(f"{JSON_FORMAT}: no 'DCGM Diagnostic' or 'DCGM GPU Diagnostic' "
                         f"object (top-level keys: {sorted(doc)[:6]})")
    results = []
    for ci, cat in enumerate(_list(root, "test_categories", "diagnostic")):
        cw = f"test_categories[{ci}]"
        if not isinstance(cat, dict):
            raise ParseError(f"{JSON_FORMAT}: {cw} is not an object")
        for ti, test in enumerate(_list(cat, "tests", cw)):
            tw = f"{cw}.tests[{ti}]"
            if not isinstance(test, dict):
                raise ParseError(f"{JSON_FORMAT}: {tw} is not an object")
            for ri, res in enumerate(_list(test, "results", tw)):
                rw = f"{tw}.results[{ri}]"
                if not isinstance(res, dict):
                    raise ParseError(f"{JSON_FORMAT}: {rw} is not an object")
                results.append(DiagResult(
                    str(cat.get("category", f"category {ci}")),
                    str(test.get("name", f"test {ti}")), _gpus(res, rw),
                    _status(res.get("status"), rw, JSON_FORMAT),
                    _texts(res.get("info")), _texts(res.get("warnings"))))
    meta = doc.get("metadata")
    version = (meta.get("version") if isinstance(meta, dict) else None) or doc.get("version")
    return DcgmDiag("json", tuple(results), True, None if version is None else str(version))


_ROW = re.compile(r"^\|(.*?)\|(.*?)\|?\s*$")
_CATEGORY = re.compile(r"^\|-+\s+(.+?)\s+-+\+")
_RESULT = re.compile(r"^(Pass|Fail|Warn|Skip|Not Run)\b"
                     r"(?:\s*-\s*GPUs?:\s*([0-9,\s]{1,200}))?\s*$", re.IGNORECASE)
_MESSAGES = {"warning", "error", "info"}


def _parse_text(text: str) -> DcgmDiag:
    results: list[DiagResult] = []
    category, test = "", ""
    message: list[str] | None = None
    kind = ""
    complete = False
    seen_row = False

    def flush() -> None:
        nonlocal message
        if message is None:
            return
        words = "".join(message).strip()
        gpu = re.search(r"\bGPU ([0-9]{1,4})\b", words)
        gpus = (int(gpu.group(1)),) if gpu else ()
        if kind == "error":  # an Error row is a failure of the test (or category) above it
            results.append(DiagResult(category, test or category, gpus, "fail",
                                      warnings=(words,)))
        elif results and kind == "warning":
            last = results[-1]
            results[-1] = DiagResult(last.category, last.test, last.gpus, last.status,
                                     last.info, (*last.warnings, words))
        message = None

    for raw in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.startswith("+") and set(line) <= {"+", "-", "="}:
            complete = seen_row
            continue
        cat = _CATEGORY.match(line)
        if cat:
            flush()
            category, test, seen_row, complete = cat.group(1), "", True, False
            continue
        row = _ROW.match(line)
        if not row:
            raise ParseError(f"{TEXT_FORMAT}: {line[:60]!r} is not a '| name | result |' row")
        left, right = row.group(1).strip(), row.group(2).strip()
        seen_row, complete = True, False
        if left.lower() in _MESSAGES:
            flush()
            kind, message = left.lower(), [right]
        elif not left and message is not None:
            # wrapped text: the column edge splits words mid-word; a space kept after the
            # cell's one-space padding marks a boundary between words
            sep = " " if row.group(2).startswith("  ") else ""
            message.append(sep + right)
        elif left in ("Diagnostic", "") and right in ("Result", ""):
            continue
        else:
            flush()
            res = _RESULT.match(right)
            if not res:
                raise ParseError(f"{TEXT_FORMAT}: result {right!r} of {left or test!r} is not "
                                 "'Pass', 'Fail', 'Warn' or 'Skip' [- GPUs: n, ...]")
            test = left or test
            ids = res.group(2)
            parts = [x for x in re.split(r"[,\s]+", ids) if x] if ids else []
            if any(len(x) > 4 for x in parts):
                raise ParseError(f"{TEXT_FORMAT}: GPU list {ids.strip()[:40]!r} of "
                                 f"{left or test!r} is not a list of GPU indices")
            gpus = tuple(int(x) for x in parts)
            results.append(DiagResult(category, test, gpus,
                                      _status(res.group(1), test, TEXT_FORMAT)))
    flush()
    if not results:
        raise ParseError(f"{TEXT_FORMAT}: no test result rows")
    return DcgmDiag("text", tuple(results), complete)


def parse_dcgm_diag(text: str) -> DcgmDiag:
    """Parse ``dcgmi diag -j`` JSON, or the text table as a fallback; else ParseError."""
    stripped = text.lstrip()
    if not stripped:
        raise ParseError(f"{JSON_FORMAT}: the output is empty")
    if stripped.startswith("{"):
        doc, end = decode(stripped, JSON_FORMAT)
        if stripped[end:].strip():
            raise ParseError(f"{JSON_FORMAT}: text after the JSON object: "
                             f"{stripped[end:].strip()[:40]!r}")
        return _parse_json(doc)
    if stripped.startswith(("|", "+")):
        return _parse_text(stripped)
    raise ParseError(f"{JSON_FORMAT}: the output is neither the JSON form (starts with '{{') "
                     f"nor the text table (starts with '+' or '|'): {stripped[:40]!r}")
