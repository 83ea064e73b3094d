"""Parser for ``ibnetdiscover -p`` (the ports report): one line per port of every node the
discovery reached, the links of the fabric as cabled.

Format, from the tool's source (linux-rdma/rdma-core, infiniband-diags/ibnetdiscover.c,
``dump_ports_report``)::

    "%2s %5d %2d 0x%016x %s %s"          type, LID, port, port GUID, width, speed
    then, for a port with a peer:
    " - %2s %5d %2d 0x%016x ( '%s' - '%s' )"   the peer's type, LID, port, port GUID,
                                                 then both node descriptions
    or, for a port without one:
    "%36s'%s'"                                  the node's own description

Types are ``SW``, ``CA``, ``RT`` (``??``: unknown); the LID is a switch's own LID, or a
CA port's base LID; the GUID is the port GUID (a switch's ports share the switch's);
widths ``1x 2x 4x 8x 12x`` (``??``); speeds ``SDR DDR QDR FDR10 FDR EDR HDR NDR XDR``
(``???``). A port without a link prints whatever its PortInfo holds (IBTA C14-24.2.1:
only the states are valid on a down port), ``4x SDR`` in ibsim.

Why ``-p`` rather than the default topology listing: each line holds both ends of a link
with their GUIDs, LIDs and ports, a port without a link is listed too, and there is no
record structure (chassis groups, ``vendid=`` blocks) to follow. Its one weakness is the
descriptions: they are printed between ``'`` with nothing escaped. A description holding
``'`` parses (the two are split at ``' - '``), and its blanks at either end are kept as
printed (compare :attr:`PortEnd.name`, the stripped text); a description holding
``' - '`` makes the split ambiguous, and that line is refused (the default listing would
anchor it on a fixed suffix instead), never guessed.

Every link is printed at both of its ends; :attr:`Discovery.links` holds each once.
Listings published cut short have some links at one end only (``both_ends`` False), and
one that contradicts itself (a port printed with two peers) keeps both readings: the
judge, not the parser, calls that an error.

>>> d = parse_ibnetdiscover_ports(
...     "CA 1 1 0x0000000000100001 4x HDR - SW 2 3 0x0000000000200000 ( 'gpu001 mlx5_0' -"
...     " 'leaf-1' )\\nSW 2 3 0x0000000000200000 4x HDR - CA 1 1 0x0000000000100001 ("
...     " 'leaf-1' - 'gpu001 mlx5_0' )\\nSW 2 4 0x0000000000200000 4x SDR   'leaf-1'\\n")
>>> [(str(k.a), str(k.b), k.width, k.speed, k.both_ends) for k in d.links]
[('"gpu001 mlx5_0"[1]', '"leaf-1"[3]', '4x', 'HDR', True)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError

TOOL = "ibnetdiscover -p"
KINDS = ("SW", "CA", "RT", "??")
WIDTHS = ("1x", "2x", "4x", "8x", "12x", "??")
SPEEDS = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR", "???")
MAX_LID = 0xFFFF
MAX_PORT = 255

_END = r"(\S{2})\s+([0-9]{1,6})\s+([0-9]{1,4})\s+(0x[0-9a-fA-F]{16})"
_LINE = re.compile(rf"^\s*{_END}\s+(\S+)\s+(\S+)(?:\s+-\s+{_END}\s+\(\s'(.*)'\s\)|\s+'(.*)')$")


@dataclass(frozen=True)
class PortEnd:
    """One end of a port line: a node's port as ibnetdiscover names it."""

    kind: str  # SW, CA, RT or ??
    lid: int
    port: int
    guid: str  # the port GUID, "0x" and 16 lower-case hex digits
    desc: str  # the node description between the quotes, blanks at its ends kept

    @property
    def name(self) -> str:
        """The description as compared with a plan: without blanks at its ends."""
        return self.desc.strip()

    def __str__(self) -> str:
        return f'"{self.name}"[{self.port}]'


@dataclass(frozen=True)
class PortLine:
    lineno: int
    end: PortEnd
    width: str  # as printed: "4x"
    speed: str  # as printed: "HDR"
    peer: PortEnd | None  # None: no link on this port


