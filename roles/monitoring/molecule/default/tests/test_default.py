"""Verify the telemetry layer (playbooks/telemetry.yml) on rg-mon-server, rg-mon-node, rg-mon-bmc.

rg-mon-server and rg-mon-node run node_exporter; rg-mon-server also runs Prometheus and
Alertmanager with the scrape jobs generated from the scenario's inventory, the cooling alert
rules of the cooling_telemetry role, and the webhook receiver of prepare.yml
(files/webhook_receiver.py) that appends each notification to WEBHOOK_LOG. rg-mon-node runs
the real cooling exporter (cooling_telemetry, port 9732), polling rg-mon-bmc, which serves
the cooling_telemetry scenario's Redfish mockup (healthy tree) on port 8000.

What is verified:
  * the packages are installed, the services enabled and active; node_exporter's ARGS carry
    the port, the textfile directory and the infiniband and textfile collectors;
  * prometheus.yml as generated: the node job lists both hosts with their `node` label and
    honor_labels, the cooling job uses rg-mon-node's own port (host_vars), rule_files and the
    local Alertmanager; promtool accepts it, and the rules file passes promtool check rules;
  * alertmanager.yml: the webhook and the e-mail receiver with auth_password_file; the SMTP
    password is only in that file (root:prometheus 0640), not in alertmanager.yml nor in any
    process's command line;
  * (a) Prometheus' targets API shows every node_exporter target up;
  * (b) a textfile dropped into rg-mon-node's textfile directory (rackgate_node_verdict,
    rackgate_healthcheck_ok 0) is served by node_exporter and queried back from Prometheus,
    with the series' own `node` label kept;
  * (c) the fault, rackgate_healthcheck_ok 0, raises NodeHealthCheckFailing: it reaches
    Alertmanager and the webhook receiver, whose log names the alert and node rg-mon-node;
  * (d) the healed node (rackgate_healthcheck_ok 1) resolves it: the receiver gets the
    resolved notification;
  * (e) the cooling job's target on rg-mon-node (the real exporter) is up in the targets
    API, rackgate_leak_detector_state of both mockup detectors is queryable (0, node
    rg-mon-node), and the cooling rules are loaded with CoolantLeakDetected's `for` of 2 s;
  * (f) the mockup BMC's tray detector is swapped for the leak scenario's (DetectorState
    Critical): the exporter reports 2, CoolantLeakDetected reaches Alertmanager and the
    webhook receiver's log with node rg-mon-node and the tray detector;
  * (g) the healthy tray detector is put back: the receiver gets CoolantLeakDetected resolved;
  * Grafana dashboards copied; the fact file records dcgm-exporter as skipped, with why.
Every wait is bounded (WAIT_S), announced on stdout (shown with a failure) and says what it
waited for; a failed wait shows the last lines of the server's journal (and, for the cooling
waits, the node's exporter journal).

What cannot be verified in a container (and why):
  * dcgm-exporter: no GPU, and NVIDIA's repository is unreachable; the role records it;
  * mail delivery: no SMTP relay (the address is a closed port on loopback);
  * real InfiniBand counters: no HCA (the infiniband collector finds no /sys/class/infiniband);
  * a real BMC or CDU (TLS, sessions, vendor quirks): the mockup is a static tree over plain
    HTTP; the other cooling alerts (coolant temperature and flow, PSU redundancy, BMC or
    exporter down) are not driven here (their rules are unit-tested with promtool in
    roles/cooling_telemetry/tests, the exporter's faults in the cooling_telemetry scenario).
"""

import json
import time
from urllib.parse import quote

import pytest
import testinfra
import yaml

testinfra_hosts = ["podman://rg-mon-server"]

