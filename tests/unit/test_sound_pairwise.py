"""Issue 11, the pairwise family (fabric.pairwise_bw and perftest's parser): an ACCEPT only
from complete, finite, positively healthy evidence, and data never executes.

Pair outputs are derived in the test from the project's perftest fixtures
(tests/fixtures/perftest, written from linux-rdma/perftest's published format) into the run
the dgx-h100 profile's command asks for (``-d mlx5_0 -s 1048576``: the result row's size
and the Device field relabelled, bandwidths kept), then composed in the format of
rackgate's own pairwise run (parsers/pairwise.py). Each test makes the one edit its name
says.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.fabric.pairwise import PairwiseParams, pairwise_command
from rackgate.checks.shared.pairs import round_robin
from rackgate.commands.launch import Across
from rackgate.model import Result
from rackgate.parsers import ParseError
from rackgate.parsers.perftest import parse_ib_write_bw
from rackgate.placement.evidence import judge_launched
from rackgate.store.evidence import Evidence

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "perftest"
CHECK = REGISTRY["fabric.pairwise_bw"]
H100 = load_profile("dgx-h100")  # device mlx5_0, 1 MiB, pass at 0.9 x 400 Gb/s
NODES = ["gpu01", "gpu02", "gpu03", "gpu04"]


def perftest(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


def as_run_of(text: str, size: int = 1 << 20, device: str = "mlx5_0") -> str:
    text = re.sub(r"(?m)^(\s*)65536(\s)", rf"\g<1>{size}\2", text)
    return re.sub(r"Device(\s+): mlx5_\d+", rf"Device\1: {device}", text)


HEALTHY = as_run_of(perftest("ib_write_bw-ndr400-64k-healthy.txt"))  # 391 Gb/s
DEGRADED = as_run_of(perftest("ib_write_bw-ndr-port-at-hdr-degraded.txt"))  # 193 Gb/s
SWEEP = perftest("ib_write_bw-ndr400-sweep-gbits-healthy.txt")  # -a: 2 B to 8 MiB, Gb/sec


def section(r: int, server: str, client: str, text: str, rc: int = 0,
            clients: int = 1) -> list[str]:
    out = [f"### pair round={r} server={server} client={client} rc={rc}",
           "0: ************************************", "0: * Waiting for client to connect... *"]
    for task in range(1, clients + 1):
        out += [f"{task}: rackgate-role=client", *(f"{task}: {ln}" for ln in text.splitlines())]
    return out


def run_output(client: dict[tuple[str, str], str] | None = None, rounds: int | None = None,
               extra: Sequence[str] = (), swap: tuple[str, str] | None = None,
               clients: int = 1) -> str:
    client = client or {}
    schedule = round_robin(NODES)
    out = [f"### rackgate-pairwise nodes={','.join(NODES)} "
           f"rounds={len(schedule) if rounds is None else rounds}"]
    for r, pairs in enumerate(schedule, start=1):
        for a, b in pairs:
            s, c = (b, a) if swap == (a, b) else (a, b)
            out += section(r, s, c, client.get((a, b), HEALTHY),
                           clients=clients if (a, b) == schedule[0][0] else 1)
    return "\n".join([*out, *extra, "### end"]) + "\n"


def judged(stdout: str, nodes: Sequence[str] = NODES) -> tuple[list[Result], dict[str, Any]]:
    """Every node's result and the matrix, as the runner judges the launched check."""
    ev = Evidence(host="head01", check=CHECK.name, argv=("timeout", "python3"),
                  outcome="completed", rc=0, started=None, ended=None, duration_s=60.0,
                  stderr="", message="", stdout_file="evidence/head01/pairwise.out",
                  stdout_sha256="0" * 64, stdout_bytes=len(stdout))
    results, matrix = judge_launched(CHECK, ev, stdout, H100, nodes)
    return results, dict(matrix or {})


def launched(stdout: str, nodes: Sequence[str] = NODES) -> list[Result]:
    return judged(stdout, nodes)[0]


def cell(stdout: str, pair: tuple[str, str]) -> str:
    """The matrix cell's message for ``pair``."""
    return next(str(p["message"]) for p in judged(stdout)[1]["pairs"]
                if {p["a"], p["b"]} == set(pair))


def by_node(results: list[Result]) -> dict[str, str]:
    return {r.node: r.status.label for r in results}


FIRST = round_robin(NODES)[0][0]  # ('gpu01', 'gpu04'): round 1, server gpu01


def test_the_healthy_matrix_passes_and_one_bad_port_fails() -> None:
    assert set(by_node(launched(run_output())).values()) == {"pass"}
    assert by_node(launched(run_output({FIRST: DEGRADED})))[FIRST[0]] in ("fail", "warn")


# ------------------------------------------------ completeness: every pair exactly once


