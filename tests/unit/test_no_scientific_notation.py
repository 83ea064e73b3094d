"""Figures in judges' messages read as people write them (``19,810 MB/s``), never in
scientific notation (``1.981e+04 MB/s``): every shipped fixture that a check's parser reads
is judged with every shipped profile, and the shared comparison and the pair and peer
judges are driven across twenty orders of magnitude. Fabric checks (judged against a
fabric plan) and the two-file RoCE check are left to their own tests."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.peers import NAME as PEERS
from rackgate.checks.peers import PeerParams, flag_peer_outliers
from rackgate.checks.shared.base import JudgedCheck, compare
from rackgate.checks.shared.pairs import judge_pairwise
from rackgate.model import Result, Status
from rackgate.profile import Threshold, available_profiles

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SCIENTIFIC = re.compile(r"\d[eE][+-]\d")  # what Python's :g and .4g write from 1e+16 / 1e-05
MAGNITUDES = st.floats(min_value=1e-7, max_value=1e13, allow_nan=False)


def tool_output(path: Path) -> str | None:
    """A fixture's tool output (after its '# ---' header line when it has one)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None
    _, sep, body = text.partition("\n# ---\n")
    return body if sep else text


def printed(message: str, expected: str, details: dict[str, float | str]) -> list[str]:
    """The texts of a judgement that reports print as they are (floats in details are
    formatted by the reports themselves)."""
    return [message, expected, *(v for v in details.values() if isinstance(v, str))]


def test_no_judge_message_of_the_shipped_fixtures_is_in_scientific_notation():
    outputs = [(p, text) for p in sorted(FIXTURES.rglob("*")) if p.is_file()
               and (text := tool_output(p)) is not None]
    profiles = [load_profile(name) for name in available_profiles()]
    judged: set[str] = set()
    found = []
    for check in REGISTRY.values():
        if not isinstance(check, JudgedCheck):  # judged against the fabric plan
            continue
        for path, text in outputs:
            try:
                record = check.parse(text)
            except Exception:  # not this check's format
                continue
            for profile in profiles:
                cp = profile.check(check.name)
                if cp is None or check.applies(profile.model.hardware) is not None:
                    continue  # as judging does: not in the profile, or not applicable
                params = check.params_model.model_validate(cp.params)
                j = check.judge(record, params, cp.thresholds, profile.model.hardware)
                judged.add(check.name)
                found += [(check.name, path.name, profile.name, t)
                          for t in printed(j.message, j.expected, j.details)
                          if SCIENTIFIC.search(t)]
    assert found == []
    # the sweep reaches every family that has fixtures, not a lucky few
    assert {"fio.seq_read", "fio.rand_read", "nccl.all_reduce", "mpi.allreduce", "gpu.health",
            "gpu.nvlink", "fabric.ports", "cooling.cdu", "redundancy.psu_ipmi",
            "redundancy.psu_redfish", "redundancy.bonding"} <= judged


@settings(max_examples=300, deadline=None)
@given(measured=MAGNITUDES, ref=MAGNITUDES, ratio=st.floats(min_value=0.01, max_value=1.0),
       limit=st.booleans())
def test_the_threshold_comparison_never_writes_scientific_notation(measured, ref, ratio,
                                                                   limit):
    lower = Threshold(unit="MB/s", ref=ref, min_ratio=ratio, limit=limit, basis="a test band")
    upper = Threshold(unit="ms", ref=ref, max_ratio=1.0 / ratio, basis="a test band")
    for t in (lower, upper):
        j = compare(measured, t, "figure")
        assert not SCIENTIFIC.search(j.message) and not SCIENTIFIC.search(j.expected), j


@settings(max_examples=100, deadline=None)
@given(rate=MAGNITUDES, fractions=st.lists(st.floats(min_value=1e-6, max_value=1.2),
                                           min_size=3, max_size=3))
def test_pair_and_peer_messages_never_write_scientific_notation(rate, fractions):
    nodes = ["n1", "n2", "n3"]
    t = Threshold(unit="Gb/s", ref=rate, min_ratio=0.9, limit=True, basis="a test band")
    pairs = dict(zip([("n1", "n2"), ("n1", "n3"), ("n2", "n3")],
                     [rate * f for f in fractions], strict=True))
    matrix = judge_pairwise(nodes, pairs, t)
    texts = [matrix.message, *(p.message for p in matrix.pairs)]
    peers = PeerParams.model_validate(load_profile("demo").rack_check(PEERS).params)
    results = [Result(f"n{i}", "fio.seq_read", Status.PASS, "ok", rate * f, "MB/s",
                      better="higher") for i, f in enumerate([1.0, 1.01, 0.99, 1.0, 0.3])]
    flagged = flag_peer_outliers(results, peers)
    assert flagged[-1].status is Status.WARN  # the laggard's message names the median
    texts += [r.message for r in flagged]
    assert [m for m in texts if SCIENTIFIC.search(m)] == []
