"""Parser for ``nvidia-smi topo -m`` (``--matrix``): the GPU/NIC connection matrix.

Format: nvidia-smi(1), ``topo -m`` and the legend the tool prints under the matrix. A header
row names the devices (``GPU0``.., ``NIC0``.. on recent drivers, RDMA names such as
``mlx5_0`` on older ones), then ``CPU Affinity``, ``NUMA Affinity`` and, from about driver
535, ``GPU NUMA ID``. One row per device gives the link to every device column:

    X      self
    SYS    PCIe plus the SMP interconnect between NUMA nodes (QPI/UPI)
    NODE   PCIe plus the interconnect between PCIe host bridges within a NUMA node
    PHB    PCIe plus a PCIe host bridge (typically the CPU)
    PXB    multiple PCIe bridges, without the host bridge
    PIX    at most a single PCIe bridge
    NV#    a bonded set of # NVLinks
    SOC    drivers before 384: same as SYS

then the affinity cells (GPU rows only). An optional ``NIC Legend:`` maps ``NIC0: mlx5_0``.

Real output varies: tab- or space-separated (copies of the tab-separated original lose the
tabs), CRLF line ends, empty affinity cells, an extra empty cell before ``GPU NUMA ID``,
text before the header or after the legend. Cells are read per line (tabs when the line has
a tab, runs of spaces otherwise); affinity cells are read by position, and must be a CPU
list, a NUMA node, N/A or empty.

>>> m = parse_topo_matrix("\\tGPU0\\tGPU1\\tNIC0\\tCPU Affinity\\tNUMA Affinity\\n"
...     "GPU0\\t X \\tNV18\\tPIX\\t0-47\\t0\\nGPU1\\tNV18\\t X \\tSYS\\t48-95\\t1\\n"
...     "NIC0\\tPIX\\tSYS\\t X\\n\\nNIC Legend:\\n\\n  NIC0: mlx5_0\\n")
>>> m.link("GPU0", "GPU1").kind, m.link("GPU0", "GPU1").nvlinks, m.nic_name("NIC0")
('NV', 18, 'mlx5_0')
>>> m.gpus[1].cpu_affinity, m.gpus[1].numa_affinity
('48-95', '1')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError

FORMAT = "nvidia-smi topo -m"
_AFFINITY_NAMES = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
# a CPU list as the kernel writes it ("0-55,112-167"), a NUMA node, N/A, or empty
_AFFINITY_SHAPES = {
    "CPU Affinity": re.compile(r"N/A|(?:[0-9]{1,5}(?:-[0-9]{1,5})?(?:,[0-9]{1,5}"
                               r"(?:-[0-9]{1,5})?)*)?", re.ASCII),
    "NUMA Affinity": re.compile(r"N/A|[0-9]{0,4}", re.ASCII),
    "GPU NUMA ID": re.compile(r"N/A|[0-9]{0,4}", re.ASCII),
}
_LINK = re.compile(r"^(X|SYS|NODE|PHB|PXB|PIX|SOC|NV([1-9][0-9]{0,3}))$")
_LEGEND_ENTRY = re.compile(r"^\s*(NIC[0-9]+)\s*:\s*(\S+)\s*$")
_GPU = re.compile(r"^GPU([0-9]+)$")
_DEVICE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*$")
# nearness of a PCIe path, best first (NVLink between a GPU and a NIC does not occur)
PCIE_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4, "SOC": 4}


@dataclass(frozen=True)
class Link:
    """One matrix cell: ``kind`` is X, SYS, NODE, PHB, PXB, PIX or NV; ``nvlinks`` the bond."""

    kind: str
    nvlinks: int = 0  # links in the NV# bond; 0 for PCIe paths and self

    def __str__(self) -> str:
        return f"NV{self.nvlinks}" if self.kind == "NV" else self.kind


@dataclass(frozen=True)
class TopoDevice:
    label: str  # column name: GPU3, NIC2 or an RDMA name (older drivers)
    is_gpu: bool
    cpu_affinity: str | None  # e.g. "0-31,64-95"; None for NIC rows, "" when printed empty
    numa_affinity: str | None
    gpu_numa_id: str | None  # "N/A" on most systems; None when the column is absent


@dataclass(frozen=True)
class TopoMatrix:
    devices: tuple[TopoDevice, ...]
    links: dict[tuple[str, str], Link]  # (row label, column label) -> cell
    nic_legend: dict[str, str]  # NIC0 -> mlx5_0; empty when no legend was printed

    @property
    def gpus(self) -> tuple[TopoDevice, ...]:
        return tuple(d for d in self.devices if d.is_gpu)

    @property
    def nics(self) -> tuple[TopoDevice, ...]:
        return tuple(d for d in self.devices if not d.is_gpu)

    def link(self, a: str, b: str) -> Link:
        return self.links[(a, b)]

    def nic_name(self, label: str) -> str:
        """The RDMA device name of a NIC column (the label itself without a legend)."""
        return self.nic_legend.get(label, label)


def _cells(line: str) -> list[str]:
    if "\t" in line:
        return [c.strip() for c in line.split("\t")]
    return line.split()


def _header_cells(line: str) -> tuple[list[str], list[str]]:
    """(device column names, affinity column names) of the header line."""
    marked = line
    for i, name in enumerate(_AFFINITY_NAMES):
        marked = marked.replace(name, f"\x00{i}")
    cells = [c for c in _cells(marked) if c]
    devices = [c for c in cells if not c.startswith("\x00")]
    trailing = [_AFFINITY_NAMES[int(c[1])] for c in cells if c.startswith("\x00")]
    if cells[len(devices):] != [c for c in cells if c.startswith("\x00")]:
        raise ParseError(f"{FORMAT}: the header names a device after the affinity columns: "
                         f"{line.strip()!r}")
    return devices, trailing


def _find_header(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        words = line.split()
        if words and words[0] == "GPU0" and ("Affinity" in line or line[:1] in (" ", "\t")):
            return i
    raise ParseError(f"{FORMAT}: no header row naming GPU0 (expected a line like "
                     "'<tab>GPU0<tab>GPU1 ... CPU Affinity'); is this the matrix output?")


def _link(cell: str, row: str, col: str, lineno: int) -> Link:
    m = _LINK.match(cell)
    if m is None:
        raise ParseError(f"{FORMAT}: line {lineno}: cell {row}/{col} is {cell!r}, not one of "
                         "X, SYS, NODE, PHB, PXB, PIX, NV# (truncated or edited output?)")
    if m.group(2):
        return Link("NV", int(m.group(2)))
    return Link("SYS" if cell == "SOC" else cell)


def _legend(lines: list[str]) -> dict[str, str] | None:
    for i, line in enumerate(lines):
        if line.strip() == "NIC Legend:":
            entries = (_LEGEND_ENTRY.match(x) for x in lines[i + 1:])
            return {m.group(1): m.group(2) for m in entries if m}
    return None


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` output; raise ParseError naming what is missing."""
    if "\x00" in text:
        raise ParseError(f"{FORMAT}: a NUL byte at offset {text.index(chr(0))}: not the "
                         "tool's text output")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    start = _find_header(lines)
    names, trailing = _header_cells(lines[start])
    bad = [n for n in names if not _DEVICE.match(n)]
    if bad or len(set(names)) != len(names):
        raise ParseError(f"{FORMAT}: header device names are unusable or repeated: {names}")
    rows: dict[str, tuple[int, list[str]]] = {}
    for lineno, line in enumerate(lines[start + 1:], start=start + 2):
        cells = _cells(line)
        if not cells or cells[0] not in names:
            if rows:
                break  # the matrix ends at the first line that is not a device row
            continue
        if cells[0] in rows:
            raise ParseError(f"{FORMAT}: line {lineno}: a second row for {cells[0]}")
        rows[cells[0]] = (lineno, cells[1:])
    missing = [n for n in names if n not in rows]
    if missing:
        raise ParseError(f"{FORMAT}: the header names {len(names)} devices but there is no "
                         f"row for {', '.join(missing)} (truncated output?)")
    links: dict[tuple[str, str], Link] = {}
    devices = []
    for name in names:
        lineno, cells = rows[name]
        if len(cells) < len(names):
            raise ParseError(f"{FORMAT}: line {lineno}: row {name} has {len(cells)} cells, "
                             f"the header names {len(names)} devices (truncated output?)")
        for col, cell in zip(names, cells, strict=False):
            links[(name, col)] = _link(cell, name, col, lineno)
        if links[(name, name)].kind != "X":
            raise ParseError(f"{FORMAT}: line {lineno}: {name}/{name} is "
                             f"{links[(name, name)]}, expected X (columns out of order?)")
        rest = cells[len(names):]
        is_gpu = bool(_GPU.match(name))
        affinity: dict[str, str | None] = dict.fromkeys(_AFFINITY_NAMES)
        if is_gpu:
            if len(rest) < min(2, len(trailing)):
                raise ParseError(f"{FORMAT}: line {lineno}: row {name} lacks its CPU and "
                                 f"NUMA affinity cells (truncated output?)")
            for i, col in enumerate(trailing[:2]):
                affinity[col] = rest[i] if i < len(rest) else None
            if "GPU NUMA ID" in trailing and len(rest) >= len(trailing):
                affinity["GPU NUMA ID"] = rest[-1]  # drivers print an empty cell before it
        for col, shape in _AFFINITY_SHAPES.items():
            value = affinity[col]
            if value is not None and not shape.fullmatch(value):
                raise ParseError(f"{FORMAT}: line {lineno}: {name}'s {col} {value[:40]!r} is "
                                 "no CPU list or NUMA node nvidia-smi prints")
        devices.append(TopoDevice(name, is_gpu, affinity["CPU Affinity"],
                                  affinity["NUMA Affinity"], affinity["GPU NUMA ID"]))
    nic_labels = [n for n in names if not _GPU.match(n)]
    legend = _legend(lines[start:]) or {}
    if legend:
        unnamed = [n for n in nic_labels if n.startswith("NIC") and n not in legend]
        if unnamed:
            raise ParseError(f"{FORMAT}: the NIC Legend names no device for "
                             f"{', '.join(unnamed)} (truncated output?)")
    if not any(_GPU.match(n) for n in names):
        raise ParseError(f"{FORMAT}: the matrix has no GPU column")
    return TopoMatrix(tuple(devices), links, legend)
