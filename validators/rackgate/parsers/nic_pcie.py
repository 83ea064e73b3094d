"""Parser for rackgate's NIC PCIe link probe (the ``fabric.nic_pcie`` check).

The probe (a fixed ``sh -c`` script, checks/fabric/nic_pcie.py) lists the RDMA devices
(``/sys/class/infiniband/<device>``, Linux Documentation/ABI/stable/sysfs-class-infiniband)
on a ``devices=`` line, then for each one ``<device>/<file>=<value>`` lines: the PCI
device's ``current_link_width``, ``current_link_speed``, ``max_link_width`` and
``max_link_speed`` (Linux Documentation/ABI/testing/sysfs-bus-pci: the width in lanes, the
speed as the kernel's ``PCIE_SPEED2STR`` prints it, "16.0 GT/s PCIe"; older kernels print
"8 GT/s"; "Unknown" when the link is down), and port 1's ``link_layer`` (InfiniBand or
Ethernet). A file the kernel does not offer is printed empty. The last line is ``end=``:
output without it was cut.

Speeds map to generations by the PCI Express base specifications' rates: 2.5, 5, 8, 16,
32 and 64 GT/s are generations 1 to 6.

>>> r = parse_nic_pcie("devices=mlx5_0\\nmlx5_0/current_link_width=16\\n"
...     "mlx5_0/current_link_speed=16.0 GT/s PCIe\\nmlx5_0/max_link_width=16\\n"
...     "mlx5_0/max_link_speed=16.0 GT/s PCIe\\nmlx5_0/link_layer=InfiniBand\\nend=\\n")
>>> d = r.devices[0]
>>> d.device, d.link_layer, d.width_current, d.gen_current, d.gen_max
('mlx5_0', 'InfiniBand', 16, 4, 4)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError, key_value_lines

PROBE_NAME = "NIC PCIe probe"
FILES = ("current_link_width", "current_link_speed", "max_link_width", "max_link_speed",
         "link_layer")
_DEVICE = re.compile(r"[A-Za-z0-9_.:-]+\Z")
_SPEED = re.compile(r"(\d+(?:\.\d+)?) GT/s(?: PCIe)?\Z")
_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_WIDTHS = {0, 1, 2, 4, 8, 12, 16, 32}  # 0: link down


@dataclass(frozen=True)
class NicLink:
    """One RDMA device's PCIe link; None where the kernel printed nothing or Unknown."""

    device: str
    link_layer: str | None
    width_current: int | None
    width_max: int | None
    gen_current: int | None
    gen_max: int | None


@dataclass(frozen=True)
class NicPcie:
    devices: tuple[NicLink, ...]


def _width(device: str, name: str, value: str) -> int | None:
    if not value:
        return None
    if not re.fullmatch(r"[0-9]{1,2}", value) or int(value) not in _WIDTHS:
        raise ParseError(f"{PROBE_NAME}: {device}/{name} is {value!r}, not a PCIe link "
                         f"width ({', '.join(map(str, sorted(_WIDTHS)))})")
    return int(value)


def _gen(device: str, name: str, value: str) -> int | None:
    if not value or value == "Unknown":
        return None
    m = _SPEED.match(value)
    gen = _GEN.get(float(m.group(1))) if m else None
    if gen is None:
        raise ParseError(f"{PROBE_NAME}: {device}/{name} is {value!r}, not a PCIe speed "
                         "(2.5, 5.0, 8.0, 16.0, 32.0 or 64.0 GT/s)")
    return gen


def parse_nic_pcie(text: str) -> NicPcie:
    """Parse the probe's output; ParseError naming the device and file for anything else."""
    pairs = key_value_lines(text, PROBE_NAME)
    if not pairs or pairs[0][0] != "devices":
        raise ParseError(f"{PROBE_NAME}: the first line is not devices=... (not the rackgate "
                         "NIC PCIe probe?)")
    if pairs[-1][0] != "end":
        raise ParseError(f"{PROBE_NAME}: no end= line (truncated output)")
    names = pairs[0][1].split()
    bad = [n for n in names if not _DEVICE.match(n)]
    if bad or len(set(names)) != len(names):
        raise ParseError(f"{PROBE_NAME}: devices= lists unusable or repeated names: {names}")
    values: dict[tuple[str, str], str] = {}
    for key, value in pairs[1:-1]:
        device, _, name = key.partition("/")
        if device not in names or name not in FILES:
            raise ParseError(f"{PROBE_NAME}: line {key}={value!r} names no listed device "
                             f"and file ({', '.join(FILES)})")
        if (device, name) in values:
            raise ParseError(f"{PROBE_NAME}: {key} is given twice (duplicated output)")
        values[(device, name)] = value
    out = []
    for d in names:
        missing = [f for f in FILES if (d, f) not in values]
        if missing:
            raise ParseError(f"{PROBE_NAME}: no {', '.join(missing)} line for {d} "
                             "(truncated output?)")
        out.append(NicLink(d, values[(d, "link_layer")] or None,
                           _width(d, "current_link_width", values[(d, "current_link_width")]),
                           _width(d, "max_link_width", values[(d, "max_link_width")]),
                           _gen(d, "current_link_speed", values[(d, "current_link_speed")]),
                           _gen(d, "max_link_speed", values[(d, "max_link_speed")])))
    return NicPcie(tuple(out))
