"""End to end on the podman demo rack: the rack day's retest loop with the FULL demo profile
(issue 30, item 2). A PSU failure on rg-node01 -> validate REJECTs it -> ``rackgate drain``
drains it in the demo rack's real slurmctld -> heal -> ``validate --retest`` resumes
rg-node01 for the job across the nodes (mpi.allreduce runs on both again) and ACCEPTs it
-> ``drain --resume-passed`` has nothing left to do: rg-node01 ends ACCEPTed and idle, and
the last report tells the story since revision 1 (every revision's report kept).

Needs the demo rack (`make e2e`), as tests/e2e/test_demo_rack.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from demo_rack import DEMO, NODES, ROOT, rackgate, require_slurm_idle, run, slurm_state

pytestmark = pytest.mark.e2e


def report_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    m = re.search(r"^Report \(JSON\): (\S+)$", proc.stdout, re.M)
    assert m, f"no report path printed:\n{proc.stdout}\n{proc.stderr}"
    doc: dict[str, Any] = json.loads((ROOT / m.group(1)).read_text())
    return doc


def by_node(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in doc["nodes"]}


def result(node: dict[str, Any], check: str) -> dict[str, Any]:
    (res,) = [r for r in node["results"] if r["check"] == check]
    return res


def slurm_reasons() -> dict[str, str]:
    """``sinfo -R`` on rg-head: each node with a reason, and the reason in full."""
    proc = run("podman", "exec", "rg-head", "sinfo", "-R", "--noheader", "-o", "%N|%E")
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("|", 1) for line in proc.stdout.splitlines() if "|" in line)


def test_rackday_2_drain_heal_retest_resume_with_the_full_demo_profile(provisioned_rack):
    require_slurm_idle(NODES)
    try:
        inject = rackgate("demo", "inject", "psu-failure", "-i", DEMO)
        assert inject.returncode == 0, inject.stdout + inject.stderr
        faulty = rackgate("validate", "-i", DEMO, "--profile", "demo")  # every check
        assert faulty.returncode == 1, faulty.stdout[-4000:] + faulty.stderr[-2000:]
        doc = report_of(faulty)
        run_dir, run_id = Path(doc["run"]["run_dir"]), doc["run"]["run_id"]
        assert {n: v["verdict"] for n, v in by_node(doc).items()} == {
            "rg-node01": "REJECT", "rg-node02": "ACCEPT"}

        drained = rackgate("drain", str(run_dir))
        assert drained.returncode == 0, drained.stdout + drained.stderr
        reason = slurm_reasons()["rg-node01"]
        assert reason.startswith(f"rackgate/drain[{run_id}]: redundancy.psu_ipmi: PSU2 "), reason
        assert slurm_state("rg-node01") == "drained"

        heal = rackgate("demo", "heal", "-i", DEMO)
        assert heal.returncode == 0, heal.stdout + heal.stderr
        retest = rackgate("validate", "--retest", str(run_dir))
        assert retest.returncode == 0, retest.stdout[-4000:] + retest.stderr[-2000:]
        assert "rg-node01: this run drained it" in retest.stdout, retest.stdout
        assert "rg-node01: passes the retest: stays in service" in retest.stdout
        again = report_of(retest)
        assert again["revision"] == 2
        nodes = by_node(again)
        assert {n: v["verdict"] for n, v in nodes.items()} == dict.fromkeys(NODES, "ACCEPT")
        for node in NODES:  # the job across both ran again, rg-node01 in it
            job = result(nodes[node], "mpi.allreduce")
            assert job["status"] == "pass" and job["attempt"] == 2, job
        assert slurm_state("rg-node01") == "idle" and "rg-node01" not in slurm_reasons()

        resumed = rackgate("drain", str(run_dir), "--resume-passed")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "WARNING" not in resumed.stdout, resumed.stdout
        assert re.search(r"^rg-node01 +ACCEPT +idle +nothing to do: passes", resumed.stdout,
                         re.M), resumed.stdout
        assert slurm_state("rg-node01") == "idle" and "rg-node01" not in slurm_reasons()

        first = json.loads((run_dir / "report.rev1.json").read_text())
        assert first["revision"] == 1 and by_node(first)["rg-node01"]["verdict"] == "REJECT"
        assert (run_dir / "report.rev2.html").is_file()
        final = json.loads((run_dir / "report.json").read_text())
        assert (final["diff"]["a"]["revision"], final["diff"]["b"]["revision"]) == (1, 2)
        assert ("rg-node01", "redundancy.psu_ipmi", "fail", "pass") in [
            (c["node_a"], c["check"], c["status_a"], c["status_b"])
            for c in final["diff"]["changes"]]
        assert (f"Changes in run {run_id} from revision 1 to revision 2"
                in (run_dir / "report.html").read_text())
    finally:
        rackgate("demo", "heal", "-i", DEMO)
        for node in NODES:
            run("podman", "exec", "rg-head", "scontrol", "update", f"nodename={node}",
                "state=resume")
    require_slurm_idle(NODES)
