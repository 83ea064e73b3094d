"""The cooling exporter's pure part (records -> samples -> exposition) over the Redfish mockups
in tests/fixtures/redfish, its poll over a fetcher that reads the trees from disk (no HTTP),
and its HTTP fetcher against the mockup served on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rackgate.demo.bmc import redfish_handler
from rackgate.parsers.redfish import parse_redfish_cooling, parse_redfish_power
from rackgate.programs import cooling_exporter as exp
from rackgate.programs import redfish as collector

MOCKUPS = Path(__file__).parents[1] / "fixtures" / "redfish"
SECONDARY = "/redfish/v1/ThermalEquipment/CDUs/1/SecondaryCoolantConnectors/1"
PRIMARY = "/redfish/v1/ThermalEquipment/CDUs/1/PrimaryCoolantConnectors/1"
TRAY = "/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/Tray"
BAY = "/redfish/v1/Chassis/1/PowerSubsystem/PowerSupplies/Bay{}"


class DirFetcher:
    """Serves a mockup tree from disk (``/redfish/v1/X`` -> ``X/index.json``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, path: str) -> dict[str, Any]:
        file = self.root / path.removeprefix("/redfish/v1").strip("/") / "index.json"
        if not file.is_file():
            raise collector.CollectError(f"GET {path}: HTTP 404")
        doc: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
        return doc


def _doc(scenario: str, kind: str) -> str:
    fetch = DirFetcher(MOCKUPS / scenario)
    found = collector.walk_cooling(fetch, "1") if kind == "cooling" else \
        collector.walk_power(fetch, "1")
    return json.dumps({"collector": "rackgate.redfish", "kind": kind, "resources": found})


def _values(samples: list[exp.Sample], name: str, key: str) -> dict[str, float]:
    """{label `key` value: sample value} of the samples named `name`."""
    return {dict(s.labels)[key]: s.value for s in samples if s.name == name}


def cooling(scenario: str) -> list[exp.Sample]:
    return exp.cooling_samples(parse_redfish_cooling(_doc(scenario, "cooling")), "1")


def power(scenario: str) -> list[exp.Sample]:
    return exp.power_samples(parse_redfish_power(_doc(scenario, "power")), "1")


def test_healthy_coolant_readings() -> None:
    s = cooling("healthy")
    assert _values(s, "rackgate_coolant_supply_temperature_celsius", "connector") == {
        PRIMARY: 25.0, SECONDARY: 32.0}
    assert _values(s, "rackgate_coolant_return_temperature_celsius", "connector") == {
        PRIMARY: 35.0, SECONDARY: 42.0}
    assert _values(s, "rackgate_coolant_flow_liters_per_minute", "connector") == {
        PRIMARY: 180.0, SECONDARY: 150.0}
    assert _values(s, "rackgate_coolant_supply_pressure_kilopascals", "connector") == {
        PRIMARY: 300.0, SECONDARY: 250.0}
    assert _values(s, "rackgate_coolant_return_pressure_kilopascals", "connector") == {
        PRIMARY: 220.0, SECONDARY: 180.0}
    loops = _values(s, "rackgate_coolant_flow_liters_per_minute", "loop")
    assert set(loops) == {"primary", "secondary"}
    assert set(_values(s, "rackgate_leak_detector_state", "name").values()) == {0.0}
    assert list(_values(s, "rackgate_cooling_unit_health", "name").values()) == [0.0]


def test_leak_shows_as_critical_on_the_tray_detector_only() -> None:
    states = _values(cooling("leak"), "rackgate_leak_detector_state", "detector")
    assert states[TRAY] == 2.0
    assert [v for k, v in states.items() if k != TRAY] == [0.0]


def test_low_flow_on_the_secondary_loop() -> None:
    flow = _values(cooling("flow-low"), "rackgate_coolant_flow_liters_per_minute", "connector")
    assert flow == {PRIMARY: 180.0, SECONDARY: 40.0}


def test_healthy_power_supplies_and_redundancy() -> None:
    s = power("healthy")
    present = _values(s, "rackgate_psu_present", "psu")
    assert present == {BAY.format(i): 1.0 for i in range(1, 7)}
    assert set(_values(s, "rackgate_psu_health", "psu").values()) == {0.0}
    assert _values(s, "rackgate_psu_input_power_watts", "psu")[BAY.format(1)] == 1110.0
    assert _values(s, "rackgate_psu_output_power_watts", "psu")[BAY.format(1)] == 1040.0
    assert set(_values(s, "rackgate_psu_capacity_watts", "psu").values()) == {3300.0}
    # the mockup offers both schemas: PowerSubsystem's group and the legacy Power one
    assert _values(s, "rackgate_psu_redundancy_ok", "mode") == {"NPlusM": 1.0, "N+m": 1.0}
    assert set(_values(s, "rackgate_psu_redundancy_min_needed", "group").values()) == {4.0}


def test_absent_psu_loses_redundancy() -> None:
    s = power("psu-absent")
    present = _values(s, "rackgate_psu_present", "psu")
    assert present[BAY.format(6)] == 0.0
    assert sum(present.values()) == 5.0
    assert _values(s, "rackgate_psu_health", "psu")[BAY.format(6)] == 3.0  # no Health
    assert BAY.format(6) not in _values(s, "rackgate_psu_input_power_watts", "psu")
    assert _values(s, "rackgate_psu_redundancy_ok", "mode")["NPlusM"] == 0.0


