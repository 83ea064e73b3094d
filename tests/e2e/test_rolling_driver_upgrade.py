"""End to end on the podman demo rack: playbooks/rolling-driver-upgrade.yml moves the NVIDIA
driver of both compute nodes, one node at a time, while a SLURM job runs.

A real version move of packages the gpu_driver role installs: Debian 12 carries the 535 driver
userspace (nvidia-smi, libnvidia-ml1, libnvidia-cfg1, libcuda1) at 535.261.03-1 (bookworm
non-free) and at 535.309.01-0+deb12u1 (bookworm-security non-free). Both nodes first get the
older one; a job is started on rg-node02 through SLURM (srun from rg-head); the roll then runs
with serial 1 to the newer one. The job stays running through rg-node01's whole batch, and is
let finish only once rg-node02's batch has drained it and says it waits for that job, so the
test proves both that a batch leaves the other nodes' jobs alone and that a batch waits.

The containers have no GPU and no kernel module (the role skips the kernel packages there):
the playbook verifies the installed package version and the module state, and says so.
gpu_nodes membership exists only in this test (an extra inventory in tmp_path), never in
inventory/demo.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from demo_rack import BIN, DEMO, ENV, NODES, ROOT, run, wait_slurm_idle

pytestmark = pytest.mark.e2e

OLD = "535.261.03-1"  # bookworm non-free
NEW = "535.309.01-0+deb12u1"  # bookworm-security non-free
PACKAGES = ("nvidia-smi", "libnvidia-ml1", "libnvidia-cfg1", "libcuda1")
PLAYBOOK = "playbooks/rolling-driver-upgrade.yml"
REASON = f"rackgate driver upgrade to {NEW}"
JOB_NAME = "rg-e2e-overlap"
RELEASE = "/tmp/rackgate-e2e-release-job"  # on rg-node02: the job ends once it exists
JOB_MAX_S = 900  # the job ends by itself after this (bounded), whatever happens
# sinfo --format=%N|%T|%E lines, as the playbook prints them: an item of the debug message's
# list, quoted (JSON or YAML result format)
SINFO_LINE = re.compile(r"""^\s*(?:- )?["']?(rg-node\d+)\|([^|]*)\|(.*?)["']?,?\s*$""")


def gpu_inventory(tmp_path: Path) -> Path:
    """The demo's compute nodes as gpu_nodes, without DCGM (its repository, NVIDIA's, is not
    reachable from here and the demo has no GPU for it)."""
    path = tmp_path / "gpu-nodes.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {
        "hosts": {node: None for node in NODES},
        "vars": {"gpu_driver_dcgm_enabled": False}}}}}))
    return path


def installed(node: str, package: str) -> str:
    proc = run("podman", "exec", node, "dpkg-query", "--show", "--showformat=${Version}", package)
    return proc.stdout.strip() if proc.returncode == 0 else f"(none: {proc.stderr.strip()})"


def squeue_state(job_name: str) -> str:
    return run("podman", "exec", "rg-head", "squeue", "--noheader", f"--name={job_name}",
               "--format=%T").stdout.strip()


def sinfo_reports(stdout: str) -> list[tuple[str, dict[str, tuple[str, str]]]]:
    """("drain" | "resume", {node: (state, reason)}) for every sinfo the playbook printed,
    in output order."""
    reports: list[tuple[str, dict[str, tuple[str, str]]]] = []
    current: dict[str, tuple[str, str]] | None = None
    for line in stdout.splitlines():
        if line.startswith("TASK ["):
            current = None
            for kind in ("drain", "resume"):
                if line.startswith(f"TASK [Show sinfo after the {kind}]"):
                    current = {}
                    reports.append((kind, current))
        elif current is not None and (m := SINFO_LINE.match(line)):
            current[m.group(1)] = (m.group(2), m.group(3))
    return reports


def release_job() -> None:
    run("podman", "exec", "rg-node02", "touch", RELEASE)


def resume_if_ours(node: str) -> None:
    """After a failed run: give the node back to the other e2e tests, but only if it is
    drained with this playbook's reason (never someone else's drain)."""
    line = run("podman", "exec", "rg-head", "sinfo", "--Node", "--noheader", f"--nodes={node}",
               "--format=%T|%E").stdout.strip().split("\n")[0]
    if "|rackgate driver upgrade to " in line:
        run("podman", "exec", "rg-head", "scontrol", "update", f"nodename={node}",
            "state=resume")


