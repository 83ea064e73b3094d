"""Parser for ``nvidia-smi nvlink -e`` (``--errorcounters``): every NVLink's error counters.

Format: nvidia-smi(1), ``nvlink --errorcounters`` ("Display error counters for a link");
the layout as published (e.g. the "Check error counters of NVLink links" section of
stas00/ml-engineering, an 8 x H100 node). One block per GPU, in index order, its header as
``nvidia-smi nvlink -s`` prints it (``parsers.nvlink``), then one line per counter of each
link, a link's lines together, blank lines between links allowed:

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
             Link 0: Replay Errors: 0
             Link 0: Recovery Errors: 0
             Link 0: CRC Errors: 0

The counters (NVML's ``nvmlDeviceGetNvLinkErrorCounter``: data-link replay, recovery, flit
and data CRC, data ECC) count since the driver loaded or since ``nvidia-smi nvlink -re``
reset them. The names read, and the kind each is judged as (:data:`COUNTER_KIND`):
``Replay Errors``, ``Recovery Errors``, ``CRC Errors`` (the three most drivers print) and,
where a driver splits the CRC counter or adds ECC, ``CRC Flit Errors``, ``CRC Data Errors``,
``ECC Errors``. Blackwell-generation drivers print another counter set (``Rx Errors``,
``Symbol Errors``, ``FEC Errors - N``, BER figures): it is not read yet, and is refused by
name, as is any other counter. A GPU none of whose links is up may print NVML's "all links
are inActive" message instead of its links, read as ``all_links_inactive``.

Refused (ParseError): a line that is none of these, a skipped GPU index, a link whose lines
are split or repeated, a counter twice on one link, a link whose counters are not the ones
the other links have (a line lost or added), a count that is no unsigned 64-bit integer.

>>> e = parse_nvlink_errors("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\\n"
...     "\\t Link 0: Replay Errors: 0\\n\\t Link 0: Recovery Errors: 0\\n"
...     "\\t Link 0: CRC Errors: 3\\n")
>>> [(c.name, c.kind, c.count) for c in e.gpus[0].links[0].counters][2]
('CRC Errors', 'crc', 3)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError
from rackgate.parsers.nvlink import ALL_DOWN, GPU_HEADER, NVML_STRING

FORMAT = "nvidia-smi nvlink -e"
# counter as printed -> the kind its limit is judged by (checks.gpu.nvlink_errors)
COUNTER_KIND = {"Replay Errors": "replay", "Recovery Errors": "recovery", "CRC Errors": "crc",
                "CRC Flit Errors": "crc", "CRC Data Errors": "crc", "ECC Errors": "ecc"}
_COUNTER = re.compile(r"^Link ([0-9]{1,4}): ([A-Za-z][A-Za-z -]{0,60}?): ([0-9]{1,20})$")
_U64 = 2**64 - 1


@dataclass(frozen=True)
class LinkCounter:
    name: str  # as nvidia-smi prints it, e.g. "Replay Errors"
    kind: str  # replay, recovery, crc or ecc (COUNTER_KIND)
    count: int  # since the driver loaded or the counters were reset


@dataclass(frozen=True)
class LinkErrors:
    index: int
    counters: tuple[LinkCounter, ...]  # in the order printed


@dataclass(frozen=True)
class GpuLinkErrors:
    index: int
    name: str
    uuid: str | None
    links: tuple[LinkErrors, ...]
    all_links_inactive: bool = False  # NVML's "all links are inActive" instead of links


@dataclass(frozen=True)
class NvLinkErrors:
    gpus: tuple[GpuLinkErrors, ...]


class _Reader:
    """The state of one pass over the lines: the GPU and link being read."""

    def __init__(self) -> None:
        self.gpus: list[GpuLinkErrors] = []
        self.gpu: tuple[int, str, str | None] | None = None
        self.links: list[LinkErrors] = []
        self.counters: list[LinkCounter] = []
        self.link: int | None = None
        self.all_down = False
        self.names: tuple[str, ...] | None = None  # the counter set every link must have

    def close_link(self, lineno: int) -> None:
        if self.link is None:
            return
        names = tuple(c.name for c in self.counters)
        if self.names is None:
            self.names = names
        elif names != self.names:
            raise ParseError(f"{FORMAT}: before line {lineno}: GPU {self.gpu and self.gpu[0]} "
                             f"link {self.link} has the counters {', '.join(names)}, the "
                             f"links before it {', '.join(self.names)} (a line lost or added?)")
        self.links.append(LinkErrors(self.link, tuple(self.counters)))
        self.link, self.counters = None, []

    def close_gpu(self, lineno: int) -> None:
        self.close_link(lineno)
        if self.gpu is not None:
            self.gpus.append(GpuLinkErrors(*self.gpu, tuple(self.links), self.all_down))
        self.gpu, self.links, self.all_down = None, [], False

    def header(self, m: re.Match[str], lineno: int) -> None:
        self.close_gpu(lineno)
        index = int(m.group(1))
        expected = self.gpus[-1].index + 1 if self.gpus else 0
        if index != expected:
            raise ParseError(f"{FORMAT}: line {lineno}: GPU {index} where GPU {expected} is "
                             "next (a GPU elided, repeated or edited?)")
        if max(len(m.group(2)), len(m.group(3) or "")) > NVML_STRING:
            raise ParseError(f"{FORMAT}: line {lineno}: GPU {index}'s name or UUID is longer "
                             f"than NVML's {NVML_STRING} characters (damaged?)")
        self.gpu = (index, m.group(2), m.group(3))

    def counter(self, m: re.Match[str], lineno: int) -> None:
        if self.gpu is None:
            raise ParseError(f"{FORMAT}: line {lineno}: a Link line before any 'GPU n:' line "
                             "(output cut at the start?)")
        if self.all_down:
            raise ParseError(f"{FORMAT}: line {lineno}: GPU {self.gpu[0]} Link line after "
                             "NVML said all links are inactive (edited or mixed output?)")
        link, name, count = int(m.group(1)), m.group(2), int(m.group(3))
        if name not in COUNTER_KIND:
            raise ParseError(f"{FORMAT}: line {lineno}: counter {name[:40]!r} is none rackgate "
                             f"reads ({', '.join(COUNTER_KIND)}; Blackwell drivers' counter "
                             "set is not read yet)")
        if count > _U64:
            raise ParseError(f"{FORMAT}: line {lineno}: count {m.group(3)} is beyond an "
                             "unsigned 64-bit counter (damaged?)")
        if link != self.link:
            if self.link is not None and link < self.link:
                raise ParseError(f"{FORMAT}: line {lineno}: GPU {self.gpu[0]} link {link} "
                                 f"after link {self.link if self.link is not None else '-'}: "
                                 "its lines are split or repeated (edited output?)")
            self.close_link(lineno)
            self.link = link
        if any(c.name == name for c in self.counters):
            raise ParseError(f"{FORMAT}: line {lineno}: GPU {self.gpu[0]} link {link} "
                             f"prints {name} twice (duplicated output?)")
        self.counters.append(LinkCounter(name, COUNTER_KIND[name], count))

    def all_inactive(self, lineno: int) -> None:
        if self.gpu is None:
            raise ParseError(f"{FORMAT}: line {lineno}: NVML's 'all links are inactive' "
                             "before any 'GPU n:' line (output cut at the start?)")
        if self.all_down or self.link is not None or self.links:
            raise ParseError(f"{FORMAT}: line {lineno}: GPU {self.gpu[0]} says 'all links "
                             "are inactive' beside link lines or twice (edited output?)")
        self.all_down = True


def parse_nvlink_errors(text: str) -> NvLinkErrors:
    """Parse ``nvidia-smi nvlink -e`` output; raise ParseError on anything else."""
    r = _Reader()
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if gpu := GPU_HEADER.match(line):
            r.header(gpu, lineno)
        elif ALL_DOWN.match(line):
            r.all_inactive(lineno)
        elif counter := _COUNTER.match(line):
            r.counter(counter, lineno)
        else:
            raise ParseError(f"{FORMAT}: line {lineno}: {line[:60]!r} is neither 'GPU n: "
                             "<name> (UUID: ...)' nor 'Link n: <counter>: <count>' (elided, "
                             "cut or edited output?)")
    r.close_gpu(len(lines))
    if not r.gpus:
        raise ParseError(f"{FORMAT}: no 'GPU n:' line (empty output, or not this command's)")
    return NvLinkErrors(tuple(r.gpus))