def test_poll_success_and_status_samples() -> None:
    result = exp.poll(DirFetcher(MOCKUPS / "healthy"), "cooling", "1", clock=lambda: 1.5e9)
    assert result.error is None and result.samples
    state = exp.State()
    state.update(result)
    s = state.samples()
    assert _values(s, "rackgate_bmc_up", "resource") == {"cooling": 1.0}
    assert _values(s, "rackgate_bmc_last_poll_timestamp_seconds", "resource") == {
        "cooling": 1.5e9}
    assert _values(s, "rackgate_bmc_poll_errors_total", "resource") == {"cooling": 0.0}
    assert not [x for x in s if x.name == "rackgate_bmc_last_error_info"]


def test_unreachable_bmc_is_visible_and_drops_readings(tmp_path: Path) -> None:
    state = exp.State()
    state.update(exp.poll(DirFetcher(MOCKUPS / "healthy"), "power", "1"))
    for _ in range(2):  # an empty tree: every GET is a 404
        state.update(exp.poll(DirFetcher(tmp_path), "power", "1"))
    s = state.samples()
    assert _values(s, "rackgate_bmc_up", "resource") == {"power": 0.0}
    assert _values(s, "rackgate_bmc_poll_errors_total", "resource") == {"power": 2.0}
    (info,) = [x for x in s if x.name == "rackgate_bmc_last_error_info"]
    assert dict(info.labels)["error"] == "GET /redfish/v1/Chassis/1: HTTP 404"
    assert not [x for x in s if x.name.startswith("rackgate_psu_")]


def test_unparseable_answer_is_an_error_not_a_crash(tmp_path: Path) -> None:
    cdu = tmp_path / "ThermalEquipment" / "CDUs" / "1"
    cdu.mkdir(parents=True)
    (cdu / "index.json").write_text(json.dumps({"@odata.id": "/x", "Id": "1"}))
    result = exp.poll(DirFetcher(tmp_path), "cooling", "1")
    assert result.error is not None and "no CoolingUnit" in result.error
    assert result.samples == ()


def test_render_escapes_label_values_and_follows_the_text_format() -> None:
    text = exp.render([
        exp.Sample("rackgate_bmc_last_error_info", (("error", 'a "b"\\c'),), 1.0),
        exp.Sample("rackgate_bmc_up", (), 0.0),
    ])
    lines = text.splitlines()
    assert lines[0] == "# HELP rackgate_bmc_up " + exp.METRICS["rackgate_bmc_up"][1]
    assert lines[1] == "# TYPE rackgate_bmc_up gauge"
    assert lines[2] == "rackgate_bmc_up 0.0"
    assert lines[-1] == 'rackgate_bmc_last_error_info{error="a \\"b\\"\\\\c"} 1.0'


def test_every_sample_name_is_declared() -> None:
    names = {s.name for s in cooling("healthy") + power("healthy")}
    assert names <= set(exp.METRICS)


@pytest.fixture
def mockup_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 redfish_handler(MOCKUPS / "healthy", "admin", "s3cret"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_urllib_fetcher_against_the_mockup_on_loopback(mockup_server: str) -> None:
    ok = exp.poll(exp.UrllibFetcher(mockup_server, "admin", "s3cret", 5), "cooling", "1")
    assert ok.error is None
    assert _values(list(ok.samples), "rackgate_coolant_flow_liters_per_minute",
                   "connector")[SECONDARY] == 150.0
    denied = exp.poll(exp.UrllibFetcher(mockup_server, "admin", "wrong", 5), "power", "1")
    assert denied.error == f"GET {mockup_server}/redfish/v1/Chassis/1: HTTP 401"


def test_once_mode_prints_metrics_and_exit_status(mockup_server: str) -> None:
    env = {"RACKGATE_BMC_USER": "admin", "RACKGATE_BMC_PASSWORD": "s3cret",
           "PYTHONPATH": str(Path(exp.__file__).parents[2])}
    run = subprocess.run([sys.executable, "-m", "rackgate.programs.cooling_exporter", "--base-url",
                          mockup_server, "--once"], capture_output=True, text=True, env=env,
                         timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert 'rackgate_bmc_up{resource="cooling"} 1.0' in run.stdout
    assert 'rackgate_bmc_up{resource="power"} 1.0' in run.stdout


def test_importing_the_exporter_loads_no_heavy_dependency() -> None:
    code = ("import sys, rackgate.programs.cooling_exporter; "
            "bad = {'ansible', 'pydantic', 'yaml', 'jinja2', 'rich', 'redfish', "
            "'prometheus_client'} & set(sys.modules); print(sorted(bad))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True,
                         env={"PYTHONPATH": str(Path(exp.__file__).parents[2])})
    assert run.stdout.strip() == "[]"


def test_prometheus_client_families() -> None:
    # prometheus_client is a dev dependency (the nodes get Debian's python3-prometheus-client).
    from prometheus_client import CollectorRegistry, generate_latest

    class C:
        def collect(self) -> Iterator[Any]:
            return exp.families(cooling("healthy") + exp.status_samples(
                exp.PollResult("cooling", (), None, 0.1, 1.0), 3))

    reg = CollectorRegistry()
    reg.register(C())
    text = generate_latest(reg).decode()
    assert 'rackgate_bmc_up{resource="cooling"} 1.0' in text
    assert 'rackgate_bmc_poll_errors_total{resource="cooling"} 3.0' in text