def test_rolling_upgrade_drains_one_node_at_a_time_and_waits_for_jobs(
        provisioned_rack: subprocess.CompletedProcess[str], tmp_path: Path) -> None:
    inventory = gpu_inventory(tmp_path)
    # 1. Both nodes at the older driver (the role itself, on both at once).
    install = tmp_path / "install-old.yml"
    install.write_text(yaml.safe_dump([{"name": "Older driver on the GPU nodes",
                                        "hosts": "gpu_nodes", "become": True,
                                        "roles": [{"role": "gpu_driver"}]}]))
    first = run(str(BIN / "ansible-playbook"), "-i", DEMO, "-i", str(inventory), str(install),
                "-e", f"gpu_driver_version={OLD}", timeout=900)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    for node in NODES:
        for package in PACKAGES:
            assert installed(node, package) == OLD, (node, package)
    # the mirror carries the newer version too (the move below is a real one)
    policy = run("podman", "exec", "rg-node01", "apt-cache", "policy", "nvidia-smi").stdout
    assert f" {NEW} " in policy and f" {OLD} " in policy, policy

    run("podman", "exec", "rg-node02", "rm", "-f", RELEASE)
    # 2. A job on rg-node02, launched through SLURM from the controller; it runs until the
    #    test releases it (at most JOB_MAX_S), and prints a marker when it ends normally.
    job_script = (f"i=0; while [ ! -e {RELEASE} ]; do i=$((i+1)); "
                  f"[ $i -gt {JOB_MAX_S * 2} ] && exit 3; sleep 0.5; done; echo job-finished")
    job = subprocess.Popen(
        ["podman", "exec", "rg-head", "srun", "--nodelist=rg-node02", "--nodes=1",
         f"--job-name={JOB_NAME}", "sh", "-c", job_script],
        cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    roll = None
    lines: list[str] = []
    saw_running_during_batch_1 = False
    released_at_line = -1
    try:
        deadline = time.monotonic() + 60
        while squeue_state(JOB_NAME) != "RUNNING":
            assert job.poll() is None, job.communicate()
            assert time.monotonic() < deadline, f"the job never ran: {squeue_state(JOB_NAME)!r}"
            time.sleep(1)
        # 3. The roll, serial 1, to the newer driver; its output is read as it comes.
        roll = subprocess.Popen(
            [str(BIN / "ansible-playbook"), "-i", DEMO, "-i", str(inventory), PLAYBOOK,
             "-e", f"gpu_driver_version={NEW}", "-e", "rackgate_driver_upgrade_serial=1",
             "-e", "rackgate_driver_upgrade_job_poll=2",
             "-e", "rackgate_driver_upgrade_job_timeout=240"],
            cwd=ROOT, env={**ENV, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        assert roll.stdout is not None
        for line in roll.stdout:
            lines.append(line.rstrip("\n"))
            # rg-node01's batch is over (resumed) while the job still runs on rg-node02
            if "rg-node01|idle|" in line and not saw_running_during_batch_1:
                saw_running_during_batch_1 = squeue_state(JOB_NAME) == "RUNNING"
            # rg-node02's batch drained it and now waits for the job: let the job end
            if "job(s) on rg-node02" in line and released_at_line < 0:
                released_at_line = len(lines)
                release_job()
        roll.wait(timeout=60)
        job_out, job_err = job.communicate(timeout=60)
    finally:
        release_job()
        if job.poll() is None:
            job.kill()
        if roll is not None and roll.poll() is None:
            roll.kill()
        for node in NODES:
            resume_if_ours(node)
    stdout = "\n".join(lines)
    # What the run showed (pytest -rP prints it): the batches, sinfo after each drain and
    # resume, the wait for rg-node02's job, the verification, and the job's own end.
    print("\n".join(line for line in lines if re.search(
        r"this batch:|sinfo after|rg-node0\d\||job\(s\) on|no job running|verified with|"
        r"^rg-node0\d\s+:", line)))
    print(f"srun on rg-node02: rc={job.returncode} {job_out.strip()} {job_err.strip()}")
    assert roll.returncode == 0, stdout[-6000:]

    # The batches ran in order, one node each: rg-node01 drained (rackgate's reason), then
    # resumed, and only then rg-node02 drained (draining: its job still ran) and resumed.
    reports = sinfo_reports(stdout)
    assert [(kind, sorted(nodes)) for kind, nodes in reports] == [
        ("drain", ["rg-node01"]), ("resume", ["rg-node01"]),
        ("drain", ["rg-node02"]), ("resume", ["rg-node02"])], reports
    assert reports[0][1]["rg-node01"] == ("drained", REASON), reports
    assert reports[1][1]["rg-node01"][0] == "idle", reports
    assert reports[2][1]["rg-node02"] == ("draining", REASON), reports
    assert reports[3][1]["rg-node02"][0] == "idle", reports
    batches = re.findall(r"this batch: (rg-node\d+(?:, rg-node\d+)*)\.", stdout)
    assert batches == ["rg-node01", "rg-node02"], batches

    # rg-node02's job ran through rg-node01's batch, undisturbed, and rg-node02's batch
    # waited for it: the wait names the job, and the job ended only after that.
    assert saw_running_during_batch_1, "the job was not running when rg-node01 was resumed"
    assert "no job running on rg-node01" in stdout
    waited = re.search(r"waiting up to 240 s for 1 job\(s\) on rg-node02 \(id name user state "
                       r"time\): \d+ " + re.escape(JOB_NAME) + r" \S+ RUNNING", stdout)
    assert waited, stdout[-6000:]
    assert released_at_line > 0
    assert job.returncode == 0 and "job-finished" in job_out, (job.returncode, job_out, job_err)

    # Verified the way a GPU-less container allows, and said so.
    for node in NODES:
        assert (f"{node}: verified with the installed package version and module state "
                f"(no GPU device here, so no nvidia-smi): package {NEW}, nvidia module not "
                f"loaded (a container: no kernel of its own)") in stdout
    # Both nodes end at the new version, and idle in SLURM.
    for node in NODES:
        for package in PACKAGES:
            assert installed(node, package) == NEW, (node, package)
        assert wait_slurm_idle(node, timeout_s=30)
    recap = [line for line in lines if re.match(r"^rg-node0\d\s+:", line)]
    assert len(recap) == 2 and all("failed=0" in line for line in recap), recap


def test_a_node_drained_by_someone_else_stops_the_roll_untouched(
        provisioned_rack: subprocess.CompletedProcess[str], tmp_path: Path) -> None:
    """rg-node01 drained by an operator: the roll does not touch it (no upgrade, its drain and
    reason kept) and stops before rg-node02."""
    inventory = gpu_inventory(tmp_path)
    theirs = "operator: bad DIMM"
    drain = run("podman", "exec", "rg-head", "scontrol", "update", "nodename=rg-node01",
                "state=drain", f"reason={theirs}")
    assert drain.returncode == 0, drain.stderr
    before = {node: installed(node, "nvidia-smi") for node in NODES}
    try:
        roll = run(str(BIN / "ansible-playbook"), "-i", DEMO, "-i", str(inventory), PLAYBOOK,
                   "-e", f"gpu_driver_version={OLD}", timeout=600)
        after_state = run("podman", "exec", "rg-head", "sinfo", "--Node", "--noheader",
                          "--nodes=rg-node01", "--format=%T|%E").stdout.strip().split("\n")[0]
    finally:
        run("podman", "exec", "rg-head", "scontrol", "update", "nodename=rg-node01",
            "state=resume")
    assert roll.returncode != 0, roll.stdout[-4000:]
    assert "it was taken out of service by someone else" in roll.stdout
    assert f'with reason "{theirs}"' in roll.stdout
    assert after_state.split("|")[1] == theirs and "drain" in after_state, after_state
    assert "TASK [Drain the batch's nodes in SLURM]" not in roll.stdout
    assert "rg-node02" not in "".join(re.findall(r"this batch: [^.]*\.", roll.stdout))
    assert {node: installed(node, "nvidia-smi") for node in NODES} == before
    assert wait_slurm_idle("rg-node01", timeout_s=30)
