"""The demo rack, brought up and provisioned once for the whole e2e session: every e2e
module (test_demo_rack.py, test_rolling_driver_upgrade.py) runs on the same rack, in file
order, each test leaving SLURM with every node idle as it found it."""

from __future__ import annotations

import subprocess

import pytest
from demo_rack import BIN, DEMO, NODES, rackgate, require_slurm_idle, run


@pytest.fixture(scope="session")
def provisioned_rack() -> subprocess.CompletedProcess[str]:
    up = rackgate("demo", "up", "-i", DEMO)
    assert up.returncode == 0, up.stdout + up.stderr
    first = run(str(BIN / "ansible-playbook"), "-i", DEMO, "playbooks/site.yml")
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    # Every test after this one validates, and mpi.allreduce needs both nodes idle in SLURM.
    require_slurm_idle(NODES)
    return first
