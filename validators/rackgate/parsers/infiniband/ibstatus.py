"""Parser for ``ibstatus`` (rdma-core, infiniband-diags/scripts/ibstatus: a shell script that
prints the kernel's sysfs port files, /sys/class/infiniband/DEV/ports/N/*).

Per port, in the order of the directory listings (devices, then ports)::

    Infiniband device 'mlx5_0' port 1 status:
    <TAB>default gid:<TAB> fe80:0000:0000:0000:946d:ae03:00a0:0000
    <TAB>base lid:<TAB> 0x64
    <TAB>sm lid:<TAB><TAB> 0x1
    <TAB>state:<TAB><TAB> 4: ACTIVE
    <TAB>phys state:<TAB> 5: LinkUp
    <TAB>rate:<TAB><TAB> 400 Gb/sec (4X NDR)
    <TAB>link_layer:<TAB> InfiniBand
    (a blank line)

exactly these seven lines, each once (a missing, repeated or other line is a ParseError);
a file the script cannot read prints ``unknown`` (``link_layer``: ``IB``, the script's
default for kernels without that file). The values are the kernel's formats
(drivers/infiniband/core/sysfs.c): ``state`` ``%d: %s`` (NOP, DOWN, INIT, ARMED, ACTIVE,
ACTIVE_DEFER, UNKNOWN), ``phys_state`` ``%d: %s`` (Sleep, Polling, Disabled,
PortConfigurationTraining, LinkUp, LinkErrorRecovery, Phy Test, <unknown>), ``rate``
``%d%s Gb/sec (%dX%s)`` (rate in Gb/s, ``.5`` for a half, the lane count and the speed
name: SDR 2.5, DDR 5, QDR 10, FDR10 10, FDR 14, EDR 25, HDR 50, NDR 100, XDR 200 Gb/s a
lane), LIDs ``0x%x``, ``link_layer`` InfiniBand, Ethernet or Unknown. A number that does
not go with its name (``4: DOWN``), or a rate that is not its lanes times its lane speed,
is not the kernel's output: a ParseError. "Fatal error: ..." (no devices: exit 255) is
never parsed as ports.

>>> st = parse_ibstatus("Infiniband device 'mlx5_0' port 1 status:\\n"
...     "\\tdefault gid:\\t fe80:0000:0000:0000:946d:ae03:00a0:0000\\n\\tbase lid:\\t 0x64\\n"
...     "\\tsm lid:\\t\\t 0x1\\n\\tstate:\\t\\t 4: ACTIVE\\n\\tphys state:\\t 5: LinkUp\\n"
...     "\\trate:\\t\\t 400 Gb/sec (4X NDR)\\n\\tlink_layer:\\t InfiniBand\\n\\n")
>>> p = st.cas[0].ports[0]
>>> (st.cas[0].name, p.state, p.physical_state, p.rate_gbps, p.link_layer, p.base_lid, p.up)
('mlx5_0', 'Active', 'LinkUp', 400.0, 'InfiniBand', 100, True)
"""

from __future__ import annotations

import re

from rackgate.parsers import ParseError
from rackgate.parsers.infiniband.model import IbPort, IbStat, as_ca, device_name, text_lines

_HEADER = re.compile(r"^Infiniband device '([^']*)' port ([0-9]{1,3}) status:$")
_FIELD = re.compile(r"^(default gid|base lid|sm lid|state|phys state|rate|link_layer):"
                    r"[\t ]+(\S.*)$")
_FIELDS = ("default gid", "base lid", "sm lid", "state", "phys state", "rate", "link_layer")
_GID = re.compile(r"[0-9a-f]{4}(?::[0-9a-f]{4}){7}")
_LID = re.compile(r"0x[0-9a-f]{1,8}")
_CODED = re.compile(r"([0-9]{1,3}): (.+)")
_RATE = re.compile(r"([0-9]{1,4})(\.5)? Gb/sec \(([0-9]{1,2})X(?: ([A-Z0-9]{3,5}))?\)")
# the kernel's names for each number (sysfs.c state_show / phys_state_to_str)
_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
_PHYS = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
         5: "LinkUp", 6: "LinkErrorRecovery", 7: "Phy Test"}
# ... and in ibstat's words (ibstat.c's port state and physical state strings)
_AS_IBSTAT_STATE = {"DOWN": "Down", "INIT": "Initializing", "ARMED": "Armed",
                    "ACTIVE": "Active"}
_AS_IBSTAT_PHYS = {"Phy Test": "PhyTest"}
_LANE_DECI_GBPS = {"SDR": 25, "": 25, "DDR": 50, "QDR": 100, "FDR10": 100, "FDR": 140,
                   "EDR": 250, "HDR": 500, "NDR": 1000, "XDR": 2000}  # sysfs.c rate_show
