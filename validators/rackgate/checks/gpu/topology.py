"""GPU topology checks: GPU-to-NIC affinity, NVLink state and DCGM diagnostics.

``topology.gpu_nic_affinity`` reads ``nvidia-smi topo -m``: every GPU needs a compute NIC
behind the same PCIe switch (PIX or PXB); a NIC reached through the host bridge (PHB, NODE)
is a warning and one across the socket link (SYS) a failure, because GPUDirect RDMA
traffic then crosses the CPU. It also checks the GPU count and the GPU/GPU cells against
the profile's ``nvlink_topology`` (``rackgate.hardware``), pair by pair: with ``kind:
nvswitch`` every pair shows ``NV<nvlinks_per_gpu>``; with ``kind: pairs`` (a hybrid
cube-mesh, a bridged pair) each listed pair shows exactly its ``NV#`` and no other pair
shows NVLink; with ``kind: none`` no pair does. An NV# pair the profile does not list is
foreign: the profile does not describe that node. Without a topology, NVLink is not judged.

``gpu.nvlink`` reads ``nvidia-smi nvlink -s``: every GPU must have ``nvlinks_per_gpu``
active links, each at least at the nominal per-link rate in one direction:

    nominal GB/s per link = nvlink_gb_s_per_gpu / nvlinks_per_gpu / 2

``nvlink_gb_s_per_gpu`` counts both directions (H100: 900 GB/s over 18 links), so
900 / 18 / 2 = 25 GB/s each way per link; A100: 600 / 12 / 2 = 25 GB/s. nvidia-smi prints
the link's signalling rate, which is at or above that figure: 25 GB/s on A100 NVLink 3
(4 lanes x 50 Gb/s / 8) and 26.562 GB/s on H100 NVLink 4 (2 lanes x 106.25 Gb/s / 8),
so a link trained down to fewer lanes or a lower rate falls below it. Speeds are compared
at the precision nvidia-smi printed them (``checks.gpu.nvlink_links``: "14.062" meets an RTX
A6000 bridge's 14.0625). Bridged PCIe cards whose chip lists more link slots than the
bridges wire are described by the profile's ``gpu.nvlink_links``: then the wired links (or
any ``nvlinks_per_gpu`` of them) must be active and every other slot inactive.

A GPU for which nvidia-smi prints NVML's "all links are inActive" instead of its link
lines fails as having no active NVLink.

``gpu.dcgm_diag`` runs ``dcgmi diag -r <level> -j`` (the text table of DCGM 3.x and 4.x is
read too): any Fail fails the node, naming the test and GPU, any Warn warns, a Skip is no
pass, and a run in which nothing passed (all skipped) is an error: no evidence of health.
Node-level results (the Deployment checks, which name no GPU) are judged on their own
status; per-GPU results must cover exactly the profile's GPUs, and from level 2 on a run
must hold some (checks.gpu.dcgm_evidence): a level-1 run names no GPU in DCGM 2.x/3.x.

>>> from rackgate.profile import GpuSpec
>>> hw = Hardware(gpu=GpuSpec(model="H100", count=8, nvlinks_per_gpu=18,
...               nvlink_gb_s_per_gpu=900, source="a public document",
...               nvlink_topology={"kind": "nvswitch", "basis": "an NVSwitch baseboard"}))
>>> nominal_link_gb_s(hw)
25.0
>>> dcgm_command(DcgmDiagParams(level=3), {})
['dcgmi', 'diag', '-r', '3', '-j']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from rackgate.checks.gpu.dcgm_evidence import dcgm_coverage, where
from rackgate.checks.gpu.nvlink_links import bridged_link_findings, exact, printed_floor
from rackgate.checks.gpu.nvlink_topology import nvlink_topology_findings
from rackgate.checks.shared.base import HostNeeds, NodeCheck, Params, Scope
from rackgate.figures import figure
from rackgate.model import Judgement, Status
from rackgate.parsers.dcgm import DcgmDiag, parse_dcgm_diag
from rackgate.parsers.nvlink import NvLinkStatus, parse_nvlink_status
from rackgate.parsers.topology import PCIE_RANK, TopoMatrix, parse_topo_matrix
from rackgate.profile import Hardware, Threshold
from rackgate.thresholds import FLOOR_RATIOS

_AFFINITY_STATUS = {"PIX": Status.PASS, "PXB": Status.PASS, "PHB": Status.WARN,
                    "NODE": Status.WARN, "SYS": Status.FAIL}
_WHY = {"PHB": "through the PCIe host bridge", "NODE": "across PCIe host bridges",
        "SYS": "across the inter-socket link"}


def _verdict(findings: list[tuple[Status, str]], ok: str) -> tuple[Status, str]:
    """Worst status of all findings, and their messages (worst first)."""
    if not findings:
        return Status.PASS, ok
    ordered = sorted(findings, key=lambda f: -f[0])
    return ordered[0][0], "; ".join(m for _, m in ordered)


def _no_gpu(hw: Hardware) -> str | None:
    return None if hw.gpu is not None else "the profile has no GPU"


# --- topology.gpu_nic_affinity ------------------------------------------------------------

class AffinityParams(Params):
    compute_nics: list[str] = Field(
        default_factory=list,
        description="RDMA names (mlx5_0) or matrix labels (NIC0) of the compute-fabric NICs; "
                    "empty: every NIC in the matrix counts")


def affinity_applies(hw: Hardware) -> str | None:
    if hw.gpu is None:
        return "the profile has no GPU"
    if not any(n.role == "compute" for n in hw.nics) and hw.gpu.nvlink_topology is None:
        return "the profile has no compute NICs and states no NVLink topology"
    return None


def judge_affinity(m: TopoMatrix, params: AffinityParams, thresholds: Mapping[str, Threshold],
                   hw: Hardware) -> Judgement:
    findings: list[tuple[Status, str]] = []
    gpus = [d.label for d in m.gpus]
    if hw.gpu is not None and len(gpus) != hw.gpu.count:
        findings.append((Status.FAIL, f"the matrix shows {len(gpus)} GPUs, the profile "
                                      f"expects {hw.gpu.count}"))
    elif hw.gpu is not None and sorted(gpus) != sorted(f"GPU{i}" for i in range(hw.gpu.count)):
        findings.append((Status.FAIL, f"the matrix shows GPUs {', '.join(gpus)}, expected "
                                      f"GPU0 to GPU{hw.gpu.count - 1}"))
    nics = [d.label for d in m.nics]
    expected_nics = sum(n.count for n in hw.nics if n.role == "compute")
    if not expected_nics and not params.compute_nics:
        nics = []  # no compute fabric: only the GPUs and their NVLink are judged
    if params.compute_nics:
        by_name = {m.nic_name(n): n for n in nics} | {n: n for n in nics}
        absent = [n for n in params.compute_nics if n not in by_name]
        if absent:
            findings.append((Status.FAIL, f"compute NICs {', '.join(absent)} are not in the "
                                          f"matrix (it shows {len(nics)} NICs)"))
        nics = [by_name[n] for n in params.compute_nics if n in by_name]
    if len(nics) < expected_nics:
        findings.append((Status.FAIL, f"the matrix shows {len(nics)} compute NICs, the "
                                      f"profile expects {expected_nics}"))
    near: dict[str, str] = {}
    good = 0
    for g in gpus:
        ranked = sorted((PCIE_RANK.get(m.link(g, n).kind, 9), n) for n in nics)
        if not ranked:
            continue
        nic = ranked[0][1]
        link = str(m.link(g, nic))
        near[g] = f"{m.nic_name(nic)} {link}"
        status = _AFFINITY_STATUS.get(link, Status.FAIL)
        if status is Status.PASS:
            good += 1
        else:
            findings.append((status, f"{g}'s nearest compute NIC {m.nic_name(nic)} ({nic}) is "
                                     f"at {link}, {_WHY.get(link, 'not over PCIe')}"))
    nv_ok = ""
    if hw.gpu is not None:
        nv_findings, nv_ok = nvlink_topology_findings(m, gpus, hw.gpu)
        findings += nv_findings
    ok = (f"all {len(gpus)} GPUs have a compute NIC at PIX or PXB{nv_ok}" if expected_nics
          or params.compute_nics else f"all {len(gpus)} GPUs{nv_ok} (the profile has no "
                                      "compute NICs)")
    status, message = _verdict(findings, ok)
    return Judgement(status, message, float(good), "GPUs",
                     f"{len(gpus)} GPUs with a compute NIC at PIX or PXB", None,
                     {**near, "nics_in_matrix": len(m.nics)}, "higher")


# --- gpu.nvlink ---------------------------------------------------------------------------

class NvLinkParams(Params):
    min_speed_ratio: float = Field(default=1.0, ge=FLOOR_RATIOS[0], le=FLOOR_RATIOS[1],
                                   description="pass at >= ratio x nominal per-link GB/s (a "
                                               "floor: rackgate.thresholds.FLOOR_RATIOS)")


# nvidia-smi prints a link's signalling rate, a few percent above the nominal data rate
# (26.562 vs 25 GB/s on NVLink 4); twice the nominal is a link of another generation, not
# a reading of this one.
NVLINK_PLAUSIBLE = 2.0


def nominal_link_gb_s(hw: Hardware) -> float | None:
    """One direction, one link: nvlink_gb_s_per_gpu (both directions) / links / 2."""
    g = hw.gpu
    if g is None or not g.nvlinks_per_gpu or g.nvlink_gb_s_per_gpu is None:
        return None
    return g.nvlink_gb_s_per_gpu / g.nvlinks_per_gpu / 2


def _speed(printed: str, value: float, floor: float) -> str:
    """A link's speed for a message: four significant digits, or as nvidia-smi printed it
    where those would read as the floor (14.062 and 14.0625 both read 14.06)."""
    return printed if figure(value) == figure(floor) else figure(value)


def nvlink_applies(hw: Hardware) -> str | None:
    if hw.gpu is None:
        return "the profile has no GPU"
    if not hw.gpu.nvlinks_per_gpu:
        return "the profile expects no NVLink (nvlinks_per_gpu unset)"
    return None


def judge_nvlink(s: NvLinkStatus, params: NvLinkParams, thresholds: Mapping[str, Threshold],
                 hw: Hardware) -> Judgement:
    reason = nvlink_applies(hw)
    if reason is not None or hw.gpu is None or not hw.gpu.nvlinks_per_gpu:
        return Judgement(Status.SKIP, reason or "the profile expects no NVLink")
    want = hw.gpu.nvlinks_per_gpu
    nominal = nominal_link_gb_s(hw)
    floor = None if nominal is None else nominal * params.min_speed_ratio
    findings: list[tuple[Status, str]] = []
    if len(s.gpus) != hw.gpu.count:
        findings.append((Status.FAIL, f"nvidia-smi lists {len(s.gpus)} GPUs, the profile "
                                      f"expects {hw.gpu.count}"))
    active_total = 0
    for g in s.gpus:
        if g.all_links_inactive:  # nvidia-smi prints NVML's message instead of link lines
            findings.append((Status.FAIL, f"GPU {g.index}: no active NVLink (all links "
                                          "inactive)"))
            continue
        active = [lk for lk in g.links if lk.active]
        active_total += len(active)
        inactive = [lk.index for lk in g.links if not lk.active]
        if hw.gpu.nvlink_links is not None:  # bridged cards: only the wired slots are up
            findings += bridged_link_findings(g, hw.gpu)
        else:
            if inactive:
                findings.append((Status.FAIL, f"GPU {g.index} links "
                                              f"{', '.join(map(str, inactive))} are inactive"))
            if len(g.links) != want:
                findings.append((Status.FAIL, f"GPU {g.index} lists {len(g.links)} links, "
                                              f"expected {want}"))
        slow = [f"{lk.index} ({_speed(lk.printed, lk.speed_gb_s, floor)} GB/s)"
                for lk in active if floor is not None and lk.speed_gb_s is not None
                and lk.speed_gb_s < printed_floor(floor, lk.speed_decimals)]
        fast = [f"{lk.index} ({figure(lk.speed_gb_s)} GB/s)" for lk in active
                if nominal is not None and lk.speed_gb_s is not None
                and lk.speed_gb_s > NVLINK_PLAUSIBLE * nominal]
        if fast and nominal is not None:
            findings.append((Status.ERROR, f"GPU {g.index} links {', '.join(fast)} read above "
                                           f"{figure(NVLINK_PLAUSIBLE)} x the nominal "
                                           f"{figure(nominal)} GB/s: implausible evidence"))
        if slow and floor is not None:
            findings.append((Status.FAIL, f"GPU {g.index} links {', '.join(slow)} are below "
                                          f"{exact(floor)} GB/s"))
    speed = f" at >= {exact(floor)} GB/s each way" if floor is not None else ""
    of = "" if hw.gpu.nvlink_links is None else \
        f" (of {hw.gpu.nvlink_links.listed} listed, as the profile's bridges wire them)"
    status, message = _verdict(findings, f"all {len(s.gpus)} GPUs have {want} active "
                                         f"NVLinks{of}{speed}")
    return Judgement(status, message, float(active_total), "links",
                     f"{hw.gpu.count * want} active links ({hw.gpu.count} GPUs x {want})"
                     f"{speed}", None, {}, "higher")


# --- gpu.dcgm_diag ------------------------------------------------------------------------

# Default timeouts per run level: estimates (r1 is a quick check, r4 the long extended test),
# NOT taken from NVIDIA's DCGM documentation, which was not at hand; each leaves generous
# room. Set params.timeout_s from your DCGM version's measured durations.
DCGM_TIMEOUT_S = {1: 300, 2: 900, 3: 3600, 4: 10800}


class DcgmDiagParams(Params):
    level: Literal[1, 2, 3, 4] = 2
    # None: the level's own timeout. The only params whose timeout_s may be None, so its
    # check has its own timeout function (dcgm_timeout), never the default params_timeout.
    timeout_s: int | None = Field(  # type: ignore[assignment]
        default=None, ge=30, description="default: DCGM_TIMEOUT_S for the level")


def dcgm_timeout(params: DcgmDiagParams) -> int:
    """``params.timeout_s``, else the level's estimate (DCGM_TIMEOUT_S).

    >>> dcgm_timeout(DcgmDiagParams(level=3)), dcgm_timeout(DcgmDiagParams(timeout_s=60))
    (3600, 60)
    """
    return int(params.timeout_s or DCGM_TIMEOUT_S[params.level])


def dcgm_command(params: DcgmDiagParams, hostvars: Mapping[str, Any]) -> list[str]:
    return ["dcgmi", "diag", "-r", str(params.level), "-j"]


def judge_dcgm(d: DcgmDiag, params: DcgmDiagParams, thresholds: Mapping[str, Threshold],
               hw: Hardware) -> Judgement:
    """Each result on its own status (node-level ones too), then which GPUs the run
    covered at the profile's level (checks.gpu.dcgm_evidence)."""
    findings: list[tuple[Status, str]] = []
    for r in d.results:
        if r.status in ("fail", "warn"):
            why = f": {r.warnings[0][:160]}" if r.warnings else ""
            findings.append((Status.FAIL if r.status == "fail" else Status.WARN,
                             f"{r.test} {r.status}s on {where(r)}{why}"))
    passed = [r for r in d.results if r.status == "pass"]
    failed = any(s is Status.FAIL for s, _ in findings)
    if not passed and not failed:
        findings.append((Status.ERROR, f"no DCGM test passed ({len(d.results)} results, all "
                                       "skipped): no evidence of health"))
    if hw.gpu is not None:
        findings += dcgm_coverage(d, params.level, hw.gpu.count, failed)
    if not d.complete and not any(s is Status.FAIL for s, _ in findings):
        findings.append((Status.ERROR, "the text table is cut before its end: no evidence "
                                       "that every test ran"))
    node = sum(r.scope == "node" for r in d.results)
    scope = " (node-level checks: the level names no GPU)" if node == len(d.results) else ""
    status, message = _verdict(findings, f"{len(passed)} DCGM results passed at level "
                                         f"{params.level}{scope}")
    skipped = sum(r.status == "skip" for r in d.results)
    return Judgement(status, message, float(len(passed)), "results", "no Fail, no Warn", None,
                     {"form": d.form, "skipped": skipped, "results": len(d.results),
                      "node_level": node})


