"""Parser for the JSON file nccl-tests writes with ``-J <file>`` (2.17.3+, file version 1-3).

Format, from NVIDIA/nccl-tests ``src/common.cu`` and ``src/util.cu``: ``{"version",
"args" (the test's argv: ``args[0]`` names the binary, read as ``program``), "nccl_version"
(code), "config": {"nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor" (or
"step_bytes"), "warmup_iters", "iterations", "validation", "devices": [{"rank", "group",
"pid", "hostname", "device", "device_hex", "device_info"}]}, "results": [{"size", "count",
"type", "redop", "root", "out_of_place"/"in_place": {"time" (or "cpu_time"), "alg_bw",
"bus_bw", "nwrong" (null when not validated)}}], "out_of_bounds": {"count", "okay"},
"average_bus_bandwidth": {"bandwidth", "okay"}, "errors": [...]}``. nccl-tests writes
``"nan"`` as a string where it measured nothing: that, ``NaN``/``Infinity`` and
overflowing numbers are refused.

Every figure must be a finite number, times, bandwidths and counts non-negative; a key
given twice in one size row or one of its sides is refused (a duplicated line would
silently replace a figure), and so is a size row or rank given twice (two runs). The
``results`` lists of several tests (``-d all``) are joined.

>>> run = parse_nccl_tests_json('{"version": 3, "results": [{"size": 1024, "count": 256, '
...     '"type": "float", "redop": "sum", "root": -1, "out_of_place": {"time": 10.0, '
...     '"alg_bw": 0.1, "bus_bw": 0.1, "nwrong": 0}}]}')
>>> run.source_format, run.rows[0].out_of_place.busbw_gbps, run.rows[0].in_place
('json', 0.1, None)
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.damage import json_float, oversized
from rackgate.parsers.nccl_tests.record import (
    NcclMeasurement,
    NcclRank,
    NcclRow,
    NcclTestsRun,
    nccl_version_from_code,
    refuse_duplicates,
)


def _merge_results(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON object hook: nccl-tests opens a new "results" list per test it runs (-d all).
    A key given twice in a size row or one of its sides would silently replace a figure
    (a duplicated line): refused."""
    out: dict[str, Any] = {}
    twice = []
    for key, value in pairs:
        if key == "results" and isinstance(out.get(key), list) and isinstance(value, list):
            out[key] = out[key] + value
        else:
            if key in out:
                twice.append(key)
            out[key] = value
    if twice and _MEASURED_KEYS & out.keys():
        raise ParseError(f"nccl-tests JSON: key(s) {', '.join(map(repr, twice))} appear twice "
                         "in one result object (duplicated output?)")
    return out


_MEASURED_KEYS = frozenset({"size", "count", "bus_bw", "alg_bw", "time", "cpu_time", "nwrong"})


def _jfloat(obj: dict[str, Any], key: str, where: str, negative: bool = False) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"nccl-tests JSON: {where}.{key} is missing or not a number "
                         f"(got {str(value)[:40]!r}; nccl-tests writes \"nan\" where it "
                         "measured nothing)")
    if isinstance(value, int) and abs(value) > 1e300:
        value = math.inf  # an integer beyond any float: no figure
    if not math.isfinite(value):
        raise ParseError(f"nccl-tests JSON: {where}.{key} {str(value)[:40]} is not a finite "
                         "number")
    if value < 0 and not negative:
        raise ParseError(f"nccl-tests JSON: {where}.{key} {value!r} is negative: not a "
                         "measurement")
    return float(value)


def _jint(value: Any, where: str, default: int | None = None) -> int:
    """An integer field: an int, or an integral float (JSON has one number type)."""
    if value is None and default is not None:
        return default
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,20}", value.strip()):
        return int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            (isinstance(value, float) and (not math.isfinite(value) or value != int(value))):
        raise ParseError(f"nccl-tests JSON: {where} is not an integer (got {value!r})")
    return int(value)


def _jside(row: dict[str, Any], key: str, where: str) -> NcclMeasurement | None:
    side = row.get(key)
    if side is None:
        return None
    if not isinstance(side, dict):
        raise ParseError(f"nccl-tests JSON: {where}.{key} is not an object")
    w = f"{where}.{key}"
    nwrong = side.get("nwrong")
    if nwrong is not None and (isinstance(nwrong, bool) or not isinstance(nwrong, int | float)
                               or (isinstance(nwrong, float) and not math.isfinite(nwrong))
                               or nwrong < 0 or nwrong != int(nwrong)):
        raise ParseError(f"nccl-tests JSON: {w}.nwrong is not a count (got {nwrong!r})")
    return NcclMeasurement(
        time_us=_jfloat(side, "time" if "time" in side else "cpu_time", w),
        algbw_gbps=_jfloat(side, "alg_bw", w), busbw_gbps=_jfloat(side, "bus_bw", w),
        wrong=None if nwrong is None else int(nwrong))


