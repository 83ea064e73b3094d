"""Issue 11, the nccl family (nccl.*, nccl.fabric_all_reduce): an ACCEPT only from
complete, finite, positively healthy evidence, and data never executes.

Every input here is derived in the test from the project's own fixtures
(tests/fixtures/nccl, written from NVIDIA/nccl-tests' published output layout, see their
SOURCES.md) by the one edit its name says: a value replaced, a row or section removed,
duplicated or relabelled. Per-rail outputs are composed in the format of rackgate's own
rails run (checks/nccl/fabric.py: ``### rackgate-rails rails=<n>``, ``### rail index=<i>
hca=<hca> rc=<rc>``, ``### end``).
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
from pydantic import ValidationError

from rackgate.checks import REGISTRY, load_profile, profile_from_document
from rackgate.checks.nccl.fabric import (
    NcclFabricParams,
    fabric_command,
    judge_fabric,
    parse_fabric,
)
from rackgate.checks.nccl.local import NcclParams, judge_nccl
from rackgate.checks.shared.base import CommandError
from rackgate.commands.launch import Across
from rackgate.model import Result
from rackgate.parsers import ParseError
from rackgate.parsers.nccl_tests import parse_nccl_tests
from rackgate.placement.evidence import judge_launched
from rackgate.profile import Profile, ProfileError
from rackgate.store.evidence import Evidence

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"
H100 = load_profile("dgx-h100")
HW = H100.model.hardware
NODE_T = H100.check("nccl.all_reduce").thresholds  # type: ignore[union-attr]
FABRIC = H100.check("nccl.fabric_all_reduce")
assert FABRIC is not None
RAIL_T = FABRIC.thresholds  # one port: ref 50 GB/s, a physical limit
RAILS = NcclFabricParams.model_validate(FABRIC.params)  # per_rail, the 8 rails of the profile
HCAS = list(RAILS.rail_hcas)
PLATEAU = (1 << 30, 1 << 31, 1 << 32, 1 << 33)  # the sizes >= judge_min_bytes 1G of -e 8G


def body(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


HEALTHY = body("allreduce-8xh100-healthy.txt")
GPU3_SLOW = body("allreduce-8xh100-nvlink-gpu3-slow.txt")
RAIL_OK = body("allreduce-2node-rail-ndr-healthy.txt")
RAIL_HDR = body("allreduce-2node-rail-at-hdr-degraded.txt")
TWO_NODES = body("allreduce-2node-srun-label.txt")


def set_cells(text: str, size: int, **cells: str) -> str:
    """The size row of ``size`` with some of its cells replaced: ``busbw`` (out-of-place),
    ``wrong`` (out-of-place #wrong), ``ip_busbw`` (in-place)."""
    index = {"busbw": -6, "wrong": -5, "ip_busbw": -2}
    out = []
    for line in text.splitlines():
        label, _, rest = line.rpartition(": ") if re.match(r"\d+: ", line) else ("", "", line)
        tokens = rest.split()
        if tokens and tokens[0] == str(size):
            for name, value in cells.items():
                tokens[index[name]] = value
            line = (f"{label}: " if label else "  ") + "  ".join(tokens)
        out.append(line)
    return "\n".join(out) + "\n"


def without_row(text: str, size: int) -> str:
    return "".join(line + "\n" for line in text.splitlines()
                   if not re.match(rf"^(\d+: )?\s*{size}\s", line))


def node_verdict(text: str, params: NcclParams | None = None) -> tuple[str, str]:
    """(status, message) of nccl.all_reduce on one node's output; unparseable is error."""
    try:
        run = parse_nccl_tests(text)
    except ParseError as exc:
        return "error", str(exc)
    j = judge_nccl(run, params or NcclParams(), NODE_T, HW)
    return j.status.label, j.message


def rails_output(bodies: Sequence[tuple[int, str, str]], announced: int | None = None,
                 head: bool = True) -> str:
    """The per-rail run's output: (index, hca, nccl-tests output) per section."""
    out = [f"### rackgate-rails rails={len(bodies) if announced is None else announced}"] \
        if head else []
    for index, hca, text in bodies:
        out += [f"### rail index={index} hca={hca} rc=0", text.rstrip("\n")]
    return "\n".join([*out, "### end"]) + "\n"


def eight_rails(slow: int | None = None) -> list[tuple[int, str, str]]:
    return [(i, hca, RAIL_HDR if i == slow else RAIL_OK) for i, hca in enumerate(HCAS)]


def fabric_verdict(text: str, params: NcclFabricParams = RAILS,
                   thresholds: Any = RAIL_T) -> tuple[str, str]:
    try:
        run = parse_fabric(text)
    except ParseError as exc:
        return "error", str(exc)
    j = judge_fabric(run, params, thresholds, HW)
    return j.status.label, j.message


def test_the_healthy_inputs_pass_so_every_refusal_below_is_the_edit() -> None:
    assert node_verdict(HEALTHY)[0] == "pass"
    assert node_verdict(GPU3_SLOW)[0] == "fail"
    assert fabric_verdict(rails_output(eight_rails()))[0] == "pass"
    assert fabric_verdict(rails_output(eight_rails(slow=3)))[0] == "fail"


# -------------------------------------------------------------- 3: rails and sizes missing


def test_sound_3_seven_of_eight_rails_missing_is_an_error() -> None:
    status, message = fabric_verdict(rails_output(eight_rails()[:1], announced=8))
    assert status == "error", message
    for i in range(1, 8):
        assert f"rail {i} ({HCAS[i]}) missing" in message


def test_sound_3_the_slow_rails_section_removed_is_an_error_naming_it() -> None:
    rails = [r for r in eight_rails(slow=3) if r[0] != 3]
    status, message = fabric_verdict(rails_output(rails, announced=8))
    assert status == "error" and "rail 3 (mlx5_5) missing" in message, message


def test_sound_3_per_rail_output_without_its_header_is_never_one_run() -> None:
    status, message = fabric_verdict(rails_output(eight_rails(slow=3), head=False))
    assert status == "error" and "per-rail" in message, message
    # one job over every rail, judged with per_rail set: not a rail measurement
    status, message = fabric_verdict(TWO_NODES)
    assert status == "error" and "without the per-rail header" in message, message


def test_sound_3_a_duplicated_or_foreign_rail_is_an_error_naming_it() -> None:
    twice = [*eight_rails(slow=2), (2, HCAS[2], RAIL_OK)]
    status, message = fabric_verdict(rails_output(twice, announced=8))
    assert status == "error" and "rail 2 (mlx5_4) appears 2 times" in message, message
    foreign = [*eight_rails(), (8, "mlx5_12", RAIL_OK)]
    status, message = fabric_verdict(rails_output(foreign, announced=8))
    assert status == "error" and "foreign rail 8 (mlx5_12)" in message, message
    relabelled = [(i, "mlx5_1" if i == 1 else h, t) for i, h, t in eight_rails()]
    status, message = fabric_verdict(rails_output(relabelled))
    assert status == "error" and "rail 1 ran on mlx5_1, the profile names mlx5_3" in message


def test_sound_3_a_slow_run_concatenated_with_healthy_runs_is_refused() -> None:
    status, message = node_verdict(GPU3_SLOW + HEALTHY + HEALTHY)
    assert status == "error" and "two runs in one output" in message, message
    # the same inside one rail section of the per-rail run
    rails = [(i, h, RAIL_HDR + RAIL_OK + RAIL_OK if i == 3 else t)
             for i, h, t in eight_rails()]
    status, message = fabric_verdict(rails_output(rails))
    assert status == "error" and "rail 3 (mlx5_5)" in message, message


def test_sound_3_an_expected_plateau_size_missing_or_foreign_is_an_error() -> None:
    status, message = node_verdict(without_row(HEALTHY, 1 << 32))
    assert status == "error" and "4294967296 B" in message, message
    extra = HEALTHY.replace("# Out of bounds", "  17179869184    4294967296     float     sum"
                            "      -1  62953.0  272.90  477.57       0  62953.0  272.90  "
                            "477.57       0\n# Out of bounds", 1)
    status, message = node_verdict(extra)
    assert status == "error" and "17179869184 B" in message and "not in the sweep" in message


# -------------------------------------------------- 4: non-finite and impossible figures


@pytest.mark.parametrize("value", ["inf", "Infinity", "nan", "NaN", "1e400", "-inf"])
def test_sound_4_a_non_finite_busbw_is_refused_naming_field_and_line(value: str) -> None:
    text = HEALTHY
    for size in PLATEAU:
        text = set_cells(text, size, busbw=value)
    with pytest.raises(ParseError, match=r"line \d+: out-of-place busbw .* not a finite"):
        parse_nccl_tests(text)
    assert node_verdict(text)[0] == "error"
    rails = [(i, h, set_cells(t, 1 << 33, busbw=value) if i == 5 else t)
             for i, h, t in eight_rails()]
    status, message = fabric_verdict(rails_output(rails))
    assert status == "error" and "rail 5 (mlx5_9): no measurement" in message, message


def test_sound_4_inf_in_two_of_four_rows_does_not_turn_a_fail_into_a_pass() -> None:
    text = set_cells(set_cells(GPU3_SLOW, 1 << 30, busbw="inf"), 1 << 31, busbw="inf")
    status, message = node_verdict(text)
    assert status == "error" and "not a finite number" in message, message


def test_sound_4_a_nan_row_is_refused_not_dropped_by_the_median() -> None:
    status, message = node_verdict(set_cells(HEALTHY, 1 << 31, busbw="nan"))
    assert status == "error" and "'nan' is not a finite number" in message, message


def test_sound_4_one_impossible_row_is_an_error_though_the_median_looks_fine() -> None:
    """1e30 GB/s in one of the four judged rows: the median (474.5) is plausible, the row
    is not (the ceiling of NVLS all_reduce on 8 GPUs is 787.5 GB/s, x1.05)."""
    status, message = node_verdict(set_cells(HEALTHY, 1 << 33, busbw="1e30"))
    assert status == "error" and "implausible evidence" in message, message
    status, message = node_verdict(set_cells(HEALTHY, 1 << 30, ip_busbw="9000.5"))
    assert status == "error" and "in-place busbw" in message, message
    rails = [(i, h, set_cells(t, 1 << 32, busbw="1e30") if i == 6 else t)
             for i, h, t in eight_rails()]
    status, message = fabric_verdict(rails_output(rails))
    assert status == "error" and "rail 6 (mlx5_10)" in message and "implausible" in message


@pytest.mark.parametrize("value", ["Infinity", "NaN", '"nan"', "1e400", "-Infinity"])
def test_sound_4_json_non_finite_figures_are_refused(value: str) -> None:
    """The -J file's 8 GiB row (out-of-place bus_bw 475.58) with the value replaced."""
    text = (FIX / "allreduce-8xh100-healthy.json").read_text(encoding="utf-8")
    old = '"bus_bw": 475.58'
    assert text.count(old) == 1
    with pytest.raises(ParseError, match=r"bus_bw|NaN|Infinity"):
        parse_nccl_tests(text.replace(old, f'"bus_bw": {value}'))


# ------------------------------------------------------- 9: only ParseError, on any input


@pytest.mark.parametrize("value", ["nan", "inf", "1e400"])
def test_sound_9_a_wrong_count_of_nan_is_a_parse_error_not_a_crash(value: str) -> None:
    with pytest.raises(ParseError, match=r"line \d+: out-of-place #wrong"):
        parse_nccl_tests(set_cells(HEALTHY, 1 << 33, wrong=value))


# ------------------------------------------------------------- 8: data never executes


def test_sound_8_a_rail_hca_with_a_command_substitution_is_refused() -> None:
    bad = ["mlx5_0$(touch /tmp/rackgate-pwned)", *HCAS[1:]]
    with pytest.raises(ValidationError, match="rail_hcas"):
        NcclFabricParams(per_rail=True, gpus_per_node=8, rail_hcas=bad)
    doc = dict(H100.raw)
    checks = dict(doc["checks"])
    checks["nccl.fabric_all_reduce"] = {**checks["nccl.fabric_all_reduce"],
                                        "params": {**FABRIC.params, "rail_hcas": bad}}
    with pytest.raises(ProfileError, match="rail_hcas"):  # the inventory overrides' path too
        profile_from_document({**doc, "checks": checks}, "dgx-h100 + a hostile override")
    for hca in ("mlx5_0\n", "mlx5_0 mlx5_1", "mlx5_0;reboot", "`id`", "mlx5_0:1:2", ""):
        with pytest.raises(ValidationError):
            NcclFabricParams(per_rail=True, gpus_per_node=8, rail_hcas=[hca, *HCAS[1:]])
    NcclFabricParams(per_rail=True, gpus_per_node=8, rail_hcas=["mlx5_0:1", *HCAS[1:]])


def test_sound_8_the_per_rail_command_never_runs_a_value_as_shell(tmp_path: Path) -> None:
    """Validation bypassed: even a hostile HCA name is only ever data."""
    marker = tmp_path / "pwned"
    hostile = NcclFabricParams.model_construct(
        per_rail=True, gpus_per_node=8, rail_hcas=[f"mlx5_0$(touch {marker})", *HCAS[1:]])
    argv = fabric_command(hostile, {}, Across(("gpu01", "gpu02")))
    inner = argv[argv.index("--") + 1:]  # what the readiness guard execs
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/sh\necho "fake srun: $#"\n')
    (bin_dir / "srun").chmod(0o755)
    if inner[0] == "python3":
        inner[0] = sys.executable
    proc = subprocess.run(inner, env={**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert not marker.exists(), "a value from the profile ran as a shell command"
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("fake srun") == 8  # every rail's job ran, from its argv


def test_sound_8_paths_and_partitions_are_plain_identifiers() -> None:
    for bad in ("/opt/x$(id)", "/opt/nccl tests", "/opt/../etc", "/opt/x\n"):
        with pytest.raises(ValidationError):
            NcclParams(binary_dir=bad)
        with pytest.raises(CommandError):
            REGISTRY["nccl.all_reduce"].command(NcclParams(), {"rackgate_nccl_tests_dir": bad})
    for partition in ("gpu;reboot", "gpu batch", "gpu\n", "$(id)"):
        with pytest.raises(ValidationError):
            NcclFabricParams(partition=partition)
    NcclFabricParams(partition="gpu,gpu-large")


# ---------------------------------------- 6 (applied to the fabric run): ranks' hosts


def _profile_with_fabric(**params: Any) -> Profile:
    doc = dict(H100.raw)
    checks = dict(doc["checks"])
    checks["nccl.fabric_all_reduce"] = {
        "params": {"judge_min_bytes": "1G", **params},
        "thresholds": {"busbw": {"unit": "GB/s", "ref": 450, "min_ratio": 0.75, "limit": True,
                                 "basis": "test threshold: 16 H100 ranks over NVLink and NDR"}}}
    return profile_from_document({**doc, "checks": checks}, "dgx-h100 + one fabric job (test)")


def launched(profile: Profile, stdout: str, nodes: Sequence[str]) -> list[Result]:
    """Every node's result as the runner judges a launched check (judge.judge_launched)."""
    check = REGISTRY["nccl.fabric_all_reduce"]
    ev = Evidence(host="head01", check=check.name, argv=("timeout", "python3"),
                  outcome="completed", rc=0, started=None, ended=None, duration_s=60.0,
                  stderr="", message="", stdout_file="evidence/head01/nccl.out",
                  stdout_sha256="0" * 64, stdout_bytes=len(stdout))
    return judge_launched(check, ev, stdout, profile, nodes)[0]


def test_sound_6_the_fabric_run_must_have_run_on_the_nodes_under_test() -> None:
    profile = _profile_with_fabric()
    ok = launched(profile, TWO_NODES, ["gpu-b01", "gpu-b02"])
    assert [r.status.label for r in ok] == ["pass", "pass"], ok[0].message
    other = launched(profile, TWO_NODES, ["gpu01", "gpu02"])
    assert {r.status.label for r in other} == {"error"}, other[0].message
    assert "not under test: gpu-b01, gpu-b02" in other[0].message
    assert "node gpu01 ran 0 rank(s), expected 8" in other[0].message
    three = launched(profile, TWO_NODES, ["gpu-b01", "gpu-b02", "gpu-b03"])
    assert {r.status.label for r in three} == {"error"}
    assert "node gpu-b03 ran 0 rank(s)" in three[0].message


def test_sound_6_every_rail_must_have_run_one_rank_on_each_node() -> None:
    out = rails_output(eight_rails())  # the profile's own check: per rail, per-port limit
    assert {r.status.label for r in launched(H100, out, ["gpu-b01", "gpu-b02"])} == {"pass"}
    wrong = launched(H100, out, ["gpu-b01", "gpu-c02"])
    assert {r.status.label for r in wrong} == {"error"}
    assert "rail 0 (mlx5_0): ranks ran on host(s) not under test: gpu-b02" in wrong[0].message
    assert "node gpu-c02 ran 0 rank(s), expected 1" in wrong[0].message
