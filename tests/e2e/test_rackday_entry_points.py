"""End to end on the podman demo rack (issue 30, items 5 and 6): the entry points work as
the README documents them.

- Item 5: the README's `.venv/bin/rackgate ... -i inventory/demo` run with none of the
  Makefile's exports (no venv on PATH, no CONTAINERS_CONF, no vault identity) validates the
  rack: rackgate finds its own Ansible and the demo inventory brings its settings.
- Item 6: on a demo node, the health check's three names take the same arguments:
  `/usr/local/sbin/rackgate-healthcheck --help` prints the options and exit codes and checks
  nothing, `--no-slurm` checks without reading SLURM, and the venv's `rackgate healthcheck`
  (a venv without rich) is the same program.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from demo_rack import DEMO, ROOT, run

pytestmark = pytest.mark.e2e

NODE = "rg-node01"
PROGRAM = "/usr/local/sbin/rackgate-healthcheck"
VENV = "/opt/rackgate-healthcheck"
SAYS = "rackgate healthcheck: "


def test_the_readmes_rackgate_validates_the_demo_rack_without_make(provisioned_rack,
                                                                   tmp_path: Path):
    script = Path(sys.executable).parent / "rackgate"
    env = {k: v for k, v in os.environ.items()
           if k not in ("CONTAINERS_CONF", "ANSIBLE_VAULT_IDENTITY_LIST", "ANSIBLE_CONFIG",
                        "VIRTUAL_ENV")}
    env |= {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(ROOT / "validators"),
            "COLUMNS": "200"}
    out = subprocess.run([str(script), "validate", "-i", DEMO, "--profile", "demo",
                          "--checks", "redundancy", "--runs-dir", str(tmp_path / "runs")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
                         check=False)
    said = out.stdout + out.stderr
    assert out.returncode == 0, said[-3000:]
    assert "Rack verdict: ACCEPT" in out.stdout, said[-3000:]


def test_the_health_checks_entry_points_agree_on_a_demo_node(provisioned_rack):
    for program in (PROGRAM, f"{VENV}/bin/rackgate-healthcheck",
                    f"{VENV}/bin/rackgate healthcheck"):
        helped = run("podman", "exec", NODE, *program.split(), "--help", timeout=60)
        assert helped.returncode == 0, f"{program} --help: {helped.stderr}"
        assert "--no-slurm" in helped.stdout and "exit codes:" in helped.stdout.lower()
        assert f"{SAYS}{NODE}" not in helped.stdout, f"{program} --help ran the check"
    for argv in ([PROGRAM, "--no-slurm"], [f"{VENV}/bin/rackgate", "healthcheck",
                                           "--no-slurm"]):
        checked = run("podman", "exec", NODE, *argv, timeout=60)
        said = checked.stdout + checked.stderr
        assert checked.returncode in (0, 1), said  # the verdict is the node's; it ran
        assert f"{SAYS}{NODE}: " in checked.stdout and "SLURM" not in checked.stdout, said
    other = run("podman", "exec", NODE, f"{VENV}/bin/rackgate", "list", "checks", timeout=60)
    assert other.returncode == 2 and "Traceback" not in other.stderr, other.stderr
