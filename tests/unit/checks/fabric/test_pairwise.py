"""fabric.pairwise_bw: the schedule script, its output parser, per-node judging of the
matrix, and the runner putting the matrix into the report (no fabric here: the pair
outputs are the perftest fixtures, composed into the script's output format)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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
from rackgate.parsers.perftest import parse_ib_read_lat, parse_ib_write_bw
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


# ------------------------------------------------------------ degraded evidence (issue 11)
# Degradations: a non-finite number (nan, inf, -inf, 1e400, NaN, Infinity) in any cell of a
# result row, a result row or pair section given twice, and the output cut anywhere before
# the table's closing dashed line (``### end`` for the pairwise run).

HW = load_profile("dgx-h100").model.hardware
PARAMS_64K = PairwiseParams(device="mlx5_0", size_bytes=65536)
NON_FINITE = st.sampled_from(["nan", "inf", "-inf", "1e400", "NaN", "Infinity", "-Infinity"])
ROW = re.compile(r"^\s*\d+\s+\d")
SINGLE = perftest("ib_write_bw-ndr400-64k-healthy.txt")  # -s 65536 on mlx5_0: PARAMS_64K' run
SWEEP = perftest("ib_write_bw-ndr400-sweep-gbits-healthy.txt")
LAT = perftest("ib_read_lat-ndr-2b-healthy.txt")


def pairwise_output(client: str = SINGLE) -> str:
    out = [f"### rackgate-pairwise nodes={','.join(NODES)} rounds=3"]
    for r, pairs in enumerate(round_robin(NODES), start=1):
        for a, b in pairs:
            out += [f"### pair round={r} server={a} client={b} rc=0", "1: rackgate-role=client",
                    *(f"1: {line}" for line in client.splitlines())]
    return "\n".join([*out, "### end"]) + "\n"


RUN = pairwise_output()


def statuses(text: str) -> dict[str, str]:
    """Each node's status (every node errs when the run is unparseable)."""
    try:
        run = parse_pairwise(text)
    except ParseError:
        return dict.fromkeys(NODES, "error")
    results, _ = judge_nodes(run, PARAMS_64K, {}, HW, NODES, "evidence/x.out")
    return {r.node: r.status.label for r in results}


PAIRS = [p for rnd in round_robin(NODES) for p in rnd]  # in section order


def bw_parses(text: str) -> bool:
    try:
        parse_ib_write_bw(text)
    except ParseError:
        return False
    return True


def with_cell(text: str, row: int, cell: int, value: str) -> str:
    lines = text.splitlines()
    index = [i for i, ln in enumerate(lines) if ROW.match(ln)][row]
    tokens = lines[index].split()
    tokens[cell % len(tokens)] = value
    lines[index] = " ".join(tokens)
    return "\n".join(lines) + "\n"


class TestDegradedPairwise:
    """Property tests, the pairwise family: degraded copies of the project's healthy perftest
    fixtures (tests/fixtures/perftest, written from linux-rdma/perftest's published format),
    alone and inside rackgate's pairwise run, never raise anything but ParseError and never
    judge ``pass``."""

    def test_the_undegraded_fixtures_pass(self) -> None:
        assert bw_parses(SINGLE) and bw_parses(SWEEP)
        assert set(statuses(RUN).values()) == {"pass"}

    @settings(max_examples=60, deadline=None)
    @given(st.integers(0, 22), st.integers(0, 4), NON_FINITE)
    def test_a_non_finite_cell_is_a_parse_error(self, row: int, cell: int, value: str) -> None:
        assert not bw_parses(with_cell(SWEEP, row, cell, value))

    @settings(max_examples=30, deadline=None)
    @given(st.integers(0, 8), NON_FINITE)
    def test_a_non_finite_latency_cell_is_a_parse_error(self, cell: int, value: str) -> None:
        text = with_cell(LAT, 0, cell, value)
        try:
            parse_ib_read_lat(text)
        except ParseError:
            return
        raise AssertionError(f"{value} in latency cell {cell} parsed")

    @settings(max_examples=40, deadline=None)
    @given(st.integers(1, 4), NON_FINITE, st.integers(0, 5))
    def test_a_non_finite_cell_in_one_pair_never_passes(self, cell: int, value: str,
                                                        pair: int) -> None:
        sections = RUN.split("### pair ")
        row = next(ln for ln in sections[pair + 1].splitlines() if ln.startswith("1:  65536"))
        tokens = row.split()
        tokens[1 + cell] = value
        sections[pair + 1] = sections[pair + 1].replace(row, " ".join(tokens))
        status = statuses("### pair ".join(sections))
        assert {status[n] for n in PAIRS[pair]} == {"error"}

    @settings(max_examples=30, deadline=None)
    @given(st.integers(0, 22))
    def test_a_duplicated_row_is_a_parse_error(self, row: int) -> None:
        lines = SWEEP.splitlines()
        index = [i for i, ln in enumerate(lines) if ROW.match(ln)][row]
        lines.insert(index, lines[index])
        assert not bw_parses("\n".join(lines))

    @settings(max_examples=30, deadline=None)
    @given(st.integers(0, 5))
    def test_a_duplicated_pair_section_never_passes(self, pair: int) -> None:
        sections = RUN.split("### pair ")
        sections.insert(pair + 1, sections[pair + 1])
        status = statuses("### pair ".join(sections))
        assert {status[n] for n in PAIRS[pair]} == {"error"}

    @settings(max_examples=40, deadline=None)
    @given(st.data())
    def test_any_duplicated_line_raises_only_parse_error(self, data: st.DataObject) -> None:
        for text in (SWEEP, RUN):
            lines = text.splitlines()
            at = data.draw(st.integers(0, len(lines) - 1))
            lines.insert(at, lines[at])
            bw_parses("\n".join(lines))
            statuses("\n".join(lines))

    @settings(max_examples=40, deadline=None)
    @given(st.integers(0, SWEEP.rstrip().rindex("\n")))
    def test_a_truncated_table_is_a_parse_error(self, cut: int) -> None:
        assert not bw_parses(SWEEP[:cut])

    @settings(max_examples=40, deadline=None)
    @given(st.integers(0, RUN.rindex("### end")))
    def test_a_truncated_pairwise_run_never_passes(self, cut: int) -> None:
        assert set(statuses(RUN[:cut]).values()) == {"error"}
