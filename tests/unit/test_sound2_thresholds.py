"""Issue 28, finding 2: an overrides file or a profile could remove a threshold silently.
``min_ratio: 1e-300`` or ``max_ratio: .inf`` were accepted (a node at 10 MB/s and another at
1,000,000 ms p99 were ACCEPTed), ``min_ratio: null`` with ``max_ratio: 2`` turned a floor
into a ceiling, ``ref: .inf`` wrote report.json (ACCEPT) and then crashed the HTML report.

Thresholds are now sane or refused, before anything is judged (rackgate.thresholds): every
figure finite, a floor's ``min_ratio`` in [0.1, 1], a ceiling's ``max_ratio`` in [1, 10], the
direction the check declares (``Check.better``); an override that loosens a threshold gives
its own basis; every report names each threshold an override changed, old and new.

Runs are stored as validate writes them (stored_runs.write_run), their fio evidence made from
the captured fixtures (tests/fixtures/fio, each saying where it came from) with figures
scaled, and judged through the CLI (``rackgate judge RUN --overrides FILE``)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from stored_runs import write_run

from rackgate.baseline import BaselineError, baseline
from rackgate.checks import load_profile
from rackgate.cli.main import main

SEQ_READ_BYTES, SEQ_READ_BW = "3628072960", "1208954668"  # fio/seq-read-healthy.json
P99_NS = '"99.000000" : 5406720'  # fio/rand-read-4k-qd32-healthy.json's p99, 5.4 ms


def seq_read(fixture_text: Any, factor: float) -> str:
    """The healthy sequential read with its bandwidth times ``factor`` (1,209 MB/s at 1)."""
    return fixture_text("fio/seq-read-healthy.json").replace(
        SEQ_READ_BYTES, str(int(int(SEQ_READ_BYTES) * factor))).replace(
        SEQ_READ_BW, str(int(int(SEQ_READ_BW) * factor)))


def slow_run(tmp_path: Path, fixture_text: Any,
             overrides: dict[str, Any] | None = None) -> Path:
    """n1 reads at 10 MB/s: the demo profile's floor is 50 MB/s (0.5 x 100 MB/s)."""
    return write_run(tmp_path / "runs" / "slow", load_profile("demo"), ["fio.seq_read"],
                     [("n1", "", (overrides or {}).get("n1", {}))],
                     evidence={("n1", "fio.seq_read"): seq_read(fixture_text, 10 / 1209)},
                     argv=("fio",))


def overrides_file(tmp_path: Path, check: str, metric: str, entry: dict[str, Any]) -> Path:
    path = tmp_path / "site-overrides.yaml"
    path.write_text(yaml.safe_dump({"checks": {check: {"thresholds": {metric: entry}}}}))
    return path


def judge(run: Path, out: Path, *extra: str) -> int:
    return main(["judge", str(run), "--out", str(out), *extra])


def refused(capsys: Any, out: Path, *needles: str) -> str:
    """The one error the CLI printed (its lines joined: the console wraps them); nothing was
    judged, no report written."""
    err = " ".join(capsys.readouterr().err.split())
    assert not out.exists() or not any(out.iterdir()), sorted(out.iterdir())
    for needle in needles:
        assert needle in err, err
    return err


def test_sound2_2_a_floor_at_1e_300_of_its_ref_is_refused(tmp_path, fixture_text, capsys):
    run = slow_run(tmp_path, fixture_text)
    assert judge(run, tmp_path / "stock") == 1  # the control: 10 MB/s fails the demo floor
    capsys.readouterr()
    path = overrides_file(tmp_path, "fio.seq_read", "read_bw", {"min_ratio": 1e-300})
    assert judge(run, tmp_path / "o", "--overrides", str(path)) == 2
    refused(capsys, tmp_path / "o", f"overrides {path}",
            "checks.fio.seq_read.thresholds.read_bw.min_ratio: 1e-300 is below 0.1")