NODE = testinfra.get_host("podman://rg-mon-node")
BMC = testinfra.get_host("podman://rg-mon-bmc")
TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
WEBHOOK_LOG = "/var/log/rackgate-webhook.jsonl"
PASSWORD = 'molecule "smtp" \\ $PW'  # molecule.yml (with $$ there)
PASSWORD_FILE = "/etc/prometheus/alertmanager-smtp-password"
FACT = "/etc/ansible/facts.d/rackgate_monitoring.fact"
WAIT_S = 90
COOLING_JOB = "rackgate-cooling"
COOLING_RULES = "/etc/prometheus/rules/rackgate-cooling.rules.yml"
TRAY = "/srv/redfish-mockup/ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/Tray/index.json"
TRAY_ID = "/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/Tray"
MANIFOLD_ID = "/redfish/v1/ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors/Manifold"
TRAY_LEAK = "/srv/tray-leak.json"  # the leak fixture's tray detector (prepare.yml)
TRAY_HEALTHY = "/srv/tray-healthy.json"  # saved by (f), put back by (g)

FETCH = (
    "python3 -c 'import sys, urllib.request; "
    'sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())\' %s'
)


def get(host, url):
    result = host.run(FETCH, url)
    assert result.rc == 0, f"GET {url} on {host.backend.hostname}: rc={result.rc} {result.stderr}"
    return result.stdout


def api(host, path):
    """GET a Prometheus or Alertmanager JSON API on rg-mon-server."""
    return json.loads(get(host, path))


def journal(host):
    units = "-u prometheus -u prometheus-alertmanager -u rackgate-webhook-receiver"
    return host.run(f"journalctl --no-pager -n 40 {units}").stdout


def cooling_journal(host):
    exporter = NODE.run("journalctl --no-pager -n 20 -u rackgate-cooling-exporter").stdout
    return f"{journal(host)}\n--- rg-mon-node's cooling exporter:\n{exporter}"


def wait_for(host, probe, what, diagnose=journal):
    """Call probe() until it returns something true; at most WAIT_S seconds."""
    print(f"waiting at most {WAIT_S} s for {what}")
    deadline = time.monotonic() + WAIT_S
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(1)
    raise AssertionError(f"within {WAIT_S} s: {what}; journal:\n{diagnose(host)}")


def put_textfile(name, text):
    """Write a textfile atomically (temporary file, then rename), as rackgate does."""
    path = f"{TEXTFILE_DIR}/{name}"
    result = NODE.run("printf '%%s' %s > %s && mv %s %s", text, f"{path}.tmp", f"{path}.tmp", path)
    assert result.rc == 0, result.stderr


def query(host, promql):
    data = api(host, f"http://127.0.0.1:9090/api/v1/query?query={quote(promql)}")
    assert data["status"] == "success", data
    return data["data"]["result"]


def webhook_notified(host):
    """(status, labels) of every alert in every notification received so far."""
    if not host.file(WEBHOOK_LOG).exists:
        return []
    found = []
    for line in host.file(WEBHOOK_LOG).content_string.splitlines():
        doc = json.loads(line)
        assert "invalid" not in doc, f"the receiver got a bad request: {doc}"
        found += [(alert.get("status"), alert.get("labels", {})) for alert in doc.get("alerts", [])]
    return found


def webhook_alerts(host):
    """(status, alertname, node) of every alert in every notification received so far."""
    return [(status, labels.get("alertname"), labels.get("node")) for status, labels in webhook_notified(host)]


def alertmanager_alerts(host, alertname):
    alerts = api(host, "http://127.0.0.1:9093/api/v2/alerts?active=true")
    return [a for a in alerts if a["labels"].get("alertname") == alertname]


@pytest.mark.parametrize("name", ["prometheus", "prometheus-alertmanager", "prometheus-node-exporter"])
def test_server_packages(host, name):
    assert host.package(name).is_installed


@pytest.mark.parametrize("name", ["prometheus", "prometheus-alertmanager", "prometheus-node-exporter"])
def test_server_services(host, name):
    service = host.service(name)
    assert service.is_enabled and service.is_running, journal(host)


