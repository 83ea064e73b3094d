"""Parser for ``nvbandwidth -j`` (NVIDIA/nvbandwidth 0.5 to 0.8, ``json_output.cpp``).

One object, ``{"nvbandwidth": {...}}``, written by jsoncpp when the run ends:

* ``version``, ``git_version``, ``CUDA Runtime Version`` (a number), ``Driver Version``;
* ``GPU Device list`` (0.8): ``"0: NVIDIA H100 80GB HBM3 (00000000:18:00): (host)"``;
* ``testcases``: per testcase ``name`` and ``status`` (``Passed``, ``Waived``, ``Running``,
  ``Error``; ``ERROR`` for a name the tool does not know), and for a passed one
  ``bandwidth_description``, ``bandwidth_matrix`` (rows of strings: each figure in GB/s
  with six significant digits, or ``"N/A"``) and ``sum`` (a number); ``-v`` adds ``min``,
  ``max``, ``average``. A testcase whose run threw stays ``Running`` and is followed by an
  entry of the same name with status ``Error`` (``setTestcaseStatusAndAddIfNeeded`` looks
  for the list in the wrong place): the two are read as one errored testcase. The
  bidirectional device-to-device testcases append their three matrices' rows to one
  ``bandwidth_matrix``;
* ``warning`` and ``error``: the run's last warning and its global error.

Anything else (an unknown key, a figure that is not a plain decimal number, rows of unequal
length, a passed testcase without its matrix or sum, a sum that is not the sum of its
figures, a second document after the first) is a ParseError naming it.

>>> r = parse_nvbandwidth_json('{"nvbandwidth": {"version": "v0.8", "testcases": ['
...     '{"name": "host_to_device_memcpy_ce", "status": "Passed", "sum": 55.1234,'
...     ' "bandwidth_description": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",'
...     ' "bandwidth_matrix": [["55.1234"]]}]}}')
>>> r.form, r.testcases[0].matrices[0].rows
('json', ((55.1234,),))
"""

from __future__ import annotations

import re
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.damage import oversized
from rackgate.parsers.nvbandwidth.model import (
    JSON_FORMAT,
    MAX_NAME,
    MAX_VERSION,
    Device,
    Matrix,
    NvbandwidthRun,
    Testcase,
    TestcaseStatus,
    checked_sum,
)
from rackgate.parsers.strict_json import decode, finite

_TOP = frozenset({"version", "git_version", "CUDA Runtime Version", "Driver Version",
                  "GPU Device list", "testcases", "warning", "error"})
_CASE = frozenset({"name", "status", "bandwidth_description", "bandwidth_matrix", "sum",
                   "min", "max", "average", "error"})
_STATUS: dict[str, TestcaseStatus] = {"Passed": "passed", "Waived": "waived",
                                      "Running": "running", "Error": "error",
                                      "ERROR": "error", "Not Found": "error"}
_NAME = re.compile(r"[A-Za-z0-9_]{1,100}\Z")
_FIGURE = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,15})?(?:e[-+][0-9]{1,3})?\Z")
_DEVICE = re.compile(r"([0-9]{1,4}): (.+?)(?: \(([0-9a-f]{8}:[0-9a-f]{2}:[0-9a-f]{2})\))?"
                     rf"(?:: \([^()]{{0,{MAX_NAME}}}\))?\Z")


def _fail(why: str) -> ParseError:
    return ParseError(f"{JSON_FORMAT}: {why}")


def _text(doc: dict[str, Any], key: str, where: str, pattern: str = r"\S{1,80}\Z"
          ) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not re.match(pattern, value):
        raise _fail(f"{where}.{key} is {str(value)[:60]!r}, not what nvbandwidth writes there")
    return value


