"""The hardware profiles shipped in validators/rackgate/profiles/.

Each must load, say where every hardware figure comes from, and explain every threshold.
The expected values below are the ones documented in the profiles (NVIDIA user guides and
public nvidia-smi output); a change to a profile's hardware must change them here too.
"""

from __future__ import annotations

import re

import pytest

from rackgate.checks import load_profile
from rackgate.checks.storage.fio import SeqReadParams
from rackgate.profile import Profile, Threshold, available_profiles

HARDWARE_PROFILES = ("dgx-h100", "dgx-a100", "hgx-h200")

# name: (nvidia-smi Product Name, GPUs per node, FB memory MiB, NVLink gen, links, GB/s)
GPUS = {
    "dgx-h100": ("NVIDIA H100 80GB HBM3", 8, 81559, 4, 18, 900),
    "dgx-a100": ("NVIDIA A100-SXM4-80GB", 8, 81920, 3, 12, 600),
    "hgx-h200": ("NVIDIA H200", 8, 143771, 4, 18, 900),
}

# name: {role: (ports, Gb/s per port, link layer)}
NICS = {
    "dgx-h100": {"compute": (8, 400, "InfiniBand"), "storage": (4, 400, "Ethernet"),
                 "management": (1, 1, "Ethernet")},
    "dgx-a100": {"compute": (8, 200, "InfiniBand"), "storage": (4, 200, "Ethernet"),
                 "management": (1, 1, "Ethernet")},
    "hgx-h200": {},   # OEM-specific: no NVIDIA figure to state
}

# name: (PSUs, redundancy, W each) or None when the OEM chooses
PSUS = {
    "dgx-h100": (6, "N+2", 3300),
    "dgx-a100": (6, "N+N", 3000),
    "hgx-h200": None,
}

# a product or quotient of figures, units allowed between: "8 x 2,000", "400 Gb/s / 8"
ARITHMETIC = re.compile(r"\d[\d,.]*(?:\s*[A-Za-z/]+){0,3}\s*(?:x|\u00d7|\*|/)\s*\d")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def thresholds(profile: Profile) -> list[tuple[str, Threshold]]:
    return [(f"{check}.{metric}", t)
            for check, cp in profile.model.checks.items()
            for metric, t in cp.thresholds.items()]


def number_forms(value: float) -> set[str]:
    return {f"{value:g}", f"{value:,.0f}", f"{value:.0f}"}


def test_the_three_hardware_profiles_are_shipped():
    assert set(HARDWARE_PROFILES) <= set(available_profiles())


@pytest.mark.parametrize("name", available_profiles())
def test_every_shipped_profile_loads_under_its_file_name(name):
    assert load_profile(name).name == name


@pytest.mark.parametrize("name", available_profiles())
def test_every_threshold_has_a_real_basis(name):
    for where, t in thresholds(load_profile(name)):
        assert len(t.basis) >= 80, f"{name} {where}: basis too short to explain the figure"
        assert re.search(r"\d", t.basis), f"{name} {where}: basis quotes no figure"


@pytest.mark.parametrize("name", available_profiles())
def test_limits_are_backed_by_a_ref_and_its_arithmetic(name):
    for where, t in thresholds(load_profile(name)):
        if not t.limit:
            continue
        assert t.ref > 0
        assert ARITHMETIC.search(t.basis), f"{name} {where}: a limit needs its arithmetic"
        assert number_forms(t.ref) & set(NUMBER.findall(t.basis)), \
            f"{name} {where}: basis does not show how ref {t.ref:g} is reached"


@pytest.mark.parametrize("name", available_profiles())
def test_every_hardware_block_names_its_source(name):
    hw = load_profile(name).model.hardware
    blocks = [("gpu", hw.gpu), ("psu", hw.psu), ("storage", hw.storage)]
    blocks += [(f"nics[{i}] {n.role}", n) for i, n in enumerate(hw.nics)]
    for label, block in blocks:
        if block is None:
            continue
        assert len(block.source.split()) >= 8, f"{name} {label}: source too thin to find"