def test_sound2_2_an_infinite_ceiling_is_refused(tmp_path, fixture_text, capsys):
    slow = fixture_text("fio/rand-read-4k-qd32-healthy.json").replace(
        P99_NS, '"99.000000" : 1000000000000')  # 1,000,000 ms
    run = write_run(tmp_path / "runs" / "r", load_profile("demo"), ["fio.rand_read"], ["n1"],
                    evidence={("n1", "fio.rand_read"): slow}, argv=("fio",))
    assert judge(run, tmp_path / "stock") == 1  # p99 is capped at 50 ms
    capsys.readouterr()
    for ratio, why in ((".inf", "Input should be a finite number (got inf)"),
                       ("1.0e+9", "1e+09 is above 10, the most a ceiling's max_ratio may be")):
        path = tmp_path / "site-overrides.yaml"
        path.write_text("checks:\n  fio.rand_read:\n    thresholds:\n      read_p99_ms: "
                        f"{{max_ratio: {ratio}}}\n")
        assert judge(run, tmp_path / "o", "--overrides", str(path)) == 2, ratio
        refused(capsys, tmp_path / "o", f"overrides {path}",
                f"checks.fio.rand_read.thresholds.read_p99_ms.max_ratio: {why}")


def test_sound2_2_a_null_min_ratio_cannot_turn_a_floor_into_a_ceiling(tmp_path, fixture_text,
                                                                     capsys):
    run = slow_run(tmp_path, fixture_text)
    path = overrides_file(tmp_path, "fio.seq_read", "read_bw",
                          {"min_ratio": None, "max_ratio": 2})
    assert judge(run, tmp_path / "o", "--overrides", str(path)) == 2
    refused(capsys, tmp_path / "o", f"overrides {path}",
            "read_bw.max_ratio: 2 given, but higher is better for this metric: its threshold "
            "is a floor (min_ratio only)",
            "read_bw.min_ratio: missing: higher is better for this metric")


def test_sound2_2_an_infinite_ref_is_refused_before_any_report_is_written(tmp_path,
                                                                         fixture_text,
                                                                         capsys):
    run = slow_run(tmp_path, fixture_text)
    path = tmp_path / "site-overrides.yaml"
    path.write_text("checks:\n  fio.seq_read:\n    thresholds:\n      read_bw: {ref: .inf}\n")
    assert judge(run, tmp_path / "o", "--overrides", str(path)) == 2
    err = refused(capsys, tmp_path / "o", f"overrides {path}",
                  "checks.fio.seq_read.thresholds.read_bw.ref: Input should be a finite number")
    assert "TypeError" not in err


def test_sound2_2_a_loosening_without_its_own_basis_is_refused(tmp_path, fixture_text, capsys):
    """0.1 is a floor in range, but lower than the profile's 0.5: it needs a basis of its own
    (the profile's explains 0.5, not 0.1); with one, the 10 MB/s node passes."""
    run = slow_run(tmp_path, fixture_text)
    profile_basis = load_profile("demo").model.checks["fio.seq_read"].thresholds["read_bw"].basis
    for entry in ({"min_ratio": 0.1}, {"min_ratio": 0.1, "basis": profile_basis}):
        path = overrides_file(tmp_path, "fio.seq_read", "read_bw", entry)
        assert judge(run, tmp_path / "o", "--overrides", str(path)) == 2
        refused(capsys, tmp_path / "o", f"overrides {path} is invalid",
                "checks.fio.seq_read.thresholds.read_bw: >= 50 MB/s (0.5 x 100 MB/s) -> >= 10 "
                "MB/s (0.1 x 100 MB/s) loosens it (floor 50 MB/s -> 10 MB/s) without a basis "
                "of its own")
    path = overrides_file(tmp_path, "fio.seq_read", "read_bw", {
        "min_ratio": 0.1, "basis": "these nodes' scratch is a network disk: 9-12 MB/s measured"})
    assert judge(run, tmp_path / "o", "--overrides", str(path)) == 0  # given its basis


def test_sound2_2_an_inventory_override_that_loosens_needs_its_basis_too(tmp_path, fixture_text,
                                                                        capsys):
    loose = {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {"ref": 20}}}}}
    run = slow_run(tmp_path, fixture_text, overrides={"n1": loose})
    assert main(["judge", str(run)]) == 2
    refused(capsys, run / "none", "rackgate_profile_overrides of inventory host n1 is invalid",
            "read_bw: >= 50 MB/s (0.5 x 100 MB/s) -> >= 10 MB/s (0.5 x 20 MB/s) loosens it")
    assert not (run / "report.json").exists()


SEQ_READ_BW_T = ("checks", "fio.seq_read", "thresholds", "read_bw")
P99_T = ("checks", "fio.rand_read", "thresholds", "read_p99_ms")


