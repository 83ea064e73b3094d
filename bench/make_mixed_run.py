"""Generate a stored run of the REAL node check families for the judge benchmark (issue 19).

    python bench/make_mixed_run.py /var/tmp/rackgate-bench/mixed-10k --nodes 10000

Like bench/make_run.py (same manifest, same EvidenceStore writes, same per-node seeds, the
same per-node faults: unreachable, overrides), but each node's 20 checks are the families
that run on the node and are judged per node, with evidence built from each family's own
fixtures under tests/fixtures at their real sizes (the tool's output only: what follows a
fixture's ``# ---`` line, else without its leading ``#`` lines, and an XML fixture without
its leading ``<!-- -->`` provenance comment).

The profile is ``dgx-h100`` (8 x H100, 8 NDR InfiniBand ports) with, for the benchmark:
the demo profile's fio sections (floors the fio captures of a virtual disk pass; the
DGX array's 12 GB/s would fail them all), the bonds of the bonding fixture, and the
topology check's compute NICs named as in the ``nvidia-smi topo -m`` fixture (mlx5_0-7).

Left out, and why: ``fabric.roce_lossless`` (the profile's compute fabric is InfiniBand:
not applicable, so never collected), ``redundancy.multipath`` (no multipath storage in the
profile: the same), ``fio.pfs.*`` (no parallel file system in the profile); checks run on
the control host (BMC: ``redundancy.psu_*``, ``cooling.cdu``), launched across the nodes
(``nccl.fabric_all_reduce``, ``mpi.allreduce``, ``fabric.pairwise_bw``) or run once per
fabric (``fabric.*`` plan checks): one evidence file for every node, or not on the node.
That leaves 14 families; the other 6 of the 20 are stand-ins registered by
bench/standin_checks.py: ``bench.gpu_01`` and ``bench.gpu_02``, copies of the heaviest,
``gpu.health`` (42 KB of nvidia-smi XML), and ``bench.nccl_01`` ... ``04``, copies of
``nccl.all_reduce`` in place of the other four collectives: the only healthy 8 x H100 capture
is all_reduce_perf's, and their checks judge it an error, another test than the one their
command asks for (same parser, same table layout).

Per node: serials, UUIDs and GUIDs are the node's own; fio figures (FioVariant), NCCL bus
and algorithm bandwidths and times, GPU temperatures and power draw vary by a per-node
lognormal factor. A small fraction of (node, check) carry a fault fixture of the family
(ECC error, link down, slow NVLink, memory failure, truncated output...), a timeout, or no
evidence at all.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import random
import re
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import standin_checks
from make_run import (
    FIXTURES,
    T0,
    check_params,
    evidence_sizes,
    host_name,
    location,
    node_rng,
    summarised,
    synthetic_manifest,
    write_nodes,
    write_unreachable,
)

from rackgate.checks import REGISTRY, load_profile, profile_from_document
from rackgate.checks.shared.base import NodeCheck
from rackgate.commands.task import KILLED_RC, TIMEOUT_RC, Task, wrapped
from rackgate.store.evidence import EvidenceStore, write_json

UNREACHABLE = 0.002  # per node: every check unreachable
OVERRIDE = 0.01  # per node: rackgate_profile_overrides
NODE_SIGMA = 0.03
TIMEOUT = 0.0005  # per (node, check)
MISSING = 0.0001
TRUNCATED = 0.0005  # per (node, check) with a text output: cut at 40-95 %

GPU_STANDINS = ("bench.gpu_01", "bench.gpu_02")
NCCL_STANDINS = ("bench.nccl_01", "bench.nccl_02", "bench.nccl_03", "bench.nccl_04")
CHECKS = ["node.identity", "node.conformance", "gpu.health", "topology.gpu_nic_affinity",
          "gpu.nvlink", "gpu.dcgm_diag", "fabric.ports", "fabric.nic_pcie",
          "redundancy.bonding", "fio.seq_read", "fio.seq_write", "fio.rand_read",
          "fio.checkpoint", "nccl.all_reduce", *NCCL_STANDINS, *GPU_STANDINS]

# check -> (healthy fixture, [(fault fixture, rate per (node, check))])
GPU_FAULTS = [("gpu/h100-ecc-uncorrectable.xml", 0.001), ("gpu/h100-remap-pending.xml", 0.0005),
              ("gpu/h100-hw-slowdown.xml", 0.0005), ("gpu/h100-pcie-x8-downtrained.xml", 0.0005),
              ("gpu/h100-power-limit-lowered.xml", 0.001)]
NCCL = ("nccl/allreduce-8xh100-healthy.txt",
        [("nccl/allreduce-8xh100-nvlink-gpu3-slow.txt", 0.001),
         ("nccl/allreduce-8xh100-wrong-elements.txt", 0.0002)])
FIXTURE_PLAN: dict[str, tuple[str, list[tuple[str, float]]]] = {
    "node.identity": ("identity/server-with-hcas.txt", [("identity/vm-without-dmi.txt", 0.001)]),
    "node.conformance": ("conformance/gpu-node-conforming.txt",
                         [("conformance/gpu-node-fabricmanager-failed-acs-on.txt", 0.001)]),
    "gpu.health": ("gpu/h100-8gpu-healthy.xml", GPU_FAULTS),
    "topology.gpu_nic_affinity": ("topology/topo-8gpu-8nic-pix-healthy.txt",
                                  [("topology/topo-gpu1-nic-node.txt", 0.0005)]),
    "gpu.nvlink": ("topology/nvlink-h100-18links-healthy.txt",
                   [("topology/nvlink-gpu2-link3-slow.txt", 0.0005),
                    ("topology/nvlink-gpu5-link7-inactive.txt", 0.0005)]),
    "gpu.dcgm_diag": ("topology/dcgm-diag-r2-pass.json",
                      [("topology/dcgm-diag-r2-memory-fail.json", 0.0005),
                       ("topology/dcgm-diag-r2-pcie-warn.json", 0.001)]),
    "fabric.ports": ("infiniband/ibstat-8x-ndr-healthy.txt",
                     [("infiniband/ibstat-port-down-mlx5_3.txt", 0.001),
                      ("infiniband/ibstat-hdr-instead-of-ndr.txt", 0.0005)]),
    "fabric.nic_pcie": ("topology/nic-pcie-dgx-h100-12-ports-gen5-x16-healthy.txt",
                        [("topology/nic-pcie-mlx5-4-x8-downtrained.txt", 0.0005)]),
    "redundancy.bonding": ("redundancy/bonding-two-reads-healthy.txt",
                           [("redundancy/bonding-two-reads-lacp-count-rose.txt", 0.0005)]),
    "fio.seq_read": ("fio/seq-read-healthy.json",
                     [("fio/seq-read-open-failed-enoent.json", 0.001)]),
    "fio.seq_write": ("fio/seq-write-healthy.json", []),
    "fio.rand_read": ("fio/rand-read-4k-qd32-healthy.json", []),
    "fio.checkpoint": ("fio/checkpoint-2jobs-fsync-healthy.json", []),
    "nccl.all_reduce": NCCL, **{name: NCCL for name in NCCL_STANDINS},
    "bench.gpu_01": ("gpu/h100-8gpu-healthy.xml", GPU_FAULTS),
    "bench.gpu_02": ("gpu/h100-8gpu-healthy.xml", GPU_FAULTS),
}
BONDS = [{"name": "bond0", "mode": "802.3ad", "members": ["ens1f0", "ens1f1"]},
         {"name": "bond1", "mode": "active-backup", "members": ["eno1", "eno2"]}]
FIO_FROM_DEMO = ("fio.seq_read", "fio.seq_write", "fio.rand_read", "fio.checkpoint")
# a lower floor (80 x 0.5 = 40 MB/s) than the demo profile's: a loosening, so it gives its
# basis (rackgate.thresholds: an override that loosens a threshold without one is refused)
OVERRIDES = {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
    "ref": 80, "basis": "bench: a synthetic node class with a slower scratch disk"}}}}}


# fabric.ports' evidence is its port probe's output: the header naming the tool that
# answered (ibstat here), then that tool's output (rackgate.parsers.infiniband.ports)
IB_PROBE = ('### rackgate-ib-ports {"argv": ["ibstat"], "path": "/usr/sbin/ibstat", '
            '"not_found": []}\n')


def body(rel: str) -> str:
    """A fixture's tool output, without the provenance header the project adds."""
    text = (FIXTURES / rel).read_text(encoding="utf-8")
    if "\n# ---\n" in text:
        return text.partition("\n# ---\n")[2]
    lines = text.splitlines(keepends=True)
    n = 0
    while n < len(lines) and lines[n].startswith("#"):
        n += 1
    text = "".join(lines[n:])
    if text.startswith("<!--"):
        text = text[text.index("-->") + 3:].lstrip("\n")
    return text


