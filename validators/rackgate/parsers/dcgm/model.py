"""The record of ``dcgmi diag -r N``, which both readers (``parsers.dcgm``: JSON,
``parsers.dcgm.text``: the text table) build.

Each result has a scope (NVIDIA/DCGM ``dcgmi/Diag.cpp``, DCGM 2.x to 4.x):

* ``gpu``: a result of a per-GPU test, for the GPUs in ``gpus``: a ``gpu_ids`` result
  (DCGM 2.x/3.x JSON), an ``entity_group: GPU`` result (4.x JSON), a ``Pass - All`` /
  ``Fail - GPUs: 1, 2`` row (3.x text) or a ``GPU3: Pass`` row (4.x text). Empty
  ``gpus``: the result claims to be a GPU's and names none (a damaged ``gpu_ids``, an
  ``- All`` that no device list resolves, a result outside the Deployment category with
  no GPU at all: DCGM names the GPU of every result of its per-GPU plugins).
* ``node``: a node-level result, judged on its own status: the Deployment (level-1)
  checks of DCGM 2.x/3.x (Denylist, NVML Library, CUDA Main Library, Permissions and OS
  Blocks, Persistence Mode, Environment Variables, Page Retirement/Row Remap, Graphics
  Processes, Inforom), which DCGM reports for the node and never per GPU; a test's
  overall row (4.x text), an ``Error`` row (3.x text), a non-GPU entity (``CPU0``).
  Here ``gpus`` names the GPUs its message is about (3.x JSON ``gpu_id``, the GPU an
  ``Error`` row names), never GPUs it tested.

``devices``: how many GPUs DCGM says it ran on, where the output says (3.x JSON ``GPU
Device IDs``, 4.x JSON ``entity_groups``, the text table's ``GPU Device IDs Detected``).

>>> DiagResult("Deployment", "Inforom", (), "pass", scope="node").scope
'node'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from rackgate.parsers import ParseError

DiagStatus = Literal["pass", "fail", "warn", "skip"]
DiagScope = Literal["gpu", "node"]
_STATUS: dict[str, DiagStatus] = {"pass": "pass", "fail": "fail", "warn": "warn",
                                  "warning": "warn", "skip": "skip", "not run": "skip",
                                  "notrun": "skip", "not_run": "skip"}
JSON_FORMAT = "dcgmi diag -j JSON"
TEXT_FORMAT = "dcgmi diag text table"
DEPLOYMENT = "deployment"  # DCGM's category of node-level checks (PLUGIN_CATEGORY_DEPLOYMENT)


@dataclass(frozen=True)
class DiagResult:
    """One test's result: for the GPUs in ``gpus`` (scope ``gpu``), or for the node."""

    category: str
    test: str
    gpus: tuple[int, ...]
    status: DiagStatus
    info: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    scope: DiagScope = "gpu"


@dataclass(frozen=True)
class DcgmDiag:
    form: Literal["json", "text"]
    results: tuple[DiagResult, ...]
    complete: bool  # False for a text table cut before its closing border
    version: str | None = None
    devices: int | None = None  # GPUs DCGM ran on, where the output lists them


def diag_status(value: Any, where: str, fmt: str) -> DiagStatus:
    status = _STATUS.get(str(value).strip().lower()) if isinstance(value, str) else None
    if status is None:
        raise ParseError(f"{fmt}: {where}.status is {value!r}, not Pass, Fail, Warn, Skip or "
                         "Not Run")
    return status


__all__ = ["DEPLOYMENT", "JSON_FORMAT", "TEXT_FORMAT", "DcgmDiag", "DiagResult", "DiagScope",
           "DiagStatus", "diag_status"]
