"""fabric.pairwise_bw: the schedule script, its output parser, per-node judging of the
matrix, and the runner putting the matrix into the report (no fabric here: the pair
outputs are the perftest fixtures, composed into the script's output format)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from stored_runs import write_run

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.fabric.pairwise import (
    PAIR_TASK,
    PairwiseParams,
    judge_nodes,
    pairwise_command,
    schedule_argv,
)
from rackgate.checks.shared.base import CommandError
from rackgate.checks.shared.pairs import round_robin
from rackgate.cli.main import main
from rackgate.commands.launch import Across
from rackgate.parsers import ParseError
from rackgate.parsers.pairwise import parse_pairwise
from rackgate.reports.verify import verify_report
from rackgate.run import judge_run

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "perftest"
CHECK = REGISTRY["fabric.pairwise_bw"]
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]


def perftest(name: str) -> str:
    raw = (FIX / name).read_text(encoding="utf-8")
    return raw.partition("\n# ---\n")[2]


def run_output(nodes: list[str], client_text: dict[tuple[str, str], str],
               rc: dict[tuple[str, str], int] | None = None, end: bool = True) -> str:
    """The pairwise script's output, as srun --label prints each pair's two tasks."""
    rc = rc or {}
    schedule = round_robin(nodes)
    out = [f"### rackgate-pairwise nodes={','.join(nodes)} rounds={len(schedule)}"]
    for r, pairs in enumerate(schedule, start=1):
        for a, b in pairs:
            out.append(f"### pair round={r} server={a} client={b} rc={rc.get((a, b), 0)}")
            out.append("0: ************************************")
            out.append("0: * Waiting for client to connect... *")
            out.append("1: rackgate-role=client")
            out += [f"1: {line}" for line in client_text[(a, b)].splitlines()]
    if end:
        out.append("### end")
    return "\n".join(out) + "\n"


def as_run_of(text: str, size: int = 1 << 20, device: str = "mlx5_0") -> str:
    """A 64 KiB perftest fixture derived into the run the check's command asks for (one
    size, -s, on one device, -d): the result row's size and the Device field relabelled,
    the bandwidths kept (64 KiB writes already run at the link's plateau)."""
    text = re.sub(r"(?m)^(\s*)65536(\s)", rf"\g<1>{size}\2", text)
    return re.sub(r"Device(\s+): mlx5_\d+", rf"Device\1: {device}", text)


# Each pair's client runs one size on one device: PARAMS is the dgx-h100 profile's
# (device mlx5_0, the default 1 MiB), and so is every pair output below.
PARAMS = PairwiseParams(device="mlx5_0")
HEALTHY = as_run_of(perftest("ib_write_bw-ndr400-64k-healthy.txt"))
DEGRADED = as_run_of(perftest("ib_write_bw-ndr-port-at-hdr-degraded.txt"))


def outputs(bad: str | None = None) -> dict[tuple[str, str], str]:
    return {p: (DEGRADED if bad in p else HEALTHY)
            for rnd in round_robin(NODES) for p in rnd}


def test_the_schedule_runs_each_round_in_parallel_from_argv_lists() -> None:
    argv = schedule_argv(PairwiseParams(device="mlx5_3"), NODES)
    assert argv[:2] == ["python3", "-c"] and argv.count("--round") == 3  # N-1 rounds, N = 4
    jobs = [i for i, word in enumerate(argv) if word == "--job"]
    assert len(jobs) == 6  # every pair once
    pairs = []
    for start in jobs:
        job = argv[start:start + 3 + int(argv[start + 2])]
        assert job[3] == "srun" and argv[start + 3 + int(argv[start + 2]):][:1] in (
            [], ["--job"], ["--round"])
        assert "--mpi=none" in job and "--immediate=60" in job and "--ntasks-per-node=1" in job
        nodelist = next(w for w in job if w.startswith("--nodelist="))
        server, client = nodelist.removeprefix("--nodelist=").split(",")
        assert job[1] == f"### pair round={job[1].split()[2][6:]} server={server} client={client}"
        # the constant task script, then the server's name and the perftest argv as data
        at = job.index("bash")
        assert job[at:at + 5] == ["bash", "-c", PAIR_TASK, "rackgate-pair", server]
        assert job[at + 5:] == ["ib_write_bw", "-d", "mlx5_3", "-i", "1", "-s", "1048576",
                                "-D", "5", "-p", "18515", "--report_gbits", "-F"]
        pairs.append(tuple(sorted((server, client))))
    assert sorted(pairs) == sorted(tuple(sorted(p)) for rnd in round_robin(NODES) for p in rnd)


def test_one_node_cannot_be_paired() -> None:
    with pytest.raises(CommandError, match="at least two nodes"):
        pairwise_command(PairwiseParams(), {}, Across(("gpu01",)))


def test_parser_reads_every_pair_and_the_clients_text() -> None:
    run = parse_pairwise(run_output(NODES, outputs()))
    assert run.nodes == tuple(NODES) and run.rounds == 3 and len(run.pairs) == 6
    assert all(p.rc == 0 and "BW average" in p.client_text for p in run.pairs)
    assert "Waiting for client" not in run.pairs[0].client_text


def test_parser_refuses_a_run_cut_short() -> None:
    with pytest.raises(ParseError, match="no '### end' line after 5 pair"):
        parse_pairwise(run_output(NODES, outputs(), end=False))
    with pytest.raises(ParseError, match="did not run"):
        parse_pairwise("srun: error: Unable to allocate resources\n")


def test_one_bad_port_is_named_and_its_partners_only_warn() -> None:
    hw = load_profile("dgx-h100").model.hardware
    run = parse_pairwise(run_output(NODES, outputs(bad="gpu03")))
    results, matrix = judge_nodes(run, PARAMS, {}, hw, NODES, "evidence/x.out")
    by = {r.node: r for r in results}
    assert by["gpu03"].status.label == "fail"
    assert "likely culprit" in by["gpu03"].message
    assert {by[n].status.label for n in ("gpu01", "gpu02", "gpu04")} == {"warn"}
    assert matrix["culprit"] == "gpu03" and matrix["line_rate_gbps"] == 400
    assert len(matrix["weak"]) == 3
    assert all("gpu03" in (w["a"], w["b"]) for w in matrix["weak"])


def test_a_failed_pair_job_is_an_error_never_a_pass() -> None:
    hw = load_profile("dgx-h100").model.hardware
    first = round_robin(NODES)[0][0]
    run = parse_pairwise(run_output(NODES, outputs(), rc={first: 1}))
    results, matrix = judge_nodes(run, PARAMS, {}, hw, NODES, "evidence/x.out")
    by = {r.node: r for r in results}
    for node in first:
        assert by[node].status.label == "error"
    missing = [p for p in matrix["pairs"] if p["status"] == "error"]
    assert len(missing) == 1 and "rc 1" in missing[0]["message"]


def stored_run(tmp_path: Path, stdout: str) -> Path:
    return write_run(tmp_path / "runs" / "pairs-run", load_profile("dgx-h100"),
                     ["fabric.pairwise_bw"], NODES, launch_host="head01",
                     evidence={("head01", "fabric.pairwise_bw"): stdout},
                     argv=("timeout", "bash"), duration_s=60.0)


def test_the_report_carries_the_matrix_and_every_nodes_verdict(tmp_path) -> None:
    outcome = judge_run(stored_run(tmp_path, run_output(NODES, outputs(bad="gpu03"))))
    doc = json.loads(outcome.report_json.read_text())
    (matrix,) = doc["pairwise"]
    assert matrix["check"] == "fabric.pairwise_bw" and matrix["culprit"] == "gpu03"
    verdicts = {n["name"]: n["verdict"] for n in doc["nodes"]}
    assert verdicts == {"gpu01": "ACCEPT", "gpu02": "ACCEPT", "gpu03": "REJECT",
                        "gpu04": "ACCEPT"}
    html = outcome.report_html.read_text()
    assert "Node pairs" in html and "gpu03" in html
    checked, problems = verify_report(outcome.report_json)
    assert checked == 4 and problems == []
    assert main(["verify", str(outcome.report_json)]) == 0  # and judged again, the same


def test_the_demo_rack_has_no_fabric_and_skips() -> None:
    assert CHECK.applies(load_profile("demo").model.hardware) is not None
    assert CHECK.applies(load_profile("dgx-h100").model.hardware) is None
