"""The Grafana dashboard roles/monitoring/files/dashboards/rackgate-acceptance.json: JSON
with a schemaVersion, its data source a dashboard variable that every panel (nested ones
in collapsed rows too) and every query variable uses, no hard-coded data source uid,
unique panel ids, every PromQL expression parsed by `promtool check rules` (each as a
recording rule; a failure, not a skip, without promtool), and every metric a panel
queries one that rackgate writes (export-metrics, healthcheck, the cooling exporter) or
a documented external one."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from conftest import promtool
from rackgate.reports.metrics import METRICS

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "roles" / "monitoring" / "files" / "dashboards" / "rackgate-acceptance.json"
COOLING_EXPORTER = ROOT / "validators" / "rackgate" / "programs" / "cooling_exporter.py"
DATASOURCE = "${datasource}"

# `rackgate healthcheck`'s textfile (the team's shared metric names, issue 18).
HEALTHCHECK = {"rackgate_healthcheck_ok", "rackgate_healthcheck_item_ok",
               "rackgate_healthcheck_drained",
               "rackgate_healthcheck_last_run_timestamp_seconds",
               "rackgate_healthcheck_duration_seconds"}
# Series other programs write, with where their names are published.
EXTERNAL = {
    # Prometheus itself: the synthetic series of its rules and scrapes
    # (prometheus.io/docs/prometheus/latest/configuration/alerting_rules, .../jobs_instances)
    "ALERTS": "Prometheus", "up": "Prometheus",
    # dcgm-exporter's default counters (NVIDIA/dcgm-exporter etc/default-counters.csv)
    "DCGM_FI_DEV_GPU_UTIL": "dcgm-exporter", "DCGM_FI_DEV_POWER_USAGE": "dcgm-exporter",
    "DCGM_FI_DEV_XID_ERRORS": "dcgm-exporter",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "dcgm-exporter",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "dcgm-exporter",
    # commented out in recent default-counters.csv: the panel's description says to enable it
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "dcgm-exporter",
    # node_exporter's infiniband collector (collector/infiniband_linux.go)
    "node_infiniband_port_data_received_bytes_total": "node_exporter",
    "node_infiniband_port_data_transmitted_bytes_total": "node_exporter",
    "node_infiniband_symbol_error_total": "node_exporter",
    "node_infiniband_link_downed_total": "node_exporter",
}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
# Grafana's own variables, as it substitutes them before querying
GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def cooling_exporter_metrics() -> set[str]:
    return set(re.findall(r'"(rackgate_[a-z_]+)"', COOLING_EXPORTER.read_text()))


def known_metrics() -> set[str]:
    return set(METRICS) | HEALTHCHECK | cooling_exporter_metrics() | set(EXTERNAL)


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return doc


def all_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every panel, the ones a (collapsed) row holds too."""
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def variables(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = doc["templating"]["list"]
    return out


def label_values_selector(query: str) -> str:
    """The series selector of a variable's ``label_values(selector, label)``."""
    m = re.fullmatch(r"label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)", query.strip())
    assert m, f"variable query {query!r} is not label_values(selector, label)"
    return m.group(1)


def expressions(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and query variable."""
    out = []
    for p in all_panels(doc["panels"]):
        for t in p.get("targets", []):
            out.append((f"panel {p['id']} {p['title']!r} target {t['refId']}", t["expr"]))
    for v in variables(doc):
        if v["type"] == "query":
            out.append((f"variable {v['name']}", label_values_selector(v["query"]["query"])))
    return out


def as_promql(expr: str) -> str:
    for var, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(var, value)
    return expr


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: what is left of its identifiers once strings,
    label matchers, ranges, grouping clauses, functions and keywords are taken out."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*", e):
        if e[m.end():].lstrip().startswith("(") or m.group() in KEYWORDS:
            continue  # a function or an aggregation, or an operator
        names.add(m.group())
    return names


def test_metric_names_finds_the_selected_metrics_only() -> None:
    expr = ('sum by (instance) (rate(foo_total{a="b", c=~"$run"}[$__rate_interval])) > 0 '
            'and on (node) max without (x) (bar:ratio) or time() - baz offset 5m > 1e9')
    assert metric_names(expr) == {"foo_total", "bar:ratio", "baz"}


def test_it_is_a_dashboard_with_a_schema_version() -> None:
    doc = dashboard()
    assert isinstance(doc["schemaVersion"], int) and doc["schemaVersion"] >= 36
    assert doc["uid"] == "rackgate-acceptance" and doc["title"]
    assert doc["panels"], "no panels"


def test_the_data_source_is_a_variable_every_panel_and_query_uses() -> None:
    doc = dashboard()
    (ds,) = [v for v in variables(doc) if v["type"] == "datasource"]
    assert ds["name"] == "datasource" and ds["query"] == "prometheus"
    queried = 0
    for p in all_panels(doc["panels"]):
        if p["type"] == "row":
            assert not p.get("targets"), f"row {p['title']!r} has queries"
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": DATASOURCE}, p["title"]
        assert p["targets"], f"panel {p['title']!r} queries nothing"
        for t in p["targets"]:
            assert t.get("datasource", p["datasource"])["uid"] == DATASOURCE, p["title"]
            queried += 1
    for v in variables(doc):
        if v["type"] == "query":
            assert v["datasource"]["uid"] == DATASOURCE, v["name"]
    nested = [p for row in doc["panels"] if row["type"] == "row" for p in row["panels"]]
    assert nested and queried >= 20  # a collapsed row's panels were checked too


def test_no_data_source_uid_is_hard_coded() -> None:
    uids: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("datasource"), dict):
                uids.append(node["datasource"].get("uid"))
            elif "datasource" in node:
                uids.append(node["datasource"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dashboard())
    assert uids and set(uids) == {DATASOURCE}


def test_panel_ids_are_unique() -> None:
    ids = [p["id"] for p in all_panels(dashboard()["panels"])]
    assert all(isinstance(i, int) for i in ids)
    assert len(ids) == len(set(ids)), sorted(ids)


def promtool_rules(exprs: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"rackgate:dashboard_expr_{i}:value", "expr": as_promql(e)}
        for i, e in enumerate(exprs)]}]}
    (tmp_path / "dashboard.rules.yml").write_text(yaml.safe_dump(rules, width=1000))
    return promtool("check", "rules", "dashboard.rules.yml", cwd=tmp_path, timeout=120)


def test_every_expression_parses_as_promql(tmp_path: Path) -> None:
    exprs = [e for _, e in expressions(dashboard())]
    run = promtool_rules(exprs, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in run.stdout, run.stdout


def test_promtool_refuses_an_expression_that_does_not_parse(tmp_path: Path) -> None:
    run = promtool_rules(['max by (node) (rackgate_node_verdict{run=~"$run"} and on (node) '
                          "group_left () rackgate_check_status)"], tmp_path)
    assert run.returncode != 0 and "group" in run.stdout + run.stderr


def test_every_metric_queried_is_one_that_is_written() -> None:
    known = known_metrics()
    unknown = {(where, name) for where, expr in expressions(dashboard())
               for name in metric_names(expr) if name not in known}
    assert not unknown, sorted(unknown)


def test_every_exported_and_health_check_metric_is_on_the_dashboard() -> None:
    queried = {name for _, expr in expressions(dashboard()) for name in metric_names(expr)}
    assert set(METRICS) | HEALTHCHECK <= queried, sorted((set(METRICS) | HEALTHCHECK) - queried)


def test_panels_fit_the_grid_without_overlapping() -> None:
    def cells(panels: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
        taken: dict[tuple[int, int], str] = {}
        for p in panels:
            g = p["gridPos"]
            assert g["x"] >= 0 and g["w"] >= 1 and g["x"] + g["w"] <= 24, p["title"]
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    assert (x, y) not in taken, f"{p['title']!r} overlaps {taken[(x, y)]!r}"
                    taken[(x, y)] = p["title"]
        return taken

    doc = dashboard()
    cells(doc["panels"])
    for row in (p for p in doc["panels"] if p["type"] == "row" and p["collapsed"]):
        cells(row["panels"])
