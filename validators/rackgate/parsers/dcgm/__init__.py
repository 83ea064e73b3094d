"""Parsers for ``dcgmi diag -r N`` results: the JSON form (``-j``) and the text table.

JSON (NVIDIA DCGM user guide, "DCGM Diagnostics", JSON output; ``dcgmi/Diag.cpp``). One
object with the test tree under ``"DCGM GPU Diagnostic"`` (DCGM 2.x/3.x) or ``"DCGM
Diagnostic"`` (DCGM 4.x): ``test_categories`` (Deployment, Integration, Hardware, Stress,
...) -> ``tests`` (``name``) -> ``results``: one object per GPU or group of GPUs with
``status`` (Pass, Fail, Warn, Skip, Not Run; DCGM 1.x wrote them in capitals), ``info``
(a string in 3.x, a list in 4.x) and ``warnings`` (objects with a ``warning`` text, or
plain strings; 3.x's Deployment results write the text under ``warnings``). 3.x names the
GPUs in ``gpu_ids`` (``"0"`` or ``"0,1,2"``); 4.x in ``entity_group`` / ``entity_id``.
3.x's Deployment checks (the level-1 tests) name no GPU: they are node-level results
(``dcgm_model``), with the GPU an error is about in ``gpu_id``; any other result that names
no GPU claims to be a GPU's and names none. Version fields sit under ``metadata`` (4.x)
or at the top level (3.x); the GPUs of the run under ``"GPU Device IDs"`` (3.x, one
device ID per GPU) or ``entity_groups`` (4.x). The text table: ``parsers.dcgm.text``.

>>> d = parse_dcgm_diag('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware",'
...     ' "tests": [{"name": "memory", "results": [{"entity_group": "GPU", "entity_id": 3,'
...     ' "status": "Fail", "warnings": [{"warning": "DBE on GPU 3"}]}]}]}]}}')
>>> r = d.results[0]
>>> (r.category, r.test, r.gpus, r.status, r.warnings, r.scope)
('Hardware', 'memory', (3,), 'fail', ('DBE on GPU 3',), 'gpu')
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

from rackgate.parsers import ParseError
from rackgate.parsers.damage import oversized
from rackgate.parsers.dcgm.model import (
    DEPLOYMENT,
    JSON_FORMAT,
    TEXT_FORMAT,
    DcgmDiag,
    DiagResult,
    DiagScope,
    DiagStatus,
    diag_status,
)
from rackgate.parsers.dcgm.text import PREAMBLE, parse_dcgm_text
from rackgate.parsers.strict_json import decode

_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")


def _integer(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _texts(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [] if value is None else [value]
    out = []
    for item in items:
        if isinstance(item, dict):  # 3.x's Deployment results write their text as 'warnings'
            item = next((item[k] for k in ("warning", "warnings", "info") if k in item),
                        json.dumps(item, sort_keys=True))
        out.append(str(item))
    return tuple(out)


def _gpus(result: dict[str, Any], category: str, where: str
          ) -> tuple[tuple[int, ...], DiagScope]:
    """The GPUs a result names and its scope (``dcgm_model``)."""
    if "gpu_ids" in result:  # 2.x/3.x per-GPU plugins: "0" or "0,1,2"
        ids = result["gpu_ids"]
        if _integer(ids):
            return (ids,), "gpu"
        if not isinstance(ids, str) or not ids.strip():
            return (), "gpu"  # claims GPUs and names none
        parts = [x.strip() for x in ids.split(",")]
        if not all(re.fullmatch(r"[0-9]{1,4}", x) for x in parts):
            raise ParseError(f"{JSON_FORMAT}: {where}.gpu_ids is {ids[:60]!r}, not a list of "
                             "GPU indices")
        return tuple(int(x) for x in parts), "gpu"
    if "entity_group" in result or "entity_id" in result:  # 4.x: one entity per result
        if str(result.get("entity_group", "GPU")).upper() != "GPU":
            return (), "node"  # a CPU, a switch: judged on its own result
        entity = result.get("entity_id")
        return ((entity,) if _integer(entity) else ()), "gpu"
    if category.strip().lower() == DEPLOYMENT:  # 2.x/3.x level-1 checks: the node's
        about = result.get("gpu_id")  # the GPU its error names, where one does
        return ((about,) if _integer(about) else ()), "node"
    return (), "gpu"  # DCGM names the GPU of every per-GPU plugin's result


def _devices(doc: dict[str, Any]) -> int | None:
    """How many GPUs the run covered: 3.x lists one device ID per GPU ("GPU Device IDs"),
    4.x the GPU entities ("entity_groups"); None where the output does not say."""
    ids = doc.get("GPU Device IDs")
    if isinstance(ids, list):
        return len(ids)
    groups = doc.get("entity_groups")
    if not isinstance(groups, list):
        return None
    gpus = [g.get("entities") for g in groups if isinstance(g, dict)
            and str(g.get("entity_group", "")).upper() == "GPU"]
    if len(gpus) != 1 or not isinstance(gpus[0], list):
        return None
    return len(gpus[0])


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
                category = str(cat.get("category", f"category {ci}"))
                gpus, scope = _gpus(res, category, rw)
                results.append(DiagResult(
                    category, str(test.get("name", f"test {ti}")), gpus,
                    diag_status(res.get("status"), rw, JSON_FORMAT),
                    _texts(res.get("info")), _texts(res.get("warnings")), scope))
    meta = doc.get("metadata")
    version = (meta.get("version") if isinstance(meta, dict) else None) or doc.get("version")
    return DcgmDiag("json", tuple(results), True, None if version is None else str(version),
                    _devices(doc))


def parse_dcgm_diag(text: str) -> DcgmDiag:
    """Parse ``dcgmi diag -j`` JSON, or the text table as a fallback; else ParseError."""
    stripped = text.lstrip()
    if not stripped:
        raise ParseError(f"{JSON_FORMAT}: the output is empty")
    if stripped.startswith("{"):
        doc, end = decode(stripped, JSON_FORMAT)
        if why := oversized(doc, 128, 8192):  # DCGM's keys are names, its messages short
            raise ParseError(f"{JSON_FORMAT}: {why}: no output of dcgmi's (damaged?)")
        if stripped[end:].strip():
            raise ParseError(f"{JSON_FORMAT}: text after the JSON object: "
                             f"{stripped[end:].strip()[:40]!r}")
        return _parse_json(doc)
    if stripped.startswith(("|", "+", PREAMBLE)):
        return parse_dcgm_text(stripped)
    raise ParseError(f"{JSON_FORMAT}: the output is neither the JSON form (starts with '{{') "
                     f"nor the text table (starts with '+', '|' or {PREAMBLE!r}): "
                     f"{stripped[:40]!r}")


__all__ = ["JSON_FORMAT", "PREAMBLE", "TEXT_FORMAT", "DcgmDiag", "DiagResult", "DiagScope",
           "DiagStatus", "parse_dcgm_diag"]
