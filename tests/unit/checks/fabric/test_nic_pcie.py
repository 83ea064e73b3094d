"""fabric.nic_pcie: the NIC PCIe probe (sysfs) judged against the width and generation of the
profile's NIC classes: tests/fixtures/topology/nic-pcie-dgx-h100-12-ports-gen5-x16-healthy.txt
and its twin nic-pcie-mlx5-4-x8-downtrained.txt (hand-written from the sysfs layout, see
their headers), and the shipped DGX profiles' NIC links with their arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import load_profile
from rackgate.checks.fabric.nic_pcie import NicPcieParams, judge_nic_pcie
from rackgate.hardware import Hardware, NicSpec
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.nic_pcie import parse_nic_pcie

FIX = Path(__file__).parents[3] / "fixtures"
SRC = "a public document for the test"


def read(name: str) -> str:
    text = (FIX / name).read_text(encoding="utf-8")
    return text.partition("\n# ---\n")[2] if "\n# ---\n" in text else text

# --- the NIC PCIe probe (sysfs) against the profile's NIC classes -------------------------

NIC = "topology/nic-pcie-dgx-h100-12-ports-gen5-x16-healthy.txt"
NIC_X8 = "topology/nic-pcie-mlx5-4-x8-downtrained.txt"
H100 = load_profile("dgx-h100").model.hardware


def nic(text: str, hw: Hardware = H100, **params: object):
    return judge_nic_pcie(parse_nic_pcie(text), NicPcieParams.model_validate(params), {}, hw)


def test_nic_pcie_dgx_h100_healthy_passes_and_x8_fails_naming_the_device():
    j = nic(read(NIC))
    assert j.status is Status.PASS and j.measured == 12, j.message
    j = nic(read(NIC_X8))
    assert j.status is Status.FAIL
    assert j.message == "mlx5_4: PCIe link x8, the profile expects x16 (down-trained link)"


def test_nic_pcie_generation_count_and_foreign_devices():
    j = nic(read(NIC).replace("mlx5_7/current_link_speed=32.0", "mlx5_7/current_link_speed=16.0"))
    assert j.status is Status.FAIL and "mlx5_7: PCIe gen 4, the profile expects gen 5" in j.message
    j = nic(read(NIC).replace("mlx5_7/current_link_speed=32.0", "mlx5_7/current_link_speed=16.0"),
            require_gen=False)
    assert j.status is Status.WARN
    j = nic(read(NIC).replace("mlx5_9/link_layer=InfiniBand", "mlx5_9/link_layer=Ethernet"))
    assert j.status is Status.FAIL
    assert "7 InfiniBand RDMA device(s)" in j.message and "5 Ethernet" in j.message
    j = nic(read(NIC).replace("mlx5_2/current_link_speed=32.0 GT/s PCIe",
                              "mlx5_2/current_link_speed=Unknown"))
    assert j.status is Status.ERROR
    assert "mlx5_2: PCIe generation not reported (or link down)" in j.message
    j = nic(read(NIC), load_profile("hgx-h200").model.hardware)
    assert j.status is Status.SKIP and "no NIC PCIe link" in j.message


@pytest.mark.parametrize("text, match", [
    ("", "first line is not devices="),
    ("devices=mlx5_0\nmlx5_0/current_link_width=16\n", "no end= line"),
    ("devices=mlx5_0\nmlx5_0/current_link_width=16\nend=\n", "no current_link_speed"),
    ("devices=mlx5_0\nmlx5_1/current_link_width=16\nend=\n", "names no listed device"),
    (("mlx5_0/current_link_width=16", "mlx5_0/current_link_width=12x"),
     "mlx5_0/current_link_width is '12x', not a PCIe link width"),
    (("mlx5_3/max_link_speed=32.0 GT/s PCIe", "mlx5_3/max_link_speed=10 GT/s"),
     "mlx5_3/max_link_speed is '10 GT/s', not a PCIe speed"),
    ("devices=mlx5_0\nmlx5_0/link_layer=Ethernet\nmlx5_0/link_layer=Ethernet\nend=\n",
     "given twice"),
])
def test_nic_pcie_malformed_probe_output_names_what_is_wrong(text, match):
    if isinstance(text, tuple):
        text = read(NIC).replace(*text)
    with pytest.raises(ParseError, match=match):
        parse_nic_pcie(text)


def test_nic_class_pcie_rules():
    with pytest.raises(ValueError, match="management port"):
        NicSpec.model_validate({"role": "management", "count": 1, "rate_gbps": 1,
                                "link_layer": "Ethernet", "source": SRC,
                                "pcie": {"width": 1, "basis": "a BMC is not a host device"}})
    one = {"count": 1, "rate_gbps": 400, "link_layer": "Ethernet", "source": SRC}
    with pytest.raises(ValueError, match="cannot tell their devices apart"):
        Hardware.model_validate({"nics": [
            {**one, "role": "compute", "pcie": {"width": 16, "basis": "a x16 card here"}},
            {**one, "role": "storage", "pcie": {"width": 8, "basis": "a x8 card here"}}]})


@settings(max_examples=40, deadline=None)
@given(device=st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
       width=st.sampled_from([0, 1, 2, 4, 8, 32]))
def test_nic_pcie_any_device_off_its_width_never_passes(device, width):
    text = read(NIC).replace(f"mlx5_{device}/current_link_width=16",
                             f"mlx5_{device}/current_link_width={width}")
    j = nic(text)
    assert j.status is Status.FAIL and f"mlx5_{device}: PCIe link x{width}" in j.message


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(0, 2000))
def test_nic_pcie_any_cut_output_never_passes(cut):
    text = read(NIC)
    cut = min(cut, len(text) - len("end=\n") - 1)
    try:
        j = nic(text[:cut])
    except ParseError:
        return
    assert j.status in (Status.FAIL, Status.ERROR)


@pytest.mark.parametrize("name, link", [("dgx-a100", (16, 4)), ("dgx-h100", (16, 5))])
def test_dgx_profiles_state_their_nics_pcie_links_with_the_arithmetic(name, link):
    nics = load_profile(name).model.hardware.nics
    for n in nics:
        if n.role == "management":
            assert n.pcie is None
            continue
        assert n.pcie is not None and (n.pcie.width, n.pcie.generation) == link, n.role
        assert "x 128/130 / 8" in n.pcie.basis and "user manuals" in n.pcie.basis
