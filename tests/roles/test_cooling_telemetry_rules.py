"""The cooling_telemetry role's Prometheus alert rules: the template rendered with the role's
defaults (jinja2 as Ansible's template module renders it) passes `promtool check rules`, and
`promtool test rules` (roles/cooling_telemetry/tests/cooling-telemetry.rules.test.yml) fires
and does not fire each alert on real series. Needs promtool (Debian's prometheus package)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jinja2
import yaml

from conftest import promtool

ROLE = Path(__file__).resolve().parents[2] / "roles" / "cooling_telemetry"
TEMPLATE = ROLE / "templates" / "cooling-telemetry.rules.yml.j2"
UNIT_TESTS = ROLE / "tests" / "cooling-telemetry.rules.test.yml"
ALERTS = {"CoolantSupplyTooHot", "CoolantReturnTooHot", "CoolantFlowTooLow",
          "CoolantLeakDetected", "PsuRedundancyLost", "BmcUnreachable", "CoolingExporterDown"}
# The cluster alerts (GpuUtilisationLow, NetworkBandwidthHigh, StorageLatencyHigh, ...) are the
# monitoring role's: tests/roles/test_monitoring_rules.py.



def render(overrides: dict[str, Any] | None = None) -> str:
    """The rules file as Ansible writes it: defaults/main.yml (alert variables), trim_blocks."""
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
    context = {k: v for k, v in defaults.items() if k.startswith("cooling_telemetry_alert_")
               or k == "cooling_telemetry_prometheus_job"}
    context.update(overrides or {})
    env = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    return env.from_string(TEMPLATE.read_text(encoding="utf-8")).render(context)




def test_rendered_rules_are_yaml_with_every_alert() -> None:
    doc = yaml.safe_load(render())
    names = {r["alert"] for g in doc["groups"] for r in g["rules"]}
    assert names == ALERTS


def test_thresholds_come_from_the_variables() -> None:
    doc = yaml.safe_load(render({"cooling_telemetry_alert_coolant_flow_min_lpm": 123,
                                 "cooling_telemetry_alert_psu_for": "45m"}))
    rules = {r["alert"]: r for g in doc["groups"] for r in g["rules"]}
    assert rules["CoolantFlowTooLow"]["expr"].endswith("< 123")
    assert rules["PsuRedundancyLost"]["for"] == "45m"


def test_promtool_check_rules(tmp_path: Path) -> None:
    (tmp_path / "cooling-telemetry.rules.yml").write_text(render(), encoding="utf-8")
    run = promtool("check", "rules", "cooling-telemetry.rules.yml", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS: 7 rules found" in run.stdout, run.stdout


def test_promtool_test_rules_fire_and_stay_quiet(tmp_path: Path) -> None:
    (tmp_path / "cooling-telemetry.rules.yml").write_text(render(), encoding="utf-8")
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    run = promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout, run.stdout


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    tests = yaml.safe_load(UNIT_TESTS.read_text(encoding="utf-8"))["tests"]
    cases = [c for t in tests for c in t["alert_rule_test"]]
    firing = {c["alertname"] for c in cases if c["exp_alerts"]}
    quiet = {c["alertname"] for c in cases if not c["exp_alerts"]}
    assert firing == ALERTS
    assert quiet == ALERTS
