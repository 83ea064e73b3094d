"""Verify the `cluster` scenario as a whole, once, from the controller rg-slurm-ctl: the
compute nodes rg-slurm-c1 and rg-slurm-c2 are idle in SLURM and run jobs (per-host checks
are in test_default.py, which lists what a container cannot show).

What is verified:
  * `sinfo` shows both compute nodes idle (partition batch);
  * `srun -N2 hostname` prints both names, and a batch job (`sbatch --wait`) completes;
  * `scontrol show topology` matches the fabric plan's topology of molecule.yml: on Debian 12
    topology/tree (su1: c1 and c2, under two spines: slurmctld takes a leaf switch with two
    parents), on Debian 13 topology/block (block su1: c1 and c2);
  * `srun -N2 -n2 --mpi=pmix` runs an MPI program (mpi4py) with ranks 0 and 1 of size 2, one
    on each compute node.

Every test that starts a job first waits, once and at most IDLE_TIMEOUT_S (slurmd
registers seconds after it starts; by verify time it has long done so), for both nodes
to be idle; otherwise each such test fails at once with the node states and the end of
slurmd's log on every node that is not idle, so a cluster without nodes fails verify
within a minute instead of queueing jobs that can never start.
"""

import functools
import os
import re
import time

import pytest
import testinfra
from testinfra.utils.ansible_runner import AnsibleRunner

INVENTORY = AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
CTL = INVENTORY.get_hosts("slurm_controller")[0]
COMPUTES = INVENTORY.get_hosts("slurm_compute")
# Cluster-wide tests run once, on the controller (roles/conftest.py prints its journal
# when one fails).
testinfra_hosts = [f"podman://{CTL}"]
# the fabric plan's topology (molecule.yml): one scalable unit under two spines
TOPOLOGY = {"su1": "rg-slurm-c[1-2]"}
SPINES = ("spine-01", "spine-02")


def on(name):
    """The testinfra host of a container of the scenario."""
    return testinfra.get_host(f"podman://{name}")


def run_ok(host, command, *args):
    result = host.run(command, *args)
    assert result.rc == 0, (
        f"{command!r} on {host.backend.hostname}: rc={result.rc}\n{result.stdout}\n"
        f"{result.stderr}"
    )
    return result.stdout


IDLE_TIMEOUT_S = 20


def _node_states(ctl):
    """{node: "state (reason)"} as slurmctld sees the batch partition (sinfo --Node)."""
    out = ctl.run("sinfo --noheader --Node --partition=batch --format='%N|%T|%E'")
    states = {}
    for line in out.stdout.splitlines():
        if line.strip():
            name, state, reason = [*line.split("|", 2), "", ""][:3]
            states[name] = state if reason in ("", "none") else f"{state} ({reason})"
    return states


@functools.cache
def _idle_states():
    """Wait once, at most IDLE_TIMEOUT_S, for slurmctld to see every compute node idle
    (slurmd registers a few seconds after it starts); the last states seen."""
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while True:
        states = _node_states(on(CTL))
        if all(states.get(n) == "idle" for n in COMPUTES) or time.monotonic() > deadline:
            return states
        time.sleep(2)


def require_idle_cluster():
    """Every test that starts a job calls this first: when a compute node is not idle it
    fails at once (after the one bounded wait) with the node states and the end of slurmd's
    log on each node that is not idle, instead of queueing a job that can never start."""
    states = _idle_states()
    bad = [n for n in COMPUTES if states.get(n) != "idle"]
    if not bad:
        return
    logs = []
    for name in bad:
        journal = on(name).run("journalctl -u slurmd -n 15 --no-pager")
        logs.append(f"--- journalctl -u slurmd -n 15 on {name} (rc={journal.rc}) ---\n"
                    f"{journal.stdout or journal.stderr}")
    seen = ", ".join(f"{n}: {states.get(n, 'not listed by sinfo')}" for n in COMPUTES)
    pytest.fail(f"slurmctld on {CTL} does not see every compute node idle after "
                f"{IDLE_TIMEOUT_S} s ({seen})\n" + "\n".join(logs), pytrace=False)


def test_sinfo_both_nodes_idle():
    require_idle_cluster()
    assert _node_states(on(CTL)) == {n: "idle" for n in COMPUTES}


def test_srun_runs_on_both_nodes():
    require_idle_cluster()
    out = run_ok(on(CTL), "timeout 60 srun --immediate=30 -N2 hostname")
    assert sorted(out.split()) == sorted(COMPUTES), out


def test_sbatch_job_completes():
    require_idle_cluster()
    out = run_ok(on(CTL), "timeout 60 sbatch --wait --output=/dev/null --wrap 'true' ")
    assert out.startswith("Submitted batch job"), out


def test_topology_matches_fabric_plan():
    out = run_ok(on(CTL), "scontrol show topology")
    conf = run_ok(on(CTL), "cat /etc/slurm/slurm.conf")
    if "TopologyPlugin=topology/block" in conf.splitlines():  # Debian 13: SLURM 24.11
        blocks = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in out.splitlines()
                  if line.startswith("BlockName=")]
        assert [(b["BlockName"], b["Nodes"]) for b in blocks] == list(TOPOLOGY.items()), out
        return
    switches = {}
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        switches[fields["SwitchName"]] = fields
    for leaf, nodes in TOPOLOGY.items():
        assert switches[leaf]["Level"] == "0", switches
        assert switches[leaf]["Nodes"] == nodes, switches
    for spine in SPINES:  # a leaf switch with two parents, as on a rail-optimised tree
        assert switches[spine]["Level"] == "1", switches
        assert switches[spine]["Switches"] == "su1", switches
    assert set(switches) == {*TOPOLOGY, *SPINES}, switches


def test_mpi_program_across_nodes_with_pmix():
    require_idle_cluster()
    program = (
        "from mpi4py import MPI; c = MPI.COMM_WORLD; "
        "print(c.Get_rank(), c.Get_size(), MPI.Get_processor_name(), flush=True)"
    )
    out = run_ok(on(CTL), "timeout 120 srun -N2 -n2 --mpi=pmix python3 -c %s", program)
    ranks = sorted(tuple(line.split()) for line in out.splitlines() if line.strip())
    assert [r[:2] for r in ranks] == [("0", "2"), ("1", "2")], out
    assert sorted(r[2] for r in ranks) == sorted(COMPUTES), out