def _jrank(d: dict[str, Any], i: int) -> NcclRank:
    where = f"config.devices[{i}]"
    group = d.get("group")
    return NcclRank(_jint(d.get("rank"), f"{where}.rank"),
                    None if group is None else _jint(group, f"{where}.group"),
                    _jint(d.get("pid"), f"{where}.pid", 0), str(d.get("hostname", "")),
                    _jint(d.get("device"), f"{where}.device", -1),
                    str(d.get("device_hex", "")), str(d.get("device_info", "")))


def parse_nccl_tests_json(text: str) -> NcclTestsRun:
    try:
        # NaN and Infinity decode (Python's json): _jfloat refuses them naming the field
        doc = json.loads(text, object_pairs_hook=_merge_results, parse_float=json_float)
    except json.JSONDecodeError as exc:
        raise ParseError(f"nccl-tests JSON: not valid JSON at line {exc.lineno} column "
                         f"{exc.colno}: {exc.msg} (truncated file: did the run finish?)") from exc
    except RecursionError:
        raise ParseError("nccl-tests JSON: nested too deeply to be nccl-tests output") from None
    except ValueError as exc:  # an integer longer than Python converts
        raise ParseError(f"nccl-tests JSON: unreadable value: {str(exc)[:80]}") from None
    if not isinstance(doc, dict):
        raise ParseError("nccl-tests JSON: the top level is not an object")
    if why := oversized(doc, 64, 4096):  # nccl-tests' keys are words, its strings short
        raise ParseError(f"nccl-tests JSON: {why}: no output of nccl-tests' (damaged?)")
    results = doc.get("results")
    if not isinstance(results, list) or not results:
        raise ParseError("nccl-tests JSON: 'results' is missing or empty (no size rows)")
    rows = []
    for i, r in enumerate(results):
        where = f"results[{i}]"
        if not isinstance(r, dict):
            raise ParseError(f"nccl-tests JSON: {where} is not an object")
        if "size" not in r or "count" not in r or "type" not in r:
            raise ParseError(f"nccl-tests JSON: {where}: size, count or type missing")
        root = str(r.get("root", "")).strip()
        rows.append(NcclRow(size_bytes=_jint(r["size"], f"{where}.size"),
                            count=_jint(r["count"], f"{where}.count"),
                            type=str(r["type"]), redop=str(r.get("redop", "")).strip(),
                            root=_jint(root, f"{where}.root") if root else None,
                            out_of_place=_jside(r, "out_of_place", where),
                            in_place=_jside(r, "in_place", where), line=0))
    raw_config = doc.get("config")
    config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
    raw_devices = config.get("devices")
    devices: list[Any] = raw_devices if isinstance(raw_devices, list) else []
    ranks = tuple(_jrank(d, i) for i, d in enumerate(devices) if isinstance(d, dict))
    refuse_duplicates(rows, list(ranks))
    oob, avg = doc.get("out_of_bounds"), doc.get("average_bus_bandwidth")
    code = doc.get("nccl_version")

    def cfg(key: str) -> int | None:
        v = config.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    errs = doc.get("errors")
    args = doc.get("args")
    program = args[0].replace("\\", "/").rsplit("/", 1)[-1] \
        if isinstance(args, list) and args and isinstance(args[0], str) else None
    return NcclTestsRun(
        rows=tuple(rows), source_format="json",
        tests_version=f"json file version {doc.get('version')}",
        nccl_version=nccl_version_from_code(code)
        if isinstance(code, int) and not isinstance(code, bool) and code >= 0 else None,
        n_threads=cfg("nthreads"), n_gpus=cfg("ngpus"), min_bytes=cfg("minimum_bytes"),
        max_bytes=cfg("maximum_bytes"), warmup_iters=cfg("warmup_iters"),
        iters=cfg("iterations"), validation=cfg("validation"), ranks=ranks,
        program=program or None, step_factor=cfg("step_factor"), step_bytes=cfg("step_bytes"),
        out_of_bounds=_jint(oob["count"], "out_of_bounds.count")
        if isinstance(oob, dict) and "count" in oob else None,
        avg_busbw_gbps=_jfloat(avg, "bandwidth", "average_bus_bandwidth")
        if isinstance(avg, dict) else None,
        errors=tuple(str(e) for e in errs) if isinstance(errs, list) else ())


__all__ = ["parse_nccl_tests_json"]
