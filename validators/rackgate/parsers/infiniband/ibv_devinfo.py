"""Parser for ``ibv_devinfo [-v]`` (rdma-core, libibverbs/examples/devinfo.c,
``print_hca_cap``), and its ports in ibstat's terms.

Layout: per device ``hca_id:<TAB>NAME``, then tab-indented ``key:<TABs>value`` device lines
(``transport``, ``fw_ver``, ``node_guid``, ``sys_image_guid``, ``vendor_id``,
``vendor_part_id``, ``hw_ver``, ``board_id``, ``phys_port_cnt``; with ``-v`` many more,
with capability-flag lists and sub-sections that vary by rdma-core version: read, never
recorded, though none may follow itself: devinfo.c never prints a line twice in a row), then
per port ``port:<TAB>N`` and its lines. Every port of the device is
printed, 1 to ``phys_port_cnt`` in order (without ``-i``): a device that lists fewer,
more or other port numbers is cut or damaged output.

A port section holds exactly the lines devinfo.c prints (any other line is a ParseError,
as is one printed twice): always ``state`` (``PORT_ACTIVE (4)``), ``max_mtu``,
``active_mtu``, ``sm_lid``, ``port_lid``, ``port_lmc``, ``link_layer``; with ``-v``
``max_msg_sz``, ``port_cap_flags``, ``port_cap_flags2``, ``max_vl_num``,
``bad_pkey_cntr``, ``qkey_viol_cntr``, ``sm_sl``, ``pkey_tbl_len``, ``gid_tbl_len``,
``subnet_timeout``, ``init_type_reply``, ``active_width`` (``4X (2)``), ``active_speed``
(``100.0 Gbps (128)``), ``effective_speed`` (newer rdma-core), ``phys_state``
(``LINK_UP (5)``, printed for InfiniBand-transport devices, RoCE included: not for iWARP)
and the ``GID[  i]:`` table. Every name is printed with its numeric code, and the pair
must be one devinfo.c's tables give (``port_state_str``, ``port_phy_state_str``,
``width_str``, ``speed_str``, ``mtu_str``). "No IB devices found" (stderr, exit 255) or
empty output is no device.

>>> d = parse_ibv_devinfo("hca_id:\\tmlx5_0\\n\\ttransport:\\t\\t\\tInfiniBand (0)\\n"
...     "\\tphys_port_cnt:\\t\\t\\t1\\n\\t\\tport:\\t1\\n\\t\\t\\tstate:\\t\\t\\tPORT_ACTIVE (4)\\n"
...     "\\t\\t\\tmax_mtu:\\t\\t4096 (5)\\n\\t\\t\\tactive_mtu:\\t\\t4096 (5)\\n"
...     "\\t\\t\\tsm_lid:\\t\\t\\t1\\n\\t\\t\\tport_lid:\\t\\t12\\n\\t\\t\\tport_lmc:\\t\\t0x00\\n"
...     "\\t\\t\\tlink_layer:\\t\\tInfiniBand\\n")
>>> p = d[0].ports[0]
>>> (p.state, p.link_layer, p.active_mtu, p.rate_gbps)
('PORT_ACTIVE', 'InfiniBand', 4096, None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError
from rackgate.parsers.infiniband.model import IbCa, IbPort, IbStat, device_name, text_lines

# devinfo.c's tables: the name printed for each code
_STATES = {1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE"}
_PHYS = {1: "SLEEP", 2: "POLLING", 3: "DISABLED", 4: "PORT_CONFIGURATION TRAINNING",
         5: "LINK_UP", 6: "LINK_ERROR_RECOVERY", 7: "PHY TEST"}
_WIDTHS = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}  # code -> lanes
_SPEEDS = {1: "2.5", 2: "5.0", 4: "10.0", 8: "10.0", 16: "14.0", 32: "25.0", 64: "50.0",
           128: "100.0", 256: "200.0"}  # code -> Gb/s per lane
_MTUS = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}
_TRANSPORTS = {0: "InfiniBand", 1: "iWARP", 2: "usNIC", 3: "usNIC UDP", 4: "unspecified"}
# ... and in ibstat's words
_AS_IBSTAT_STATE = {"PORT_DOWN": "Down", "PORT_INIT": "Initializing", "PORT_ARMED": "Armed",
                    "PORT_ACTIVE": "Active"}
_AS_IBSTAT_PHYS = {"SLEEP": "Sleep", "POLLING": "Polling", "DISABLED": "Disabled",
                   "PORT_CONFIGURATION TRAINNING": "PortConfigurationTraining",
                   "LINK_UP": "LinkUp", "LINK_ERROR_RECOVERY": "LinkErrorRecovery",
                   "PHY TEST": "PhyTest"}

_ALWAYS = ("state", "max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc", "link_layer")
_VERBOSE = frozenset({"max_msg_sz", "port_cap_flags", "port_cap_flags2", "max_vl_num",
                      "bad_pkey_cntr", "qkey_viol_cntr", "sm_sl", "pkey_tbl_len",
                      "gid_tbl_len", "subnet_timeout", "init_type_reply", "active_width",
                      "active_speed", "effective_speed", "phys_state"})
_IDENTITY = frozenset({"transport", "fw_ver", "node_guid", "sys_image_guid", "vendor_id",
                       "vendor_part_id", "hw_ver", "board_id", "phys_port_cnt"})
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_ ]{0,40}?):\s*(.*)$")
_GID = re.compile(r"^GID\[ *([0-9]{1,5})\]:\s+([0-9a-f:.]{2,45})"
                  r"(?:, (?:RoCE v1|RoCE v2|Invalid gid type))?$")
_CODED = re.compile(r"^(.+?) \(([0-9]{1,4})\)$")
_NUMBER = re.compile(r"^[0-9]{1,10}$")
_HEX = re.compile(r"^0x[0-9a-fA-F]{1,16}$")
_LINK_LAYERS = frozenset({"InfiniBand", "Ethernet", "Unspecified", "Unknown"})


@dataclass(frozen=True)
class IbvPort:
    """One ``port:`` block of ibv_devinfo; width/speed/physical state only with ``-v``."""

    number: int
    state: str  # PORT_ACTIVE, PORT_DOWN, ... (the verbs name, without the code)
    link_layer: str
    active_mtu: int | None
    phys_state: str | None  # LINK_UP, POLLING, ... (-v only)
    active_width: int | None  # lanes: 1, 2, 4, 8, 12 (-v only)
    active_speed_gbps: float | None  # per lane (-v only)
    printed: frozenset[str] = frozenset()  # the keys of its lines

    @property
    def rate_gbps(self) -> float | None:
        if self.active_width is None or self.active_speed_gbps is None:
            return None
        return round(self.active_width * self.active_speed_gbps, 4)


@dataclass(frozen=True)
class IbvDevice:
    hca_id: str
    fw_ver: str
    vendor_part_id: str
    ports: tuple[IbvPort, ...]
    transport: str = ""  # InfiniBand (RoCE too), iWARP, usNIC, ...


def _coded(value: str, table: dict[int, str], what: str, where: str) -> str | None:
    """``NAME (code)`` as devinfo.c prints it: NAME, or None for its "invalid" word;
    ParseError when NAME is not what devinfo.c prints for code."""
    m = _CODED.match(value)
    name, code = (m.group(1), int(m.group(2))) if m else (value, -1)
    if m and table.get(code) == name:
        return name
    if m and code not in table and name.startswith("invalid"):
        return None
    raise ParseError(f"ibv_devinfo: {where}: {what} {value[:40]!r} is not what ibv_devinfo "
                     "prints (NAME (code) from its table)")


def _port(number: int, f: dict[str, str], where: str) -> IbvPort:
    missing = [k for k in _ALWAYS if k not in f]
    if missing:
        raise ParseError(f"ibv_devinfo: {where} lacks {', '.join(missing)} (cut output?)")
    state = _coded(f["state"], _STATES, "state", where) or "invalid state"
    mtu_name = _coded(f["active_mtu"], {k: str(v) for k, v in _MTUS.items()}, "active_mtu",
                      where)
    _coded(f["max_mtu"], {k: str(v) for k, v in _MTUS.items()}, "max_mtu", where)
    for key in ("sm_lid", "port_lid"):
        if not _NUMBER.match(f[key]) or int(f[key]) > 0xFFFF:
            raise ParseError(f"ibv_devinfo: {where}: {key} {f[key][:40]!r} is not a LID")
    if not re.fullmatch(r"0x[0-9a-f]{2}", f["port_lmc"]):
        raise ParseError(f"ibv_devinfo: {where}: port_lmc {f['port_lmc'][:40]!r} is not 0x%02x")
    if f["link_layer"] not in _LINK_LAYERS:
        raise ParseError(f"ibv_devinfo: {where}: link_layer {f['link_layer'][:40]!r} is none "
                         "ibv_devinfo prints")
    phys = width = speed = None
    if "phys_state" in f:
        phys = _coded(f["phys_state"], _PHYS, "phys_state", where) or "invalid physical state"
    if "active_width" in f:
        m = _CODED.match(f["active_width"])
        lanes = _WIDTHS.get(int(m.group(2))) if m else None
        if m and lanes is not None and m.group(1) == f"{lanes}X":
            width = lanes
        elif not (m and lanes is None and m.group(1) == "invalid widthX"):
            raise ParseError(f"ibv_devinfo: {where}: active_width {f['active_width'][:40]!r} "
                             "is not what ibv_devinfo prints (NX (code))")
    if "active_speed" in f:
        try:
            name = _coded(f["active_speed"], {k: f"{v} Gbps" for k, v in _SPEEDS.items()},
                          "active_speed", where)
        except ParseError:
            raise ParseError(f"ibv_devinfo: {where}: active_speed "
                             f"{(f['active_speed'].split() or [''])[0][:40]!r} is not a speed "
                             f"ibv_devinfo prints ({f['active_speed'][:40]!r})") from None
        speed = float(name.split()[0]) if name else None
    for key in _VERBOSE - {"phys_state", "active_width", "active_speed"}:
        if key in f and not (_NUMBER.match(f[key]) or _HEX.match(f[key])
                             or re.fullmatch(r"[0-9]{1,2} \([0-9]\)|invalid value \([0-9]{1,3}\)"
                                             r"|[0-9]{1,4}\.[0-9] Gbps", f[key])):
            raise ParseError(f"ibv_devinfo: {where}: {key} {f[key][:40]!r} is no value "
                             "ibv_devinfo prints")
    return IbvPort(number, state, f["link_layer"], int(mtu_name) if mtu_name else None, phys,
                   width, speed, frozenset(f))


class _Device:
    def __init__(self, name: str, lineno: int) -> None:
        self.name, self.lineno = name, lineno
        self.fields: dict[str, str] = {}
        self.ports: list[tuple[int, int, dict[str, str]]] = []

    def build(self) -> IbvDevice:
        where = f"device {self.name} (line {self.lineno})"
        count = self.fields.get("phys_port_cnt", "")
        if not _NUMBER.match(count) or not 1 <= int(count) <= 255:
            raise ParseError(f"ibv_devinfo: {where}: phys_port_cnt {count[:40]!r} missing or "
                             "not a port count")
        numbers = [n for n, _, _ in self.ports]
        if numbers != list(range(1, int(count) + 1)):
            raise ParseError(f"ibv_devinfo: {where} has phys_port_cnt {count} but lists "
                             f"port(s) {numbers or 'none'} (cut or repeated output?)")
        transport = self.fields.get("transport", "")
        m = re.fullmatch(r"(.+) \((-?[0-9]{1,2})\)", transport)
        if transport and not (m and _TRANSPORTS.get(int(m.group(2)), "invalid transport")
                              == m.group(1)):
            raise ParseError(f"ibv_devinfo: {where}: transport {transport[:40]!r} is not what "
                             "ibv_devinfo prints (NAME (code) from its table)")
        return IbvDevice(self.name, self.fields.get("fw_ver", ""),
                         self.fields.get("vendor_part_id", ""),
                         tuple(_port(n, f, f"{self.name} port {n}")
                               for n, _, f in self.ports),
                         m.group(1) if m else "")


def _port_line(dev: _Device, line: str, lineno: int) -> None:
    """One line inside a port section (after its ``port:`` line)."""
    fields = dev.ports[-1][2]
    m = _GID.match(line)
    key, value = (f"GID[{int(m.group(1))}]", m.group(2)) if m else ("", "")
    if not m:
        k = _KEY.match(line)
        if not k or k.group(1) not in (*_ALWAYS, *_VERBOSE):
            raise ParseError(f"ibv_devinfo: line {lineno}: {line[:60]!r} is no line of a port "
                             "section ibv_devinfo prints")
        key, value = k.group(1), k.group(2).strip()
    if key in fields:
        raise ParseError(f"ibv_devinfo: line {lineno}: {key} printed twice in one port "
                         "(duplicated output?)")
    fields[key] = value


def parse_ibv_devinfo(text: str) -> tuple[IbvDevice, ...]:
    """Parse ``ibv_devinfo [-v]``; empty output or "No IB devices found" is no device."""
    devices: list[_Device] = []
    previous = ""
    for lineno, raw in enumerate(text_lines(text, "ibv_devinfo"), 1):
        line = raw.strip()
        if not line or (not devices and line == "No IB devices found"):
            continue
        if raw == previous:  # devinfo.c never prints one line twice in a row
            raise ParseError(f"ibv_devinfo: line {lineno}: {line[:60]!r} printed twice in a "
                             "row (duplicated output?)")
        previous = raw
        if line.startswith("hca_id:"):
            name = line.partition(":")[2].strip()
            device_name(name, "ibv_devinfo", f"line {lineno}")
            if any(d.name == name for d in devices):
                raise ParseError(f"ibv_devinfo: line {lineno}: device {name} listed twice")
            devices.append(_Device(name, lineno))
            continue
        if not devices:
            raise ParseError(f"ibv_devinfo: line {lineno}: {line[:60]!r} before any "
                             "'hca_id:' line (is this ibv_devinfo output?)")
        dev = devices[-1]
        m = _KEY.match(line)
        if m and m.group(1) == "port":
            if not _NUMBER.match(m.group(2).strip()):
                raise ParseError(f"ibv_devinfo: line {lineno}: port {m.group(2)[:20]!r} is not "
                                 "a number")
            dev.ports.append((int(m.group(2)), lineno, {}))
        elif dev.ports:
            _port_line(dev, line, lineno)
        elif not raw.startswith(("\t", " ")):
            raise ParseError(f"ibv_devinfo: line {lineno}: {line[:60]!r} is not indented "
                             "under its device")
        elif m and m.group(1) in _IDENTITY:
            if m.group(1) in dev.fields:
                raise ParseError(f"ibv_devinfo: line {lineno}: {m.group(1)} printed twice "
                                 f"for {dev.name} (duplicated output?)")
            dev.fields[m.group(1)] = m.group(2).strip()
    return tuple(d.build() for d in devices)


def ibstat_from_devinfo(devices: tuple[IbvDevice, ...], verbose: bool = False) -> IbStat:
    """ibv_devinfo's view in ibstat's terms, so fabric.ports can judge either.

    ``verbose``: the output is ``ibv_devinfo -v``'s, so every port must have the lines
    ``-v`` prints (``active_width``, ``active_speed``, and ``phys_state`` on an
    InfiniBand-transport device); a port without them is not that command's output
    (ParseError)."""
    for d in devices:
        if verbose and not d.transport:
            raise ParseError(f"ibv_devinfo: {d.hca_id} lacks its transport line, which "
                             "ibv_devinfo prints for every device (cut output?)")
        for p in d.ports if verbose else ():
            wanted = {"active_width", "active_speed"} | \
                ({"phys_state"} if d.transport == "InfiniBand" else set())
            if not wanted <= p.printed:
                raise ParseError(f"ibv_devinfo: {d.hca_id} port {p.number} lacks "
                                 f"{', '.join(sorted(wanted - p.printed))}, which "
                                 "ibv_devinfo -v prints (not -v output, or cut)")
    return IbStat(tuple(
        IbCa(d.hca_id, "CA", d.vendor_part_id, len(d.ports), d.fw_ver, "", "", "", tuple(
            IbPort(p.number, _AS_IBSTAT_STATE.get(p.state, "???"),
                   _AS_IBSTAT_PHYS.get(p.phys_state, "???") if p.phys_state else "",
                   p.rate_gbps, p.link_layer) for p in d.ports))
        for d in devices))


__all__ = ["IbvDevice", "IbvPort", "ibstat_from_devinfo", "parse_ibv_devinfo"]
