from __future__ import annotations

from rackgate.checks import load_profile
from rackgate.checks.drift import CHECK, DriftParams, version_drift
from rackgate.model import Result, Status

SHIPPED = DriftParams.model_validate(load_profile("demo").rack_check(CHECK).params)


def gpu(node: str, driver: str, vbios: str = "96.00.89.00.01", status=Status.PASS) -> Result:
    return Result(node, "gpu.health", status, "ok",
                  details={"driver_version": driver, "vbios_versions": vbios})


def hca(node: str, *fws: str) -> Result:
    return Result(node, "fabric.ports", Status.PASS, "ok",
                  details={f"fw.mlx5_{i}": fw for i, fw in enumerate(fws)})


def by_node(results):
    return {r.node: r for r in results}


def test_one_node_on_another_driver_fails_naming_both_versions():
    out = by_node(version_drift([gpu("n1", "535.183.01"), gpu("n2", "535.183.01"),
                                 gpu("n3", "535.161.08")], SHIPPED))
    assert out["n1"].status is Status.PASS and out["n1"].check == CHECK
    assert out["n3"].status is Status.FAIL
    assert out["n3"].message == ("NVIDIA driver 535.161.08 differs from the rack's "
                                 "535.183.01 (2 of 3 nodes)")


def test_hca_firmware_is_compared_as_a_set_per_node():
    out = by_node(version_drift([hca("n1", "28.39.1002", "28.39.1002"),
                                 hca("n2", "28.39.1002", "28.39.1002"),
                                 hca("n3", "28.39.1002", "28.36.1010")], SHIPPED))
    assert out["n3"].status is Status.FAIL and "HCA firmware 28.36.1010, 28.39.1002" in \
        out["n3"].message
    assert out["n2"].status is Status.PASS


def test_an_even_split_fails_both_sides():
    out = by_node(version_drift([gpu("n1", "535.183.01"), gpu("n2", "535.161.08")], SHIPPED))
    assert {r.status for r in out.values()} == {Status.FAIL}


def test_errored_and_skipped_results_do_not_vote():
    out = by_node(version_drift([gpu("n1", "535.183.01"), gpu("n2", "535.183.01"),
                                 gpu("n3", "999", status=Status.ERROR)], SHIPPED))
    assert set(out) == {"n1", "n2"} and all(r.status is Status.PASS for r in out.values())
