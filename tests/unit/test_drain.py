"""``rackgate drain``: what it decides for each node from a judged report and the scheduler's
view, the commands it builds, and what it refuses. The SLURM cycle against a real
slurmctld is in tests/e2e/test_demo_rack.py (test_drain_cycle_in_the_demo_rack_slurm).

sinfo lines below are written from sinfo(1): ``--format=%N|%T|%E`` prints the node name, its
extended state (with flag characters such as ``*``) and the reason, one line per node and
partition.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from stored_runs import write_run

from rackgate.checks import load_profile
from rackgate.cli.main import main
from rackgate.scheduler import kubernetes, slurm
from rackgate.scheduler.drain import (
    Records,
    ReportError,
    ReportNode,
    decide_kubernetes,
    decide_slurm,
    report_nodes,
)
from rackgate.scheduler.kubernetes import TaintState
from rackgate.scheduler.slurm import parse_states

RUN = "20261202T031500Z-demo"
EARLIER = "20261101T000000Z-demo"
PSU = "redundancy.psu_ipmi: PSU2 Status (02h): Failure detected"
OURS = f"rackgate/drain[{RUN}]: {PSU}"
OLDER = f"rackgate/drain[{EARLIER}]: fio.seq_read: sequential read 12 MB/s misses ..."
# what this run's records hold once it drained n1..n3 (scheduler/*-drain/actions.json)
DRAINED = Records({n: frozenset({OURS}) for n in ("n1", "n2", "n3")})


def node(name: str, verdict: str = "ACCEPT", *results: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "verdict": verdict, "reasons": [],
            "results": list(results) or [{"check": "fio.seq_read", "status": "pass",
                                          "message": "ok"}]}


PSU_FAIL = {"check": "redundancy.psu_ipmi", "status": "fail",
            "message": "PSU2 Status (02h): Failure detected"}


def report(*nodes: dict[str, Any], run_id: str = RUN) -> dict[str, Any]:
    return {"schema": "rackgate.report/1", "run": {"run_id": run_id}, "nodes": list(nodes)}


def decide(doc: dict[str, Any], sinfo: str, resume_passed: bool = False,
           records: Records = DRAINED) -> dict[str, Any]:
    run_id, nodes = report_nodes(doc, "report.json")
    return {d.node: d for d in decide_slurm(nodes, parse_states(sinfo), run_id, records,
                                            resume_passed=resume_passed)}


def test_a_rejected_idle_node_is_drained_with_the_run_the_check_and_the_message():
    d = decide(report(node("n1", "REJECT", PSU_FAIL)), "n1|idle|none\n")["n1"]
    assert d.action == "drain" and d.why == OURS
    assert d.argvs == (("scontrol", "update", "nodename=n1", "state=drain",
                        f"reason={OURS}"),)


def test_a_node_someone_else_drained_is_never_touched_rejected_or_passing():
    sinfo = "n1|drained|ops: replacing DIMM B3\nn2|draining|ops: firmware update\n"
    for resume in (False, True):
        ds = decide(report(node("n1", "REJECT", PSU_FAIL), node("n2")), sinfo, resume)
        assert {n: d.action for n, d in ds.items()} == {"n1": "leave", "n2": "leave"}
        assert all(d.argvs == () for d in ds.values())
        assert "ops: replacing DIMM B3" in ds["n1"].why


def test_a_node_down_for_maintenance_by_a_person_is_left_but_slurms_own_not_responding_is_drained():
    ds = decide(report(node("n1", "REJECT", PSU_FAIL), node("n2", "REJECT", PSU_FAIL)),
                "n1|down|maintenance window 14:00\nn2|down*|Not responding\n")
    assert ds["n1"].action == "leave" and ds["n2"].action == "drain"


def test_resume_passed_resumes_only_what_this_run_drained():
    sinfo = f"n1|drained|{OLDER}\nn2|idle|none\nn3|drained*|{OURS}\n"
    doc = report(node("n1"), node("n2"), node("n3"))
    without = decide(doc, sinfo)
    assert [without[n].action for n in ("n1", "n2", "n3")] == ["leave", "none", "none"]
    assert "--resume-passed resumes it" in without["n3"].why
    ds = decide(doc, sinfo, resume_passed=True)
    assert [ds[n].action for n in ("n1", "n2", "n3")] == ["leave", "none", "resume"]
    assert ds["n3"].argvs == (("scontrol", "update", "nodename=n3", "state=resume"),)
    assert f"rackgate run {EARLIER}, not this one" in ds["n1"].why


def test_a_drain_naming_this_run_that_its_records_do_not_show_is_left():
    ds = decide(report(node("n1")), f"n1|drained|{OURS}\n", resume_passed=True,
                records=Records(unreadable=("runs/x/scheduler/a-drain/actions.json",)))
    assert ds["n1"].action == "leave" and ds["n1"].argvs == ()
    assert "show no drain of n1; 1 record(s) unreadable: runs/x/" in ds["n1"].why


def test_a_reason_that_only_starts_with_the_word_rackgate_is_not_rackgates():
    for reason in ("rackgate upgrade by ops", "rackgate maint: PSU2 RMA ticket 4711",
                   f"rackgate {RUN}: {PSU}"):  # the last: in no record of this run
        ds = decide(report(node("n1")), f"n1|drained|{reason}\n", resume_passed=True)
        assert ds["n1"].action == "leave", reason


def test_the_health_checks_own_drain_is_left_to_the_health_check():
    """`rackgate healthcheck` drains with its own marker and resumes its own drains; drain
    neither resumes nor overwrites them, rejected or passing."""
    for reason in ("rackgate healthcheck: n1: mounts: FAIL: /scratch: not mounted",
                   "rackgate/healthcheck: mounts: /scratch: not mounted"):
        for verdict, results in (("ACCEPT", ()), ("REJECT", (PSU_FAIL,))):
            d = decide(report(node("n1", verdict, *results)), f"n1|drained|{reason}\n",
                       resume_passed=True)["n1"]
            assert d.action == "leave" and d.argvs == (), (verdict, d)
            assert reason in d.why


def test_a_node_an_earlier_run_drained_is_held_for_both_runs():
    d = decide(report(node("n1", "REJECT", PSU_FAIL)), f"n1|drained|{OLDER}\n")["n1"]
    assert d.action == "drain" and d.reason == f"rackgate/drain[{EARLIER},{RUN}]: {PSU}"
    assert d.argvs == (("scontrol", "update", "nodename=n1", "state=drain",
                        f"reason={d.reason}"),)


def test_a_node_held_for_two_runs_is_released_by_this_one_and_stays_drained():
    both = f"rackgate/drain[{EARLIER},{RUN}]: {PSU}"
    d = decide(report(node("n1")), f"n1|drained|{both}\n", resume_passed=True)["n1"]
    assert d.action == "release" and d.reason is not None
    assert d.reason.startswith(f"rackgate/drain[{EARLIER}]: {RUN} passes it; still rejected")
    assert d.argvs[0][3] == "state=drain"


def test_a_reason_that_cannot_name_one_more_run_is_a_conflict_and_changes_nothing():
    runs = ",".join(f"2026110{i}T000000Z-profile-with-a-long-name" for i in range(3))
    d = decide(report(node("n1", "REJECT", PSU_FAIL)),
               f"n1|drained|rackgate/drain[{runs}]: x\n")["n1"]
    assert d.action == "conflict" and d.argvs == () and "characters for why" in d.why


def test_an_older_rackgates_drain_of_this_run_in_its_records_is_this_runs():
    """Before the marker, rackgate wrote "rackgate <run>: ..."; such a drain is this run's
    when its records hold exactly that reason (older actions.json: the decision's why)."""
    legacy = f"rackgate {RUN}: {PSU}"
    records = Records({"n1": frozenset({legacy})})
    d = decide(report(node("n1")), f"n1|drained|{legacy}\n", True, records)["n1"]
    assert d.action == "resume"
    d = decide(report(node("n1", "REJECT", PSU_FAIL)), f"n1|drained|{legacy}\n", False,
               records)["n1"]
    assert d.action == "drain" and d.reason == OURS  # rewritten with the marker


def test_draining_again_with_the_same_reason_is_nothing_to_do():
    d = decide(report(node("n1", "REJECT", PSU_FAIL)), f"n1|drained|{OURS}\n")["n1"]
    assert d.action == "none" and d.argvs == ()
    both = f"rackgate/drain[{EARLIER},{RUN}]: {PSU}"
    d = decide(report(node("n1", "REJECT", PSU_FAIL)), f"n1|drained|{both}\n")["n1"]
    assert d.action == "none" and d.argvs == ()


def test_a_node_slurm_does_not_list_is_unknown_and_nothing_is_run_for_it():
    ds = decide(report(node("n1", "REJECT", PSU_FAIL), node("n2")), "n2|idle|none\n")
    assert ds["n1"].action == "unknown" and ds["n1"].argvs == ()


def test_a_node_in_two_partitions_is_judged_once():
    states = parse_states("n1|idle|none\nn1|idle|none\n")
    assert list(states) == ["n1"]


def test_an_unparseable_sinfo_line_is_refused_naming_it():
    with pytest.raises(ValueError, match=re.escape("'n1 idle' is not <node>|<state>|<reason>")):
        parse_states("n1 idle\n")


def test_the_reason_is_bounded_printable_and_counts_the_other_failures():
    long = {"check": "fio.seq_read", "status": "fail", "message": "x\x1b[31m " + "y" * 400}
    gpu = {"check": "gpu.health", "status": "error", "message": "no GPU"}
    reason = slurm.reason([RUN], slurm.message_for(node("n1", "REJECT", long, gpu)))
    assert len(reason) <= slurm.REASON_MAX and reason.endswith("... (+1 more)")
    assert reason.startswith(f"rackgate/drain[{RUN}]: fio.seq_read: x?[31m y")
    assert slurm.claims_of(reason) == (RUN,)


def test_a_node_rejected_with_nothing_judged_is_drained_naming_its_verdict_reason():
    n = {"name": "n1", "verdict": "REJECT", "reasons": ["no check was judged"],
         "results": []}
    assert slurm.message_for(n) == "verdict: no check was judged"


@pytest.mark.parametrize(("doc", "field"), [
    ({"schema": "rackgate.report/2", "run": {"run_id": RUN}, "nodes": []}, "schema"),
    (report(node("n1"), run_id="r1; rm -rf /"), "run.run_id"),
    (report(), "nodes lists no node"),
    (report(node("n1 n2")), "nodes[0].name"),
    (report(node("n1", "MAYBE")), "nodes[0].verdict"),
    (report(node("n1"), node("n1")), "lists n1 twice"),
    (report(node("n1", "ACCEPT", PSU_FAIL)), "inconsistent"),
    (report({"name": "n1", "verdict": "ACCEPT", "results": [{"status": "pass"}]}),
     "nodes[0].results"),
])
def test_a_report_drain_cannot_trust_is_refused_naming_the_field(doc, field):
    with pytest.raises(ReportError, match=re.escape(field)):
        report_nodes(doc, "runs/x/report.json")


def test_kubernetes_rejects_taint_label_and_annotate_and_accepts_are_labelled():
    nodes = [ReportNode("dgx01", "REJECT", PSU), ReportNode("dgx02", "ACCEPT", "")]
    states = {n: TaintState(n, False, "", "") for n in ("dgx01", "dgx02")}
    ds = decide_kubernetes(nodes, RUN, states, Records(), resume_passed=False,
                           kubeconfig="/etc/rg/kube.conf")
    k = ("kubectl", "--kubeconfig", "/etc/rg/kube.conf")
    assert ds[0].argvs == (
        (*k, "taint", "nodes", "dgx01", f"rackgate/rejected={RUN}:NoSchedule"),
        (*k, "annotate", "nodes", "dgx01", f"rackgate/reason={OURS}", "--overwrite"),
        (*k, "label", "nodes", "dgx01", "rackgate/verdict=REJECT", f"rackgate/run={RUN}",
         "--overwrite"))
    assert ds[1].argvs == ((*k, "label", "nodes", "dgx02", "rackgate/verdict=ACCEPT",
                            f"rackgate/run={RUN}", "--overwrite"),)


def test_kubernetes_removes_only_the_taint_this_run_set_and_its_records_show():
    nodes = [ReportNode(n, "ACCEPT", "") for n in ("dgx01", "dgx02", "dgx03", "dgx04")]
    states = {"dgx01": TaintState("dgx01", True, RUN, OURS),
              "dgx02": TaintState("dgx02", True, EARLIER, OLDER),
              "dgx03": TaintState("dgx03", True, "ops", "rackgate maint: RMA 4711"),
              "dgx04": TaintState("dgx04", True, EARLIER,
                                  f"rackgate/drain[{EARLIER},{RUN}]: {PSU}")}
    records = Records({n: frozenset({OURS}) for n in ("dgx01", "dgx04")})
    ds = {d.node: d for d in decide_kubernetes(nodes, RUN, states, records,
                                               resume_passed=True, kubeconfig=None)}
    assert {n: d.action for n, d in ds.items()} == {
        "dgx01": "resume", "dgx02": "leave", "dgx03": "leave", "dgx04": "release"}
    assert ds["dgx01"].argvs[:2] == (
        ("kubectl", "taint", "nodes", "dgx01", "rackgate/rejected:NoSchedule-"),
        ("kubectl", "annotate", "nodes", "dgx01", "rackgate/reason-"))
    assert [a[1] for a in ds["dgx04"].argvs] == ["annotate", "label"]  # EARLIER's taint stays
    assert all(a[1] == "label" for n in ("dgx02", "dgx03") for a in ds[n].argvs)
    unread = decide_kubernetes(nodes[:1], RUN, {"dgx01": "connection refused"}, records,
                               resume_passed=True, kubeconfig=None)
    assert unread[0].action == "unknown" and unread[0].argvs == ()


@pytest.mark.parametrize(("call", "message"), [
    (lambda: kubernetes.label_argv("DGX01", "ACCEPT", RUN, None), "lower-case RFC 1123"),
    (lambda: kubernetes.taint_argv("dgx01", "r" * 64, None), "label value"),
    (lambda: kubernetes.state_argv("dgx01", "kube.conf; id"), "kubeconfig path"),
])
def test_kubernetes_names_that_kubectl_would_misread_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def stored_run(tmp_path: Path, doc: dict[str, Any], launch_host: str | None) -> Path:
    """A judged run of ``doc``'s nodes; its inventory (no slurm_controller group) lists
    them in group compute."""
    names = [n["name"] for n in doc["nodes"]]
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"compute": {
        "hosts": {n: None for n in names}}}}}))
    run_dir = write_run(tmp_path / RUN, load_profile("demo"), ["redundancy.psu_ipmi"], names,
                        launch_host=launch_host)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["inventory"] = [str(inventory)]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "report.json").write_text(json.dumps(doc))
    return run_dir


