"""A failure stays with the node that failed (issue 13, point 1).

A 32-node DGX H100 run is built from the project's fixtures (nvidia-smi XML, ibstat, the
perftest pair outputs composed into the pairwise script's format, the readiness guard's
line for the NCCL job), with one node, dgx025, unreachable. Judged offline, the 31 others
are accepted on their own evidence; dgx025 is rejected naming why. Both forms of a stored
run are judged: one collected before rackgate left unreachable nodes out of the jobs
across the nodes (the jobs included dgx025 and failed or missed its pairs), and one
collected since (the jobs ran without it; the manifest's ``launched`` says so).
"""

from __future__ import annotations

import json
from pathlib import Path

from checks.fabric.test_pairwise import HEALTHY, perftest, run_output
from stored_runs import write_run

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.shared.pairs import round_robin
from rackgate.model import Status
from rackgate.placement import ACROSS_NODES, JudgeJob
from rackgate.run import judge_run
from rackgate.store.evidence import EvidenceStore
from rackgate.store.manifest import Launched

FIX = Path(__file__).resolve().parents[1] / "fixtures"
NODES = [f"dgx{i:03d}" for i in range(1, 33)]
DEAD = "dgx025"
PROFILE = load_profile("dgx-h100")
ON_NODE = {"gpu.health": (FIX / "gpu" / "h100-8gpu-healthy.xml").read_text(),
           "fabric.ports": (FIX / "infiniband" / "ibstat-8x-ndr-healthy.txt").read_text()}
ACROSS = ["fabric.pairwise_bw", "nccl.fabric_all_reduce"]
# fabric.ports' evidence is its port probe's output: the header (ibstat answered), then ibstat's
PROBE = {"fabric.ports": '### rackgate-ib-ports {"argv": ["ibstat"], "path": "/usr/sbin/ibstat", '
                         '"not_found": []}\n'}
UNREACHABLE = "Failed to connect to the host via ssh: ssh: connect to host 192.0.2.125 port 22: " \
              "No route to host"
NOT_READY = ("rackgate-slurm-ready: SLURM nodes not ready, nothing was queued: "
             f"{DEAD} down* (Not responding)\n")


def _body(text: str) -> str:
    """A fixture's content without its header (nvidia-smi XML and ibstat have one)."""
    return text.partition("\n# ---\n")[2] if "\n# ---\n" in text else text


def pairwise(nodes: list[str], dead: str | None) -> str:
    """The pairwise script's output over ``nodes``: every pair healthy, except that a
    client or server on ``dead`` could not connect (rc 1)."""
    refused = perftest("ib_write_bw-client-couldnt-connect.txt")
    pairs = {p: (refused if dead in p else HEALTHY) for rnd in round_robin(nodes) for p in rnd}
    rc = {p: 1 for p in pairs if dead in p}
    return run_output(nodes, pairs, rc=rc)


def stored(tmp_path: Path, *, left_out: bool) -> Path:
    """The run; ``left_out``: collected since the jobs leave unreachable nodes out."""
    checks = [*ON_NODE, *ACROSS]
    run = write_run(tmp_path / "runs" / "dgx-32", PROFILE, checks, NODES, launch_host="head01",
                    evidence={(n, c): PROBE.get(c, "") + _body(t) for n in NODES if n != DEAD
                              for c, t in ON_NODE.items()},
                    argv=("timeout", "x"), duration_s=5.0)
    store = EvidenceStore(run)
    for check in ON_NODE:
        store.write(DEAD, check, "", argv=("timeout", "x"), outcome="unreachable", rc=None,
                    started=None, ended=None, duration_s=None, stderr="", message=UNREACHABLE)
    if left_out:
        ran = [n for n in NODES if n != DEAD]
        store.write("head01", "fabric.pairwise_bw", pairwise(ran, None), argv=("timeout", "x"),
                    outcome="completed", rc=0, started=None, ended=None, duration_s=600.0,
                    stderr="", message="")
        manifest = json.loads((run / "manifest.json").read_text())
        why = f"{DEAD} unreachable: {UNREACHABLE}"
        manifest["launched"] = {c: Launched(nodes=tuple(ran), left_out={DEAD: why}).to_doc()
                                for c in ACROSS}
        (run / "manifest.json").write_text(json.dumps(manifest))
        # the NCCL job across the 31 is left without evidence here: it must then be an
        # error for each of them, never a pass (below)
    else:
        # the sequencer exits 0 whatever its jobs did: each pair's rc is in its section
        store.write("head01", "fabric.pairwise_bw", pairwise(NODES, DEAD),
                    argv=("timeout", "x"), outcome="completed", rc=0, started=None,
                    ended=None, duration_s=600.0, stderr="", message="")
        store.write("head01", "nccl.fabric_all_reduce", "", argv=("timeout", "x"),
                    outcome="completed", rc=3, started=None, ended=None, duration_s=1.0,
                    stderr=NOT_READY, message="non-zero return code")
    return run


