"""Which GPUs a ``dcgmi diag`` run is evidence for, for ``gpu.dcgm_diag`` (checks.gpu.topology).

A result is per-GPU or node-level (``parsers.dcgm.model``). Node-level results (DCGM's
Deployment checks: Denylist, NVML Library, Persistence Mode, Page Retirement/Row Remap,
Inforom, ...) are judged on their own status by the check and are no evidence about any
one GPU. Per-GPU results must cover exactly the profile's GPUs 0..count-1 (DCGM numbers
the GPUs as nvidia-smi does), each per-GPU test with one result for every one of them;
a result that claims to be a GPU's and names none is an error.

Level 1 (``dcgmi diag -r 1``, "deployment") runs only node-level checks in DCGM 2.x/3.x
(DCGM 4.x reports its ``software`` test per GPU): a run that names no GPU is complete
evidence for level 1, and no evidence of the GPUs' health at level 2 and above, which
add per-GPU tests of the Integration, Hardware and Stress categories (DCGM user guide,
"Run Levels"). Where the output lists the GPUs DCGM ran on (``devices``), their number
must be the profile's count at every level.

>>> from rackgate.parsers.dcgm.model import DcgmDiag, DiagResult
>>> d = DcgmDiag("json", (DiagResult("Deployment", "Inforom", (), "pass", scope="node"),),
...              True)
>>> dcgm_coverage(d, 1, 8), [s.label for s, _ in dcgm_coverage(d, 2, 8)]
([], ['error'])
"""

from __future__ import annotations

from rackgate.model import Status
from rackgate.parsers.dcgm.model import DEPLOYMENT, DcgmDiag, DiagResult


def where(r: DiagResult) -> str:
    """The GPUs a result is for, or the node (and the GPUs its message names)."""
    gpus = ", ".join(map(str, r.gpus))
    if r.scope == "gpu":
        return f"GPU {gpus}" if gpus else "no GPU"
    return f"the node (GPU {gpus})" if gpus else "the node"


def no_gpu_evidence(level: int, count: int, d: DcgmDiag) -> tuple[Status, str] | None:
    """At level 2 and above, an error where no per-GPU test beyond Deployment ran."""
    per_gpu = [r for r in d.results if r.scope == "gpu" and r.gpus]
    if level < 2:
        return None
    if not per_gpu:
        return (Status.ERROR, f"no DCGM result names a GPU: no evidence that the {count} "
                              f"GPUs were tested (level {level} runs per-GPU tests; only "
                              "level 1 is node-level)")
    if all(r.category.strip().lower() == DEPLOYMENT for r in per_gpu):
        return (Status.ERROR, f"only Deployment results: no evidence that the level-{level} "
                              "per-GPU tests (Integration, Hardware, Stress) ran")
    return None


def dcgm_coverage(d: DcgmDiag, level: int, count: int, failed: bool = False
                  ) -> list[tuple[Status, str]]:
    """The findings about which GPUs the run covered (see the module docstring); the
    error of :func:`no_gpu_evidence` among them unless a result already ``failed`` (a
    failing test is evidence enough that the node is not healthy)."""
    out: list[tuple[Status, str]] = []
    per_gpu = [r for r in d.results if r.scope == "gpu"]
    nameless = sorted({r.test for r in per_gpu if not r.gpus})
    if nameless:
        out.append((Status.ERROR, f"{', '.join(nameless)}: a per-GPU result names no GPU: "
                                  "no evidence which GPUs were tested"))
    if d.devices is not None and d.devices != count:
        out.append((Status.FAIL, f"DCGM ran on {d.devices} GPUs, the profile expects "
                                 f"{count}"))
    missing = None if failed else no_gpu_evidence(level, count, d)
    if missing is not None:
        out.append(missing)
    want = set(range(count))
    seen = {g for r in per_gpu for g in r.gpus}
    if not seen:
        return out
    if seen - want:
        out.append((Status.FAIL, f"DCGM reports GPUs {sorted(seen - want)}, which the profile's "
                                 f"{count} GPUs (0-{count - 1}) do not include"))
    if want - seen:
        out.append((Status.FAIL, f"DCGM tested GPUs {sorted(seen & want)}, the profile expects "
                                 f"{count} (no result for {sorted(want - seen)})"))
    tests: dict[tuple[str, str], list[int]] = {}
    for r in per_gpu:
        tests.setdefault((r.category, r.test), []).extend(r.gpus)
    for (_, test), gpus in tests.items():
        twice = sorted({g for g in gpus if gpus.count(g) > 1})
        if twice:
            out.append((Status.ERROR, f"{test} lists GPU {', '.join(map(str, twice))} in more "
                                      "than one result (duplicated output?)"))
        lacking = sorted(want & seen - set(gpus))
        if gpus and lacking:
            out.append((Status.ERROR, f"{test} has no result for GPU "
                                      f"{', '.join(map(str, lacking))}: not every GPU was "
                                      "tested"))
    return out


__all__ = ["dcgm_coverage", "no_gpu_evidence", "where"]