def profile_document() -> dict[str, Any]:
    doc = copy.deepcopy(dict(load_profile("dgx-h100").raw))
    demo = load_profile("demo").raw
    for name in FIO_FROM_DEMO:
        doc["checks"][name] = copy.deepcopy(demo["checks"][name])
    doc["checks"]["redundancy.bonding"] = {
        **copy.deepcopy(demo["checks"]["redundancy.bonding"]), "params": {"bonds": BONDS}}
    doc["checks"]["topology.gpu_nic_affinity"] = {
        "params": {"compute_nics": [f"mlx5_{i}" for i in range(8)]}}
    for name in GPU_STANDINS:
        doc["checks"][name] = copy.deepcopy(doc["checks"]["gpu.health"])
    for name in NCCL_STANDINS:
        doc["checks"][name] = copy.deepcopy(doc["checks"]["nccl.all_reduce"])
    doc["checks"] = {k: v for k, v in doc["checks"].items()
                     if k in CHECKS or k not in REGISTRY or not isinstance(REGISTRY[k], NodeCheck)}
    doc["name"] = "dgx-h100-bench"
    doc["description"] = (f"{doc['description']} BENCHMARK: the demo's fio floors, two "
                          "bonds, compute NICs mlx5_0-7, 2 stand-in copies of gpu.health and 4 "
                          "of nccl.all_reduce (bench/make_mixed_run.py).")
    return doc


