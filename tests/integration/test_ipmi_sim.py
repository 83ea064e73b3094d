"""redundancy.psu_ipmi against a live BMC: Debian's ipmi_sim queried by the real ipmitool.

The simulator's files (molecule/demo-bmc/ipmi_sim, from the handbook's PROBES.md) describe a
BMC with two PSU status sensors and a PSU1 input power sensor. Each test gets a fresh state
directory and free ports; faults are injected at run time through the console port with the
same commands as the .emu file. Needs `apt-get install openipmi ipmitool` (make test's
bootstrap installs them): without them the tests FAIL, saying so.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from conftest import ipmi_sim
from rackgate.checks.redundancy import PsuIpmiParams, judge_psu_ipmi, psu_ipmi_command
from rackgate.checks.shared.base import SECRET_FILE
from rackgate.demo.bmc import ipmi_console
from rackgate.model import Judgement, Status
from rackgate.parsers.ipmi import parse_ipmi_sdr
from rackgate.profile import Hardware, PsuSpec

HW = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source="the ipmi_sim test BMC, 2 PSUs"))
T = TypeVar("T")
PASSWORD = "password"  # lan.conf's admin user; read from a 0600 file (-f), never argv


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: run `apt-get install -y {package}` "
                    "(scripts/bootstrap.sh --test installs it)", pytrace=False)
    return path


@dataclass
class Bmc:
    lan_port: int
    console_port: int
    log: Path

    def query(self) -> str:
        argv = psu_ipmi_command(PsuIpmiParams(), {"rackgate_bmc_host": "127.0.0.1",
                                                  "rackgate_bmc_port": self.lan_port})
        secret = self.log.parent / "bmc-password"  # what the collector makes, privately
        secret.touch(mode=0o600)
        secret.write_text(PASSWORD)
        argv = [str(secret) if a == SECRET_FILE else a for a in argv]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        assert out.returncode == 0, f"{' '.join(argv)} -> rc {out.returncode}: {out.stderr}"
        return out.stdout

    def judge(self) -> Judgement:
        return judge_psu_ipmi(parse_ipmi_sdr(self.query()), PsuIpmiParams(), {}, HW)

    def console(self, command: str) -> None:
        """Send one emulator command (as in the .emu file) over the console port."""
        ipmi_console(self.console_port, command)


@pytest.fixture
def bmc(tmp_path: Path) -> Iterator[Bmc]:
    _need("ipmi_sim", "openipmi")
    _need("sdrcomp", "openipmi")
    _need("ipmitool", "ipmitool")
    with ipmi_sim(tmp_path) as (lan_port, console_port):
        yield Bmc(lan_port, console_port, tmp_path / "ipmi_sim.log")


def test_healthy_bmc_passes(bmc: Bmc) -> None:
    j = bmc.judge()
    assert j.status is Status.PASS, j.message
    assert j.measured == 2 and j.details["input_power_max_w"] == 400


@pytest.mark.parametrize(("fault", "named", "why"), [
    ("sensor_set_bit 0x20 0 2 1 1 1", "PSU2 Status", "Failure detected"),
    ("sensor_set_bit 0x20 0 2 3 1 1", "PSU2 Status", "Power Supply AC lost"),
    # issue 11 finding 2: offsets 05h-07h as this ipmitool prints them (one of them holds a
    # comma), which a deny-list of words let pass
    ("sensor_set_bit 0x20 0 2 5 1 1", "PSU2 Status", "AC out-of-range, but present"),
    ("sensor_set_bit 0x20 0 2 6 1 1", "PSU2 Status", "Config Error"),
    ("sensor_set_bit 0x20 0 2 7 1 1", "PSU2 Status", "Power Supply Inactive"),
    ("sensor_set_value 0x20 0 3 0xe8 1", "PSU1 Power In", "928 W is beyond the BMC's critical"),
])
def test_injected_fault_fails_naming_the_sensor(bmc: Bmc, fault: str, named: str,
                                                 why: str) -> None:
    bmc.console(fault)
    j = _eventually(bmc.judge, lambda j: j.status is not Status.PASS)
    assert j.status is Status.FAIL, j.message
    assert named in j.message and why in j.message, j.message


def test_ok_status_column_is_not_trusted(bmc: Bmc) -> None:
    """ipmitool prints 'ok' for PSU2 with its Failure bit set; the judge must not."""
    bmc.console("sensor_set_bit 0x20 0 2 1 1 1")
    text = _eventually(bmc.query, lambda t: "Failure detected" in t)
    line = next(x for x in text.splitlines() if x.startswith("PSU2 Status"))
    assert line.split("|")[2].strip() == "ok"


def _eventually(get: Callable[[], T], done: Callable[[T], bool]) -> T:
    """The console answers after the command ran; allow the BMC a moment all the same."""
    deadline = time.monotonic() + 5
    value = get()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.1)
        value = get()
    return value
