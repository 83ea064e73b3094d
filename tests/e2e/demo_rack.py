"""What the e2e tests share: the demo rack's paths and names, and helpers that run commands
against it, and `provision`, which the session fixture `provisioned_rack` in tests/conftest.py
runs once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEMO = str(ROOT / "inventory" / "demo")
NODES = ["rg-node01", "rg-node02"]


ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule" / "containers.conf"),
       "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "COLUMNS": "200",
       "ANSIBLE_VAULT_IDENTITY_LIST":
           f"demo@{ROOT / 'molecule' / 'demo-bmc' / 'vault-password.txt'}"}


def accepted_both(stdout: str) -> bool:
    """The console's verdict line of a rack whose two nodes were both accepted, with or
    without warnings (the demo's node.identity warns: no DMI serial in a container)."""
    return re.search(r"^Rack verdict: ACCEPT \(2/2 nodes accepted(, \d+ warnings?)?\)$",
                     stdout, re.M) is not None


def run(*argv: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=timeout, check=False)


def rackgate(*args: str) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "rackgate.cli.main", *args)


def slurm_state(node: str) -> str:
    return run("podman", "exec", "rg-head", "sinfo", "-h", "-N", "-n", node,
               "-o", "%T").stdout.strip().split("\n")[0]


def wait_slurm_idle(node: str, timeout_s: float = 60.0) -> bool:
    """Bounded wait for SLURM to see ``node`` idle again."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if slurm_state(node) == "idle":
            return True
        time.sleep(2)
    return False


def require_slurm_idle(nodes: list[str], timeout_s: float = 45.0) -> None:
    """Wait (bounded: slurmd registers seconds after provisioning starts it) for slurmctld on
    rg-head to see every node idle; otherwise fail at once with the node states and the end
    of slurmd's log on each node that is not idle."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = {n: slurm_state(n) for n in nodes}
        if all(state == "idle" for state in states.values()):
            return
        if time.monotonic() > deadline:
            break
        time.sleep(2)
    logs = "\n".join(
        f"--- journalctl -u slurmd -n 15 on {n} ---\n"
        + run("podman", "exec", n, "journalctl", "-u", "slurmd", "-n", "15", "--no-pager").stdout
        for n, state in states.items() if state != "idle")
    pytest.fail(f"SLURM on rg-head does not see every node idle after {timeout_s:.0f} s: "
                f"{states} (sinfo -N)\n{logs}", pytrace=False)


def provision() -> subprocess.CompletedProcess[str]:
    """Bring the demo rack up and provision it (site.yml); the session fixture
    ``provisioned_rack`` (tests/conftest.py) calls it once for every e2e module, which run
    in file order on the same rack, each test leaving SLURM with every node idle."""
    up = rackgate("demo", "up", "-i", DEMO)
    assert up.returncode == 0, up.stdout + up.stderr
    first = run(str(BIN / "ansible-playbook"), "-i", DEMO, "playbooks/site.yml")
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    # Every test after this one validates, and mpi.allreduce needs both nodes idle in SLURM.
    require_slurm_idle(NODES)
    return first