def _devices(value: Any) -> tuple[Device, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _fail("GPU Device list is not a list")
    out = []
    for i, item in enumerate(value):
        m = _DEVICE.match(item) if isinstance(item, str) else None
        if m is None or int(m.group(1)) != i or len(m.group(2)) > MAX_NAME:
            raise _fail(f"GPU Device list[{i}] is {str(item)[:60]!r}, not '{i}: <name> "
                        "(<bus id>): (<host>)' (edited output?)")
        out.append(Device(i, m.group(2), m.group(3)))
    return tuple(out)


def _cell(value: Any, where: str) -> float | None:
    if value == "N/A":
        return None
    if not isinstance(value, str) or not _FIGURE.match(value):
        raise _fail(f"{where} is {str(value)[:40]!r}, not a figure nvbandwidth writes")
    return finite(float(value), where)


def _matrix(case: dict[str, Any], name: str, where: str) -> Matrix:
    desc, rows = case.get("bandwidth_description"), case.get("bandwidth_matrix")
    if not isinstance(desc, str) or not desc:
        raise _fail(f"{where} passed without its bandwidth_description")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) and r
                                                         for r in rows):
        raise _fail(f"{where} passed without a bandwidth_matrix of rows")
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise _fail(f"{where}.bandwidth_matrix has rows of unequal length (edited output?)")
    cells = tuple(tuple(_cell(v, f"{where}.bandwidth_matrix[{r}][{c}]")
                        for c, v in enumerate(row)) for r, row in enumerate(rows))
    m = Matrix(desc, width, cells, name, finite(case.get("sum"), f"{where}.sum"), 0)
    checked_sum(m, JSON_FORMAT, None)
    return m


def _testcases(value: Any) -> tuple[Testcase, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _fail("testcases is not a list")
    out: list[Testcase] = []
    for i, case in enumerate(value):
        where = f"testcases[{i}]"
        if not isinstance(case, dict) or set(case) - _CASE:
            extra = sorted(set(case) - _CASE) if isinstance(case, dict) else []
            raise _fail(f"{where} is not a testcase object" +
                        (f" (unknown keys {', '.join(extra)[:80]})" if extra else ""))
        name = _text(case, "name", where, _NAME.pattern)
        said = case.get("status")
        status = _STATUS.get(said) if isinstance(said, str) else None
        if name is None or status is None:
            raise _fail(f"{where} has no name or no status nvbandwidth writes "
                        f"(got {str(said)[:40]!r})")
        error = case.get("error")
        message = error if isinstance(error, str) else ""
        if status == "error" and out and out[-1].name == name and out[-1].status == "running":
            out[-1] = Testcase(name, "error", message, (), 0)  # the Running entry it ends
            continue
        matrices = (_matrix(case, name, where),) if status == "passed" else ()
        out.append(Testcase(name, status, message, matrices, 0))
    return tuple(out)


def parse_nvbandwidth_json(text: str) -> NvbandwidthRun:
    """The JSON output of one nvbandwidth run; ParseError naming what is wrong otherwise."""
    doc, end = decode(text, JSON_FORMAT)
    if text[end:].strip():
        raise _fail("more text after the JSON document (two documents: a run that failed "
                    "prints its error, then the document again)")
    if problem := oversized(doc, 64, 4096):
        raise _fail(f"{problem} (damaged output?)")
    if not isinstance(doc, dict) or set(doc) != {"nvbandwidth"} \
            or not isinstance(doc["nvbandwidth"], dict):
        raise _fail("the document is not one object holding 'nvbandwidth'")
    body: dict[str, Any] = doc["nvbandwidth"]
    if extra := sorted(set(body) - _TOP):
        raise _fail(f"unknown keys {', '.join(extra)[:120]} (another tool's, or a newer "
                    "format this parser does not know)")
    version = _text(body, "version", "nvbandwidth")
    if version is None:
        raise _fail("no version (not nvbandwidth's output?)")
    runtime = body.get("CUDA Runtime Version")
    if runtime is not None and (isinstance(runtime, bool) or not isinstance(runtime, int)
                                or not 0 <= runtime < 10**9):
        raise _fail(f"CUDA Runtime Version is {str(runtime)[:40]!r}, not a version number")
    error = body.get("error")
    if any(body.get(k) is not None and not isinstance(body[k], str) for k in ("error", "warning")):
        raise _fail("error or warning is not a string")
    return NvbandwidthRun(
        form="json", version=version,
        git_version=_text(body, "git_version", "nvbandwidth", rf"\S{{0,{MAX_VERSION}}}\Z"),
        cuda_runtime_version=runtime,
        driver_version=_text(body, "Driver Version", "nvbandwidth"),
        devices=_devices(body.get("GPU Device list")),
        testcases=_testcases(body.get("testcases")), error=error)


__all__ = ["parse_nvbandwidth_json"]
