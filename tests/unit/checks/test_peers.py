from __future__ import annotations

import pytest

from rackgate.checks import load_profile
from rackgate.checks.peers import NAME as PEERS
from rackgate.checks.peers import PeerParams, flag_peer_outliers
from rackgate.model import Result, Status

SHIPPED = PeerParams.model_validate(load_profile("demo").rack_check(PEERS).params)


def results(values, better="higher", status=Status.PASS):
    return [Result(f"n{i:02d}", "fio.seq_read", status, "ok", v, "MB/s", better=better)
            for i, v in enumerate(values)]


def labels(rs):
    return [r.status.label for r in rs]


def test_slow_node_that_passes_is_warned_with_the_peer_median():
    out = flag_peer_outliers(results([1000, 1010, 990, 1005, 995, 998, 1002, 700]), SHIPPED)
    assert labels(out) == ["pass"] * 7 + ["warn"]
    assert "30% below the median 999 MB/s of 8 nodes" in out[-1].message
    assert out[-1].details["peer_median"] == 999.0


def test_tight_cluster_noise_is_not_flagged():
    # MAD is tiny here, so z is large, but 2 % is not a straggler
    assert labels(flag_peer_outliers(results([1000, 1000, 1000, 1001, 980]),
                                     SHIPPED)) == ["pass"] * 5


def test_identical_peers_and_one_far_node():
    out = flag_peer_outliers(results([500, 500, 500, 500, 100]), SHIPPED)
    assert labels(out) == ["pass"] * 4 + ["warn"]
    assert out[-1].details["peer_robust_z"] == "inf"


def test_lower_is_better_flags_the_slow_latency():
    out = flag_peer_outliers(results([1.0, 1.1, 0.9, 1.05, 3.0], better="lower"), SHIPPED)
    assert labels(out) == ["pass"] * 4 + ["warn"]
    assert "above the median" in out[-1].message


def test_too_few_peers_or_no_direction_changes_nothing():
    assert labels(flag_peer_outliers(results([1000, 1000, 100]), SHIPPED)) == ["pass"] * 3
    assert labels(flag_peer_outliers(results([1000] * 4 + [10], better=None),
                                     SHIPPED)) == ["pass"] * 5


@pytest.mark.parametrize("status", [Status.FAIL, Status.ERROR, Status.SKIP])
def test_only_passing_results_are_downgraded(status):
    bad = Result("bad", "fio.seq_read", status, "x", 10.0, "MB/s", better="higher")
    rs = [*results([1000] * 4), bad]
    assert flag_peer_outliers(rs, SHIPPED)[-1].status is status