def test_node_exporter_on_the_node():
    assert NODE.package("prometheus-node-exporter").is_installed
    assert not NODE.package("prometheus").is_installed
    service = NODE.service("prometheus-node-exporter")
    assert service.is_enabled and service.is_running
    args = NODE.file("/etc/default/prometheus-node-exporter").content_string
    for flag in (
        "--web.listen-address=:9100",
        f"--collector.textfile.directory={TEXTFILE_DIR}",
        "--collector.infiniband",
        "--collector.textfile",
    ):
        assert flag in args, args
    assert NODE.file(TEXTFILE_DIR).is_directory


def test_prometheus_config_generated_from_the_inventory(host):
    config = yaml.safe_load(host.file("/etc/prometheus/prometheus.yml").content_string)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert sorted(jobs) == ["node", "prometheus", "rackgate-cooling"]
    node = jobs["node"]
    assert node["honor_labels"] is True
    assert sorted((s["targets"], s["labels"]["node"]) for s in node["static_configs"]) == [
        (["rg-mon-node:9100"], "rg-mon-node"),
        (["rg-mon-server:9100"], "rg-mon-server"),
    ]
    assert jobs["rackgate-cooling"]["static_configs"] == [
        {"targets": ["rg-mon-node:9732"], "labels": {"node": "rg-mon-node"}}
    ]
    assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    assert config["alerting"]["alertmanagers"] == [{"static_configs": [{"targets": ["127.0.0.1:9093"]}]}]
    assert config["global"]["evaluation_interval"] == "2s"
    check = host.run("promtool check config /etc/prometheus/prometheus.yml")
    assert check.rc == 0, check.stdout + check.stderr
    rules = host.run("promtool check rules /etc/prometheus/rules/rackgate-cluster.rules.yml")
    assert rules.rc == 0, rules.stdout + rules.stderr


def test_alertmanager_config_and_password_file(host):
    config_file = host.file("/etc/prometheus/alertmanager.yml")
    assert (config_file.user, config_file.group, config_file.mode) == ("root", "prometheus", 0o640)
    text = config_file.content_string
    assert PASSWORD not in text and "smtp\"" not in text
    config = yaml.safe_load(text)
    (receiver,) = config["receivers"]
    assert config["route"]["receiver"] == receiver["name"]
    assert config["route"]["group_by"] == ["alertname", "node"]
    assert receiver["webhook_configs"] == [{"url": "http://127.0.0.1:9099/rackgate", "send_resolved": True}]
    (email,) = receiver["email_configs"]
    assert email["auth_password_file"] == PASSWORD_FILE
    assert email["smarthost"] == "127.0.0.1:2525"
    assert "auth_password" not in email
    secret = host.file(PASSWORD_FILE)
    assert (secret.user, secret.group, secret.mode) == ("root", "prometheus", 0o640)
    assert secret.content_string == PASSWORD
    check = host.run("amtool check-config /etc/prometheus/alertmanager.yml")
    assert check.rc == 0, check.stdout + check.stderr
    # No process carries the password on its command line.
    cmdlines = host.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout
    assert PASSWORD not in cmdlines


def test_a_every_node_exporter_target_is_up(host):
    def node_targets():
        data = api(host, "http://127.0.0.1:9090/api/v1/targets?state=active")
        targets = [t for t in data["data"]["activeTargets"] if t["labels"]["job"] == "node"]
        healths = {t["labels"]["node"]: t["health"] for t in targets}
        return healths if healths == {"rg-mon-server": "up", "rg-mon-node": "up"} else None

    wait_for(host, node_targets, "Prometheus' targets API to show both node_exporter targets up")