def test_cli_prints_the_kubernetes_commands_and_applies_nothing_without_a_kubeconfig(
        tmp_path, capsys):
    run_dir = stored_run(tmp_path, report(node("dgx01", "REJECT", PSU_FAIL), node("dgx02")),
                         None)
    assert main(["drain", str(run_dir), "--scheduler", "kubernetes"]) == 0
    out = capsys.readouterr().out
    assert f"kubectl taint nodes dgx01 rackgate/rejected={RUN}:NoSchedule\n" in out
    assert "kubectl annotate nodes dgx01 'rackgate/reason=" in out
    assert "Not applied: give --kubeconfig FILE" in out
    assert not (run_dir / "scheduler").exists()


def test_cli_refuses_a_run_without_a_report_or_without_a_launch_host(tmp_path, capsys):
    run_dir = stored_run(tmp_path, report(node("n1", "REJECT", PSU_FAIL)), None)
    assert main(["drain", str(run_dir)]) == 2
    assert "no SLURM launch host" in capsys.readouterr().err
    (run_dir / "report.json").unlink()
    assert main(["drain", str(run_dir), "--dry-run"]) == 2
    assert "has no report.json: judge the run first" in capsys.readouterr().err


def test_cli_refuses_a_report_of_another_run(tmp_path, capsys):
    run_dir = stored_run(tmp_path, report(node("n1"), run_id="20261101T000000Z-demo"), "head")
    assert main(["drain", str(run_dir)]) == 2
    assert "is not this run's" in capsys.readouterr().err