@pytest.mark.parametrize(("keys", "value", "message"), [
    ((*SEQ_READ_BW_T, "min_ratio"), 1e-300, "read_bw.min_ratio: 1e-300 is below 0.1"),
    ((*SEQ_READ_BW_T, "min_ratio"), 1.5, "read_bw.min_ratio: 1.5 is above 1"),
    ((*P99_T, "max_ratio"), 1e9, "read_p99_ms.max_ratio: 1e+09 is above 10"),
    ((*P99_T, "min_ratio"), 0.5, "read_p99_ms.min_ratio: 0.5 given, but lower is better"),
    ((*SEQ_READ_BW_T, "ref"), float("inf"), "read_bw.ref: Input should be a finite number"),
    ((*SEQ_READ_BW_T, "ceiling"), float("inf"), "read_bw.ceiling: Input should be a finite"),
    (("checks", "fabric.pairwise_bw", "params", "min_ratio"), 1e-300,
     "params.min_ratio: Input should be greater than or equal to 0.1"),
])
def test_sound2_2_a_profile_file_with_a_meaningless_figure_is_refused(tmp_path, fixture_text,
                                                                      capsys, keys, value,
                                                                      message):
    doc = json.loads(json.dumps(dict(load_profile("demo").raw)))
    node = doc
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    profile = tmp_path / "site.yaml"
    profile.write_text(yaml.safe_dump(doc))
    run = slow_run(tmp_path, fixture_text)
    assert judge(run, tmp_path / "o", "--profile", str(profile)) == 2
    refused(capsys, tmp_path / "o", f"profile {profile} is invalid", message)


def test_sound2_2_the_reports_name_every_threshold_an_overrides_file_changed(tmp_path,
                                                                          fixture_text):
    run = write_run(tmp_path / "runs" / "r", load_profile("demo"),
                    ["fio.seq_read", "fio.rand_read"], ["n1"], argv=("fio",), evidence={
                        ("n1", "fio.seq_read"): seq_read(fixture_text, 30 / 1209),
                        ("n1", "fio.rand_read"): fixture_text(
                            "fio/rand-read-4k-qd32-healthy.json")})
    basis = "SATA scratch disks on this site: 28-35 MB/s measured on 4 golden nodes"
    path = tmp_path / "site-overrides.yaml"
    path.write_text(yaml.safe_dump({"checks": {
        "fio.seq_read": {"thresholds": {"read_bw": {"ref": 40, "min_ratio": 0.7,
                                                    "basis": basis}}},
        "fio.rand_read": {"thresholds": {"read_p99_ms": {"ref": 20}}}}}))
    assert judge(run, tmp_path / "o", "--overrides", str(path)) == 0
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    bw, p99 = doc["profile"]["changes"]
    assert (bw["origin"], bw["check"], bw["metric"]) == (f"overrides {path}", "fio.seq_read",
                                                         "read_bw")
    assert (bw["old_band"], bw["new_band"]) == (">= 50 MB/s (0.5 x 100 MB/s)",
                                                ">= 28 MB/s (0.7 x 40 MB/s)")
    assert bw["loosens"] == ["floor 50 MB/s -> 28 MB/s"] and bw["new"]["basis"] == basis
    assert bw["old"]["ref"] == 100 and bw["new"]["ref"] == 40
    assert (p99["metric"], p99["old_band"], p99["new_band"], p99["loosens"]) == (
        "read_p99_ms", "<= 50 ms (1 x 50 ms)", "<= 20 ms (1 x 20 ms)", [])  # tighter
    assert doc["nodes"][0]["threshold_changes"] == []  # no inventory override
    html = (tmp_path / "o" / "report.html").read_text()
    assert 'id="threshold-changes"' in html and "2 threshold(s) changed by overrides, 1 of " \
                                                "them loosened" in html
    assert "<b>floor 50 MB/s -&gt; 28 MB/s</b>" in html and basis in html
    summary = (tmp_path / "o" / "summary.md").read_text()
    assert "**Thresholds changed by overrides** (2, 1 loosened):" in summary
    assert r"- fio.seq_read read_bw: >= 50 MB/s (0.5 x 100 MB/s) -> >= 28 MB/s (0.7 x 40 " \
           r"MB/s); LOOSENS floor 50 MB/s -> 28 MB/s; basis: " + basis in summary
    suite = ET.parse(tmp_path / "o" / "report.xml").getroot().find("testsuite")
    assert suite is not None
    props = [p.get("value") for p in suite.iter("property")
             if p.get("name") == "threshold_changed"]
    assert len(props) == 2 and props[1].startswith("fio.rand_read read_p99_ms: <= 50 ms")


