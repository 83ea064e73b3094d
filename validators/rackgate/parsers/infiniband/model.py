"""The record every RDMA port reader gives (``ibstat``'s terms): :class:`IbStat`, its
devices (:class:`IbCa`) and their ports (:class:`IbPort`), and what the readers share.

``ibstat`` (``parsers.infiniband``) fills every field; ``ibv_devinfo -v``
(``parsers.infiniband.ibv_devinfo``), ``ibstatus`` (``parsers.infiniband.ibstatus``) and ``rdma
link`` (``parsers.rdma_link``) fill what they print, their states translated to ibstat's words
(``Active``, ``LinkUp``...) from a fixed table per tool: a word on no table is kept as the tool
printed it, which no judge counts as up.
>>> IbPort(1, "Active", "LinkUp", 400.0, "InfiniBand").up
True
>>> IbPort(1, "Active", "Polling", 400.0, "InfiniBand").up
False
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError
from rackgate.parsers.damage import DAMAGE

DEVICE = re.compile(r"[A-Za-z0-9_.-]{1,63}", re.ASCII)  # IB_DEVICE_NAME_MAX: 64 with its NUL
MAX_LINE = 512  # characters of one line: no port listing prints longer ones


@dataclass(frozen=True)
class IbPort:
    """One port of one RDMA device as ibstat prints it (rate in Gb/s, as ibstat prints)."""

    number: int
    state: str  # Down | Initializing | Armed | Active | ???
    physical_state: str  # LinkUp | Polling | Disabled | Sleep | ... ; "" when not reported
    rate_gbps: float | None  # None when the tool reports no rate (rdma link)
    link_layer: str  # InfiniBand | Ethernet
    base_lid: int | None = None
    sm_lid: int | None = None
    port_guid: str | None = None

    @property
    def up(self) -> bool:
        """Logical state Active and physical link up (LinkUp; unknown physical state is
        accepted only when the tool does not print it)."""
        return self.state == "Active" and self.physical_state in ("LinkUp", "")


@dataclass(frozen=True)
class IbCa:
    """One RDMA device (CA, or a switch's management port): ibstat's ``ca_dump``."""

    name: str
    node_type: str  # CA | Switch | Router | iWARP RNIC | ???
    ca_type: str  # e.g. MT4129 (ConnectX-7); VFs show their own device id (MT4124, MT4126)
    num_ports: int
    firmware_version: str
    hardware_version: str
    node_guid: str
    system_guid: str
    ports: tuple[IbPort, ...]


@dataclass(frozen=True)
class IbStat:
    """All devices ibstat listed; ``errors`` holds its ibpanic/ibwarn lines."""

    cas: tuple[IbCa, ...]
    errors: tuple[str, ...] = ()


def text_lines(text: str, tool: str, max_line: int = MAX_LINE) -> list[str]:
    """The lines of ``text`` (CRLF or LF ends, trailing blanks dropped); ParseError for a
    line holding a character no port listing prints (``parsers.damage.DAMAGE``: a carriage
    return inside a line, a byte-order mark...) or longer than ``max_line``."""
    out = []
    for n, raw in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        line = raw.rstrip(" \t")
        if DAMAGE.search(line) or len(line) > max_line:
            why = "a character the tool never prints" if DAMAGE.search(line) else \
                f"{len(line):,} characters (at most {max_line:,})"
            raise ParseError(f"{tool}: line {n} holds {why}: {line[:60]!a}")
        out.append(line)
    return out


def device_name(name: str, tool: str, where: str) -> str:
    """``name`` when the kernel could give it to an RDMA device, else ParseError."""
    if not DEVICE.fullmatch(name):
        raise ParseError(f"{tool}: {where}: {name[:60]!r} is no RDMA device name")
    return name


def as_ca(name: str, ports: list[IbPort], tool: str) -> IbCa:
    """A device of a reader that prints ports only (no type, firmware or GUIDs): its
    ports in number order, one of each number (ParseError naming a repeated one)."""
    numbers = [p.number for p in ports]
    twice = sorted({n for n in numbers if numbers.count(n) > 1})
    if twice:
        raise ParseError(f"{tool}: device '{name}' lists port {', '.join(map(str, twice))} "
                         "twice (duplicated output?)")
    ordered = tuple(sorted(ports, key=lambda p: p.number))
    return IbCa(name, "CA", "", len(ordered), "", "", "", "", ordered)


__all__ = ["DEVICE", "MAX_LINE", "IbCa", "IbPort", "IbStat", "as_ca", "device_name",
           "text_lines"]
