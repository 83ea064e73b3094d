"""End to end on the podman demo rack: up -> provision -> validate -> reports.

Real components only: podman containers with systemd, ansible-playbook with the common
role installing Debian's fio, ansible-runner collecting, the real fio measuring, and
headless Chromium rendering the HTML report. There is no GPU here: the demo profile
judges storage only, and says so.

Needs podman with the project's containers.conf, the base image (make image) and
Debian's mirror; `make test` provides all three.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DEMO = str(ROOT / "inventory" / "demo")
NODES = ["rg-node01", "rg-node02"]


def run(*argv: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "molecule" / "containers.conf"),
           "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "COLUMNS": "200"}
    return subprocess.run(list(argv), cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def rackgate(*args: str) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "rackgate.cli", *args)


def report_of(proc: subprocess.CompletedProcess[str]) -> dict:
    m = re.search(r"^Report \(JSON\): (\S+)$", proc.stdout, re.M)
    assert m, f"no report path printed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads((ROOT / m.group(1)).read_text())


def results(doc: dict) -> dict[str, dict]:
    return {n["name"]: n for n in doc["nodes"]}


@pytest.fixture(scope="module")
def provisioned_rack():
    up = rackgate("demo", "up", "-i", DEMO)
    assert up.returncode == 0, up.stdout + up.stderr
    first = run(str(BIN / "ansible-playbook"), "-i", DEMO, "playbooks/site.yml")
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    return first


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
    for node in NODES:
        (res,) = by[node]["results"]
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
        figure = f"{by[node]['results'][0]['measured']} MB/s"
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
    (res,) = by["rg-node02"]["results"]
    assert res["status"] == "fail" and res["measured"] > 0
    assert "misses >= 5e+08 MB/s" in res["message"]
    assert "rg-node02: fio.seq_read: fail: sequential read" in proc.stdout


def test_stopped_node_is_an_error_and_the_others_are_judged(provisioned_rack):
    stop = run("podman", "stop", "--time", "5", "rg-node02")
    assert stop.returncode == 0, stop.stderr
    try:
        proc = rackgate("validate", "-i", DEMO, "--profile", "demo")
    finally:
        start = run("podman", "start", "rg-node02")
    assert start.returncode == 0, start.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    by = results(report_of(proc))
    (down,) = by["rg-node02"]["results"]
    assert down["status"] == "error" and down["measured"] is None
    assert down["message"].startswith("host unreachable, nothing collected")
    assert by["rg-node02"]["verdict"] == "REJECT"
    (up,) = by["rg-node01"]["results"]
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
