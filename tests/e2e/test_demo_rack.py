"""End to end on the podman demo rack: up -> provision -> validate -> reports.

Real components only: podman containers with systemd, ansible-playbook with the common
role installing Debian's fio, ansible-runner collecting, the real fio measuring, and
headless Chromium rendering the HTML report. There is no GPU here: the demo profile
judges storage only, and says so.

Needs podman with the project's containers.conf, the base image (make image) and
Debian's mirror; `make test` provides all three.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEMO = str(ROOT / "inventory" / "demo")
NODES = ["rg-node01", "rg-node02"]


ENV = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule" / "containers.conf"),
       "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "COLUMNS": "200",
       "ANSIBLE_VAULT_IDENTITY_LIST":
           f"demo@{ROOT / 'molecule' / 'demo-bmc' / 'vault-password.txt'}"}


def run(*argv: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=timeout, check=False)


def rackgate(*args: str) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "rackgate.cli", *args)


def report_of(proc: subprocess.CompletedProcess[str]) -> dict:
    m = re.search(r"^Report \(JSON\): (\S+)$", proc.stdout, re.M)
    assert m, f"no report path printed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads((ROOT / m.group(1)).read_text())


def results(doc: dict) -> dict[str, dict]:
    return {n["name"]: n for n in doc["nodes"]}


def result(node: dict, check: str = "fio.seq_read") -> dict:
    (res,) = [r for r in node["results"] if r["check"] == check]
    return res


@pytest.fixture(scope="module")
def provisioned_rack():
    up = rackgate("demo", "up", "-i", DEMO)
    assert up.returncode == 0, up.stdout + up.stderr
    first = run(str(BIN / "ansible-playbook"), "-i", DEMO, "playbooks/site.yml")
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    # Every test after this one validates, and mpi.allreduce needs both nodes idle in SLURM.
    require_slurm_idle(NODES)
    return first


def test_members_know_each_other_without_container_dns(provisioned_rack):
    """Each container's /etc/hosts names every other member with its fixed address
    (podman --add-host), so the rack works whether or not the podman network has DNS."""
    members = {"rg-head": "10.89.240.10", "rg-node01": "10.89.240.11",
               "rg-node02": "10.89.240.12"}
    for name in members:
        hosts = run("podman", "exec", name, "cat", "/etc/hosts").stdout
        entries = {fields[1]: fields[0] for fields in (line.split() for line in
                   hosts.splitlines()) if len(fields) >= 2 and not fields[0].startswith("#")}
        for other, address in members.items():
            if other != name:
                assert entries.get(other) == address, f"{name}:/etc/hosts\n{hosts}"


def test_provisioning_is_idempotent(provisioned_rack):
    again = run(str(BIN / "ansible-playbook"), "-i", DEMO, "playbooks/site.yml")
    assert again.returncode == 0, again.stdout[-4000:]
    recap = [line for line in again.stdout.splitlines() if re.match(r"^rg-\S+\s+:", line)]
    assert len(recap) == 3, again.stdout[-2000:]
    assert all("changed=0" in line and "failed=0" in line for line in recap), "\n".join(recap)


def test_demo_rack_is_accepted_with_fio_figures(provisioned_rack, tmp_path):
    proc = rackgate("validate", "-i", DEMO, "--profile", "demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Rack verdict: ACCEPT (2/2 nodes accepted)" in proc.stdout
    doc = report_of(proc)
    by = results(doc)
    assert sorted(by) == NODES
    # No GPU or fabric here: those checks are skipped with the reason, never passed.
    for node in NODES:
        for check in ("gpu.health", "gpu.nvlink", "gpu.dcgm_diag", "fabric.ports",
                      "topology.gpu_nic_affinity"):
            r = result(by[node], check)
            assert r["status"] == "skip" and "not applicable to profile demo" in r["message"]
    # The simulated BMCs, reached from the control host with the vaulted password:
    assert result(by["rg-node01"], "redundancy.psu_ipmi")["status"] == "pass"
    assert result(by["rg-node02"], "redundancy.psu_redfish")["status"] == "pass"
    for node in NODES:
        assert result(by[node], "cooling.cdu")["status"] == "pass"
    # One MPI job across both compute containers, launched by srun from the SLURM
    # controller (rg-head, provisioned by roles/slurm): one evidence file judges both.
    for node in NODES:
        mpi = result(by[node], "mpi.allreduce")
        assert mpi["status"] == "pass", mpi
        assert mpi["measured"] > 0 and mpi["unit"] == "GB/s"
        assert mpi["evidence"] == "evidence/rg-head/mpi.allreduce.out"
        assert mpi["details"]["hosts"] == "rg-node01, rg-node02"
    mpi_record = json.loads((ROOT / "runs" / doc["run"]["run_id"]
                             / "evidence/rg-head/mpi.allreduce.json").read_text())
    # srun behind rackgate's readiness guard (python3 -c <probe> NODES -- srun ...)
    argv = mpi_record["argv"]
    assert argv[3:5] == ["python3", "-c"] and argv[6:9] == ["rg-node01,rg-node02", "--", "srun"]
    assert "--nodelist=rg-node01,rg-node02" in argv
    for node in NODES:
        ident = result(by[node], "node.identity")
        # This VM exposes no DMI, so no serial: the certificate says so, as a warning.
        assert ident["status"] in ("pass", "warn"), ident
        assert ident["details"]["kernel"] and ident["details"]["os"].startswith("Debian")
        res = result(by[node])
        assert res["status"] == "pass", res
        assert res["measured"] > 0 and res["unit"] == "MB/s"
        assert res["details"]["fio_version"].startswith("fio-3")
        evidence = ROOT / "runs" / doc["run"]["run_id"] / res["evidence"]
        assert json.loads(evidence.read_text())["jobs"]  # raw fio JSON, as fio wrote it

    # The HTML report, rendered by a real browser: verdict, nodes and figures are on it.
    html = ROOT / "runs" / doc["run"]["run_id"] / "report.html"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "headless Chromium is needed to check the HTML report: apt-get install " \
                     "chromium (make test installs it)"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'chromium'}"]
    dom = run(chromium, *flags, "--dump-dom", html.as_uri(), timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Rack verdict: ACCEPT" in dom.stdout
    for node in NODES:
        figure = f"{result(by[node])['measured']} MB/s"
        assert node in dom.stdout and figure in dom.stdout, figure
    shot = html.with_name("report.png")
    run(chromium, *flags, "--window-size=1280,1400", f"--screenshot={shot}", html.as_uri(),
        timeout=120)
    assert shot.stat().st_size > 10_000


def test_impossible_threshold_on_one_node_rejects_the_rack(provisioned_rack, tmp_path):
    override = tmp_path / "override.yml"
    override.write_text(yaml.safe_dump({"all": {"hosts": {"rg-node02": {
        "rackgate_profile_overrides": {"checks": {"fio.seq_read": {"thresholds": {
            "read_bw": {"ref": 1.0e9, "basis": "impossible on purpose (test)"}}}}}}}}}))
    proc = rackgate("validate", "-i", DEMO, "-i", str(override), "--profile", "demo")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Rack verdict: REJECT (1/2 nodes accepted)" in proc.stdout
    by = results(report_of(proc))
    assert by["rg-node01"]["verdict"] == "ACCEPT"
    assert by["rg-node02"]["verdict"] == "REJECT" and by["rg-node02"]["overridden"]
    res = result(by["rg-node02"])
    assert res["status"] == "fail" and res["measured"] > 0
    assert "misses >= 5e+08 MB/s" in res["message"]
    assert "rg-node02 (rack demo-r1 u 37): fio.seq_read: fail: sequential read" in proc.stdout


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


def test_stopped_node_is_an_error_and_the_others_are_judged(provisioned_rack):
    stop = rackgate("demo", "inject", "node-down", "-i", DEMO)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    try:
        proc = rackgate("validate", "-i", DEMO, "--profile", "demo")
    finally:
        start = run("podman", "start", "rg-node02")
        # The MPI job launched while rg-node02 was down leaves it COMPLETING in SLURM;
        # as an operator would after an outage, set it down and resume it once its slurmd
        # is back, so the later tests find both nodes idle.
        if not wait_slurm_idle("rg-node02"):
            for state in ("down reason=e2e-node-down", "resume"):
                run("podman", "exec", "rg-head", "scontrol", "update", "nodename=rg-node02",
                    *f"state={state}".split(" "))
        assert wait_slurm_idle("rg-node02"), slurm_state("rg-node02")
    assert start.returncode == 0, start.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    by = results(report_of(proc))
    for down in by["rg-node02"]["results"]:
        if down["check"].startswith(("fio.", "node.")):  # run on the node: nothing to run on
            assert down["status"] == "error" and down["measured"] is None
            assert down["message"].startswith("host unreachable, nothing collected")
    # its BMC still answers (queried from the control host), as on a real rack
    assert result(by["rg-node02"], "redundancy.psu_redfish")["status"] == "pass"
    # the MPI job across both nodes cannot have run: an error on each, never a pass
    for node in NODES:
        assert result(by[node], "mpi.allreduce")["status"] == "error"
    assert by["rg-node02"]["verdict"] == "REJECT"
    up = result(by["rg-node01"])
    assert up["status"] == "pass" and up["measured"] > 0


def test_rejudge_offline_with_a_stricter_profile(provisioned_rack, tmp_path):
    proc = rackgate("validate", "-i", DEMO, "--profile", "demo", "--limit", "rg-node01")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = ROOT / "runs" / report_of(proc)["run"]["run_id"]
    strict = yaml.safe_load((ROOT / "validators/rackgate/profiles/demo.yaml").read_text())
    strict["name"] = "demo-strict"
    strict["checks"]["fio.seq_read"]["thresholds"]["read_bw"]["ref"] = 1.0e9
    (tmp_path / "strict.yaml").write_text(yaml.safe_dump(strict))
    again = rackgate("judge", str(run_dir), "--profile", str(tmp_path / "strict.yaml"),
                     "--out", str(tmp_path / "rejudged"))
    assert again.returncode == 1, again.stdout + again.stderr
    doc = json.loads((tmp_path / "rejudged" / "report.json").read_text())
    assert doc["profile"]["name"] == "demo-strict" and doc["verdict"] == "REJECT"
    assert json.loads((run_dir / "report.json").read_text())["verdict"] == "ACCEPT"


def _kill_orphans(marker: str) -> None:
    """ansible-runner starts ansible-playbook in a session of its own (pexpect), so killing
    rackgate's process group leaves it behind: kill every process whose command line names
    this test's own inventory file, so nothing outlives the test."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def test_killed_run_resumes_collecting_only_what_is_missing(provisioned_rack, tmp_path):
    # rg-node02 reads for 25 s instead of 3: the run is killed (SIGKILL, whole process
    # group, as a crash would) once rg-node01's evidence is stored and before rg-node02's.
    slow = tmp_path / "slow-node02.yml"
    slow.write_text(yaml.safe_dump({"all": {"hosts": {"rg-node02": {
        "rackgate_profile_overrides": {"checks": {"fio.seq_read": {"params": {
            "runtime_s": 25}}}}}}}}))
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rackgate.cli", "validate", "-i", DEMO, "-i", str(slow),
         "--profile", "demo", "--runs-dir", str(runs)],
        cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    first = None
    deadline = time.monotonic() + 120
    try:
        while first is None and time.monotonic() < deadline and proc.poll() is None:
            first = next(iter(runs.glob("*/evidence/rg-node01/fio.seq_read.json")), None)
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _kill_orphans(str(slow))
    assert first is not None, "rg-node01's evidence never appeared"
    run_dir = first.parents[2]
    assert not (run_dir / "evidence/rg-node02/fio.seq_read.json").exists()
    assert json.loads((run_dir / "manifest.json").read_text())["finished"] is None
    kept = first.read_bytes()

    resumed = rackgate("validate", "--resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "fio.seq_read on 1 node(s)" in resumed.stdout
    assert "fio.seq_read rg-node02: completed" in resumed.stdout
    assert "fio.seq_read rg-node01" not in resumed.stdout
    assert first.read_bytes() == kept  # rg-node01 was not collected again
    doc = report_of(resumed)
    assert doc["verdict"] == "ACCEPT" and doc["run"]["resumed"]
    assert doc["run"]["finished"] is not None


def test_injected_bmc_faults_reject_with_sensor_and_location(provisioned_rack):
    try:
        for fault in ("psu-failure", "leak"):
            inject = rackgate("demo", "inject", fault, "-i", DEMO)
            assert inject.returncode == 0, inject.stdout + inject.stderr
        proc = rackgate("validate", "-i", DEMO, "--profile", "demo",
                        "--checks", "redundancy,cooling")
    finally:
        heal = rackgate("demo", "heal", "-i", DEMO)
    assert heal.returncode == 0, heal.stdout + heal.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("rg-node01 (rack demo-r1 u 38): redundancy.psu_ipmi: fail: PSU2 Status (02h): "
            "Failure detected") in proc.stdout
    for node, u in (("rg-node01", 38), ("rg-node02", 37)):
        assert f"{node} (rack demo-r1 u {u}): cooling.cdu: fail: LEAK" in proc.stdout
    # healed: the same checks pass again
    again = rackgate("validate", "-i", DEMO, "--profile", "demo",
                     "--checks", "redundancy,cooling")
    assert again.returncode == 0, again.stdout + again.stderr
