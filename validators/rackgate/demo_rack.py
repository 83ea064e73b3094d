"""The demo rack: podman containers with systemd that stand in for a rack's nodes.

The hosts come from ``inventory/demo`` (every host whose ``ansible_connection`` is
``containers.podman.podman``); each becomes a container of the same name on the
``rackgate-demo`` network, from the locally built base image (scripts/build-image.sh).
This needs a source checkout of rackgate: the image recipe lives there.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from rackgate.inventory import Inventory

REPO = Path(__file__).resolve().parents[2]
NETWORK = "rackgate-demo"
LABEL = "io.rackgate.demo=1"
PODMAN_CONNECTION = "containers.podman.podman"


class DemoError(RuntimeError):
    pass


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # podman's state, or "absent"
    systemd: str  # systemctl is-system-running, or "-"


def podman_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(REPO / "molecule" / "containers.conf"))
    return env


def _podman(*args: str, check: bool = True, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(["podman", *args], capture_output=True, text=True,
                              env=podman_env(), timeout=timeout, check=False)
    except FileNotFoundError:
        raise DemoError("podman is not installed: run `make demo` (it installs podman, runc "
                        "and debootstrap) or apt-get install podman runc debootstrap") from None
    if check and proc.returncode != 0:
        raise DemoError(f"podman {' '.join(args)} failed (rc {proc.returncode}): "
                        f"{proc.stderr.strip()[-500:]}")
    return proc


def demo_hosts(inv: Inventory) -> list[str]:
    return sorted(h for h, v in inv.hostvars.items()
                  if v.get("ansible_connection") == PODMAN_CONNECTION)


def container_name(inv: Inventory, host: str) -> str:
    return str(inv.hostvars[host].get("ansible_host", host))


def build_image() -> str:
    script = REPO / "scripts" / "build-image.sh"
    if not script.is_file():
        raise DemoError(f"{script} is missing: the demo rack needs a rackgate source checkout")
    proc = subprocess.run([str(script)], capture_output=True, text=True, env=podman_env(),
                          check=False, timeout=1800)
    if proc.returncode != 0:
        raise DemoError(f"building the base image failed: {proc.stderr.strip()[-800:]}")
    return proc.stdout.strip().splitlines()[-1]


def _systemd_state(name: str) -> str:
    proc = _podman("exec", name, "systemctl", "is-system-running", check=False, timeout=30)
    return proc.stdout.strip() or "unknown"


def status(inv: Inventory) -> list[NodeState]:
    out = []
    for host in demo_hosts(inv):
        name = container_name(inv, host)
        proc = _podman("container", "inspect", "--format", "{{.State.Status}}", name,
                       check=False)
        state = proc.stdout.strip() if proc.returncode == 0 else "absent"
        out.append(NodeState(name, state, _systemd_state(name) if state == "running" else "-"))
    return out


def up(inv: Inventory, boot_timeout_s: float = 60.0) -> list[NodeState]:
    hosts = demo_hosts(inv)
    if not hosts:
        raise DemoError(f"inventory {', '.join(inv.sources)} has no host with "
                        f"ansible_connection={PODMAN_CONNECTION}")
    image = build_image()
    if _podman("network", "exists", NETWORK, check=False).returncode != 0:
        _podman("network", "create", "--label", LABEL, NETWORK)
    for host in hosts:
        name = container_name(inv, host)
        state = _podman("container", "inspect", "--format", "{{.State.Status}}", name,
                        check=False)
        if state.returncode != 0:
            _podman("run", "--detach", "--name", name, "--hostname", name, "--network", NETWORK,
                    "--label", LABEL, image)
        elif state.stdout.strip() != "running":
            _podman("start", name)
    deadline = time.monotonic() + boot_timeout_s
    while True:  # bounded: systemd boots in a few seconds; give up at the deadline
        states = status(inv)
        if all(s.systemd in ("running", "degraded") for s in states):
            return states
        if time.monotonic() > deadline:
            raise DemoError("containers did not finish booting within "
                            f"{boot_timeout_s:.0f} s: "
                            + ", ".join(f"{s.name}={s.state}/{s.systemd}" for s in states))
        time.sleep(1)


def down(inv: Inventory) -> None:
    for host in demo_hosts(inv):
        _podman("rm", "--force", "--time", "5", container_name(inv, host), check=False)
    _podman("network", "rm", NETWORK, check=False)
