"""Issue 19 end to end: collecting the demo rack through SLURM gives what Ansible gives.

``rackgate validate --via slurm`` runs every node's own checks as one srun job, launched on
rg-head (the demo rack's real slurmctld) behind rackgate's readiness guard, each task the
node collector, srun's labelled output written to a file on rg-head and fetched; ``--via
ansible`` runs the same collector once per node over Ansible, its records fetched as a
file too.
Both runs of the demo profile must give the same verdicts, the same statuses and the
same evidence files with the same fields. A node SLURM reports drained is not run, with
SLURM's own state and reason in its evidence, and the other node is still measured.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from demo_rack import DEMO, NODES, ROOT, accepted_both, rackgate, require_slurm_idle, run

from rackgate.commands.task import check_argv

pytestmark = pytest.mark.e2e


def report_of(proc: subprocess.CompletedProcess[str]) -> dict:
    m = re.search(r"^Report \(JSON\): (\S+)$", proc.stdout, re.M)
    assert m, f"no report path printed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads((ROOT / m.group(1)).read_text())


def statuses(doc: dict) -> dict[tuple[str, str], str]:
    return {(n["name"], r["check"]): r["status"] for n in doc["nodes"] for r in n["results"]}


def records(run_dir: Path) -> dict[str, dict]:
    return {str(p.relative_to(run_dir)): json.loads(p.read_text())
            for p in sorted((run_dir / "evidence").rglob("*.json"))}


def own_argv(argv: list[str]) -> list[str]:
    """The check's own command, with the credential file's private directory (new for
    every collection) left out."""
    return [re.sub(r"/rackgate-runner-[^/]+/", "/rackgate-runner-*/", a) for a in check_argv(argv)]


def collection_jobs() -> list[str]:
    """The collection jobs slurmctld still lists (finished jobs stay MinJobAge, 300 s)."""
    out = run("podman", "exec", "rg-head", "scontrol", "show", "job", "--oneliner").stdout
    return [line for line in out.splitlines() if "JobName=rackgate-collect-" in line]


def test_via_slurm_gives_the_verdicts_and_evidence_of_via_ansible(provisioned_rack):
    require_slurm_idle(NODES)
    jobs_before = collection_jobs()
    by_ansible = rackgate("validate", "-i", DEMO, "--profile", "demo", "--via", "ansible")
    assert by_ansible.returncode == 0, by_ansible.stdout + by_ansible.stderr
    # Ansible did not go through SLURM (earlier jobs may have left the list meanwhile)
    assert not set(collection_jobs()) - set(jobs_before)
    require_slurm_idle(NODES)
    by_slurm = rackgate("validate", "-i", DEMO, "--profile", "demo", "--via", "slurm")
    assert by_slurm.returncode == 0, by_slurm.stdout + by_slurm.stderr
    a, s = report_of(by_ansible), report_of(by_slurm)
    assert accepted_both(by_slurm.stdout), by_slurm.stdout[-3000:]

    # the job slurmctld ran: one task on each compute node
    (job,) = [j for j in collection_jobs() if j not in jobs_before]
    assert "NodeList=rg-node[01-02]" in job and "NumTasks=2" in job, job
    assert "JobState=COMPLETED" in job, job

    assert a["verdict"] == s["verdict"]
    assert [(n["name"], n["verdict"]) for n in a["nodes"]] == \
        [(n["name"], n["verdict"]) for n in s["nodes"]]
    assert statuses(a) == statuses(s)
    node_checks = {c for (_, c), st in statuses(s).items() if st != "skip"}
    assert {"node.identity", "fio.seq_read"} <= node_checks

    ra, rs = records(Path(a["run"]["run_dir"])), records(Path(s["run"]["run_dir"]))
    assert sorted(ra) == sorted(rs)  # the same evidence files
    for path, rec in rs.items():
        other = ra[path]
        assert sorted(rec) == sorted(other), path
        assert (rec["outcome"], rec["rc"]) == (other["outcome"], other["rc"]), path
        assert own_argv(rec["argv"]) == own_argv(other["argv"]), path
        assert (rec["stdout_bytes"] > 0) == (other["stdout_bytes"] > 0), path
        assert rec["duration_s"] is not None and rec["started"] and rec["ended"], path
    # the same bytes where the command's output does not change between runs
    for node in NODES:
        ident = Path(f"evidence/{node}/node.identity.out")
        assert (Path(s["run"]["run_dir"]) / ident).read_text() == \
            (Path(a["run"]["run_dir"]) / ident).read_text()
    manifest = json.loads((Path(s["run"]["run_dir"]) / "manifest.json").read_text())
    assert manifest["revisions"][0]["via"] == "slurm"
    # the records came back as files (issue 28): their private directories are gone
    for host in ("rg-head", *NODES):
        left = run("podman", "exec", host, "sh", "-c",
                   "ls -d /var/tmp/rackgate-records-* 2>/dev/null; true").stdout
        assert left.strip() == "", f"{host} keeps {left}"


def test_a_node_slurm_reports_drained_is_not_run_with_slurms_reason(provisioned_rack):
    require_slurm_idle(NODES)
    why = "ops: e2e via slurm, a bad DIMM"
    run("podman", "exec", "rg-head", "scontrol", "update", "nodename=rg-node02",
        "state=drain", f"reason={why}")
    try:
        proc = rackgate("validate", "-i", DEMO, "--profile", "demo", "--via", "slurm",
                        "--checks", "node.identity,fio.seq_read", "--no-plan")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        doc = report_of(proc)
        got = statuses(doc)
        assert got[("rg-node01", "node.identity")] in ("pass", "warn")
        assert got[("rg-node01", "fio.seq_read")] == "pass"
        for check in ("node.identity", "fio.seq_read"):
            assert got[("rg-node02", check)] == "error"
            (res,) = [r for n in doc["nodes"] if n["name"] == "rg-node02"
                      for r in n["results"] if r["check"] == check]
            assert res["message"] == (f"command not run: SLURM did not run it: rg-node02 is "
                                      f"drained ({why})"), res["message"]
        verdicts = {n["name"]: n["verdict"] for n in doc["nodes"]}
        assert verdicts == {"rg-node01": "ACCEPT", "rg-node02": "REJECT"}
    finally:
        run("podman", "exec", "rg-head", "scontrol", "update", "nodename=rg-node02",
            "state=resume")
    require_slurm_idle(NODES)
