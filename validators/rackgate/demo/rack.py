"""The demo rack: podman containers with systemd that stand in for a rack's nodes, and
simulated BMCs on the control host's loopback that stand in for their BMCs.

The hosts come from ``inventory/demo`` (every host whose ``ansible_connection`` is
``containers.podman.podman``); each becomes a container of the same name on the
``rackgate-demo`` network, from the locally built base image (scripts/build-image.sh).
Each container has a fixed address, and every member's name and address are written into
every member's /etc/hosts (``podman run --add-host``): the rack never depends on the
network's DNS, which podman's CNI backend provides only with the dnsname plugin.
The BMCs (rackgate.demo.bmc): ipmi_sim on 127.0.0.1:9623 (console 9624) for rg-node01,
and a Redfish mockup service on 127.0.0.1:9625 for rg-node02's BMC and the rack's CDU.
Their state lives in ``.state/demo`` so that a fault injected there is undone by ``heal``.
This needs a source checkout of rackgate: the image recipe and simulator files live there.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rackgate.demo.boot import INIT_FORMAT, host_facts, init_gone
from rackgate.environment import demo_settings
from rackgate.inventory import Inventory
from rackgate.refusal import Refusal

REPO = Path(__file__).resolve().parents[3]
STATE = REPO / ".state" / "demo"
REDFISH_MOCKUP = REPO / "tests" / "fixtures" / "redfish" / "healthy"
IPMI_LAN_PORT, IPMI_CONSOLE_PORT, REDFISH_PORT = 9623, 9624, 9625
# The simulators' own credentials (molecule/demo-bmc/ipmi_sim/lan.conf); the inventory
# holds the same password vaulted, as a real rack's inventory would.
BMC_USER, BMC_PASSWORD = "admin", "password"
FAULTS = {
    "psu-failure": "PSU2 of rg-node01's BMC reports 'Failure detected' (IPMI)",
    "psu-absent": "supply Bay2 of rg-node02's BMC is absent (Redfish)",
    "leak": "a leak detector of the rack's CDU reports Critical (Redfish)",
    "flow-low": "the CDU's secondary-loop flow drops to 60 L/min (Redfish)",
    "node-down": "container rg-node02 is stopped",
}
NETWORK = "rackgate-demo"
# A fixed subnet and a fixed address per container, as real nodes have: SLURM's controller
# resolves a node's address once, so a node that came back from a restart on another
# address would answer its registration but never the controller's pings and job launches.
SUBNET_PREFIX = "10.89.240."
SUBNET = SUBNET_PREFIX + "0/24"
FIRST_HOST_ADDRESS = 10
LABEL = "io.rackgate.demo=1"
PODMAN_CONNECTION = "containers.podman.podman"


class DemoError(Refusal):
    pass


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str  # podman's state, or "absent"
    systemd: str  # systemctl is-system-running, or "-"


def podman_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", demo_settings()["CONTAINERS_CONF"])
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
    """``systemctl is-system-running`` inside the container; "unknown" when it printed
    nothing (``podman exec`` failed, or systemd's bus is not up yet)."""
    proc = _podman("exec", name, "systemctl", "is-system-running", check=False, timeout=30)
    return proc.stdout.strip() or "unknown"


def _boot_diagnosis(name: str) -> str:
    """What a container that did not boot says: the exec's exit status and error, whether
    its init still runs on the host, and the last lines of its console, so that a boot
    timeout names its cause."""
    proc = _podman("exec", name, "systemctl", "is-system-running", check=False, timeout=30)
    logs = _podman("logs", "--tail", "8", name, check=False, timeout=30)
    console = " | ".join(line.strip() for line in (logs.stdout + logs.stderr).splitlines()
                         if line.strip())
    return (f"{name}: systemctl is-system-running rc {proc.returncode} "
            f"{(proc.stdout.strip() or proc.stderr.strip())[-300:]!r}; "
            f"init: {_init_gone(name) or 'running'}; console: {console[-600:]!r}")


def _init_gone(name: str) -> str | None:
    proc = _podman("container", "inspect", "--format", INIT_FORMAT, name, check=False,
                   timeout=30)
    if proc.returncode != 0:
        return f"podman inspect failed (rc {proc.returncode}): {proc.stderr.strip()[-200:]}"
    return init_gone(proc.stdout)


def status(inv: Inventory) -> list[NodeState]:
    return bmc_status() + container_status(inv)


def container_status(inv: Inventory) -> list[NodeState]:
    out = []
    for host in demo_hosts(inv):
        name = container_name(inv, host)
        proc = _podman("container", "inspect", "--format", "{{.State.Status}}", name,
                       check=False)
        state = proc.stdout.strip() if proc.returncode == 0 else "absent"
        out.append(NodeState(name, state, _systemd_state(name) if state == "running" else "-"))
    return out


def addresses(inv: Inventory) -> dict[str, str]:
    """Container name -> its fixed address on the demo network, in host-name order
    (inventory/demo: rg-head 10.89.240.10, rg-node01 .11, rg-node02 .12)."""
    return {container_name(inv, host): f"{SUBNET_PREFIX}{FIRST_HOST_ADDRESS + index}"
            for index, host in enumerate(demo_hosts(inv))}


def _extra_hosts(plan: dict[str, str], name: str) -> list[str]:
    """The ``--add-host`` entries of one member: every other member, name:address."""
    return sorted(f"{other}:{address}" for other, address in plan.items() if other != name)


def _inspect(name: str) -> tuple[str, list[str]] | None:
    """(podman state, the container's --add-host entries), or None when it does not exist."""
    proc = _podman("container", "inspect", "--format",
                   "{{.State.Status}} {{json .HostConfig.ExtraHosts}}", name, check=False)
    if proc.returncode != 0:
        return None
    state, _, hosts = proc.stdout.strip().partition(" ")
    try:
        extra = json.loads(hosts) or []
    except json.JSONDecodeError:
        extra = []
    return state, sorted(str(h) for h in extra)


# systemd boots the demo image in 2-5 s here on a quiet machine; a fresh CI machine under load
# once saw all three members still "unknown" after 60 s, so the wait allows three minutes and
# then says why each member is not up.
BOOT_TIMEOUT_S = 180.0
# A member whose init stops while it boots is made again, at most twice: CI once saw every
# member's init gone seconds after `podman run` while podman still said "running" (runc:
# "cannot exec in a stopped container"); on a second try the cause is named (init_gone,
# host_facts) and a member that keeps stopping ends the wait at once.
BOOT_ATTEMPTS = 3


def _start(name: str, address: str, extra: Sequence[str], image: str) -> None:
    _podman("run", "--detach", "--name", name, "--hostname", name, "--network", NETWORK,
            "--ip", address, *(f"--add-host={entry}" for entry in extra),
            "--label", LABEL, image)


def up(inv: Inventory, boot_timeout_s: float = BOOT_TIMEOUT_S,
       say: Callable[[str], None] = lambda line: None) -> list[NodeState]:
    """Start the BMC simulators and every member (made when missing or made for another
    plan, started when stopped), then wait, bounded, for systemd in each; ``say`` gets a
    line for each member made again because its init stopped while booting."""
    hosts = demo_hosts(inv)
    if not hosts:
        raise DemoError(f"inventory {', '.join(inv.sources)} has no host with "
                        f"ansible_connection={PODMAN_CONNECTION}")
    start_bmcs()
    image = build_image()
    if _podman("network", "exists", NETWORK, check=False).returncode != 0:
        _podman("network", "create", "--label", LABEL, "--subnet", SUBNET, NETWORK)
    plan = addresses(inv)
    for name, address in plan.items():
        extra = _extra_hosts(plan, name)
        found = _inspect(name)
        if found is not None and found[1] != extra:
            # Made before the rack had its /etc/hosts entries, or for another rack: its
            # name service would not know the other members. It holds nothing that
            # provisioning does not put back.
            _podman("rm", "--force", "--time", "5", name)
            found = None
        if found is None:
            _start(name, address, extra, image)
        elif found[0] != "running":
            _podman("start", name)
    made = dict.fromkeys(plan, 1)
    stopped: list[str] = []
    deadline = time.monotonic() + boot_timeout_s
    while True:  # bounded: waits for systemd in every member; gives up at the deadline
        states = container_status(inv)
        late = [s.name for s in states if s.systemd not in ("running", "degraded")]
        if not late:
            return bmc_status() + states
        for name in late:
            gone = _init_gone(name) if name in plan else None
            if gone is None:
                continue
            stopped.append(f"{name} (try {made[name]} of {BOOT_ATTEMPTS}): {gone}")
            if made[name] >= BOOT_ATTEMPTS:
                deadline = 0.0  # it keeps stopping: waiting longer tells nothing more
                continue
            say(f"{name} stopped while booting ({gone}; {host_facts()}); "
                f"making it again (try {made[name] + 1} of {BOOT_ATTEMPTS})")
            _podman("rm", "--force", "--time", "5", name)
            _start(name, plan[name], _extra_hosts(plan, name), image)
            made[name] += 1
            deadline = max(deadline, time.monotonic() + boot_timeout_s)
        if time.monotonic() > deadline:
            raise DemoError("containers did not finish booting within "
                            f"{boot_timeout_s:.0f} s of their last start: "
                            + ", ".join(f"{s.name}={s.state}/{s.systemd}" for s in states)
                            + "\n" + "\n".join(_boot_diagnosis(name) for name in late)
                            + "".join(f"\nstopped while booting: {line}" for line in stopped)
                            + f"\nhost: {host_facts()}")
        time.sleep(1)


def down(inv: Inventory) -> None:
    stop_bmcs()
    for host in demo_hosts(inv):
        _podman("rm", "--force", "--time", "5", container_name(inv, host), check=False)
    _podman("network", "rm", NETWORK, check=False)


def _pid_alive(pidfile: Path) -> bool:
    try:
        os.kill(int(pidfile.read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


def _stop(pidfile: Path) -> None:
    if _pid_alive(pidfile):
        pid = int(pidfile.read_text())
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):  # bounded: 5 s, then SIGKILL
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)


def stop_bmcs() -> None:
    _stop(STATE / "ipmi_sim.pid")
    _stop(STATE / "redfish.pid")


def start_bmcs(fresh: bool = False) -> list[NodeState]:
    """Start the simulated BMCs unless they run; ``fresh`` restarts them from clean state."""
    from rackgate.demo import bmc as demo_bmc

    if fresh:
        stop_bmcs()
    STATE.mkdir(parents=True, exist_ok=True)
    if not _pid_alive(STATE / "ipmi_sim.pid"):
        try:
            proc = demo_bmc.start_ipmi_sim(STATE / "ipmi_sim", IPMI_LAN_PORT, IPMI_CONSOLE_PORT)
        except (demo_bmc.BmcError, OSError) as exc:
            raise DemoError(f"the IPMI BMC simulator did not start: {exc}") from None
        (STATE / "ipmi_sim.pid").write_text(str(proc.pid))
    if not _pid_alive(STATE / "redfish.pid"):
        root = STATE / "redfish"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(REDFISH_MOCKUP, root)
        env = {**os.environ, "RACKGATE_BMC_USER": BMC_USER, "RACKGATE_BMC_PASSWORD": BMC_PASSWORD}
        with (STATE / "redfish.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "rackgate.demo.bmc", "redfish", "--root", str(root),
                 "--port", str(REDFISH_PORT)], env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        (STATE / "redfish.pid").write_text(str(proc.pid))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # bounded wait for the port
            try:
                socket.create_connection(("127.0.0.1", REDFISH_PORT), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise DemoError(f"the Redfish BMC simulator did not listen on {REDFISH_PORT}: "
                            f"{(STATE / 'redfish.log').read_text(errors='replace')[-500:]}")
    return bmc_status()


def bmc_status() -> list[NodeState]:
    return [NodeState(f"ipmi_sim 127.0.0.1:{IPMI_LAN_PORT}",
                      "running" if _pid_alive(STATE / "ipmi_sim.pid") else "stopped", "-"),
            NodeState(f"redfish 127.0.0.1:{REDFISH_PORT}",
                      "running" if _pid_alive(STATE / "redfish.pid") else "stopped", "-")]


def _edit_json(rel: str, change: dict[str, object]) -> None:
    path = STATE / "redfish" / rel / "index.json"
    doc = json.loads(path.read_text())
    for dotted, value in change.items():
        node = doc
        *parents, last = dotted.split(".")
        for key in parents:
            node = node[key]
        node[last] = value
    path.write_text(json.dumps(doc, indent=2))


def inject(inv: Inventory, fault: str) -> str:
    """Break one named thing in the simulators or containers; returns what was broken."""
    from rackgate.demo import bmc as demo_bmc

    if fault not in FAULTS:
        raise DemoError(f"unknown fault {fault!r} (faults: {', '.join(FAULTS)})")
    if fault != "node-down":
        start_bmcs()
    if fault == "psu-failure":
        demo_bmc.ipmi_console(IPMI_CONSOLE_PORT, "sensor_set_bit 0x20 0 2 1 1 1")
    elif fault == "psu-absent":
        _edit_json("Chassis/1/PowerSubsystem/PowerSupplies/Bay2",
                   {"Status.State": "Absent", "Status.Health": None})
    elif fault == "leak":
        _edit_json("ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/Tray",
                   {"DetectorState": "Critical"})
    elif fault == "flow-low":
        _edit_json("ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1",
                   {"FlowLitersPerMinute.Reading": 60.0})
    else:
        _podman("stop", "--time", "5", container_name(inv, "rg-node02"))
    return FAULTS[fault]


def heal(inv: Inventory, say: Callable[[str], None] = lambda line: None) -> list[NodeState]:
    """Undo every injected fault: fresh simulators, every container running."""
    start_bmcs(fresh=True)
    return up(inv, say=say)