@dataclass(frozen=True)
class Link:
    """A link as found: ``a`` is the end of the line that first printed it."""

    a: PortEnd
    b: PortEnd
    width: str  # at ``a``, as printed
    speed: str
    lineno: int  # the first line printing it
    both_ends: bool  # printed at both of its ends (a listing cut short has one)


@dataclass(frozen=True)
class Discovery:
    ports: tuple[PortLine, ...]  # every line, in order
    links: tuple[Link, ...]  # every link once, in the order first printed

    def ends(self) -> tuple[PortEnd, ...]:
        """Every port seen, as a line's own end or as a peer, once per (GUID, port)."""
        seen: dict[tuple[str, int], PortEnd] = {}
        for line in self.ports:
            for end in (line.end, line.peer):
                if end is not None:
                    seen.setdefault((end.guid, end.port), end)
        return tuple(seen.values())

    @property
    def switches(self) -> dict[str, str]:
        """GUID -> description of every switch seen."""
        return {e.guid: e.name for e in self.ends() if e.kind == "SW"}

    @property
    def ca_ports(self) -> tuple[PortEnd, ...]:
        return tuple(e for e in self.ends() if e.kind == "CA")


def _int(text: str, bound: int, what: str, lineno: int, line: str) -> int:
    value = int(text)
    if value > bound:
        raise ParseError(f"{TOOL}: line {lineno}: {what} {value} is above {bound}: {line[:100]!r}")
    return value


def _end(groups: tuple[str | None, ...], desc: str, lineno: int, line: str) -> PortEnd:
    kind, lid, port, guid = (g or "" for g in groups)
    if kind not in KINDS:
        raise ParseError(f"{TOOL}: line {lineno}: node type {kind!r} is none of "
                         f"{', '.join(KINDS)}: {line[:100]!r}")
    return PortEnd(kind, _int(lid, MAX_LID, "LID", lineno, line),
                   _int(port, MAX_PORT, "port", lineno, line), guid.lower(), desc)


def _parse_line(lineno: int, line: str) -> PortLine:
    m = _LINE.match(line)
    if not m:
        raise ParseError(f"{TOOL}: line {lineno} is not a port line ('<type> <lid> <port> "
                         f"<guid> <width> <speed>' then a peer or a description): "
                         f"{line[:100]!r}")
    width, speed = m.group(5), m.group(6)
    if width not in WIDTHS or speed not in SPEEDS:
        raise ParseError(f"{TOOL}: line {lineno}: width {width!r} / speed {speed!r} is not "
                         f"one ibnetdiscover prints ({' '.join(WIDTHS)} / {' '.join(SPEEDS)})"
                         f": {line[:100]!r}")
    if m.group(12) is not None:  # no peer
        return PortLine(lineno, _end(m.groups()[:4], m.group(12), lineno, line), width, speed,
                        None)
    both = m.group(11)
    if both.count("' - '") != 1:
        raise ParseError(f"{TOOL}: line {lineno}: cannot tell the two node descriptions "
                         f"apart in ( '{both}' ): a description holds \"' - '\"")
    mine, theirs = both.split("' - '")
    return PortLine(lineno, _end(m.groups()[:4], mine, lineno, line), width, speed,
                    _end(m.groups()[6:10], theirs, lineno, line))


def _links(ports: list[PortLine]) -> tuple[Link, ...]:
    found: dict[tuple[tuple[str, int], tuple[str, int]], Link] = {}
    for line in ports:
        if line.peer is None:
            continue
        here, there = (line.end.guid, line.end.port), (line.peer.guid, line.peer.port)
        back = found.get((there, here))
        if back is not None and not back.both_ends:
            found[(there, here)] = Link(back.a, back.b, back.width, back.speed, back.lineno,
                                        True)
        elif back is None and (here, there) not in found:
            found[(here, there)] = Link(line.end, line.peer, line.width, line.speed,
                                        line.lineno, False)
    return tuple(found.values())


def parse_ibnetdiscover_ports(text: str) -> Discovery:
    """Parse ``ibnetdiscover -p`` output; ParseError naming the line for anything else."""
    ports = [_parse_line(n, line)
             for n, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1)
             if line.strip()]
    if not ports:
        raise ParseError(f"{TOOL}: no port line in the output (empty)")
    return Discovery(tuple(ports), _links(ports))


__all__ = ["Discovery", "Link", "PortEnd", "PortLine", "parse_ibnetdiscover_ports"]
