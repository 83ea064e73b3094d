"""A sysfs tree of RDMA ports in the kernel's formats, and the real ``ibstatus`` (and the
real port probe) run over it: how tests/fixtures/infiniband/probe-ibstatus-*.txt were
captured, and how tests/unit/test_truth3_ibport.py captures them again.

The build machine has no RDMA in its kernel: /sys/class/infiniband does not
exist, and ``ibstatus`` (a shell script that prints those files) says "Fatal error: No
devices". Here the files are written as the kernel writes them
(drivers/infiniband/core/sysfs.c: ``state_show`` ``"%d: %s"``, ``phys_state_show``
``"%u: %s"``, ``rate_show`` ``"%d%s Gb/sec (%dX%s)"``, ``lid_show``/``sm_lid_show``
``"0x%x"``, ``link_layer_show``, the GID table ``"%pI6"``) into a directory that a
private mount namespace (``unshare --mount``, root only) binds over /sys/class, so the
script reads them where it always does. Nothing outside that namespace sees the mounts.
In the same namespace /dev/null is bound over ibstat (and ibv_devinfo where installed),
which the probe then passes over (it is not executable), as on an image without them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rackgate.checks.fabric.ports import PortsParams, ports_command

_STATE = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE"}
_PHYS = {1: "Sleep", 2: "Polling", 3: "Disabled", 5: "LinkUp"}


@dataclass(frozen=True)
class SysPort:
    device: str
    port: int
    state: int  # IBTA PortState: 1 Down ... 4 Active
    phys: int  # IBTA PortPhysicalState: 2 Polling, 5 LinkUp
    rate: str  # as rate_show prints it, e.g. "400 Gb/sec (4X NDR)"
    link_layer: str  # InfiniBand | Ethernet
    lid: int
    sm_lid: int
    gid: str  # GID index 0, as %pI6 prints it


def write_tree(root: Path, ports: list[SysPort]) -> Path:
    """The files under ``root``/infiniband; returns ``root`` (to bind over /sys/class)."""
    for p in ports:
        d = root / "infiniband" / p.device / "ports" / str(p.port)
        (d / "gids").mkdir(parents=True)
        files = {"state": f"{p.state}: {_STATE[p.state]}", "phys_state": f"{p.phys}: "
                 f"{_PHYS[p.phys]}", "rate": p.rate, "link_layer": p.link_layer,
                 "lid": f"0x{p.lid:x}", "sm_lid": f"0x{p.sm_lid:x}", "gids/0": p.gid}
        for name, value in files.items():
            (d / name).write_text(value + "\n", encoding="ascii")
    return root


def can_run() -> str | None:
    """Why the capture cannot run here, or None."""
    if os.geteuid() != 0:
        return "binding a sysfs tree needs root (a private mount namespace)"
    missing = [t for t in ("unshare", "mount", "ibstatus") if shutil.which(t) is None]
    if missing:
        return f"not installed: {', '.join(missing)}"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True, text=True, check=False)
    return None if probe.returncode == 0 else f"unshare --mount fails: {probe.stderr.strip()}"


def run_probe(root: Path, timeout_s: int = 60) -> subprocess.CompletedProcess[str]:
    """fabric.ports' probe (its default tools) over the tree, with ibstat and ibv_devinfo
    (where installed) out of reach: /dev/null bound over each."""
    argv = ports_command(PortsParams(), {})
    hidden = [p for p in (shutil.which("ibstat"), shutil.which("ibv_devinfo")) if p]
    script = ('mount --bind "$1" /sys/class || exit 1; shift; '
              'while [ "$1" != -- ]; do mount --bind /dev/null "$1" || exit 1; shift; done; '
              'shift; exec "$@"')
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           script, "sh", str(root), *hidden, "--", sys.executable, *argv[1:]],
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def dgx_ports(faults: dict[str, tuple[int, int, str]] | None = None) -> list[SysPort]:
    """The 12 RDMA ports of a DGX H100 as its user guide (Table 6) names them: compute
    ConnectX-7 InfiniBand NDR at mlx5_0/3/4/5/6/9/10/11, storage ConnectX-7 Ethernet at
    mlx5_1/2/7/8, all Active/LinkUp at 400 Gb/s, except ``faults``: device ->
    (state, physical state, rate). LIDs, the SM's LID and GIDs are invented."""
    out = []
    for i in range(12):
        dev = f"mlx5_{i}"
        ib = i not in (1, 2, 7, 8)
        state, phys, rate = (faults or {}).get(dev, (4, 5, "400 Gb/sec (4X NDR)"))
        gid = (f"fe80:0000:0000:0000:946d:ae03:00a0:{i:04x}" if ib else
               f"fe80:0000:0000:0000:966d:aeff:fea0:{i:04x}")
        out.append(SysPort(dev, 1, state, phys, rate, "InfiniBand" if ib else "Ethernet",
                           100 + i if ib else 0, 1 if ib else 0, gid))
    return out


__all__ = ["SysPort", "can_run", "dgx_ports", "run_probe", "write_tree"]