def test_cli_refuses_a_kubeconfig_without_kubernetes_and_no_forks(tmp_path, capsys):
    run_dir = stored_run(tmp_path, report(node("n1")), "head")
    assert main(["drain", str(run_dir), "--kubeconfig", "/etc/k.conf"]) == 2
    assert "--kubeconfig is for --scheduler kubernetes" in capsys.readouterr().err
    assert main(["drain", str(run_dir), "--forks", "0"]) == 2
    assert "--forks 0 is not at least 1" in capsys.readouterr().err


def test_this_runs_records_are_its_planned_and_done_drains_and_nothing_else(tmp_path):
    """What --resume-passed trusts: the drains this run's records in its run directory
    hold, for this scheduler (planned.json: written before the commands ran; actions.json,
    whose older form had the reason as "why"); another run's or scheduler's record counts
    for nothing, and one that cannot be read is named."""
    from rackgate.scheduler.apply import read_records
    from rackgate.store.evidence import write_json

    legacy = f"rackgate {RUN}: {PSU}"
    base = tmp_path / "scheduler"
    write_json(base / "20261202T040000Z-drain" / "actions.json", {
        "run_id": RUN, "scheduler": "slurm", "actions": [
            {"node": "n1", "action": "drain", "why": legacy},
            {"node": "n2", "action": "resume", "why": "passes"}]})
    write_json(base / "20261202T050000Z-drain" / "planned.json", {
        "run_id": RUN, "scheduler": "slurm", "actions": [
            {"node": "n3", "action": "drain", "why": OURS, "reason": OURS}]})
    write_json(base / "20261202T060000Z-drain" / "actions.json", {
        "run_id": EARLIER, "scheduler": "slurm", "actions": [
            {"node": "n4", "action": "drain", "reason": OURS}]})
    write_json(base / "20261202T070000Z-drain" / "actions.json", {
        "run_id": RUN, "scheduler": "kubernetes", "actions": [
            {"node": "n5", "action": "drain", "reason": OURS}]})
    (base / "20261202T080000Z-drain").mkdir()
    (base / "20261202T080000Z-drain" / "actions.json").write_text("[" * 100_000)
    records = read_records(tmp_path, RUN, "slurm")
    assert dict(records.drained) == {"n1": {legacy}, "n3": {OURS}}
    assert records.unreadable == (str(base / "20261202T080000Z-drain" / "actions.json"),)
