"""The real collector (``python -m rackgate.programs.redfish``, DMTF's ``redfish`` client,
basic auth) against the mockup trees in tests/fixtures/redfish, served over loopback HTTP; then
parse and judge its output as a run would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from rackgate.checks.cooling import CduParams, PsuRedfishParams, judge_cdu, judge_psu_redfish
from rackgate.demo.bmc import redfish_handler
from rackgate.model import Status
from rackgate.parsers.redfish import parse_redfish_cooling, parse_redfish_power
from rackgate.profile import Hardware, PsuSpec, Threshold

pytest.importorskip("redfish", reason="the collector needs DMTF's redfish client")

MOCKUPS = Path(__file__).parents[1] / "fixtures" / "redfish"
VALIDATORS = Path(__file__).parents[2] / "validators"
USER, PASSWORD = "rackgate", "s3cret-test"
HW = Hardware(psu=PsuSpec(count=6, redundancy="N+2", source="six supplies, 4+2, test mockup"))
LIMITS = {
    "supply_temp_c": Threshold(unit="C", ref=40, max_ratio=1.0, basis="a figure for the test"),
    "return_temp_c": Threshold(unit="C", ref=50, max_ratio=1.0, basis="a figure for the test"),
    "flow_lpm": Threshold(unit="L/min", ref=120, min_ratio=0.8, basis="a figure for the test"),
}


@pytest.fixture
def serve(request: pytest.FixtureRequest) -> Callable[..., str]:
    """serve(scenario, delay_s=0) -> base URL of a loopback server, shut down after the test."""

    def start(scenario: str, delay_s: float = 0.0) -> str:
        handler = redfish_handler(MOCKUPS / scenario, USER, PASSWORD, delay_s)
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

        request.addfinalizer(stop)
        return f"http://127.0.0.1:{server.server_address[1]}"

    return start


def collect(base_url: str, kind: str, *extra: str, password: str = PASSWORD,
            timeout_s: int = 3) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, RACKGATE_BMC_USER=USER, RACKGATE_BMC_PASSWORD=password)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(VALIDATORS),
                                                      env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "rackgate.programs.redfish", "--base-url", base_url,
            "--timeout", str(timeout_s), *extra, kind]
    assert password not in argv  # credentials travel in the environment only
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def test_healthy_node_passes_both_checks(serve):
    url = serve("healthy")
    power = collect(url, "power")
    assert power.returncode == 0, power.stderr
    j = judge_psu_redfish(parse_redfish_power(power.stdout), PsuRedfishParams(), {}, HW)
    assert j.status is Status.PASS, j.message
    cooling = collect(url, "cooling")
    assert cooling.returncode == 0, cooling.stderr
    j = judge_cdu(parse_redfish_cooling(cooling.stdout), CduParams(), LIMITS, HW)
    assert j.status is Status.PASS, j.message


def test_absent_psu_fails(serve):
    out = collect(serve("psu-absent"), "power")
    assert out.returncode == 0, out.stderr
    j = judge_psu_redfish(parse_redfish_power(out.stdout), PsuRedfishParams(), {}, HW)
    assert j.status is Status.FAIL and "Power Supply Bay6" in j.message


def test_leak_fails(serve):
    out = collect(serve("leak"), "cooling")
    assert out.returncode == 0, out.stderr
    j = judge_cdu(parse_redfish_cooling(out.stdout), CduParams(), LIMITS, HW)
    assert j.status is Status.FAIL and "LEAK" in j.message


def test_low_flow_fails(serve):
    out = collect(serve("flow-low"), "cooling")
    assert out.returncode == 0, out.stderr
    j = judge_cdu(parse_redfish_cooling(out.stdout), CduParams(), LIMITS, HW)
    assert j.status is Status.FAIL and "coolant flow 40 L/min" in j.message


def test_wrong_password_exits_non_zero_naming_url_and_status(serve):
    url = serve("healthy")
    out = collect(url, "power", password="wrong")
    assert out.returncode == 1 and out.stdout == ""
    assert f"{url}/redfish/v1" in out.stderr and "HTTP 401" in out.stderr
    assert "wrong" not in out.stderr


def test_missing_resource_exits_non_zero_naming_url_and_status(serve):
    url = serve("healthy")
    out = collect(url, "power", "--chassis", "9")
    assert out.returncode == 1
    assert f"GET {url}/redfish/v1/Chassis/9: HTTP 404" in out.stderr


def test_connection_refused_exits_non_zero():
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = collect(f"http://127.0.0.1:{port}", "power")
    assert out.returncode == 1 and f"127.0.0.1:{port}" in out.stderr
    assert "ConnectionError" in out.stderr


def test_slow_service_times_out_in_seconds(serve):
    url = serve("healthy", delay_s=3)
    started = time.monotonic()
    out = collect(url, "power", timeout_s=1)
    assert out.returncode == 1 and "Timeout" in out.stderr, out.stderr
    assert time.monotonic() - started < 15