def by_node(run: Path, profile_doc: dict | None = None) -> dict[str, dict]:
    doc = json.loads(judge_run(run).report_json.read_text())
    return {n["name"]: n for n in doc["nodes"]}


def result(node: dict, check: str) -> dict:
    (r,) = [r for r in node["results"] if r["check"] == check]
    return r


def test_a_run_collected_with_the_dead_node_in_its_jobs_accepts_the_31_others(
        tmp_path: Path) -> None:
    nodes = by_node(stored(tmp_path, left_out=False))
    dead = nodes.pop(DEAD)
    assert dead["verdict"] == "REJECT"
    assert result(dead, "gpu.health")["message"].startswith(
        f"nothing collected: {DEAD} did not answer: there is no route to it")
    pairs = result(dead, "fabric.pairwise_bw")
    assert pairs["status"] == "error" and "is it up and reachable" in pairs["message"]
    nccl = result(dead, "nccl.fabric_all_reduce")
    assert nccl["status"] == "error"
    assert f"{DEAD} broke the nccl.fabric_all_reduce job" in nccl["message"]
    assert "down* (Not responding)" in nccl["message"]
    for name, node in nodes.items():
        assert node["verdict"] == "ACCEPT", (name, node["reasons"])
        pair = result(node, "fabric.pairwise_bw")
        assert pair["status"] == "warn" and f"partner {DEAD} not measured" in pair["message"]
        job = result(node, "nccl.fabric_all_reduce")
        assert job["status"] == "warn" and job["message"].startswith("not measured") \
            and DEAD in job["message"]


def test_a_run_whose_jobs_left_the_dead_node_out_judges_the_others_on_them(
        tmp_path: Path) -> None:
    nodes = by_node(stored(tmp_path, left_out=True))
    dead = nodes.pop(DEAD)
    assert dead["verdict"] == "REJECT"
    for check in ACROSS:
        r = result(dead, check)
        assert r["status"] == "error" and r["message"].startswith(
            f"left out of the job across the nodes: {DEAD} unreachable")
    for node in nodes.values():
        pair = result(node, "fabric.pairwise_bw")
        assert pair["status"] == "pass" and f"run without {DEAD}" in pair["message"]
        # its NCCL job left no evidence: an error, never a pass through no fault of the node
        assert result(node, "nccl.fabric_all_reduce")["status"] == "error"
        assert node["verdict"] == "REJECT"


def test_with_no_partner_left_the_survivor_warns_and_the_absent_node_errs() -> None:
    check = REGISTRY["mpi.allreduce"]
    demo = load_profile("demo")
    hosts = ("rg-node01", "rg-node02")
    why = "rg-node02 unreachable: Failed to connect to the host via ssh"
    job = JudgeJob(hosts, ("mpi.allreduce",), {h: demo for h in hosts},
                   {h: demo for h in hosts}, "rg-head",
                   {"mpi.allreduce": Launched(nodes=("rg-node01",),
                                             left_out={"rg-node02": why})})

    class NoEvidence:
        def read(self, host: str, check: str) -> tuple:
            raise AssertionError("nothing ran: nothing is read")

    judged = {r.node: r for r in ACROSS_NODES.judge(check, job, NoEvidence(), hosts).results}
    assert judged["rg-node02"].status is Status.ERROR and why in judged["rg-node02"].message
    assert judged["rg-node01"].status is Status.WARN
    assert judged["rg-node01"].message.startswith(f"not measured: partner {why}")


def test_a_site_without_a_launch_path_skips_multi_node_checks_with_its_reason() -> None:
    check = REGISTRY["mpi.allreduce"]
    demo = load_profile("demo")
    hosts = ("n1", "n2")
    job = JudgeJob(hosts, ("mpi.allreduce",), {h: demo for h in hosts}, {h: demo for h in hosts},
                   None, no_launch_reason="Kubernetes site")
    results = ACROSS_NODES.judge(check, job, EvidenceStore(Path("/nonexistent")), hosts).results
    assert {r.status for r in results} == {Status.SKIP}
    assert all("Kubernetes site" in r.message for r in results)
    # without the site's word for it, a missing launch host stays an error
    job = JudgeJob(hosts, ("mpi.allreduce",), {h: demo for h in hosts}, {h: demo for h in hosts},
                   None)
    results = ACROSS_NODES.judge(check, job, EvidenceStore(Path("/nonexistent")), hosts).results
    assert {r.status for r in results} == {Status.ERROR}
