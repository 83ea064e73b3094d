"""Parser for ``iblinkinfo -l`` (one line per port), and for its default listing (node
headers, then the ports), of fabric.links: each port's width, speed, states and peer.

Format, from the tool's source (linux-rdma/rdma-core, infiniband-diags/iblinkinfo.c
``print_port``, ``print_node_header``; the value names from libibmad/dump.c and
libibnetdisc/ibnetdisc.c)::

    -l:       0x%016x "%30s" %6d %4d[%2s] ==<link>==>  <peer>
    default:  CA: <desc>:  /  Switch: 0x%016x <desc>:  /  Router: <desc>:  headers, then
              0x%016x %6d %4d[%2s] ==<link>==>  <peer>   (a CA's or router's port)
              %6d %4d[%2s] ==<link>==>  <peer>           (a switch's port)
    <link>:   (%3s %18s %6s/%8s)   width, speed, logical state / physical state
              (              %6s/%8s)   a Down port: its width and speed are not valid
    <peer>:   [0x%016x ]%6d %4d[%2s] "%s" (%s %s)   [-l: peer port GUID], LID, port,
              description, then "Could be <width>" / "Could be <speed>" when the link
              trained below what both ends support
              [  ] "" ( )                    no peer (a Down port)
              "Port not available"           no peer, the port not Down

The first GUID is the port GUID (a switch's ports share the switch's); the ``"%30s"``
description is right-aligned, padded with blanks (compare :attr:`LinkPort.name`).
Widths: 1X 2X 4X 8X 12X ("undefined (n)"). Speeds, Gb/s per lane: 2.5, 5.0, 10.0 (and
"10.0 Gbps (FDR10)"), 14.0625, 25.78125, 53.125, 106.25, 212.5. Logical states:
NoChange Down Initialize Armed Active; physical: NoChange Sleep Polling Disabled
PortConfigurationTraining LinkUp LinkErrorRecovery PhyTest; "?(n)" for other codes.

Default-listing port lines without their header (``iblinkinfo | grep Up``) are refused:
the node they belong to is unknown.

>>> ports = parse_iblinkinfo_ports('0x0000000000100007 "                 gpu002 mlx5_1"'
...     '      8    1[  ] ==( 1X        53.125 Gbps Active/  LinkUp)==>  0x0000000000200001'
...     '      3    2[  ] "su1-leaf-r1" (Could be 4X )').ports
>>> p = ports[0]
>>> (p.name, p.port, p.width, p.speed_gbps, p.state, p.physical_state, p.peer.desc, p.hint)
('gpu002 mlx5_1', 1, '1X', 53.125, 'Active', 'LinkUp', 'su1-leaf-r1', 'Could be 4X')
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError

TOOL = "iblinkinfo"
WIDTHS = ("1X", "2X", "4X", "8X", "12X")
STATES = ("NoChange", "Down", "Initialize", "Armed", "Active")
PHYSICAL_STATES = ("NoChange", "Sleep", "Polling", "Disabled", "PortConfigurationTraining",
                   "LinkUp", "LinkErrorRecovery", "PhyTest")
MAX_LID = 0xFFFF
MAX_PORT = 255

_GUID = r"0x[0-9a-fA-F]{16}"
_AT = r"([0-9]{1,6})\s+([0-9]{1,4})\[[ 0-9]{2,3}\]"  # LID, port[ext port]
_LINE_MODE = re.compile(rf'^({_GUID}) "(.*?)"\s+{_AT} ==\(')
_CA_PORT = re.compile(rf"^\s+({_GUID})\s+{_AT} ==\(")
_SWITCH_PORT = re.compile(rf"^\s+{_AT} ==\(")
_HEADER = re.compile(rf"^(CA|Switch|Router|\?\?): (?:({_GUID}) )?(.*):$")
# the speed's words are single-spaced ("14.0625 Gbps (FDR10)"): a group of such words, not
# a lazy ".+?" before "\s+", which rescanned a long run of spaces at every step (a 100,000-
# character line took minutes)
_LINK = re.compile(r"^\s*(?:(1X|2X|4X|8X|12X|undefined \(\d+\))\s+(\S+(?: \S+)*?)\s+)?"
                   r"([A-Za-z]+|\?\(\d+\))/\s*([A-Za-z]+|\?\(\d+\))\s*$")
_PEER = re.compile(rf'^(?:({_GUID})\s+)?{_AT} "(.*)" \(([^"]*)\)$')
_NO_PEER = re.compile(r'^(?:\[  \] "" \( \)|"Port not available")$')
_SPEED = re.compile(r"^([0-9]{1,3}(?:\.[0-9]{1,6})?) Gbps( \(FDR10\))?$")


@dataclass(frozen=True)
class Peer:
    guid: str | None  # its port GUID (-l only)
    lid: int
    port: int
    desc: str

    @property
    def name(self) -> str:
        return self.desc.strip()

    def __str__(self) -> str:
        return f'"{self.name}"[{self.port}]'


@dataclass(frozen=True)
class LinkPort:
    """One port line."""

    lineno: int
    guid: str  # the port GUID, lower case (a switch's ports share the switch's)
    desc: str  # the node description as printed (-l pads it on the left)
    lid: int
    port: int
    width: str | None  # "4X"; "undefined (n)"; None on a Down port (not printed)
    speed_gbps: float | None  # per lane, as printed (FDR10: 10.0); None: not a rate / Down
    speed_text: str  # as printed: "53.125 Gbps", "10.0 Gbps (FDR10)"; "" on a Down port
    state: str  # logical: STATES
    physical_state: str  # PHYSICAL_STATES
    peer: Peer | None
    hint: str  # "Could be 4X", "Could be 53.125 Gbps", both, or ""

    @property
    def name(self) -> str:
        return self.desc.strip()

    @property
    def fdr10(self) -> bool:
        return self.speed_text.endswith("(FDR10)")

    @property
    def up(self) -> bool:
        return self.state == "Active" and self.physical_state == "LinkUp"

    def __str__(self) -> str:
        return f'"{self.name}"[{self.port}]'


@dataclass(frozen=True)
class LinkInfo:
    ports: tuple[LinkPort, ...]
    line_mode: bool  # -l (else the default listing)


def _int(text: str, bound: int, what: str, where: str) -> int:
    value = int(text)
    if value > bound:
        raise ParseError(f"{where}: {what} {value} is above {bound}")
    return value


def _state(text: str, allowed: tuple[str, ...], what: str, where: str) -> str:
    if text not in allowed and not re.fullmatch(r"\?\(\d+\)", text):
        raise ParseError(f"{where}: {what} {text!r} is not one iblinkinfo prints "
                         f"({', '.join(allowed)})")
    return text


def _port(lineno: int, line: str, guid: str, desc: str, lid: str, port: str,
          rest: str) -> LinkPort:
    where = f"{TOOL}: line {lineno} ({line[:100]!r})"
    link, sep, peer_text = rest.partition(")==>")
    m = _LINK.match(link) if sep else None
    if not m:
        raise ParseError(f"{where}: no '==( <width> <speed> <state>/<physical state> )==>'")
    width, speed = m.group(1), m.group(2) or ""
    s = _SPEED.match(speed)
    peer: Peer | None = None
    p = _PEER.match(peer_text.strip())
    if p:
        peer = Peer(p.group(1).lower() if p.group(1) else None,
                    _int(p.group(2), MAX_LID, "peer LID", where),
                    _int(p.group(3), MAX_PORT, "peer port", where), p.group(4))
    elif not _NO_PEER.match(peer_text.strip()):
        raise ParseError(f"{where}: cannot read the peer in {peer_text.strip()[:80]!r}")
    return LinkPort(lineno, guid.lower(), desc, _int(lid, MAX_LID, "LID", where),
                    _int(port, MAX_PORT, "port", where), width,
                    float(s.group(1)) if s else None, speed,
                    _state(m.group(3), STATES, "state", where),
                    _state(m.group(4), PHYSICAL_STATES, "physical state", where),
                    peer, p.group(5).strip() if p else "")


def parse_iblinkinfo_ports(text: str) -> LinkInfo:
    """Parse ``iblinkinfo -l`` or its default listing; ParseError naming the line for
    anything else, for a port line before any node header, and for a mix of the two."""
    ports: list[LinkPort] = []
    modes: set[bool] = set()
    header: tuple[str, str | None, str] | None = None  # type, GUID, description
    for lineno, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        if not line.strip():
            continue
        if m := _LINE_MODE.match(line):
            modes.add(True)
            ports.append(_port(lineno, line, m.group(1), m.group(2), m.group(3), m.group(4),
                               line[m.end():]))
            continue
        if h := _HEADER.match(line):
            if (h.group(1) == "Switch") != (h.group(2) is not None):
                raise ParseError(f"{TOOL}: line {lineno}: a Switch: header has the switch's "
                                 f"GUID, no other has: {line[:100]!r}")
            header = (h.group(1), h.group(2), h.group(3))
            continue
        ca, sw = _CA_PORT.match(line), _SWITCH_PORT.match(line)
        if not (ca or sw):
            raise ParseError(f"{TOOL}: line {lineno} is neither a port line ('... ==( ... "
                             f")==> ...') nor a CA:/Switch: header: {line[:100]!r}")
        if header is None:
            raise ParseError(f"{TOOL}: line {lineno}: a port line before any CA:/Switch: "
                             f"header (output filtered, by grep?): its node is unknown: "
                             f"{line[:100]!r}")
        modes.add(False)
        kind, guid, desc = header
        if ca and kind != "Switch":
            ports.append(_port(lineno, line, ca.group(1), desc, ca.group(2), ca.group(3),
                               line[ca.end():]))
        elif sw and kind == "Switch" and guid is not None:
            ports.append(_port(lineno, line, guid, desc, sw.group(1), sw.group(2),
                               line[sw.end():]))
        else:
            raise ParseError(f"{TOOL}: line {lineno}: a port line of the wrong shape for "
                             f"the {kind} it follows: {line[:100]!r}")
    if not ports:
        raise ParseError(f"{TOOL}: no port line ('... ==( ... )==> ...') in the output")
    if len(modes) > 1:
        raise ParseError(f"{TOOL}: the output mixes -l lines with the default listing")
    return LinkInfo(tuple(ports), True in modes)


__all__ = ["LinkInfo", "LinkPort", "Peer", "parse_iblinkinfo_ports"]
