from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from rackgate.checks import CATALOG, REGISTRY, load_profile
from rackgate.profile import ProfileError, available_profiles

GOOD = {
    "schema_version": 1,
    "name": "lab",
    "description": "a test profile",
    "hardware": {"gpu": {"model": "NVIDIA H100 80GB HBM3", "count": 8,
                         "source": "vendor datasheet, for the test"}},
    "checks": {"fio.seq_read": {
        "params": {"size": "64M", "runtime_s": 2, "timeout_s": 30},
        "thresholds": {"read_bw": {"unit": "MB/s", "ref": 7000, "min_ratio": 0.8,
                                   "limit": True, "basis": "PCIe Gen4 x4 NVMe, 7 GB/s spec"}},
    }},
}


def write(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_shipped_profiles_load():
    assert "demo" in available_profiles()
    for name in available_profiles():
        assert load_profile(name).name == name


def test_good_profile_from_path(tmp_path):
    p = load_profile(write(tmp_path, GOOD))
    t = p.check("fio.seq_read").thresholds["read_bw"]
    assert t.lower_bound == pytest.approx(5600)
    assert len(p.sha256) == 64


def bad(**changes):
    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    node = doc
    for dotted, value in changes.items():
        *path, last = dotted.split("__")
        node = doc
        for key in path:
            node = node[key.replace("_DOT_", ".")]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return doc


FIO = "checks__fio_DOT_seq_read"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (bad(schema_version=2), "schema_version: Input should be 1"),
        (bad(colour="blue"), "colour: Extra inputs are not permitted"),
        (bad(**{f"{FIO}__thresholds__read_bw__ref": -1}),
         "checks.fio.seq_read.thresholds.read_bw.ref: Input should be greater than 0 (got -1)"),
        (bad(**{f"{FIO}__thresholds__read_bw__basis": None}),
         "checks.fio.seq_read.thresholds.read_bw.basis: Field required"),
        (bad(**{f"{FIO}__thresholds__read_bw__min_ratio": None}),
         "needs min_ratio, max_ratio or both"),
        (bad(**{f"{FIO}__thresholds__read_bandwidth": GOOD["checks"]["fio.seq_read"]
                ["thresholds"]["read_bw"]}),
         "checks.fio.seq_read.thresholds.read_bandwidth: the check judges no such metric"),
        (bad(**{f"{FIO}__thresholds": {}}),
         "checks.fio.seq_read.thresholds.read_bw: missing"),
        (bad(**{f"{FIO}__params__iodepth": 0}),
         "checks.fio.seq_read.params.iodepth: Input should be greater than or equal to 1"),
        (bad(**{f"{FIO}__params__blocksize": "1M"}),
         "checks.fio.seq_read.params.blocksize: Extra inputs are not permitted"),
        (bad(checks={"fio.seqread": {}}), "checks.fio.seqread: unknown check"),
        (bad(hardware__gpu__count=0), "hardware.gpu.count: Input should be greater than or"),
        (bad(hardware__gpu__source=None), "hardware.gpu.source: Field required"),
        (bad(hardware__nics=[{"role": "compute", "count": 8, "rate_gbps": 400,
                               "link_layer": "IB", "source": "a datasheet"}]),
         "hardware.nics.0.link_layer: Input should be 'InfiniBand' or 'Ethernet'"),
        (bad(hardware=None), "hardware: Field required"),
    ],
)
def test_bad_profile_is_refused_with_file_field_and_why(tmp_path, doc, message):
    path = write(tmp_path, doc)
    with pytest.raises(ProfileError) as exc:
        load_profile(path)
    assert path in str(exc.value)
    assert message in str(exc.value)


def test_unknown_profile_lists_shipped_ones():
    with pytest.raises(ProfileError, match=r"shipped: .*demo"):
        load_profile("no-such-profile")


def test_not_yaml_mapping(tmp_path):
    with pytest.raises(ProfileError, match="top level must be a mapping"):
        load_profile(write(tmp_path, [1, 2]))


def test_overrides_merge_deeply_and_are_validated(tmp_path):
    p = load_profile(write(tmp_path, GOOD))
    strict = p.with_overrides(
        {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {"min_ratio": 0.95}}}}},
        "host_vars of n1")
    t = strict.check("fio.seq_read").thresholds["read_bw"]
    assert t.min_ratio == 0.95 and t.ref == 7000 and t.limit  # the rest is kept
    assert strict.sha256 != p.sha256
    with pytest.raises(ProfileError, match="host_vars of n1 is invalid"):
        p.with_overrides({"checks": {"fio.seq_read": {"thresholds": {"read_bw": {"ref": 0}}}}},
                         "host_vars of n1")
    assert p.with_overrides({}, "nothing") is p


def test_each_metric_declares_its_direction_and_the_shipped_profiles_agree():
    """Every metric a check judges is a floor ("higher" is better) or a ceiling ("lower"),
    and every shipped threshold is one, as its check declares."""
    for name, spec in CATALOG.items():
        assert set(spec.better) == spec.metrics | spec.optional_metrics, name
    for name in available_profiles():
        for check, cp in load_profile(name).model.checks.items():
            for metric, t in cp.thresholds.items():
                floor = REGISTRY[check].better[metric] == "higher"
                assert (t.min_ratio is not None, t.max_ratio is not None) == (floor, not floor)
    with pytest.raises(ValueError, match="better must name every metric it judges"):
        replace(REGISTRY["fio.seq_read"], better={})


def test_an_override_tightens_freely_and_every_change_is_kept_in_order(tmp_path):
    p = load_profile(write(tmp_path, GOOD))
    once = p.with_overrides({"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "min_ratio": 0.9}}}}}, "overrides a.yaml")
    twice = once.with_overrides({"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "min_ratio": 0.95}}}}}, "overrides b.yaml")
    assert p.changes == () and len(once.changes) == 1
    first, second = twice.changes
    assert (first.origin, first.old.min_ratio, first.new.min_ratio) == ("overrides a.yaml",
                                                                        0.8, 0.9)
    assert (second.origin, second.old.min_ratio, second.new.min_ratio, second.loosens) == (
        "overrides b.yaml", 0.9, 0.95, ())


@pytest.mark.parametrize(("entry", "message"), [
    ({"unit": "GB/s", "basis": "the same figure in GB/s (a test)"},
     r"read_bw.unit: an override cannot change a threshold's unit \('MB/s' -> 'GB/s'\)"),
    ({"ceiling": 9000}, r"loosens it \(physical limit 7,000 MB/s -> 9,000 MB/s\)"),
    ({"limit": False}, r"loosens it \(physical limit 7,000 MB/s -> none\)"),
])
def test_an_override_may_not_change_a_unit_or_raise_a_physical_limit_silently(tmp_path, entry,
                                                                              message):
    p = load_profile(write(tmp_path, GOOD))
    with pytest.raises(ProfileError, match=message):
        p.with_overrides({"checks": {"fio.seq_read": {"thresholds": {"read_bw": entry}}}},
                         "overrides x.yaml")
