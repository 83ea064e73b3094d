"""``rackgate-healthcheck`` end to end on this machine: the real CLI (a subprocess of this
Python), a configuration file, a fake node root (/proc, /sys, /run) and fake nvidia-smi,
journalctl, systemctl, sinfo and scontrol first on PATH. The fakes print fixtures
(tests/fixtures/healthcheck/) and record their arguments; sinfo answers the state the test
gives. Checks what the program prints, its exit code, the textfile and the scontrol calls."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "healthcheck"
PREFIX = "rackgate healthcheck: "  # the lines it prints
MARK = "rackgate/healthcheck: "  # the drain reasons it writes
OURS = f"{MARK}mounts: /lustre: not mounted (expected lustre)"
RECORD = "var/lib/rackgate-healthcheck/drain-reason"  # under the root

CONFIG = """\
node_name: gpu001
textfile_dir: /var/lib/prometheus/node-exporter
slurmd_unit: slurmd.service
gpus: 8
gpu_ecc: true
gpu_xid: true
xid_allowed: [13, 31, 43, 45]
ib_ports: [{device: mlx5_0, port: 1, rate_gbps: 400}]
mounts: [{path: /home, fstype: nfs4}, {path: /lustre, fstype: lustre}]
memlock_min: unlimited
units: [munge.service]
failed_units_allowed: []
"""


def body(name: str) -> str:
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith("# "))


class FakeNode:
    def __init__(self, tmp: Path) -> None:
        self.root, self.bin, self.log = tmp / "root", tmp / "bin", tmp / "calls.log"
        self.config = tmp / "healthcheck.yaml"
        self.config.write_text(CONFIG, encoding="utf-8")
        self.bin.mkdir()
        self.files({
            "proc/self/mountinfo": body("mountinfo_ok.txt"),
            "proc/4242/comm": "slurmd\n",
            "proc/4242/limits": body("limits_memlock_unlimited.txt"),
            # Documentation/ABI/stable/sysfs-class-infiniband: state and rate of a port
            "sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n",
            "sys/class/infiniband/mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)\n",
        })
        (self.root / "var/lib/prometheus/node-exporter").mkdir(parents=True)
        self.tool("nvidia-smi", body("nvidia-smi_8gpus_ok.csv"))
        self.tool("journalctl", body("kernel_xid13_app_fault.log"))
        self.tool("systemctl", "")
        self.tool("scontrol", "")
        self.sinfo("idle", "none")

    def files(self, files: dict[str, str]) -> None:
        for rel, text in files.items():
            path = self.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def tool(self, name: str, output: str, rc: int = 0, sleep_s: float = 0) -> None:
        out = self.bin / f"{name}.out"
        out.write_text(output, encoding="utf-8")
        script = self.bin / name
        is_active = ""
        if name == "systemctl":  # is-active: one "active" per unit; --failed: the output file
            is_active = ('if [ "$1" = is-active ]; then shift 2; for u do echo active; done; '
                         'exit 0; fi\n'
                         'if [ "$1" = show ]; then echo 4242; exit 0; fi\n')
        script.write_text(
            "#!/bin/sh\n"
            f"echo {shlex.quote(name)} \"$@\" >> {shlex.quote(str(self.log))}\n"
            + (f"sleep {sleep_s}\n" if sleep_s else "") + is_active
            + f"cat {shlex.quote(str(out))}\nexit {rc}\n", encoding="utf-8")
        script.chmod(0o755)

    def sinfo(self, state: str, reason: str) -> None:
        self.tool("sinfo", f"gpu001|{state}|{reason}\ngpu001|{state}|{reason}\n")

    def run(self, *extra: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}"}
        return subprocess.run(
            [sys.executable, "-m", "rackgate.programs.healthcheck", "--config", str(self.config),
             "--root", str(self.root), *extra],
            env=env, capture_output=True, text=True, timeout=60, check=False)

    def calls(self, tool: str) -> list[str]:
        if not self.log.exists():
            return []
        return [c for c in self.log.read_text(encoding="utf-8").splitlines()
                if c.startswith(tool + " ")]

    def metrics(self) -> list[str]:
        path = self.root / "var/lib/prometheus/node-exporter/rackgate-healthcheck.prom"
        return [line for line in path.read_text(encoding="utf-8").splitlines()
                if not line.startswith("#")]


@pytest.fixture
def node(tmp_path: Path) -> FakeNode:
    return FakeNode(tmp_path)


def test_healthy_node_exits_0_and_changes_nothing(node):
    r = node.run()
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{PREFIX}gpu001: healthy (7 items, 0 skipped)" in r.stdout
    assert node.calls("scontrol") == []
    assert node.calls("sinfo") == ["sinfo --Node --noheader --nodes=gpu001 --format=%N|%T|%E"]
    assert "rackgate_healthcheck_ok 1" in node.metrics()
    assert 'rackgate_healthcheck_item_ok{item="gpu_xid"} 1' in node.metrics()
    assert not [p for p in node.root.glob("var/lib/prometheus/node-exporter/.*")]  # no tmp left


def test_missing_mount_drains_with_the_prefix_and_exits_1(node):
    node.files({"proc/self/mountinfo": body("mountinfo_lustre_missing.txt")})
    r = node.run()
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{PREFIX}gpu001: mounts: FAIL: /home: fstype nfs" in r.stdout
    [call] = node.calls("scontrol")
    assert call.startswith(f"scontrol update nodename=gpu001 state=drain reason={MARK}mounts: ")
    assert call.endswith((node.root / RECORD).read_text().rstrip("\n"))  # recorded first
    assert "rackgate_healthcheck_drained 1" in node.metrics()
    assert 'rackgate_healthcheck_item_ok{item="mounts"} 0' in node.metrics()


def test_healthy_node_drained_by_the_check_is_resumed(node):
    node.sinfo("drained", OURS)
    node.files({RECORD: OURS + "\n"})
    r = node.run()
    assert r.returncode == 0, r.stdout
    assert node.calls("scontrol") == ["scontrol update nodename=gpu001 state=resume"]
    assert "rackgate_healthcheck_drained 0" in node.metrics()
    assert not (node.root / RECORD).exists()


@pytest.mark.parametrize("reason", ["operator: test", "rackgate r1-demo: fio.seq_read: slow",
                                    "rackgate/drain[r1-demo]: fio.seq_read: slow",
                                    f"{PREFIX}keep out, RMA 4711", OURS])
def test_someone_elses_drain_is_never_touched(node, reason):
    node.sinfo("drained", reason)
    assert node.run().returncode == 0
    node.files({"proc/self/mountinfo": body("mountinfo_lustre_missing.txt")})
    assert node.run().returncode == 1
    assert node.calls("scontrol") == []


@pytest.mark.parametrize(("tool", "fixture_name", "item", "says"), [
    ("nvidia-smi", "nvidia-smi_gpu_missing.csv", "gpu_count", "7 GPUs found, 8 expected"),
    ("nvidia-smi", "nvidia-smi_ecc_uncorrected.csv", "gpu_ecc", "GPU 5"),
    ("journalctl", "kernel_xid79_fallen_off_bus.log", "gpu_xid", "Xid 79"),
    ("systemctl", "systemctl_failed_two.txt", "systemd_units", "failed units"),
])
def test_each_failing_tool_fails_its_item(node, tool, fixture_name, item, says):
    node.tool(tool, body(fixture_name))
    r = node.run("--no-slurm")
    assert r.returncode == 1
    [line] = [x for x in r.stdout.splitlines() if f": {item}: " in x]
    assert says in line and ": FAIL: " in line
    assert node.calls("sinfo") == [] and node.calls("scontrol") == []


def test_down_port_memlock_and_stale_pid(node):
    node.files({"sys/class/infiniband/mlx5_0/ports/1/state": "1: DOWN\n",
                "proc/4242/limits": body("limits_memlock_8m.txt")})
    out = node.run("--no-slurm").stdout
    assert f"{PREFIX}gpu001: ib_ports: FAIL: mlx5_0/1: state '1: DOWN'" in out
    assert "memlock: FAIL: slurmd (pid 4242): memlock soft 8388608 bytes" in out
    node.files({"proc/4242/comm": "bash\n"})
    assert "memlock: ERROR: main pid 4242 of slurmd.service is 'bash', not slurmd" \
        in node.run("--no-slurm").stdout


def test_a_missing_nvidia_smi_is_an_error_that_drains(node):
    node.tool("nvidia-smi", "NVIDIA-SMI has failed because it couldn't communicate with the "
              "NVIDIA driver.\n", rc=9)
    r = node.run()
    assert r.returncode == 1
    assert "gpu_count: ERROR: nvidia-smi: nvidia-smi exited 9: NVIDIA-SMI has failed" in r.stdout
    [call] = node.calls("scontrol")
    assert f"reason={MARK}gpu_count: nvidia-smi: nvidia-smi exited 9" in call


def test_a_hanging_command_is_cut_and_the_run_stays_under_10_s(node):
    node.tool("nvidia-smi", body("nvidia-smi_8gpus_ok.csv"), sleep_s=30)
    r = node.run("--no-slurm")
    assert r.returncode == 1
    assert "gpu_count: ERROR: nvidia-smi: nvidia-smi did not finish: timed out" in r.stdout
    seconds = float(r.stdout.rsplit(" in ", 1)[1].split()[0])
    assert seconds < 10, r.stdout


def test_no_textfile_directory_is_said_and_nothing_written(node):
    (node.root / "var/lib/prometheus/node-exporter").rmdir()
    r = node.run()
    assert r.returncode == 0
    assert "textfile directory /var/lib/prometheus/node-exporter is absent" in r.stdout


def test_bad_configuration_exits_2_and_touches_nothing(node):
    node.config.write_text(CONFIG.replace("node_name: gpu001", "node_name: 'a;b'"))
    r = node.run()
    assert r.returncode == 2 and "configuration refused" in r.stdout and "node_name" in r.stdout
    assert node.calls("sinfo") == [] and node.calls("scontrol") == []


def test_sinfo_failure_on_a_healthy_node_exits_2(node):
    node.tool("sinfo", "", rc=1)
    r = node.run()
    assert r.returncode == 2 and "cannot read the node's state" in r.stdout


def test_the_subcommand_is_registered_in_rackgate():
    from rackgate.cli.main import build_parser

    args = build_parser().parse_args(["healthcheck", "--config", "x.yaml", "--no-slurm"])
    assert args.config == "x.yaml" and args.no_slurm


def test_the_program_needs_only_the_standard_library_and_pyyaml():
    """The node's venv holds rackgate with --no-deps and sees only the OS's PyYAML."""
    code = ("import sys, rackgate.programs.healthcheck; print(' '.join(sorted({m.split('.')[0] "
            "for m in sys.modules} - set(sys.stdlib_module_names) - {'__main__'})))")
    bare = code.replace(", rackgate.programs.healthcheck", "")
    before = subprocess.run([sys.executable, "-c", bare],
                            capture_output=True, text=True, check=True).stdout.split()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # PyYAML's C loader brings Cython's runtime modules (_cython_*, cython_runtime)
    new = {m for m in set(out.stdout.split()) - set(before)
           if not m.startswith("_") and m != "cython_runtime"}
    assert sorted(new) == ["rackgate", "yaml"], out.stdout


def test_the_kernel_log_is_scanned_whole_but_only_xid_lines_are_kept():
    """A kernel log larger than the output cap: every line is read, the XID lines kept."""
    from rackgate.health.probe import OUTPUT_CAP, run_command

    script = ("import sys\nw = sys.stdout.write\nw('NVRM: Xid (PCI:0000:18:00): 13, first\\n')\n"
              f"for i in range({OUTPUT_CAP // 50}): w('LustreError: 11-0: noise line ' + "
              "str(i).rjust(12) + '\\n')\nw('NVRM: Xid (PCI:0000:5d:00): 79, last\\n')\n")
    ran = run_command([sys.executable, "-c", script], 8.0, keep="NVRM: Xid")
    assert ran.rc == 0, ran.stderr
    assert ran.stdout.splitlines() == ["NVRM: Xid (PCI:0000:18:00): 13, first",
                                       "NVRM: Xid (PCI:0000:5d:00): 79, last"]


def test_output_over_the_cap_is_incomplete_evidence():
    from rackgate.health.probe import OUTPUT_CAP, run_command

    ran = run_command([sys.executable, "-c", f"print('x' * {OUTPUT_CAP + 10})"], 8.0)
    assert ran.rc is None and "printed more than" in ran.stderr
    assert ran.trouble(["tool"]) is not None


def test_a_timed_out_command_is_killed_with_its_children(tmp_path):
    from rackgate.health.probe import run_command

    marker = tmp_path / "child-survived"
    script = f"sleep 2; touch {shlex.quote(str(marker))}"
    ran = run_command(["sh", "-c", f"sh -c {shlex.quote(script)} & wait"], 0.5)
    assert ran.rc is None and "timed out" in ran.stderr
    subprocess.run(["sleep", "2.5"], check=True)
    assert not marker.exists()


def test_slurmd_not_running_is_a_memlock_error(node):
    script = node.bin / "systemctl"
    script.write_text(script.read_text(encoding="utf-8").replace("echo 4242", "echo 0"),
                      encoding="utf-8")
    out = node.run("--no-slurm").stdout
    assert "memlock: ERROR: slurmd.service: no main pid ('0'): is slurmd up?" in out
