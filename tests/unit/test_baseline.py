"""`rackgate baseline`: profile overrides from a run's golden nodes, and `judge`/`validate
--overrides` judging against them. Runs are stored as validate writes them
(stored_runs.write_run) with fio evidence made from the captured fixtures, their figures
scaled per node (bw_bytes and io_bytes together, so fio's own arithmetic still holds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from stored_runs import write_run

from rackgate.baseline import BaselineError, baseline
from rackgate.checks import REGISTRY, load_profile
from rackgate.cli.baseline import overrides_yaml
from rackgate.cli.main import main
from rackgate.overrides import load_profile_or_fail
from rackgate.profile import Profile
from rackgate.refusal import Refusal
from rackgate.run import judge_run

SEQ_READ_BYTES, SEQ_READ_BW = "3628072960", "1208954668"  # fio/seq-read-healthy.json
RAND_P99_NS = "5406720"  # fio/rand-read-4k-qd32-healthy.json


def seq_read(fixture_text, factor: float) -> str:
    """The healthy sequential read with its bandwidth times ``factor`` (1,209 MB/s at 1)."""
    return fixture_text("fio/seq-read-healthy.json").replace(
        SEQ_READ_BYTES, str(int(int(SEQ_READ_BYTES) * factor))).replace(
        SEQ_READ_BW, str(int(int(SEQ_READ_BW) * factor)))


def demo_with(changes: dict[str, Any]) -> Profile:
    return load_profile("demo").with_overrides(changes, "test")


def stored(tmp_path: Path, fixture_text, factors: dict[str, float], *,
           profile: Profile | None = None, overrides: dict[str, Any] | None = None) -> Path:
    """A judged run of fio.seq_read on nodes named by ``factors`` (their bandwidth factor)."""
    run = write_run(tmp_path / "runs" / "20261202T031500Z-demo", profile or load_profile("demo"),
                    ["fio.seq_read"],
                    [(n, "", (overrides or {}).get(n, {})) for n in factors],
                    evidence={(n, "fio.seq_read"): seq_read(fixture_text, f)
                              for n, f in factors.items()}, argv=("fio",))
    judge_run(run)
    return run


def report(run: Path) -> dict[str, Any]:
    return json.loads((run / "report.json").read_text())


def statuses(doc: dict[str, Any], check: str = "fio.seq_read") -> dict[str, str]:
    return {n["name"]: next(r["status"] for r in n["results"] if r["check"] == check)
            for n in doc["nodes"]}


def test_a_node_below_the_golden_nodes_band_fails_though_it_passed_the_stock_profile(
        tmp_path, fixture_text, capsys):
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.96, "n3": 0.6})
    assert statuses(report(run)) == {"n1": "pass", "n2": "pass", "n3": "pass"}
    out = tmp_path / "overrides.yaml"
    assert main(["baseline", str(run), "--nodes", "n1,n2", "-o", str(out),
                 "--allow-small"]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    outcome = judge_run(run, out_dir=tmp_path / "rejudged", overrides_files=[out])
    doc = json.loads(outcome.report_json.read_text())
    assert statuses(doc) == {"n1": "pass", "n2": "pass", "n3": "fail"}
    threshold = doc["profile"]["checks"]["fio.seq_read"]["thresholds"]["read_bw"]
    # the median of 1,209 and 1,160.6 MB/s
    assert (threshold["ref"], threshold["min_ratio"]) == (1184.8, 0.9)
    n3 = next(n for n in doc["nodes"] if n["name"] == "n3")["results"][0]
    assert n3["expected"] == ">= 1,066 MB/s (0.9 x 1,185 MB/s)"
    assert doc["profile"]["sha256"] != report(run)["profile"]["sha256"]
    assert doc["profile"]["source"].endswith(f"+ overrides {out}")


def test_the_cli_judges_with_overrides_and_exits_on_the_verdict(tmp_path, fixture_text, capsys):
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.6})
    out = tmp_path / "overrides.yaml"
    out.write_text(overrides_yaml(baseline(report(run), ["n1"]), "rackgate baseline"))
    assert main(["judge", str(run), "--out", str(tmp_path / "stock")]) == 0
    assert main(["judge", str(run), "--overrides", str(out), "--out", str(tmp_path / "b")]) == 1
    assert "n2: fio.seq_read: fail" in capsys.readouterr().out


def test_every_golden_node_passes_its_own_baseline_when_the_band_is_widened(tmp_path,
                                                                           fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.9, "n3": 0.7})
    made = baseline(report(run))
    (t,) = made.thresholds
    assert t.threshold.min_ratio is not None and t.threshold.min_ratio < 0.9
    assert "widened so the lowest, 846.3 MB/s, passes" in t.threshold.basis
    out = tmp_path / "overrides.yaml"
    out.write_text(overrides_yaml(made, "rackgate baseline"))
    doc = json.loads(judge_run(run, out_dir=tmp_path / "b", overrides_files=[out])
                     .report_json.read_text())
    assert set(statuses(doc).values()) == {"pass"}


def test_the_basis_names_the_run_nodes_date_statistic_and_spread(tmp_path, fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.96, "n3": 0.5})
    (t,) = baseline(report(run), ["n1", "n2"]).thresholds
    assert t.threshold.basis == (
        "site baseline from run 20261202T031500Z-demo (nodes n1, n2; collected t1): median of "
        "2 nodes 1,185 MB/s, range 1,161-1,209 MB/s, MAD 24.2 MB/s (spread 4.085% of the "
        "median); pass at >= 0.9 x median (tolerance 10%). It replaces the profile's ref "
        "100 MB/s")
    assert t.figures == (("n1", 1209.0), ("n2", 1160.6))


def test_the_yaml_says_what_it_is_and_loads_back_as_the_document(tmp_path, fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    made = baseline(report(run))
    text = overrides_yaml(made, "rackgate baseline runs/x -o o.yaml")
    assert text.startswith("# rackgate site baseline: profile overrides from run "
                           "20261202T031500Z-demo (profile\n# demo, sha256 ")
    assert "#   rackgate baseline runs/x -o o.yaml\n" in text
    assert "#   rackgate validate -i INVENTORY --profile demo --overrides FILE\n" in text
    assert "basis: >-\n" in text
    assert yaml.safe_load(text) == made.document()
    read_bw = made.document()["checks"]["fio.seq_read"]["thresholds"]["read_bw"]
    assert read_bw["limit"] is False and read_bw["max_ratio"] is None
    assert "one node: no spread" in read_bw["basis"]


def test_a_latency_ceiling_stays_a_ceiling_and_comes_from_the_details(tmp_path, fixture_text):
    text = fixture_text("fio/rand-read-4k-qd32-healthy.json")
    run = write_run(tmp_path / "runs" / "r", load_profile("demo"), ["fio.rand_read"],
                    ["n1", "n2"], argv=("fio",), evidence={
                        ("n1", "fio.rand_read"): text,
                        ("n2", "fio.rand_read"): text.replace(RAND_P99_NS, "6000000")})
    judge_run(run)
    made = {t.metric: t for t in baseline(report(run)).thresholds}
    p99 = made["read_p99_ms"].threshold
    assert (p99.ref, p99.min_ratio, p99.max_ratio, p99.unit) == (5.7035, None, 1.1, "ms")
    assert made["read_p99_ms"].figures == (("n1", 5.407), ("n2", 6.0))
    iops = made["read_iops"].threshold
    assert iops.min_ratio == 0.9 and iops.max_ratio is None and iops.ref == 32680


def test_a_physical_limit_is_kept_as_the_ceiling(tmp_path, fixture_text):
    limited = demo_with({"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "ref": 2000, "limit": True, "basis": "a test bus of 2,000 MB/s"}}}}})
    run = stored(tmp_path, fixture_text, {"n1": 1.0}, profile=limited)
    (t,) = baseline(report(run)).thresholds
    assert (t.threshold.limit, t.threshold.ceiling, t.threshold.ref) == (False, 2000, 1209)
    assert t.threshold.basis.endswith(
        "Ceiling 2,000 MB/s: the profile's physical limit, above which a figure is "
        "implausible evidence (a test bus of 2,000 MB/s)")


def test_a_median_above_the_physical_limit_is_refused(tmp_path, fixture_text):
    # 1,209 MB/s is within the 5 % tolerance of a 1,180 MB/s limit: it passed the profile
    limited = demo_with({"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "ref": 1180, "min_ratio": 0.5, "limit": True, "basis": "a test bus of 1,180 MB/s"}}}}})
    run = stored(tmp_path, fixture_text, {"n1": 1.0}, profile=limited)
    assert statuses(report(run)) == {"n1": "pass"}
    with pytest.raises(BaselineError) as exc:
        baseline(report(run))
    assert "check fio.seq_read metric read_bw: the median 1,209 MB/s is above the profile's " \
           "physical limit 1,180 MB/s" in str(exc.value)


def test_a_job_across_the_nodes_gives_one_figure(tmp_path, fixture_text):
    run = write_run(tmp_path / "runs" / "mpi", load_profile("demo"), ["mpi.allreduce"],
                    ["rg-node01", "rg-node02"], launch_host="rg-head", argv=("timeout", "srun"),
                    evidence={("rg-head", "mpi.allreduce"): fixture_text(
                        "mpi/allreduce-2nodes-srun-healthy.txt")})
    judge_run(run)
    (t,) = baseline(report(run)).thresholds
    assert t.job and t.figures == (("job across rg-node01, rg-node02", pytest.approx(0.38805)),)
    assert "the job's one figure 0.3881 GB/s (a check across the nodes measures the whole " \
           "job once: nodes rg-node01, rg-node02)" in t.threshold.basis


def test_a_node_that_was_not_accepted_is_refused_naming_why(tmp_path, fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.03})
    with pytest.raises(BaselineError) as exc:
        baseline(report(run))
    assert "a golden node must be accepted, and 1 chosen node(s) were not: n2: REJECT " \
           "(fio.seq_read: fail: sequential read 36.3 MB/s misses" in str(exc.value)
    assert "Choose accepted nodes with --nodes (n1)" in str(exc.value)


def test_a_node_not_in_the_run_is_refused(tmp_path, fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    with pytest.raises(BaselineError, match=r"node\(s\) n9 are not in run "
                                            r"20261202T031500Z-demo \(its nodes: n1\)"):
        baseline(report(run), ["n1", "n9"])


def test_a_chosen_node_without_a_finite_figure_is_refused(tmp_path, fixture_text):
    doc = report(stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 1.0}))
    doc["nodes"][1]["results"][0]["measured"] = None
    with pytest.raises(BaselineError) as exc:
        baseline(doc)
    assert "node n2 check fio.seq_read metric read_bw: no finite figure (measured is None; " \
           "status pass" in str(exc.value)


def test_a_report_judged_with_another_profile_is_refused(tmp_path, fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    judge_run(run, demo_with({"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "ref": 120}}}}}))
    with pytest.raises(BaselineError, match="judge it with its own profile first"):
        baseline(report(run))


def test_checks_without_site_figures_are_listed_with_the_reason(tmp_path, fixture_text):
    doc = report(stored(tmp_path, fixture_text, {"n1": 1.0}))
    doc["nodes"][0]["results"] += [
        {"check": "cooling.cdu", "status": "pass", "measured": 32.0, "unit": "C"},
        {"check": "rack.peer_comparison", "status": "pass", "measured": None, "unit": ""},
        {"check": "nccl.all_reduce", "status": "skip", "measured": None, "unit": "",
         "message": "the profile expects no GPU"}]
    made = baseline(doc)
    assert dict(made.left_out) == {
        "cooling.cdu": "its thresholds (flow_lpm, return_temp_c, supply_temp_c) are limits "
                       "(safety, health, counts or line rates), not site figures",
        "rack.peer_comparison": "a rack-level judgement over the other results, not a "
                                "measurement",
        "nccl.all_reduce": "the profile sets no threshold for busbw"}
    assert "#   cooling.cdu: its thresholds" in overrides_yaml(made, "rackgate baseline")


def test_an_inventory_override_of_a_baselined_threshold_is_noted(tmp_path, fixture_text):
    own = {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "ref": 90, "basis": "n2's scratch disk is an older model (a test figure)"}}}}}
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 1.0}, overrides={"n2": own})
    (note,) = baseline(report(run), ["n1"]).notes
    assert note.startswith("host n2 overrides fio.seq_read.read_bw in the inventory")


def test_the_overridden_profile_is_what_a_run_records_and_judges_again(tmp_path, fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.6})
    out = tmp_path / "overrides.yaml"
    out.write_text(overrides_yaml(baseline(report(run), ["n1"]), "rackgate baseline"))
    profile = load_profile_or_fail("demo", [out])  # what validate --overrides runs with
    assert profile.raw["checks"]["fio.seq_read"]["thresholds"]["read_bw"]["ref"] == 1209
    # validate records profile.raw in the manifest: a run so recorded judges with it again
    again = stored(tmp_path / "again", fixture_text, {"n1": 1.0, "n2": 0.6}, profile=profile)
    assert statuses(report(again)) == {"n1": "pass", "n2": "fail"}
    assert report(again)["run"]["profile"]["source"].endswith(f"+ overrides {out}")


@pytest.mark.parametrize(("text", "message"), [
    ("checks:\n  fio.seq_read:\n    thresholds:\n      read_bandwidth: {unit: MB/s, ref: 1, "
     "min_ratio: 1, basis: a test figure}\n",
     "checks.fio.seq_read.thresholds.read_bandwidth: the check judges no such metric"),
    ("checks:\n  fio.pfs.seq_read: {enabled: true}\n",
     "checks.fio.pfs.seq_read: profile demo does not define this check"),
    ("- a list\n", "must be a non-empty mapping (a partial profile), got list"),
])
def test_an_overrides_file_the_profile_refuses_is_named(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(Refusal) as exc:
        load_profile_or_fail("demo", [path])
    assert str(path) in str(exc.value) and message in str(exc.value)


def test_the_cli_refuses_in_one_line_and_never_overwrites_without_force(tmp_path, fixture_text,
                                                                      capsys):
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    out = tmp_path / "overrides.yaml"
    out.write_text("mine")
    assert main(["baseline", str(run), "-o", str(out), "--allow-small"]) == 2
    assert capsys.readouterr().err == f"rackgate baseline: {out} exists: give --force to " \
                                      f"overwrite it\n"
    assert main(["baseline", str(run), "-o", str(out), "--force", "--allow-small"]) == 0
    assert out.read_text().startswith("# rackgate site baseline")
    capsys.readouterr()
    assert main(["baseline", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == f"rackgate baseline: {tmp_path / 'runs'} has no " \
                                      f"report.json: judge the run first (rackgate judge " \
                                      f"{tmp_path / 'runs'})\n"
    assert main(["baseline", str(run), "--nodes", "n7"]) == 2
    assert "node(s) n7 are not in run" in capsys.readouterr().err


def test_the_cli_prints_the_overrides_and_says_what_it_baselined(tmp_path, fixture_text, capsys,
                                                                 monkeypatch):
    stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.96})
    monkeypatch.chdir(tmp_path)
    run = "runs/20261202T031500Z-demo"
    assert main(["baseline", run, "--tolerance", "0.05", "--allow-small"]) == 0
    printed = capsys.readouterr()
    assert yaml.safe_load(printed.out)["checks"]["fio.seq_read"]["thresholds"]["read_bw"][
        "min_ratio"] == 0.95
    assert f"#   rackgate baseline {run} --tolerance 0.05 --allow-small\n" in printed.out
    assert "  fio.seq_read read_bw: ref 1,185 MB/s, the median of 2 node(s); pass at >= " \
           "1,126 MB/s; spread 4.085%\n" in printed.err


def test_only_benchmark_figures_are_declared_and_each_is_a_judged_metric():
    declared = {name: dict(c.baseline) for name, c in REGISTRY.items() if c.baseline}
    for name, metrics in declared.items():
        judged = REGISTRY[name].metrics | REGISTRY[name].optional_metrics
        assert set(metrics) <= judged, name
    assert set(declared) == {
        "fio.seq_read", "fio.seq_write", "fio.rand_read", "fio.checkpoint", "fio.pfs.seq_read",
        "fio.pfs.checkpoint", "nccl.all_reduce", "nccl.all_gather", "nccl.reduce_scatter",
        "nccl.alltoall", "nccl.sendrecv", "nccl.fabric_all_reduce", "mpi.allreduce",
        "nvbandwidth.host_to_device", "nvbandwidth.device_to_host",
        "nvbandwidth.device_to_device"}
    assert declared["fio.rand_read"] == {"read_iops": "measured", "read_p99_ms": "clat_p99_ms"}


def test_a_job_whose_nodes_disagree_on_its_one_figure_is_refused(tmp_path, fixture_text):
    run = write_run(tmp_path / "runs" / "mpi", load_profile("demo"), ["mpi.allreduce"],
                    ["rg-node01", "rg-node02"], launch_host="rg-head", argv=("timeout", "srun"),
                    evidence={("rg-head", "mpi.allreduce"): fixture_text(
                        "mpi/allreduce-2nodes-srun-healthy.txt")})
    judge_run(run)
    doc = report(run)
    doc["nodes"][1]["results"][0]["measured"] = 0.2
    with pytest.raises(BaselineError, match="the nodes of one job report different figures "
                                            r"\(rg-node01 0.3881 GB/s, rg-node02 0.2 GB/s\)"):
        baseline(doc)


def test_a_node_named_twice_is_refused(tmp_path, fixture_text):
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    with pytest.raises(BaselineError, match="--nodes names n1 twice"):
        baseline(report(run), ["n1", "n1"])


def test_resume_and_retest_refuse_overrides_they_take_the_profile_from_the_run(tmp_path,
                                                                              capsys):
    path = tmp_path / "overrides.yaml"
    path.write_text("checks: {}\n")
    for how in ("--resume", "--retest"):
        assert main(["validate", how, str(tmp_path), "--overrides", str(path)]) == 2
        assert "checks from the run's manifest.json; drop -i/--profile/--overrides/" \
            in capsys.readouterr().err
