"""End to end on the podman demo rack: a validate run's results, exported by `rackgate
export-metrics`, read by the real node_exporter on rg-node01 (the monitoring role, with
its textfile collector): the file is copied into the collector's directory and every
exported series comes back, with the same labels and value, from a scrape of
127.0.0.1:9100/metrics inside the container, and node_exporter reports no textfile error.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest
import yaml
from demo_rack import DEMO, ROOT, rackgate, run
from prometheus_client.parser import text_string_to_metric_families

from rackgate.reports.metrics import DEFAULT_FILE

pytestmark = pytest.mark.e2e

NODE = "rg-node01"
TEXTFILE_DIR = yaml.safe_load((ROOT / "roles/monitoring/defaults/main.yml").read_text())[
    "monitoring_node_exporter_textfile_dir"]
SCRAPE = ("import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
          "'http://127.0.0.1:9100/metrics', timeout=10).read().decode())")
SCRAPE_WAIT_S = 30.0

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str, prefix: str = "") -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith(prefix)}


def scrape() -> subprocess.CompletedProcess[str]:
    return run("podman", "exec", NODE, "python3", "-c", SCRAPE, timeout=60)


def scrape_until(wanted: Samples) -> Samples:
    """Scrape node_exporter on the node until every wanted series is there (bounded: it reads
    the textfile directory on every scrape), else fail naming what is missing."""
    deadline = time.monotonic() + SCRAPE_WAIT_S
    while True:
        proc = scrape()
        got = samples(proc.stdout) if proc.returncode == 0 else {}
        missing = sorted(set(wanted) - set(got))
        if not missing:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"node_exporter on {NODE} (127.0.0.1:9100) lacks {len(missing)} "
                        f"exported series after {SCRAPE_WAIT_S:.0f} s, e.g. {missing[:3]}; "
                        f"scrape rc {proc.returncode}: {proc.stderr[-500:]}", pytrace=False)
        time.sleep(2)


def test_node_exporter_serves_the_exported_acceptance_results(provisioned_rack, tmp_path):
    proc = rackgate("validate", "-i", DEMO, "--profile", "demo", "--checks", "fio.seq_read")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"^Report \(JSON\): (\S+)$", proc.stdout, re.M)
    assert m, f"no report path printed:\n{proc.stdout}"
    run_dir = (ROOT / m.group(1)).parent

    out = tmp_path / DEFAULT_FILE
    export = rackgate("export-metrics", str(run_dir), "-o", str(out))
    assert export.returncode == 0, export.stdout + export.stderr
    assert re.fullmatch(r"export-metrics: run \S+: 2 node\(s\), \d+ series -> \S+\n",
                        export.stderr), export.stderr
    exported = samples(out.read_text())
    verdicts = {dict(k)["node"]: v for (name, k), v in exported.items()
                if name == "rackgate_node_verdict"}
    assert verdicts == {"rg-node01": 1, "rg-node02": 1}, exported

    present = run("podman", "exec", NODE, "test", "-d", TEXTFILE_DIR)
    assert present.returncode == 0, (f"{NODE} has no textfile directory {TEXTFILE_DIR}: is "
                                     f"the monitoring role in inventory/demo?")
    target = f"{TEXTFILE_DIR}/{DEFAULT_FILE}"
    try:
        cp = run("podman", "cp", str(out), f"{NODE}:{target}")
        assert cp.returncode == 0, cp.stderr
        scraped = scrape_until(exported)
        assert {k: scraped[k] for k in exported} == exported
        errors = {k: v for k, v in samples(scrape().stdout, "node_textfile").items()
                  if k[0] == "node_textfile_scrape_error"}
        assert errors and set(errors.values()) == {0.0}, errors
        mtimes = {dict(k).get("file") for (name, k) in samples(scrape().stdout)
                  if name == "node_textfile_mtime_seconds"}
        assert any(f and f.endswith(DEFAULT_FILE) for f in mtimes), mtimes
    finally:
        run("podman", "exec", NODE, "rm", "-f", target)