def test_b_textfile_metric_is_scraped(host):
    put_textfile(
        "rackgate-acceptance.prom",
        "# HELP rackgate_node_verdict 1 ACCEPT, 0 REJECT\n"
        "# TYPE rackgate_node_verdict gauge\n"
        'rackgate_node_verdict{run="molecule",rack="r1",node="rg-mon-node"} 0\n',
    )
    put_textfile(
        "rackgate-healthcheck.prom",
        "# HELP rackgate_healthcheck_ok 1 all items passed, 0 at least one failed\n"
        "# TYPE rackgate_healthcheck_ok gauge\n"
        "rackgate_healthcheck_ok 0\n",
    )
    served = get(NODE, "http://127.0.0.1:9100/metrics")
    assert 'rackgate_node_verdict{node="rg-mon-node",rack="r1",run="molecule"} 0' in served
    assert "rackgate_healthcheck_ok 0" in served

    verdict = wait_for(
        host,
        lambda: query(host, 'rackgate_node_verdict{run="molecule"}'),
        "Prometheus to return rackgate_node_verdict{run=\"molecule\"} scraped from rg-mon-node",
    )
    (series,) = verdict
    assert series["metric"]["node"] == "rg-mon-node" and series["metric"]["rack"] == "r1"
    assert series["value"][1] == "0"
    health = wait_for(
        host,
        lambda: query(host, "rackgate_healthcheck_ok == 0"),
        "Prometheus to return rackgate_healthcheck_ok 0 from rg-mon-node",
    )
    assert [s["metric"]["node"] for s in health] == ["rg-mon-node"]


def test_c_failing_health_check_alert_reaches_the_receiver(host):
    (alert,) = wait_for(
        host,
        lambda: alertmanager_alerts(host, "NodeHealthCheckFailing"),
        "Alertmanager to hold NodeHealthCheckFailing",
    )
    assert alert["labels"]["node"] == "rg-mon-node"

    firing = ("firing", "NodeHealthCheckFailing", "rg-mon-node")
    wait_for(
        host,
        lambda: firing in webhook_alerts(host),
        f"the webhook receiver's log ({WEBHOOK_LOG}) to show NodeHealthCheckFailing firing for rg-mon-node",
    )
    assert all(node == "rg-mon-node" for _, name, node in webhook_alerts(host) if name == "NodeHealthCheckFailing")


def test_d_healed_node_resolves_the_alert(host):
    put_textfile("rackgate-healthcheck.prom", "rackgate_healthcheck_ok 1\n")
    resolved = ("resolved", "NodeHealthCheckFailing", "rg-mon-node")
    wait_for(
        host,
        lambda: resolved in webhook_alerts(host),
        f"the webhook receiver's log ({WEBHOOK_LOG}) to show NodeHealthCheckFailing resolved for rg-mon-node",
    )


def test_e_cooling_exporter_target_is_up_and_scraped(host):
    def cooling_targets():
        data = api(host, "http://127.0.0.1:9090/api/v1/targets?state=active")
        targets = [t for t in data["data"]["activeTargets"] if t["labels"]["job"] == COOLING_JOB]
        found = [(t["labels"]["node"], t["labels"]["instance"], t["health"]) for t in targets]
        return found if found == [("rg-mon-node", "rg-mon-node:9732", "up")] else None

    wait_for(
        host,
        cooling_targets,
        f"Prometheus' targets API to show the {COOLING_JOB} target rg-mon-node:9732 (the real exporter) up",
        cooling_journal,
    )

    def leak_series():
        series = query(host, "rackgate_leak_detector_state")
        found = sorted((s["metric"]["detector"], s["metric"]["node"], s["value"][1]) for s in series)
        return found if found == [(MANIFOLD_ID, "rg-mon-node", "0"), (TRAY_ID, "rg-mon-node", "0")] else None

    wait_for(
        host,
        leak_series,
        "Prometheus to return rackgate_leak_detector_state 0 (node rg-mon-node) for the Manifold and Tray",
        cooling_journal,
    )
    # The cooling rules of cooling_telemetry are loaded, with the scenario's short `for`.
    check = host.run("promtool check rules %s", COOLING_RULES)
    assert check.rc == 0, check.stdout + check.stderr
    groups = api(host, "http://127.0.0.1:9090/api/v1/rules?type=alert")["data"]["groups"]
    rules = {r["name"]: r for g in groups if g["name"] == "rackgate-cooling" for r in g["rules"]}
    assert "CoolantLeakDetected" in rules, f"the cooling rules are not loaded: {sorted(rules)}"
    assert rules["CoolantLeakDetected"]["duration"] == 2, rules["CoolantLeakDetected"]
    assert not alertmanager_alerts(host, "CoolantLeakDetected"), "a leak alert before any leak"


