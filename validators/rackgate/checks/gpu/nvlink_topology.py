"""The GPU/GPU cells of ``nvidia-smi topo -m`` against the profile's ``nvlink_topology``.

Used by ``topology.gpu_nic_affinity`` (checks/gpu/topology.py). The profile's model
(``rackgate.hardware``: ``nvswitch``, ``pairs`` or ``none``) gives the exact set of GPU
pairs that must show NVLink and each pair's bond (``NV#``); every other pair must show
none. Judged pair by pair, so a hybrid cube-mesh (DGX-1: NV1 or NV2 to four of the seven
other GPUs, SYS to the rest) or a bridged pair of PCIe cards (NV4 on RTX A6000) passes when
it is what the profile says, and a missing, narrower, wider or foreign bond fails.

>>> from rackgate.parsers.topology import parse_topo_matrix
>>> from rackgate.hardware import GpuSpec
>>> m = parse_topo_matrix("\\tGPU0\\tGPU1\\tCPU Affinity\\tNUMA Affinity\\n"
...     "GPU0\\t X \\tNV4\\t0-31\\t0\\nGPU1\\tNV4\\t X \\t0-31\\t0\\n")
>>> spec = GpuSpec(model="NVIDIA RTX A6000", count=2, source="a doctest stand-in source",
...     nvlink_topology={"kind": "none", "basis": "said to have no bridge fitted"})
>>> print(nvlink_topology_findings(m, ["GPU0", "GPU1"], spec)[0][0][1])
NVLink the profile does not describe: GPU0-GPU1 NV4 (the profile's topology: no-NVLink)
"""

from __future__ import annotations

from rackgate.hardware import GpuSpec
from rackgate.model import Status
from rackgate.parsers.topology import TopoMatrix


def nvlink_topology_findings(m: TopoMatrix, gpus: list[str],
                             spec: GpuSpec) -> tuple[list[tuple[Status, str]], str]:
    """The GPU/GPU cells against the profile's nvlink_topology, pair by pair: an expected
    pair without exactly its NV# bond fails, an NV# pair the profile does not list fails
    (foreign), a cell that differs from its mirror is damaged evidence. Returns the
    findings and the pass text ("" when the profile states no topology)."""
    want = spec.expected_nvlink_pairs()
    topo = spec.nvlink_topology
    if want is None or topo is None:
        return [], ""
    index = {g: int(g[3:]) for g in gpus}  # the parser's GPU labels are GPU<n>
    wrong: list[str] = []
    foreign: list[str] = []
    damaged: list[str] = []
    for i, a in enumerate(sorted(gpus, key=index.__getitem__)):
        for b in sorted(gpus, key=index.__getitem__)[i + 1:]:
            ab, ba = m.link(a, b), m.link(b, a)
            if ab != ba and "NV" in (ab.kind, ba.kind):
                damaged.append(f"{a}-{b} {ab} but {b}-{a} {ba}")
                continue
            n = want.get((index[a], index[b]))
            if n is None and ab.kind == "NV":
                foreign.append(f"{a}-{b} {ab}")
            elif n is not None and (ab.kind != "NV" or ab.nvlinks != n):
                wrong.append(f"{a}-{b} {ab}" + ("" if topo.kind == "nvswitch"
                                                 else f" (expected NV{n})"))
    what = getattr(topo, "name", None) or {"nvswitch": "NVSwitch", "pairs": "NVLink pairs",
                                           "none": "no-NVLink"}[topo.kind]
    out: list[tuple[Status, str]] = []
    if damaged:
        out.append((Status.ERROR, f"the matrix is not symmetric: {', '.join(damaged)} "
                                  "(damaged or edited output)"))
    if wrong and topo.kind == "nvswitch":
        out.append((Status.FAIL, f"GPU pairs without NV{spec.nvlinks_per_gpu}: "
                                 f"{', '.join(wrong)}"))
    elif wrong:
        out.append((Status.FAIL, f"GPU pairs not joined as the profile's {what} says: "
                                 f"{', '.join(wrong)}"))
    if foreign:
        out.append((Status.FAIL, f"NVLink the profile does not describe: {', '.join(foreign)} "
                                 f"(the profile's topology: {what})"))
    ok = {"nvswitch": " and NVLink to every other GPU through NVSwitch",
          "pairs": f" and exactly the {len(want)} NVLink pairs of the profile's {what}",
          "none": " and no NVLink, as the profile says"}[topo.kind]
    return out, ok
