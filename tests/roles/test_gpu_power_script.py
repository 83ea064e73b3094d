"""The gpu_driver role's GPU power script (roles/gpu_driver/files/rackgate-gpu-power), run by
/bin/sh with a fake nvidia-smi first on PATH in a temporary directory: the fake records its
argv and prints the GPU list a test gives it, in the format of
`nvidia-smi --query-gpu=index,name,power.min_limit,power.max_limit --format=csv,noheader,nounits`
(nvidia-smi(1), "--query-gpu"; one line per GPU, fields joined by ", "; "[N/A]" where the GPU
does not report a field). The config is the role's template (templates/gpu-power.conf.j2),
rendered as Ansible's template module renders it (trim_blocks), or a line written by a test.
No GPU is touched: what nvidia-smi would do with -pl/-ac is the fake's exit status."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest

ROLE = Path(__file__).resolve().parents[2] / "roles" / "gpu_driver"
SCRIPT = ROLE / "files" / "rackgate-gpu-power"
TEMPLATE = ROLE / "templates" / "gpu-power.conf.j2"

FAKE = """#!/bin/sh
printf '%s\\n' "$*" >> "$FAKE_LOG"
case "$1" in
  --query-gpu=*) cat "$FAKE_GPUS"; exit "${FAKE_QUERY_RC:-0}" ;;
esac
case " $* " in
  *" -pl "*) if [ -n "${FAKE_PL_ERROR:-}" ]; then echo "$FAKE_PL_ERROR"; exit 4; fi ;;
  *" -ac "*) if [ -n "${FAKE_AC_ERROR:-}" ]; then echo "$FAKE_AC_ERROR"; exit 4; fi ;;