@pytest.mark.parametrize("name", HARDWARE_PROFILES)
def test_hardware_profile_thresholds_show_their_arithmetic(name):
    # none of these is a vendor limit yet; the floors still show how ref was reached
    for where, t in thresholds(load_profile(name)):
        assert ARITHMETIC.search(t.basis), f"{name} {where}: no arithmetic in basis"
        assert number_forms(t.ref) & set(NUMBER.findall(t.basis)), where
        assert "rackgate_profile_overrides" in t.basis, where


@pytest.mark.parametrize("name", HARDWARE_PROFILES)
def test_gpu_block_is_what_the_profile_documents(name):
    gpu = load_profile(name).model.hardware.gpu
    assert gpu is not None
    model, count, mib, gen, links, gbs = GPUS[name]
    assert (gpu.model, gpu.count, gpu.memory_mib) == (model, count, mib)
    assert (gpu.nvlink_generation, gpu.nvlinks_per_gpu, gpu.nvlink_gb_s_per_gpu) == \
        (gen, links, gbs)
    assert gpu.nvlink_topology is not None and gpu.nvlink_topology.kind == "nvswitch"


@pytest.mark.parametrize("name", HARDWARE_PROFILES)
def test_nics_are_what_the_profile_documents(name):
    nics = load_profile(name).model.hardware.nics
    got = {n.role: (n.count, n.rate_gbps, n.link_layer) for n in nics}
    assert len(got) == len(nics), f"{name}: one entry per role expected"
    assert got == NICS[name]


@pytest.mark.parametrize("name", HARDWARE_PROFILES)
def test_psus_are_what_the_profile_documents(name):
    psu = load_profile(name).model.hardware.psu
    if PSUS[name] is None:
        assert psu is None
    else:
        assert psu is not None
        assert (psu.count, psu.redundancy, psu.watts_each) == PSUS[name]


@pytest.mark.parametrize("name", ["dgx-h100", "dgx-a100"])
def test_dgx_storage_and_read_floor_follow_the_data_drives(name):
    p = load_profile(name)
    storage = p.model.hardware.storage
    assert storage is not None
    assert storage.local_nvme_count == 10   # 2 M.2 boot + 8 U.2 data drives
    t = p.check("fio.seq_read").thresholds["read_bw"]
    assert (t.unit, t.ref, t.limit) == ("MB/s", 16000, False)   # 8 drives x 2,000 MB/s
    assert t.lower_bound == pytest.approx(12000)


@pytest.mark.parametrize("name", HARDWARE_PROFILES)
def test_seq_read_params_suit_a_real_node(name):
    p = load_profile(name)
    params = SeqReadParams.model_validate(p.check("fio.seq_read").params)
    assert params.ioengine == "libaio" and params.direct
    assert 30 <= params.runtime_s <= 60
    assert params.iodepth >= 16 and params.numjobs >= 4
    assert params.size.endswith("G")
    assert params.timeout_s >= 5 * params.runtime_s


def test_hgx_h200_leaves_oem_parts_to_the_site():
    p = load_profile("hgx-h200")
    assert "OEM" in p.model.description
    hw = p.model.hardware
    assert (hw.nics, hw.psu, hw.storage) == ([], None, None)
    t = p.check("fio.seq_read").thresholds["read_bw"]
    assert t.limit is False
    assert "floor" in t.basis.lower()


def test_hgx_h200_floor_can_be_overridden_per_site():
    site = {"checks": {"fio.seq_read": {"thresholds": {"read_bw": {
        "ref": 28000, "limit": True,
        "basis": "4 data drives x 7,000 MB/s rated sequential read (OEM datasheet, table 2)",
    }}}}}
    p = load_profile("hgx-h200").with_overrides(site, "group_vars/hgx.yml")
    t = p.check("fio.seq_read").thresholds["read_bw"]
    assert (t.ref, t.limit, t.min_ratio) == (28000, True, 0.75)
    assert t.lower_bound == pytest.approx(21000)
    assert p.model.hardware.gpu is not None and p.model.hardware.gpu.model == "NVIDIA H200"