_NUM = re.compile(r"-?[0-9]+\.[0-9]+")


def _scale_num(text: str, f: float) -> str:
    x = float(text)
    decimals = len(text.split(".")[1])
    return f"{x * f:.{decimals}f}"


class NcclVariant:
    """nccl-tests output with time scaled by 1/f and algbw/busbw by f (columns kept)."""

    ROW = re.compile(r"^( +[0-9]+ +[0-9]+ +\S+ +\S+ +-?[0-9]+)(.*)$")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)

    def render(self, f: float) -> str:
        out = []
        for line in self.lines:
            m = self.ROW.match(line)
            if not m:
                out.append(line)
                continue
            cols = re.split(r"(\s+)", m.group(2))
            k = 0
            for j, c in enumerate(cols):
                if not c or c.isspace():
                    continue
                if _NUM.fullmatch(c):
                    pos = k % 4  # time, algbw, busbw, #wrong
                    new = _scale_num(c, 1 / f if pos == 0 else f)
                    if j > 0 and cols[j - 1].isspace() and len(new) > len(c):
                        cols[j - 1] = cols[j - 1][:max(1, len(cols[j - 1]) - (len(new) - len(c)))]
                    cols[j] = new
                k += 1
            out.append(m.group(1) + "".join(cols) + line[len(line.rstrip("\n")):])
        return "".join(out)