esac
exit 0
"""
QUERY = "--query-gpu=index,name,power.min_limit,power.max_limit --format=csv,noheader,nounits"
# Two H100 SXM (200..700 W) and one A100 SXM (100..400 W): a mixed node.
MIXED = ("0, NVIDIA H100 80GB HBM3, 200.00, 700.00\n"
         "1, NVIDIA H100 80GB HBM3, 200.00, 700.00\n"
         "2, NVIDIA A100-SXM4-80GB, 100.00, 400.00\n")


def render(limits: dict[str, Any], clocks: dict[str, Any]) -> str:
    env = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    return env.from_string(TEMPLATE.read_text(encoding="utf-8")).render(
        gpu_driver_power_limits=limits, gpu_driver_application_clocks=clocks,
        __gpu_driver_power_script="/usr/local/libexec/rackgate/rackgate-gpu-power")


class Run:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        bindir = tmp / "bin"
        bindir.mkdir()
        fake = bindir / "nvidia-smi"
        fake.write_text(FAKE, encoding="utf-8")
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        self.log = tmp / "calls"
        self.gpus = tmp / "gpus"
        self.gpus.write_text(MIXED, encoding="utf-8")
        self.env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}",
                    "FAKE_LOG": str(self.log), "FAKE_GPUS": str(self.gpus)}

    def __call__(self, config: str, **env: str) -> subprocess.CompletedProcess[str]:
        conf = self.tmp / "gpu-power.conf"
        conf.write_text(config, encoding="utf-8")
        return subprocess.run(["/bin/sh", str(SCRIPT), str(conf)], capture_output=True,
                              text=True, timeout=30, env={**self.env, **env}, check=False)

    @property
    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def test_template_writes_one_line_per_setting():
    text = render({"NVIDIA H100 80GB HBM3": 550, "NVIDIA A100-SXM4-80GB": 300},
                  {"NVIDIA H100 80GB HBM3": {"memory_mhz": 2619, "graphics_mhz": 1980}})
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "power_limit_w[NVIDIA A100-SXM4-80GB]=300",
        "power_limit_w[NVIDIA H100 80GB HBM3]=550",
        "application_clocks_mhz[NVIDIA H100 80GB HBM3]=2619,1980",
    ]


def test_limits_and_clocks_applied_to_the_gpus_of_each_model(run):
    result = run(render({"NVIDIA H100 80GB HBM3": 550},
                        {"NVIDIA H100 80GB HBM3": {"memory_mhz": 2619, "graphics_mhz": 1980}}))
    assert result.returncode == 0, result.stderr
    assert run.calls == [QUERY, "-i 0 -pl 550", "-i 0 -ac 2619,1980",
                         "-i 1 -pl 550", "-i 1 -ac 2619,1980"]
    out = result.stdout.splitlines()
    assert "GPU 0 (NVIDIA H100 80GB HBM3): power limit set to 550 W (range 200.00..700.00 W)" in out
    assert ("GPU 1 (NVIDIA H100 80GB HBM3): application clocks set to memory 2619 MHz, "
            "graphics 1980 MHz") in out
    assert "GPU 2 (NVIDIA A100-SXM4-80GB): no setting for this model, left as it is" in out


@pytest.mark.parametrize(("watts", "gpus"), [
    (450, "2, NVIDIA A100-SXM4-80GB, 100.00, 400.00"),   # above the max limit
    (90, "2, NVIDIA A100-SXM4-80GB, 100.00, 400.00"),    # below the min limit
])
def test_limit_outside_the_gpus_range_is_refused(run, watts, gpus):
    run.gpus.write_text("0, NVIDIA H100 80GB HBM3, 200.00, 700.00\n" + gpus + "\n")
    result = run(render({"NVIDIA H100 80GB HBM3": 600, "NVIDIA A100-SXM4-80GB": watts}, {}))
    assert result.returncode == 1
    assert (f"GPU 2 (NVIDIA A100-SXM4-80GB): refusing power limit {watts} W: outside this "
            "GPU's range 100.00..400.00 W") in result.stderr
    # nothing is sent to the refusing GPU; the other one is still set
    assert run.calls == [QUERY, "-i 0 -pl 600"]


def test_range_edges_are_allowed(run):
    result = run(render({"NVIDIA H100 80GB HBM3": 700, "NVIDIA A100-SXM4-80GB": 100}, {}))
    assert result.returncode == 0, result.stderr
    assert run.calls == [QUERY, "-i 0 -pl 700", "-i 1 -pl 700", "-i 2 -pl 100"]


def test_gpu_without_a_power_limit_range_is_refused(run):
    run.gpus.write_text("0, NVIDIA H100 80GB HBM3, [N/A], [N/A]\n")
    result = run(render({"NVIDIA H100 80GB HBM3": 550}, {}))
    assert result.returncode == 1
    assert "reports no power limit range (power.min_limit '[N/A]'" in result.stderr
    assert run.calls == [QUERY]


@pytest.mark.parametrize(("line", "why"), [
    ("power_limit_w[NVIDIA H100; reboot]=550", "is not a GPU name"),
    ("power_limit_w[$(reboot)]=550", "is not a GPU name"),
    ("power_limit_w[NVIDIA H100 80GB HBM3]=550 W", "is not a whole number"),
    ("power_limit_w[NVIDIA H100 80GB HBM3]=5.5e2", "is not a whole number"),
    ("power_limit_w[NVIDIA H100 80GB HBM3]=", "is not a whole number"),
    ("application_clocks_mhz[NVIDIA H100 80GB HBM3]=2619", "are not <memory MHz>,<graphics MHz>"),
    ("application_clocks_mhz[NVIDIA H100 80GB HBM3]=2619,1980,1", "are not <memory MHz>"),
    ("graphics_clock[NVIDIA H100 80GB HBM3]=1980", "unknown setting 'graphics_clock'"),
    ("power_limit_w NVIDIA H100 80GB HBM3=550", "no [<model>]"),
    ("power_limit_w[NVIDIA H100 80GB HBM3]", "no '='"),
])
def test_malformed_config_applies_nothing(run, line, why):
    result = run(f"power_limit_w[NVIDIA A100-SXM4-80GB]=300\n{line}\n")
    assert result.returncode == 2
    assert "gpu-power.conf line 2: " in result.stderr and why in result.stderr, result.stderr
    assert run.calls == []  # nvidia-smi not even asked


def test_a_setting_given_twice_is_refused(run):
    result = run("power_limit_w[NVIDIA H100 80GB HBM3]=550\n"
                 "power_limit_w[NVIDIA H100 80GB HBM3]=600\n")
    assert result.returncode == 2
    assert "power_limit_w[NVIDIA H100 80GB HBM3] is set twice" in result.stderr
    assert run.calls == []


def test_nothing_configured_asks_nothing(run):
    result = run(render({}, {}))
    assert result.returncode == 0, result.stderr
    assert "sets nothing" in result.stdout
    assert run.calls == []


def test_query_failure_is_an_error(run):
    run.gpus.write_text("NVIDIA-SMI has failed because it couldn't communicate with the "
                        "NVIDIA driver.\n")
    result = run(render({"NVIDIA H100 80GB HBM3": 550}, {}), FAKE_QUERY_RC="9")
    assert result.returncode == 1
    assert "nvidia-smi --query-gpu failed: NVIDIA-SMI has failed" in result.stderr


def test_nvidia_smi_refusing_a_setting_is_reported(run):
    result = run(render({"NVIDIA H100 80GB HBM3": 550},
                        {"NVIDIA H100 80GB HBM3": {"memory_mhz": 2619, "graphics_mhz": 1980}}),
                 FAKE_AC_ERROR="Setting applications clocks is not supported for GPU "
                               "00000000:18:00.0.")
    assert result.returncode == 1
    assert ("GPU 0 (NVIDIA H100 80GB HBM3): nvidia-smi -i 0 -ac 2619,1980 failed: Setting "
            "applications clocks is not supported") in result.stderr
    # the limits were still set, on both GPUs
    assert "-i 0 -pl 550" in run.calls and "-i 1 -pl 550" in run.calls


def test_unreadable_line_from_nvidia_smi_is_an_error(run):
    run.gpus.write_text("0, NVIDIA H100 80GB HBM3, 200.00, 700.00, extra\n")
    result = run(render({"NVIDIA H100 80GB HBM3": 550}, {}))
    assert result.returncode == 1
    assert "cannot read nvidia-smi's line" in result.stderr
    assert run.calls == [QUERY]


def test_a_model_this_node_lacks_is_said_not_failed(run):
    result = run(render({"NVIDIA L40S": 300}, {}))
    assert result.returncode == 0, result.stderr
    assert "no GPU named 'NVIDIA L40S' on this node" in result.stdout
    assert run.calls == [QUERY]


def test_no_gpu_listed_is_an_error(run):
    run.gpus.write_text("")
    result = run(render({"NVIDIA H100 80GB HBM3": 550}, {}))
    assert result.returncode == 1
    assert "nvidia-smi lists no GPU" in result.stderr