_LINK_LAYERS = {"InfiniBand": "InfiniBand", "Ethernet": "Ethernet", "Unknown": "Unknown",
                "IB": "InfiniBand"}


def _coded(value: str, table: dict[int, str], unknown: str, what: str, where: str) -> str:
    """``N: NAME`` as sysfs prints it: NAME (``unknown`` for the kernel's word for a number
    off its table; the script's "unknown" for an unreadable file stays "unknown")."""
    if value == "unknown":
        return value
    m = _CODED.fullmatch(value)
    if m and table.get(int(m.group(1)), unknown) == m.group(2):
        return m.group(2)
    raise ParseError(f"ibstatus: {where}: {what} {value[:40]!r} is not the kernel's "
                     "'N: NAME' for its number")


def _rate(value: str, where: str) -> float | None:
    if value == "unknown":
        return None
    m = _RATE.fullmatch(value)
    lane = _LANE_DECI_GBPS.get(m.group(4) or "") if m else None
    lanes = int(m.group(3)) if m else 0
    if m and lane is not None and lanes in (1, 2, 4, 8, 12):
        deci = lane * lanes
        if f"{deci // 10}{'.5' if deci % 10 else ''}" == m.group(1) + (m.group(2) or ""):
            return deci / 10
    raise ParseError(f"ibstatus: {where}: rate {value[:40]!r} is not the kernel's "
                     "'R Gb/sec (NX SPEED)' with R its lanes times the speed of one")


def _lid(value: str, what: str, where: str) -> int | None:
    if value == "unknown":
        return None
    if not _LID.fullmatch(value):
        raise ParseError(f"ibstatus: {where}: {what} {value[:40]!r} is not 0x and hex digits")
    return int(value, 16)


def _port(number: int, f: dict[str, str], where: str) -> IbPort:
    missing = [k for k in _FIELDS if k not in f]
    if missing:
        raise ParseError(f"ibstatus: {where} lacks {', '.join(missing)} (cut output?)")
    if f["default gid"] != "unknown" and not _GID.fullmatch(f["default gid"]):
        raise ParseError(f"ibstatus: {where}: default gid {f['default gid'][:50]!r} is not a "
                         "GID")
    if f["link_layer"] not in _LINK_LAYERS:
        raise ParseError(f"ibstatus: {where}: link_layer {f['link_layer'][:40]!r} is none the "
                         "kernel prints")
    state = _coded(f["state"], _STATES, "UNKNOWN", "state", where)
    phys = _coded(f["phys state"], _PHYS, "<unknown>", "phys state", where)
    return IbPort(number, _AS_IBSTAT_STATE.get(state, state),
                  _AS_IBSTAT_PHYS.get(phys, phys),
                  _rate(f["rate"], where), _LINK_LAYERS[f["link_layer"]],
                  base_lid=_lid(f["base lid"], "base lid", where),
                  sm_lid=_lid(f["sm lid"], "sm lid", where))


def parse_ibstatus(text: str) -> IbStat:
    """Parse ``ibstatus`` (all devices); empty output is no device."""
    blocks: list[tuple[str, int, int, dict[str, str]]] = []  # device, port, line, fields
    for lineno, raw in enumerate(text_lines(text, "ibstatus"), 1):
        line = raw.strip()
        if not line:
            continue
        m = _HEADER.match(line)
        if m:
            name = device_name(m.group(1), "ibstatus", f"line {lineno}")
            if any(b[0] == name and b[1] == int(m.group(2)) for b in blocks):
                raise ParseError(f"ibstatus: line {lineno}: {name} port {m.group(2)} listed "
                                 "twice (duplicated output?)")
            blocks.append((name, int(m.group(2)), lineno, {}))
            continue
        f = _FIELD.match(line)
        if not blocks or not f or not raw.startswith(("\t", " ")):
            raise ParseError(f"ibstatus: line {lineno}: {line[:60]!r} is no line ibstatus "
                             "prints" + ("" if blocks else " (before any \"Infiniband device "
                                                           "'...' port N status:\" line)"))
        fields = blocks[-1][3]
        if f.group(1) in fields:
            raise ParseError(f"ibstatus: line {lineno}: {f.group(1)!r} printed twice for "
                             f"one port (duplicated output?)")
        fields[f.group(1)] = f.group(2).strip()
    devices: dict[str, list[IbPort]] = {}
    for name, number, lineno, fields in blocks:
        devices.setdefault(name, []).append(
            _port(number, fields, f"{name} port {number} (line {lineno})"))
    return IbStat(tuple(as_ca(name, ports, "ibstatus") for name, ports in devices.items()))


__all__ = ["parse_ibstatus"]