def test_f_mockup_leak_reaches_the_receiver(host):
    assert not [a for a in webhook_alerts(host) if a[1] == "CoolantLeakDetected"], "a leak notified before any leak"
    BMC.check_output("cp %s %s", TRAY, TRAY_HEALTHY)
    BMC.check_output("cp %s %s", TRAY_LEAK, TRAY)
    wait_for(
        host,
        lambda: query(host, f'rackgate_leak_detector_state{{detector="{TRAY_ID}"}} == 2'),
        "Prometheus to return rackgate_leak_detector_state 2 (Critical) for the mockup's tray detector",
        cooling_journal,
    )
    (alert,) = wait_for(
        host,
        lambda: alertmanager_alerts(host, "CoolantLeakDetected"),
        "Alertmanager to hold CoolantLeakDetected",
        cooling_journal,
    )
    assert alert["labels"]["node"] == "rg-mon-node" and alert["labels"]["detector"] == TRAY_ID, alert

    def firing():
        return [
            labels
            for status, labels in webhook_notified(host)
            if status == "firing" and labels.get("alertname") == "CoolantLeakDetected"
        ]

    notified = wait_for(
        host,
        firing,
        f"the webhook receiver's log ({WEBHOOK_LOG}) to show CoolantLeakDetected firing for rg-mon-node",
        cooling_journal,
    )
    assert {(labels["node"], labels["detector"], labels["severity"]) for labels in notified} == {
        ("rg-mon-node", TRAY_ID, "critical")
    }, notified


def test_g_repaired_leak_resolves_the_alert(host):
    # Put the healthy detector back even when (f) failed half-way (it saved it first).
    BMC.check_output("test -f %s && cp %s %s", TRAY_HEALTHY, TRAY_HEALTHY, TRAY)
    resolved = ("resolved", "CoolantLeakDetected", "rg-mon-node")
    wait_for(
        host,
        lambda: resolved in webhook_alerts(host),
        f"the webhook receiver's log ({WEBHOOK_LOG}) to show CoolantLeakDetected resolved for rg-mon-node",
        cooling_journal,
    )
    back = query(host, f'rackgate_leak_detector_state{{detector="{TRAY_ID}"}} == 0')
    assert back, "the tray detector is not back to 0 in Prometheus"


def test_dashboards_copied(host):
    copied = host.run("ls /var/lib/grafana/dashboards/rackgate").stdout.split()
    assert "rackgate-acceptance.json" in copied
    json.loads(host.file("/var/lib/grafana/dashboards/rackgate/rackgate-acceptance.json").content_string)


def test_fact_file_records_what_was_skipped(host):
    fact = json.loads(host.file(FACT).content_string)
    assert fact["server"]["enabled"] is True
    assert sorted(fact["server"]["scrape_jobs"]["node"]) == ["rg-mon-node", "rg-mon-server"]
    assert fact["server"]["scrape_jobs"]["rackgate-cooling"] == ["rg-mon-node"]
    skipped = {s["step"]: s["reason"] for s in fact["skipped"]}
    (dcgm,) = [reason for step, reason in skipped.items() if step.startswith("dcgm-exporter")]
    assert "NVIDIA" in dcgm
    node_fact = json.loads(NODE.file(FACT).content_string)
    assert node_fact["server"]["enabled"] is False
    assert node_fact["node_exporter"]["textfile_dir"] == TEXTFILE_DIR