class Mixed:
    def __init__(self, run_dir: Path, seed: int, profile_raw: dict[str, Any]) -> None:
        from make_run import FioVariant

        self.run_dir, self.seed = run_dir, seed
        profile = profile_from_document(profile_raw, "bench")
        self.params = check_params(profile, CHECKS)
        self.text = {rel: (IB_PROBE if rel.startswith("infiniband/ibstat") else "") + body(rel)
                     for plan in FIXTURE_PLAN.values()
                     for rel in [plan[0], *(f for f, _ in plan[1])]}
        self.fio_read = FioVariant(self.text["fio/seq-read-healthy.json"])
        self.nccl = NcclVariant(self.text[NCCL[0]])

    def healthy(self, check: str, rel: str, i: int, rng: random.Random, f: float) -> str:
        text = self.text[rel]
        if check == "fio.seq_read":
            return self.fio_read.render(f, T0 + timedelta(seconds=i))
        if check.startswith("fio."):  # the other directions: scale bw and iops figures
            return re.sub(r'("(?:bw_bytes|bw|iops|bw_mean|iops_mean)" : )([0-9.]+)',
                          lambda m: m.group(1) + (_scale_num(m.group(2), f)
                                                  if "." in m.group(2)
                                                  else str(round(int(m.group(2)) * f))), text)
        if check.startswith("nccl."):
            return self.nccl.render(f * 0.93)
        if rel.startswith("gpu/"):
            text = re.sub(r"<serial>16500000000(\d\d)</serial>",
                          lambda m: f"<serial>{1_650_000_000_000 + i * 8 + int(m.group(1))}"
                                    "</serial>", text)
            text = re.sub(r"<uuid>GPU-00000000-0000-4000-8000-0000000000(\d\d)</uuid>",
                          lambda m: f"<uuid>GPU-{i:08x}-0000-4000-8000-0000000000"
                                    f"{m.group(1)}</uuid>", text)
            text = re.sub(r"<gpu_temp>(\d+) C</gpu_temp>",
                          lambda m: f"<gpu_temp>{int(m.group(1)) + rng.randrange(-3, 4)} C"
                                    "</gpu_temp>", text)
            return re.sub(r"<power_draw>([0-9.]+) W</power_draw>",
                          lambda m: f"<power_draw>{float(m.group(1)) * f:.2f} W</power_draw>",
                          text)
        if check == "node.identity":
            serial = f"{1_700_000_000_000 + i * 7919 + rng.randrange(7919)}"
            text = re.sub(r"^(product|chassis)_serial=.*$", rf"\1_serial={serial}", text,
                          flags=re.M)
            text = re.sub(r"^board_serial=.*$", f"board_serial=PQ{rng.randrange(10**10):010d}",
                          text, flags=re.M)
            text = re.sub(r"a088:c203:0012:34", f"a088:c203:{i >> 8 & 0xffff:04x}:{i & 0xff:02x}",
                          text)
            return re.sub(r"^machine_id=.*$", f"machine_id={rng.getrandbits(128):032x}", text,
                          flags=re.M)
        if check == "fabric.ports":
            return re.sub(r"0x946dae0300a0", f"0x946dae{i:06x}", text)
        return text

    def node(self, i: int) -> Counter[str]:
        host = host_name(i)
        rng = node_rng(self.seed, i)
        unreachable = rng.random() < UNREACHABLE
        rng.random()  # the override draw (the manifest's)
        factor = math.exp(rng.gauss(0.0, NODE_SIGMA))
        store = EvidenceStore(self.run_dir, sync=False)
        stats: Counter[str] = Counter()
        when = T0 + timedelta(seconds=i * 0.05)
        fmt = "%Y-%m-%d %H:%M:%S.%f"
        for name in CHECKS:
            check, params = REGISTRY[name], self.params[name]
            argv = wrapped(Task(host, name, tuple(check.command(params, {})),
                                check.timeout_s(params)))
            if unreachable:
                stats["unreachable"] += 1
                write_unreachable(store, host, name, argv)
                continue
            fields: dict[str, Any] = {"argv": argv, "outcome": "completed", "rc": 0,
                                      "stderr": "", "message": ""}
            duration = rng.uniform(0.5, 30.0)
            healthy, faults = FIXTURE_PLAN[name]
            u = rng.random()
            f = factor * math.exp(rng.gauss(0.0, 0.01))
            if u < MISSING:
                stats["missing"] += 1
                continue
            u -= MISSING
            stdout = None
            if u < TIMEOUT:
                stats["timeout"] += 1
                rc = TIMEOUT_RC if rng.random() < 0.8 else KILLED_RC
                duration = float(check.timeout_s(params))
                stdout = ""
                fields.update(outcome="timeout", rc=rc,
                              message=f"killed after {duration:g} s (timeout rc {rc})")
            u -= TIMEOUT
            if stdout is None and u < TRUNCATED:
                stats["truncated"] += 1
                full = self.healthy(name, healthy, i, rng, f)
                stdout = full[:int(len(full) * rng.uniform(0.4, 0.95))]
            u -= TRUNCATED
            if stdout is None:
                for rel, rate in faults:
                    if u < rate:
                        stats[f"fault {rel}"] += 1
                        stdout = self.text[rel]
                        if rel.endswith("enoent.json"):
                            fields.update(rc=1, stderr="fio: pid=0, err=2/file:filesetup.c")
                        break
                    u -= rate
            if stdout is None:
                stats["healthy"] += 1
                stdout = self.healthy(name, healthy, i, rng, f)
            ended = when + timedelta(seconds=duration)
            store.write(host, name, stdout, started=when.strftime(fmt),
                        ended=ended.strftime(fmt), duration_s=round(duration, 3), **fields)
            when = ended
        return stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="output run directory (must not exist)")
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    run_dir: Path = args.run_dir
    if run_dir.exists():
        ap.error(f"{run_dir} exists; remove it or choose another directory")
    t0 = time.perf_counter()
    standin_checks.register(CHECKS)
    profile = profile_from_document(profile_document(), "bench/make_mixed_run.py")
    (run_dir / "evidence").mkdir(parents=True)
    hosts = []
    for i in range(args.nodes):
        rng = node_rng(args.seed, i)
        rng.random()
        override = rng.random() < OVERRIDE
        hosts.append({"name": host_name(i), "location": location(i),
                      "profile_overrides": OVERRIDES if override else {}})
    manifest = synthetic_manifest(run_dir, hosts, CHECKS, profile,
                                  "bench/make_mixed_run.py")
    write_json(run_dir / "manifest.json", manifest, sync=False)
    _, stats = write_nodes(Mixed, (run_dir, args.seed, dict(profile.raw)), args.nodes,
                           args.jobs)
    files, out_bytes, meta_bytes = evidence_sizes(run_dir)
    summary = {"run_dir": str(run_dir), "nodes": args.nodes, "checks": CHECKS,
               "seed": args.seed, "generation_s": round(time.perf_counter() - t0, 1),
               "evidence_files": files, "stdout_bytes": out_bytes, "meta_bytes": meta_bytes,
               "bytes_per_node": round((out_bytes + meta_bytes) / args.nodes),
               "overridden_hosts": sum(1 for h in hosts if h["profile_overrides"]),
               "scenarios": dict(sorted(stats.items()))}
    return summarised(run_dir, summary)


if __name__ == "__main__":
    sys.exit(main())
