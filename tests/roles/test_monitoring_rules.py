"""The monitoring role's cluster rules: the template rendered with the role's defaults (jinja2
as Ansible's template module renders it) passes `promtool check rules`, and `promtool test
rules` (roles/monitoring/tests/*.rules.test.yml) fires and does not fire each alert on series
written in the exporters' formats, and computes the fleet recording rules. Every alert the
template defines has a firing and a quiet case, and no alert is defined both here and in the
cooling_telemetry role. Needs promtool (Debian's prometheus package)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jinja2
import yaml

from conftest import promtool

ROLES = Path(__file__).resolve().parents[2] / "roles"
ROLE = ROLES / "monitoring"
TEMPLATE = ROLE / "templates" / "rackgate-cluster.rules.yml.j2"
RULES_FILE = "rackgate-cluster.rules.yml"
UNIT_TESTS = sorted((ROLE / "tests").glob("*.rules.test.yml"))
COOLING_TEMPLATE = ROLES / "cooling_telemetry" / "templates" / "cooling-telemetry.rules.yml.j2"
ALERTS = {"GpuUtilisationLow", "InfinibandBandwidthHigh", "NetworkBandwidthHigh",
          "StorageLatencyHigh", "GpuXidError", "GpuEccUncorrectable",
          "GpuUncorrectableRowsRemapped", "GpuRowRemapFailure", "InfinibandSymbolErrorsRising",
          "InfinibandLinkDowned", "NodeHealthCheckFailing", "NodeDrainedByHealthCheck",
          "HealthCheckStale", "DrainedNodeRateHigh", "MonthlyFailureRateHigh"}
RECORDS = {"rackgate:node_verdict_run_timestamp_seconds", "rackgate:node_latest_verdict",
           "rackgate:node_out_of_service", "rackgate:node_out_of_service:avg1h",
           "rackgate:fleet_out_of_service:ratio_burn",
           "rackgate:fleet_out_of_service:ratio_month"}


def defaults() -> dict[str, Any]:
    loaded = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def render(overrides: dict[str, Any] | None = None) -> str:
    """The rules file as Ansible writes it: defaults/main.yml (alert variables), trim_blocks."""
    context = {k: v for k, v in defaults().items() if k.startswith("monitoring_alert_")}
    context.update(overrides or {})
    env = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    return env.from_string(TEMPLATE.read_text(encoding="utf-8")).render(context)


def rules_by_kind(text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    doc = yaml.safe_load(text)
    rules = [r for g in doc["groups"] for r in g["rules"]]
    return [r for r in rules if "alert" in r], [r for r in rules if "record" in r]




def test_rendered_rules_are_yaml_with_every_alert_and_record() -> None:
    alerts, records = rules_by_kind(render())
    assert {r["alert"] for r in alerts} == ALERTS
    assert {r["record"] for r in records} == RECORDS


def test_no_alert_is_defined_in_both_roles() -> None:
    # cooling_telemetry keeps the cooling, power, leak and BMC alerts; the cluster alerts
    # live here only. The cooling template is read as text (its variables are its own).
    cooling = COOLING_TEMPLATE.read_text(encoding="utf-8")
    cooling_alerts = {line.split(":", 1)[1].strip() for line in cooling.splitlines()
                      if line.strip().startswith("- alert:")}
    assert cooling_alerts, "no alert found in the cooling_telemetry template"
    assert not cooling_alerts & ALERTS
    assert {"PsuRedundancyLost", "CoolantLeakDetected"} <= cooling_alerts


def test_every_alert_variable_is_used_by_the_template() -> None:
    text = TEMPLATE.read_text(encoding="utf-8")
    unused = [k for k in defaults() if k.startswith("monitoring_alert_") and k not in text]
    assert not unused


def test_thresholds_come_from_the_variables() -> None:
    alerts, _ = rules_by_kind(render({
        "monitoring_alert_gpu_util_min_percent": 55,
        "monitoring_alert_gpu_util_for": "45m",
        "monitoring_alert_gpu_util_selector": 'pod!=""',
        "monitoring_alert_gpu_xid_ignore": [13, 43],
        "monitoring_alert_ib_symbol_errors_max_per_hour": 99,
        "monitoring_alert_healthcheck_stale_seconds": 1234,
        "monitoring_alert_failure_rate_max_ratio": 0.02,
    }))
    by_name: dict[str, list[dict[str, Any]]] = {}
    for rule in alerts:
        by_name.setdefault(rule["alert"], []).append(rule)
    gpu = by_name["GpuUtilisationLow"][0]
    assert gpu["for"] == "45m"
    assert 'DCGM_FI_DEV_GPU_UTIL{pod!=""}' in gpu["expr"]
    assert gpu["expr"].endswith("< 55")
    assert by_name["GpuXidError"][0]["expr"] == "DCGM_FI_DEV_XID_ERRORS != 0 != 13 != 43"
    assert by_name["InfinibandSymbolErrorsRising"][0]["expr"].endswith("> 99")
    assert by_name["HealthCheckStale"][0]["expr"].endswith("> 1234")
    assert by_name["MonthlyFailureRateHigh"][0]["expr"].endswith("> 0.02")


def test_promtool_check_rules(tmp_path: Path) -> None:
    (tmp_path / RULES_FILE).write_text(render(), encoding="utf-8")
    run = promtool("check", "rules", RULES_FILE, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    alerts, records = rules_by_kind(render())
    assert f"SUCCESS: {len(alerts) + len(records)} rules found" in run.stdout, run.stdout


def test_promtool_test_rules_fire_and_stay_quiet(tmp_path: Path) -> None:
    assert UNIT_TESTS, "no *.rules.test.yml under roles/monitoring/tests"
    (tmp_path / RULES_FILE).write_text(render(), encoding="utf-8")
    for unit in UNIT_TESTS:
        shutil.copy(unit, tmp_path / unit.name)
    run = promtool("test", "rules", *(u.name for u in UNIT_TESTS), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("SUCCESS") == len(UNIT_TESTS), run.stdout


def test_promtool_test_rules_fails_on_a_changed_threshold(tmp_path: Path) -> None:
    # The unit tests pin the defaults: a rules file rendered with another threshold fails them.
    (tmp_path / RULES_FILE).write_text(
        render({"monitoring_alert_gpu_util_min_percent": 60}), encoding="utf-8")
    for unit in UNIT_TESTS:
        shutil.copy(unit, tmp_path / unit.name)
    run = promtool("test", "rules", *(u.name for u in UNIT_TESTS), cwd=tmp_path)
    assert run.returncode != 0, run.stdout
    assert "GpuUtilisationLow" in run.stdout + run.stderr


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases = [c for unit in UNIT_TESTS
             for t in yaml.safe_load(unit.read_text(encoding="utf-8"))["tests"]
             for c in t.get("alert_rule_test", [])]
    firing = {c["alertname"] for c in cases if c["exp_alerts"]}
    quiet = {c["alertname"] for c in cases if not c["exp_alerts"]}
    assert firing == ALERTS
    assert quiet == ALERTS


def test_every_record_is_tested() -> None:
    # Recording rules are checked by value (promql_expr_test) or through the alerts built
    # on them: the fleet ratios feed DrainedNodeRateHigh and MonthlyFailureRateHigh.
    exprs = {e["expr"] for unit in UNIT_TESTS
             for t in yaml.safe_load(unit.read_text(encoding="utf-8"))["tests"]
             for e in t.get("promql_expr_test", [])}
    assert {"rackgate:node_latest_verdict", "rackgate:node_out_of_service"} <= exprs
