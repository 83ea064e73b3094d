"""Where EvidenceStore.read, the fio parser and the report writer spend their time.

    python bench/micro_breakdown.py /var/tmp/rackgate-bench/run-10k --nodes 1000

Repeats, step by step and without a profiler's overhead, what ``EvidenceStore.read`` and
``parse_fio_json`` do for the evidence of the first ``--nodes`` nodes (page cache warm:
run it after a judge run), and times serialising the stored report.json with the
``indent=2`` that ``write_json`` uses against compact output. Prints microseconds per
evidence file and the projection to the run's size. It calls rackgate's own functions
where one exists and the standard library for the steps inside them; it edits nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import standin_checks

from rackgate.parsers.fio import _json_start, parse_fio_json
from rackgate.store.evidence import Evidence, EvidenceStore
from rackgate.store.manifest import read_manifest


def timed(label: str, n: int, scale: int, fn: Callable[[], Any]) -> Any:
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    print(f"  {label:<58} {dt / n * 1e6:8.1f} us/file  -> {dt * scale / n:6.2f} s at "
          f"{scale} files")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--skip-report", action="store_true", help="skip the report.json part")
    args = ap.parse_args(argv)
    run_dir: Path = args.run_dir

    manifest = read_manifest(run_dir)
    standin_checks.register_for_manifest(manifest)
    total = len(manifest["hosts"]) * len(manifest["checks"])
    pairs = [(h["name"], c) for h in manifest["hosts"][:args.nodes] for c in manifest["checks"]]
    store = EvidenceStore(run_dir)
    pairs = [p for p in pairs if store.meta_path(*p).is_file()]
    n = len(pairs)
    print(f"{n} evidence files of {args.nodes} nodes; projected to {total} (the whole run)")

    print("EvidenceStore.read, whole:")
    timed("EvidenceStore.read(host, check)", n, total,
          lambda: [store.read(h, c) for h, c in pairs])
    print("its steps:")
    metas = timed("pathlib: meta_path + relative_to", n, total,
                  lambda: [(store.meta_path(h, c), store.meta_path(h, c).relative_to(run_dir))
                           for h, c in pairs])
    metas = [m for m, _ in metas]
    timed("meta.is_file() (stat)", n, total, lambda: [m.is_file() for m in metas])
    texts = timed("meta.read_text() (~800 B)", n, total, lambda: [m.read_text("utf-8")
                                                                  for m in metas])
    docs = timed("json.loads(meta)", n, total, lambda: [json.loads(t) for t in texts])

    def build() -> list[Evidence]:
        out = []
        for d in docs:
            d = dict(d)
            d["argv"] = tuple(d["argv"])
            out.append(Evidence(**d))
        return out

    evs = timed("Evidence(**doc)", n, total, build)
    outs = timed("pathlib: run_dir / ev.stdout_file", n, total,
                 lambda: [run_dir / e.stdout_file for e in evs])
    datas = timed(".out read_bytes() (~6.5 KB)", n, total, lambda: [o.read_bytes() for o in outs])
    timed("hashlib.sha256(data).hexdigest()", n, total,
          lambda: [hashlib.sha256(d).hexdigest() for d in datas])
    stdouts = timed("data.decode('utf-8', errors='replace')", n, total,
                    lambda: [d.decode("utf-8", errors="replace") for d in datas])
    strs = [str(run_dir / e.stdout_file) for e in evs] + [str(m) for m in metas]
    timed("floor: os.open/os.read/os.close of both files, str paths", n, total,
          lambda: [_raw(p) for p in strs])

    fio = [s for e, s in zip(evs, stdouts, strict=True)
           if e.check != "node.identity" and e.outcome == "completed" and e.rc == 0]
    m = len(fio)
    print(f"parse_fio_json on {m} completed fio outputs (projection: per fio file, to "
          f"{total} files):")
    timed("parse_fio_json(stdout), whole", m, total, lambda: [_try(parse_fio_json, s)
                                                              for s in fio])
    timed("  json.JSONDecoder().raw_decode(text, _json_start(text))", m, total,
          lambda: [_try(lambda s=s: json.JSONDecoder().raw_decode(s, _json_start(s)))
                   for s in fio])
    timed("  json.loads(text) (one shared decoder, no _json_start)", m, total,
          lambda: [_try(json.loads, s) for s in fio])

    report = run_dir / "report.json"
    if not args.skip_report and report.is_file():
        print(f"report.json ({report.stat().st_size / 1e6:.0f} MB), serialising the whole "
              "document once:")
        doc = json.loads(report.read_text("utf-8"))
        body = timed1("json.dumps(doc, indent=2)  (what write_json does)",
                      lambda: json.dumps(doc, indent=2, sort_keys=False))
        timed1("json.dumps(doc)  (compact: the C encoder)", lambda: json.dumps(doc))
        timed1("json.dumps(doc, separators=(',', ':'))", lambda: json.dumps(
            doc, separators=(",", ":")))
        data = timed1(".encode()", lambda: (body + "\n").encode())
        with tempfile.TemporaryDirectory(dir=run_dir.parent) as tmp:
            path = Path(tmp) / "r.json"

            def write(sync: bool) -> None:
                with open(path, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    if sync:
                        os.fsync(fh.fileno())

            timed1("write the bytes, no fsync", lambda: write(False))
            timed1("write the bytes + fsync", lambda: write(True))
    return 0


def timed1(label: str, fn: Callable[[], Any]) -> Any:
    t = time.perf_counter()
    out = fn()
    print(f"  {label:<58} {time.perf_counter() - t:8.2f} s")
    return out


def _raw(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 1 << 20)
    finally:
        os.close(fd)


def _try(fn: Callable[..., Any], *a: Any) -> Any:
    try:
        return fn(*a)
    except ValueError:
        return None


if __name__ == "__main__":
    sys.exit(main())