def test_sound2_2_validate_records_the_changes_and_a_rejudge_lists_them_again(tmp_path,
                                                                            capsys):
    """A validate whose node cannot be reached still writes its manifest and reports: the
    overrides' changes are in both, and ``rackgate judge RUN`` lists them again."""
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": {"n1": {
        "ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_connection": "ssh"}}}}}}))
    path = overrides_file(tmp_path, "fio.seq_read", "read_bw", {"ref": 200})
    runs = tmp_path / "runs"
    assert main(["validate", "-i", str(inv), "--profile", "demo", "--checks", "fio.seq_read",
                 "--overrides", str(path), "--runs-dir", str(runs), "--no-plan"]) == 1
    (run,) = (d for d in runs.iterdir() if d.is_dir())
    manifest = json.loads((run / "manifest.json").read_text())
    (change,) = manifest["profile"]["changes"]
    assert change["new_band"] == ">= 100 MB/s (0.5 x 200 MB/s)" and change["loosens"] == []
    assert json.loads((run / "report.json").read_text())["profile"]["changes"] == [change]
    capsys.readouterr()
    assert main(["judge", str(run), "--out", str(tmp_path / "again")]) == 1
    again = json.loads((tmp_path / "again" / "report.json").read_text())
    assert again["profile"]["changes"] == [change]


def test_sound2_2_validate_refuses_a_loosening_before_anything_runs(tmp_path, capsys):
    inv = tmp_path / "inventory.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": {"n1": {
        "ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_connection": "ssh"}}}}}}))
    path = overrides_file(tmp_path, "fio.seq_read", "read_bw", {"ref": 20})
    runs = tmp_path / "runs"
    assert main(["validate", "-i", str(inv), "--profile", "demo", "--checks", "fio.seq_read",
                 "--overrides", str(path), "--runs-dir", str(runs), "--no-plan"]) == 2
    assert "loosens it (floor 50 MB/s -> 10 MB/s) without a basis" in " ".join(
        capsys.readouterr().err.split())
    assert not runs.exists() or not any(runs.iterdir())


def test_sound2_2_a_baseline_band_below_a_tenth_of_its_median_is_refused(tmp_path,
                                                                        fixture_text):
    """A golden node at 5 % of the others' median would widen the floor to 0.049 x ref."""
    run = write_run(tmp_path / "runs" / "g", load_profile("demo"), ["fio.seq_read"],
                    ["n1", "n2", "n3"], argv=("fio",), evidence={
                        (n, "fio.seq_read"): seq_read(fixture_text, f)
                        for n, f in (("n1", 1.0), ("n2", 1.0), ("n3", 0.05))})
    assert judge(run, run) == 0  # 60 MB/s still passes the demo's 50 MB/s
    doc = json.loads((run / "report.json").read_text())
    with pytest.raises(BaselineError, match=r"read_bw.min_ratio: 0.049 is below 0.1"):
        baseline(doc)
    made = baseline(doc, ["n1", "n2"])  # the control: a band the golden nodes agree on
    assert made.thresholds[0].threshold.min_ratio == 0.9



def test_sound2_2_the_reports_name_the_thresholds_a_hosts_inventory_overrides_changed(
        tmp_path, fixture_text):
    loose = {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "ref": 20, "basis": "n1 and n2 read from a network disk: 9-12 MB/s measured"}}}}}
    run = write_run(tmp_path / "runs" / "r", load_profile("demo"), ["fio.seq_read"],
                    [("n1", "", loose), ("n2", "", loose), ("n3", "", {})], argv=("fio",),
                    evidence={(n, "fio.seq_read"): seq_read(fixture_text, 10 / 1209)
                              for n in ("n1", "n2", "n3")})
    assert judge(run, tmp_path / "o") == 1  # n3 keeps the profile's 50 MB/s floor
    doc = json.loads((tmp_path / "o" / "report.json").read_text())
    assert doc["profile"]["changes"] == []
    by = {n["name"]: n for n in doc["nodes"]}
    assert [n["verdict"] for n in by.values()] == ["ACCEPT", "ACCEPT", "REJECT"]
    (change,) = by["n1"]["threshold_changes"]
    assert by["n2"]["threshold_changes"] == [change] and by["n3"]["threshold_changes"] == []
    assert change["origin"] == "rackgate_profile_overrides of inventory host n1"
    assert change["loosens"] == ["floor 50 MB/s -> 10 MB/s"]
    html = (tmp_path / "o" / "report.html").read_text()
    assert "<td>rackgate_profile_overrides (inventory): n1, n2</td>" in html
    assert "1 threshold(s) changed by overrides, 1 of them loosened" in html
