"""Verify the slurm role on the `cluster` scenario: rg-slurm-ctl (slurmctld) and two compute
nodes rg-slurm-c1, rg-slurm-c2 (slurmd) on one podman network (Debian 12 or 13, as
MOLECULE_DISTRO chose the image; systemd as PID 1).

What is verified:
  * each host has only the packages and daemons it needs: slurmctld (not slurmd) on the
    controller, slurmd (not slurmctld) plus Open MPI and PMIx on the compute nodes; munge,
    slurmctld and slurmd are enabled and active where they belong, their drop-in makes them
    want munge.service, and `systemd-analyze verify` accepts their units;
  * the munge key is the same on every host, mode 0400, owner munge, and a credential made
    with `munge -n` on any host decodes with `unmunge` on every other one;
  * slurm.conf is identical on every host and declares each node no larger than what
    `slurmd -C` detects there (RealMemory = MemTotal - slurm_node_memory_reserve_mb);
  * the cluster as a whole (test_cluster.py, run once, on the controller): `sinfo` shows
    both compute nodes idle, `srun -N2 hostname` prints both names, a batch job (`sbatch
    --wait`) completes, `scontrol show topology` matches the fabric plan, and `srun -N2 -n2
    --mpi=pmix` runs an MPI program;
  * Debian 13 (SLURM 24.11): topology/block from the same plan, and the gpu/nvml plugin
    (slurm-wlm-nvml-plugin, contrib) on rg-slurm-c1, the node declared with GPUs; Debian 12
    (SLURM 22.05): topology/tree, and no such package exists;
  * cgroup.conf carries the defaults for real nodes (ConstrainDevices=yes), and slurm.conf the
    container settings of molecule.yml (proctrack/linuxproc, task/none);
  * rg-slurm-c1 is configured with 2 GPUs that a container cannot have: slurm.conf declares
    it without Gres, its gres.conf says why, and /etc/ansible/facts.d/rackgate_slurm.fact
    records the skip with its reason.

What cannot be verified in a container (and why):
  * cgroup confinement (proctrack/cgroup, task/cgroup, task/affinity, ConstrainDevices): the
    containers have no CAP_SYS_ADMIN and a read-only cgroup v1 hierarchy, so slurmd cannot
    create job cgroups; the scenario uses proctrack/linuxproc and task/none instead;
  * GPU scheduling (Gres=gpu, gres.conf AutoDetect=nvml or the /dev/nvidiaN list): there
    are no /dev/nvidia* devices (on Debian 13 the plugin is installed, but has no GPU to find);
  * slurmdbd accounting: it needs a MySQL/MariaDB server, which the scenario does not run
    (slurm_dbd_enabled stays false);
  * MPI over InfiniBand/RDMA: Open MPI runs over TCP between the containers.

When a test fails, the last 50 journal lines of the host are printed with it.
"""

import hashlib
import json
import os
import re

import pytest
import testinfra
from testinfra.utils.ansible_runner import AnsibleRunner

INVENTORY = AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
CONTROLLERS = INVENTORY.get_hosts("slurm_controller")
COMPUTES = INVENTORY.get_hosts("slurm_compute")
ALL = CONTROLLERS + COMPUTES
# `podman exec` on the molecule instances: much faster than one Ansible module per command.
testinfra_hosts = [f"podman://{name}" for name in ALL]

CTL = "rg-slurm-ctl"
FACT = "/etc/ansible/facts.d/rackgate_slurm.fact"


def name_of(host):
    return host.backend.hostname


def release(host):
    """The container's Debian codename (VERSION_CODENAME in /etc/os-release)."""
    fields = dict(line.split("=", 1) for line in
                  host.file("/etc/os-release").content_string.splitlines() if "=" in line)
    return fields["VERSION_CODENAME"].strip('"')


def on(name):
    """The testinfra host of another container of the scenario."""
    return testinfra.get_host(f"podman://{name}")