def test_sound_3_a_pair_printed_twice_is_an_error_not_extra_evidence() -> None:
    """The weak pair's section, then a healthy copy of it (two runs' sections)."""
    text = run_output({FIRST: DEGRADED}, extra=section(1, *FIRST, HEALTHY))
    status = by_node(launched(text))
    assert status["gpu01"] == status["gpu04"] == "error", status
    assert "pair printed 2 times" in cell(text, FIRST)


def test_sound_3_a_pair_run_otherwise_than_scheduled_is_an_error() -> None:
    text = run_output(swap=FIRST)  # gpu04 served, gpu01 was the client
    results = launched(text)
    assert by_node(results)["gpu01"] == "error" and by_node(results)["gpu04"] == "error"
    assert "the schedule has round 1 server gpu01 client gpu04" in cell(text, FIRST)


def test_sound_3_the_client_report_must_be_the_scheduled_measurement() -> None:
    other_device = as_run_of(perftest("ib_write_bw-ndr400-64k-healthy.txt"), device="mlx5_3")
    for client, why in ((SWEEP, "measured size(s) [2, 4, 8"),  # a sweep, not -s 1048576
                        (other_device, "ran on device mlx5_3")):
        text = run_output({FIRST: client})
        assert by_node(launched(text))["gpu01"] == "error"
        assert why in cell(text, FIRST)
    text = run_output(clients=2)  # two tasks claimed the client's role
    assert by_node(launched(text))["gpu01"] == "error"
    assert "2 tasks said 'rackgate-role=client'" in cell(text, FIRST)


def test_sound_3_a_second_run_or_a_wrong_round_count_is_refused() -> None:
    two_runs = run_output({FIRST: DEGRADED}) + run_output()
    assert set(by_node(launched(two_runs)).values()) == {"error"}
    assert set(by_node(launched(run_output(rounds=2))).values()) == {"error"}


# ------------------------------------------------------ 4: non-finite and impossible


def test_sound_4_a_pair_above_line_rate_is_implausible_evidence_not_a_warning() -> None:
    """A MiB/sec report read as Gb/sec (46610 "Gb/s" over a 400 Gb/s port)."""
    wrong_unit = HEALTHY.replace("MiB/sec", "Gb/sec")
    results = launched(run_output({FIRST: wrong_unit}))
    assert by_node(results)["gpu01"] == "error" and by_node(results)["gpu04"] == "error"


@pytest.mark.parametrize("value", ["nan", "inf", "Infinity", "1e400", "-392.40"])
def test_sound_4_a_non_finite_cell_is_refused_never_dropped(value: str) -> None:
    """The sweep's largest row (8 MiB, the judged one) with its BW average replaced."""
    text = re.sub(r"(?m)^(\s*8388608\s+5000\s+393\.97\s+)392\.40", rf"\g<1>{value}", SWEEP)
    assert text != SWEEP
    with pytest.raises(ParseError, match=r"line \d+: result (row|cell)"):
        parse_ib_write_bw(text)


def test_sound_4_a_row_printed_twice_in_one_table_is_refused() -> None:
    row = next(ln for ln in SWEEP.splitlines() if ln.strip().startswith("8388608"))
    with pytest.raises(ParseError, match="printed 2 times"):
        parse_ib_write_bw(SWEEP.replace(row, f"{row}\n{row}"))


# --------------------------------------------------------- 9: only ParseError, any input


def test_sound_9_an_overflowing_cell_is_a_parse_error_not_a_crash() -> None:
    text = re.sub(r"(?m)^(\s*1048576\s+)5000", r"\g<1>1e400", HEALTHY)
    assert text != HEALTHY
    with pytest.raises(ParseError, match="not a finite"):
        parse_ib_write_bw(text)
    results = launched(run_output({FIRST: text}))  # the rack still gets its report
    assert by_node(results)["gpu01"] == "error"


# ------------------------------------------------------------ 8: data never executes


def test_sound_8_the_pairwise_schedule_passes_every_value_as_data(tmp_path: Path) -> None:
    """Validation bypassed: a hostile device name reaches srun as one argv word, and no
    shell on the launch host reads it (the nodes' constant task script gets it as "$@")."""
    marker = tmp_path / "pwned"
    hostile = PairwiseParams.model_construct(device=f"mlx5_0$(touch {marker})")
    argv = pairwise_command(hostile, {}, Across(tuple(NODES[:2])))
    inner = argv[argv.index("--") + 1:]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/sh\nfor a in "$@"; do printf "[%s]" "$a"; done\n')
    (bin_dir / "srun").chmod(0o755)
    inner[0] = sys.executable if inner[0] == "python3" else inner[0]
    proc = subprocess.run(inner, env={**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, check=False)
    assert not marker.exists()
    assert proc.returncode == 0, proc.stderr
    assert f"[mlx5_0$(touch {marker})]" in proc.stdout
