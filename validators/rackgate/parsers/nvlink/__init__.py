"""Parser for ``nvidia-smi nvlink -s`` (``--status``): the state of every NVLink of every GPU.

Format: nvidia-smi(1), ``nvlink --status``. One block per GPU, in index order:

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
             Link 0: 26.562 GB/s
             Link 1: <inactive>

A speed is the link's current rate in one direction, in GB/s (10^9 bytes/s), printed with
at most three decimals (``26.562`` for NVLink 4's 26.5625, ``14.062`` for 14.0625 on an
RTX A6000 bridge, ``25`` on A100): the record keeps how many were printed
(``speed_decimals``), so a judge compares at that precision. An unused or failed link
reads ``<inactive>``. A GPU without NVLink has a header and no link lines. A GPU
none of whose links is up has, instead of link lines, NVML's message

    NVML: Unable to retrieve NVLink information as all links are inActive

(spelled so in public issue reports, e.g. leptonai/gpud#1085; matched in any letter case):
it is read as ``all_links_inactive``, a fault of that GPU for the judge, not an unreadable
listing. Anything else (a ``...`` left by someone who shortened the listing, a cut line, a
skipped GPU index, that message beside link lines) is refused: a listing with links left
out must never read as a healthy one.

>>> s = parse_nvlink_status("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\\n"
...     "\\t Link 0: 25 GB/s\\n\\t Link 1: <inactive>\\n")
>>> [(link.index, link.speed_gb_s) for link in s.gpus[0].links]
[(0, 25.0), (1, None)]
>>> a6000 = parse_nvlink_status("GPU 0: NVIDIA RTX A6000\\n\\t Link 0: 14.062 GB/s\\n")
>>> a6000.gpus[0].links[0].speed_decimals, a6000.gpus[0].links[0].printed
(3, '14.062')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError

FORMAT = "nvidia-smi nvlink -s"
GPU_HEADER = re.compile(r"^GPU ([0-9]{1,4}): (.*?)(?: \(UUID: ([^()]*)\))?$")  # [^()]: as multipath
NVML_STRING = 96  # NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE
_LINK = re.compile(r"^Link ([0-9]{1,4}): (?:([0-9]{1,9}(?:\.[0-9]{1,9})?) GB/s|(<inactive>))$")
ALL_DOWN = re.compile(r"^NVML: ?Unable to retrieve NVLink information as all links are "
                       r"inactive\.?$", re.IGNORECASE)


@dataclass(frozen=True)
class NvLink:
    index: int
    speed_gb_s: float | None  # one direction, GB/s; None when nvidia-smi says <inactive>
    speed_decimals: int = 0  # digits nvidia-smi printed after the point (3 in "26.562")

    @property
    def active(self) -> bool:
        return self.speed_gb_s is not None

    @property
    def printed(self) -> str:
        """The speed as nvidia-smi printed it ("" for an inactive link)."""
        if self.speed_gb_s is None:
            return ""
        return f"{self.speed_gb_s:.{self.speed_decimals}f}"


@dataclass(frozen=True)
class NvLinkGpu:
    index: int
    name: str  # product name, e.g. "NVIDIA H100 80GB HBM3"
    uuid: str | None
    links: tuple[NvLink, ...]
    all_links_inactive: bool = False  # NVML's "all links are inActive" instead of link lines


@dataclass(frozen=True)
class NvLinkStatus:
    gpus: tuple[NvLinkGpu, ...]


def parse_nvlink_status(text: str) -> NvLinkStatus:
    """Parse ``nvidia-smi nvlink -s`` output; raise ParseError on anything else."""
    gpus: list[NvLinkGpu] = []
    current: tuple[int, str, str | None] | None = None
    links: list[NvLink] = []
    all_down = False

    def close() -> None:
        if current is not None:
            gpus.append(NvLinkGpu(current[0], current[1], current[2], tuple(links), all_down))

    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        gpu = GPU_HEADER.match(line)
        link = _LINK.match(line)
        if gpu:
            close()
            index = int(gpu.group(1))
            expected = gpus[-1].index + 1 if gpus else 0
            if index != expected:
                raise ParseError(f"{FORMAT}: line {lineno}: GPU {index} follows GPU "
                                 f"{expected - 1 if gpus else 'none'}; GPU {expected} is "
                                 "missing (elided or edited output?)")
            if max(len(gpu.group(2)), len(gpu.group(3) or "")) > NVML_STRING:
                raise ParseError(f"{FORMAT}: line {lineno}: GPU {index}'s name or UUID is "
                                 f"longer than NVML's {NVML_STRING} characters (damaged?)")
            current, links, all_down = (index, gpu.group(2), gpu.group(3)), [], False
        elif ALL_DOWN.match(line):
            if current is None:
                raise ParseError(f"{FORMAT}: line {lineno}: NVML's 'all links are inactive' "
                                 "before any 'GPU n:' line (output cut at the start?)")
            if all_down or links:
                raise ParseError(f"{FORMAT}: line {lineno}: GPU {current[0]} "
                                 + ("says 'all links are inactive' twice" if all_down else
                                    "lists links and then says all links are inactive")
                                 + " (edited or mixed output?)")
            all_down = True
        elif link:
            if current is None:
                raise ParseError(f"{FORMAT}: line {lineno}: a Link line before any "
                                 "'GPU n:' line (output cut at the start?)")
            if all_down:
                raise ParseError(f"{FORMAT}: line {lineno}: GPU {current[0]} Link line after "
                                 "NVML said all links are inactive (edited or mixed output?)")
            index = int(link.group(1))
            if index != len(links):
                raise ParseError(f"{FORMAT}: line {lineno}: GPU {current[0]} Link {index} "
                                 f"follows Link {len(links) - 1}; links are missing "
                                 "(elided or edited output?)")
            text = link.group(2)
            speed = None if link.group(3) else float(text)
            links.append(NvLink(index, speed, len(text.partition(".")[2]) if text else 0))
        else:
            raise ParseError(f"{FORMAT}: line {lineno}: {line[:60]!r} is neither 'GPU n: "
                             "<name> (UUID: ...)' nor 'Link n: <speed> GB/s' or "
                             "'Link n: <inactive>' (elided, cut or edited output?)")
    close()
    if not gpus:
        raise ParseError(f"{FORMAT}: no 'GPU n:' line (empty output, or not this command's)")
    return NvLinkStatus(tuple(gpus))
