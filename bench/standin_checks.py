"""BENCHMARK STAND-INS, not real checks: copies of ``fio.seq_read`` under other names.

To judge a run of C checks per node of one family (``bench/make_run.py``), the benchmark
registers ``bench.fio_01`` ... ``bench.fio_NN`` in ``rackgate.checks.REGISTRY`` when this
module is imported: each is ``dataclasses.replace(REGISTRY["fio.seq_read"], name=...)``,
so it runs the same parser and judge on the same kind of evidence (~6.5 KB of fio JSON).
``bench/make_mixed_run.py`` makes a run of the real families instead, which costs more
per result (``nvidia-smi -q -x`` alone is ~42 KB a node).

Nothing under validators/ knows about these names: they exist only in a process that
imported this module, and only the benchmark's run directories mention them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from rackgate.checks import REGISTRY
from rackgate.store.manifest import Manifest

PREFIX = "bench.fio_"
BASE = "fio.seq_read"
# bench/make_mixed_run.py's stand-ins: copies of the heaviest real family (42 KB of XML)
GPU_PREFIX = "bench.gpu_"
GPU_BASE = "gpu.health"
# and copies of nccl.all_reduce: the only healthy 8 x H100 capture is all_reduce_perf's, and
# the other collectives' checks judge it an error (another test than the command asked for)
NCCL_PREFIX = "bench.nccl_"
NCCL_BASE = "nccl.all_reduce"
BASE_CHECKS = ("node.identity", "fio.seq_read")  # the two real families, first


def standin_names(count: int) -> list[str]:
    return [f"{PREFIX}{i:02d}" for i in range(1, count + 1)]


def register(names: Iterable[str]) -> list[str]:
    """Register each ``bench.fio_NN`` name as a copy of fio.seq_read, each ``bench.gpu_NN``
    as a copy of gpu.health, each ``bench.nccl_NN`` of nccl.all_reduce (idempotent)."""
    added = []
    for name in names:
        if name.startswith(PREFIX):
            origin = BASE
        elif name.startswith(GPU_PREFIX):
            origin = GPU_BASE
        elif name.startswith(NCCL_PREFIX):
            origin = NCCL_BASE
        else:
            continue
        if name not in REGISTRY:
            REGISTRY[name] = dataclasses.replace(
                REGISTRY[origin], name=name, tags=frozenset({"bench", "standin"}),
                description=f"BENCHMARK STAND-IN: a copy of {origin} (bench/standin_checks.py)")
            added.append(name)
    return added


def register_for_manifest(manifest: Manifest) -> list[str]:
    """Register the stand-ins a stored benchmark run names (before judging it)."""
    return register(manifest.checks)


def check_names(total: int) -> list[str]:
    """``total`` check names: the two real families, then stand-ins."""
    if total < 1:
        raise ValueError("at least one check")
    real = list(BASE_CHECKS[:total])
    return real + standin_names(max(0, total - len(real)))


def profile_document(demo_raw: Mapping[str, Any], checks: Iterable[str]) -> dict[str, Any]:
    """The demo profile with a copy of its fio.seq_read section for every stand-in."""
    doc = copy.deepcopy(dict(demo_raw))
    section = doc["checks"][BASE]
    wanted = list(checks)
    doc["checks"] = {name: copy.deepcopy(doc["checks"].get(name, section)) for name in wanted}
    n = sum(1 for name in wanted if name.startswith(PREFIX))
    doc["description"] = (f"{doc['description']} BENCHMARK: plus {n} stand-in copies of "
                          f"{BASE} (bench/standin_checks.py).")
    return doc


# The default benchmark shape: 2 real checks + 18 stand-ins.
register(standin_names(18))