@pytest.fixture(autouse=True)
def journal_on_failure(request, host):
    """Print the host's journal after a test that failed."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        journal = host.run("journalctl -n 50 --no-pager")
        print(f"--- journalctl -n 50 --no-pager on {name_of(host)} (rc={journal.rc}) ---")
        print(journal.stdout or journal.stderr)


def run_ok(host, command, *args):
    result = host.run(command, *args)
    assert result.rc == 0, (
        f"{command!r} on {name_of(host)}: rc={result.rc}\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


def test_packages_only_what_the_host_needs(host):
    name = name_of(host)
    assert host.package("munge").is_installed
    assert host.package("slurm-client").is_installed
    if name in CONTROLLERS:
        assert host.package("slurmctld").is_installed
        assert host.package("libpmix-dev").is_installed  # srun loads mpi/pmix on the controller too
        assert not host.package("slurmd").is_installed, "the controller must not get slurmd"
        assert not host.package("openmpi-bin").is_installed
    else:
        for package in ("slurmd", "openmpi-bin", "libpmix-dev", "python3-mpi4py", "procps"):
            assert host.package(package).is_installed, package
        assert not host.package("slurmctld").is_installed, "compute nodes must not get slurmctld"
    # The gpu/nvml plugin: Debian 13 only, and only on the node declared with GPUs.
    nvml = host.package("slurm-wlm-nvml-plugin").is_installed
    assert nvml == (release(host) == "trixie" and name == "rg-slurm-c1"), (name, release(host))
    plugin = host.file("/usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_nvml.so")
    assert plugin.exists == nvml, plugin.path


def test_daemons_enabled_and_active(host):
    name = name_of(host)
    daemons = ["munge"] + (["slurmctld"] if name in CONTROLLERS else ["slurmd"])
    for daemon in daemons:
        service = host.service(daemon)
        assert service.is_enabled, f"{daemon} not enabled on {name}"
        assert service.is_running, f"{daemon} not active on {name}"
    # The role's drop-in makes the Slurm daemon start munge.
    wants = host.check_output("systemctl show --property=Wants --value %s", daemons[-1])
    assert "munge.service" in wants.split(), wants
    other = "slurmd" if name in CONTROLLERS else "slurmctld"
    assert not host.exists(other) and not host.file(f"/lib/systemd/system/{other}.service").exists
    # --man=no: the image has no man pages for the units' Documentation= lines.
    run_ok(host, "systemd-analyze verify --man=no munge.service %s.service", daemons[-1])


def test_munge_key_mode_owner_and_identical(host):
    key = host.file("/etc/munge/munge.key")
    assert key.mode == 0o400
    assert key.user == "munge" and key.group == "munge"
    digests = {n: on(n).check_output("sha256sum /etc/munge/munge.key").split()[0] for n in ALL}
    assert len(set(digests.values())) == 1, digests


@pytest.mark.parametrize("source", ALL)
def test_munge_credential_decodes_across_nodes(host, source):
    credential = run_ok(on(source), "munge -n").strip()
    decoded = run_ok(host, "printf '%%s' %s | unmunge", credential)
    assert "STATUS:          Success (0)" in decoded, decoded


def test_slurm_conf_identical_everywhere(host):
    content = host.file("/etc/slurm/slurm.conf").content
    reference = on(CTL).file("/etc/slurm/slurm.conf").content
    assert hashlib.sha256(content).digest() == hashlib.sha256(reference).digest()
    text = content.decode()
    for line in (
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "TopologyPlugin=topology/" + ("block" if release(host) == "trixie" else "tree"),
        "SlurmctldHost=rg-slurm-ctl",
        "GresTypes=gpu",
    ):
        assert line in text.splitlines(), f"{line!r} missing from slurm.conf:\n{text}"


def test_node_no_larger_than_slurmd_detects(host):
    name = name_of(host)
    if name not in COMPUTES:
        pytest.skip("slurmd runs on compute nodes only")
    detected = dict(re.findall(r"(\w+)=(\S+)", run_ok(host, "slurmd -C").splitlines()[0]))
    conf = host.file("/etc/slurm/slurm.conf").content_string
    line = next(x for x in conf.splitlines() if x.startswith(f"NodeName={name} "))
    declared = dict(re.findall(r"(\w+)=(\S+)", line))
    assert int(declared["RealMemory"]) <= int(detected["RealMemory"]), (line, detected)
    assert int(declared["CPUs"]) == int(detected["CPUs"]), (line, detected)
    assert "Gres" not in declared, f"{name} has no GPU devices, yet: {line}"


def test_cgroup_conf_keeps_real_node_defaults(host):
    lines = host.file("/etc/slurm/cgroup.conf").content_string.splitlines()
    for expected in ("ConstrainDevices=yes", "ConstrainCores=yes", "ConstrainRAMSpace=yes"):
        assert expected in lines


def test_fact_file_records_gpu_skip(host):
    fact = json.loads(host.file(FACT).content_string)
    name = name_of(host)
    assert fact["role"] == "slurm"
    assert fact["node_name"] == name
    if name == "rg-slurm-c1":
        assert fact["gpus"] == {"configured": 2, "declared": False, "gres_autodetect": "none"}
        steps = {s["step"]: s["reason"] for s in fact["skipped"]}
        assert "gpu gres" in steps, fact
        assert "/dev/nvidia0, /dev/nvidia1 are missing" in steps["gpu gres"]
        assert "container" in steps["gpu gres"]
        gres = host.file("/etc/slurm/gres.conf").content_string
        assert "No GPU is declared" in gres and "AutoDetect" not in gres, gres
    else:
        assert fact["skipped"] == [], fact