CHECKS = (
    NodeCheck(
        name="topology.gpu_nic_affinity",
        scope=Scope.NODE,
        tags=frozenset({"gpu", "topology", "fabric"}),
        description="Each GPU has a compute NIC behind its PCIe switch; NVLink joins every "
                    "GPU pair (nvidia-smi topo -m)",
        params_model=AffinityParams,
        metrics=frozenset(),
        command=lambda p, hv: ["nvidia-smi", "topo", "-m"],
        # the RDMA names among compute_nics (matrix labels, NIC0, are not device names)
        needs=lambda p, hv: HostNeeds(rdma_devices=tuple(
            n for n in p.compute_nics if not (n.startswith("NIC") and n[3:].isdigit()))),
        parse=parse_topo_matrix,
        judge=judge_affinity,
        applies=affinity_applies,
    ),
    NodeCheck(
        name="gpu.nvlink",
        scope=Scope.NODE,
        tags=frozenset({"gpu", "nvlink"}),
        description="Every NVLink of every GPU is active at its nominal rate "
                    "(nvidia-smi nvlink -s)",
        params_model=NvLinkParams,
        metrics=frozenset(),
        command=lambda p, hv: ["nvidia-smi", "nvlink", "-s"],
        parse=parse_nvlink_status,
        judge=judge_nvlink,
        applies=nvlink_applies,
    ),
    NodeCheck(
        name="gpu.dcgm_diag",
        scope=Scope.NODE,
        tags=frozenset({"gpu", "dcgm"}),
        description="DCGM diagnostics (dcgmi diag -r <level> -j): no test fails or warns",
        params_model=DcgmDiagParams,
        metrics=frozenset(),
        command=dcgm_command,
        timeout_s=dcgm_timeout,
        parse=parse_dcgm_diag,
        judge=judge_dcgm,
        applies=_no_gpu,
    ),
)

__all__ = ["CHECKS", "AffinityParams", "DcgmDiagParams", "NvLinkParams", "judge_affinity",
           "judge_dcgm", "judge_nvlink", "nominal_link_gb_s"]
