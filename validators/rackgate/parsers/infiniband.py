"""Parsers for InfiniBand / RoCE port listings: ``ibstat``, ``ibv_devinfo`` and
``iblinkinfo`` (the iproute2 ``dcb`` JSON of fabric.roce_lossless: ``parsers.dcb``).

Formats, from the tools' source (linux-rdma/rdma-core):

* ``ibstat`` (infiniband-diags/ibstat.c, ``ca_dump``/``port_dump``): per device a header
  ``CA 'mlx5_0'`` (node type ``CA``, ``Switch``, ``Router``, ``iWARP RNIC`` or ``???``), then
  tab-indented ``CA type``, ``Number of ports``, ``Firmware version``, ``Hardware version``,
  ``Node GUID``, ``System image GUID``; per port ``Port N:`` and, indented twice, ``State``
  (Down, Initializing, Armed, Active, ???), ``Physical state`` (Sleep, Polling, Disabled,
  PortConfigurationTraining, LinkUp, LinkErrorRecovery, PhyTest, ...), ``Rate`` (Gb/s, an
  integer, ``2.5`` for 1x SDR, ``N (FDR10)``), ``Base lid``, ``LMC``, ``SM lid``,
  ``Capability mask``, ``Port GUID`` and ``Link layer`` (InfiniBand or Ethernet: RoCE).
  Errors go to stderr as ``ibpanic: ...`` / ``ibwarn: ...``; they are kept, not dropped.
  Without any RDMA device ibstat prints NOTHING and exits 0: empty output parses to a
  record with zero CAs, which the judge reports as "no HCA found", never as healthy. A
  field ibstat does not print (a damaged name), a value over 256 characters, a device name
  no kernel gives or a GUID that is not ``0x`` and 16 hex digits is a ParseError.
* ``ibv_devinfo`` (libibverbs/examples/devinfo.c): ``hca_id:<TAB>mlx5_0``, tab-indented
  ``key:<TABs>value`` lines, ``port:<TAB>N`` blocks with ``state: PORT_ACTIVE (4)``,
  ``active_mtu``, ``link_layer`` and, with ``-v``, ``phys_state``, ``active_width``
  (``4X (2)``) and ``active_speed`` (``25.0 Gbps (32)``). "No IB devices found" = zero.
* ``iblinkinfo`` (infiniband-diags/iblinkinfo.c): ``CA: name:`` / ``Switch: 0xGUID name:``
  headers, then one line per port: ``[GUID] LID PORT[..] ==( 4X 25.78125 Gbps Active/
  LinkUp)==> PEERLID PEERPORT[..] "peer" ( note )``. Lines filtered by grep (no headers)
  parse as well.

Windows line ends, trailing blanks and tabs-or-spaces indentation are all accepted.

>>> st = parse_ibstat("CA 'mlx5_0'\\n\\tCA type: MT4129\\n\\tNumber of ports: 1\\n"
...     "\\tFirmware version: 28.39.1002\\n\\tPort 1:\\n\\t\\tState: Active\\n"
...     "\\t\\tPhysical state: LinkUp\\n\\t\\tRate: 400\\n\\t\\tLink layer: InfiniBand\\n")
>>> p = st.cas[0].ports[0]
>>> (st.cas[0].name, p.state, p.rate_gbps, p.link_layer, p.up)
('mlx5_0', 'Active', 400.0, 'InfiniBand', True)
>>> parse_ibstat("").cas
()
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rackgate.parsers import ParseError

_HEADER = re.compile(r"^(CA|Switch|Router|iWARP RNIC|\?\?\?):? '([^']*)'$")
_PORT = re.compile(r"^Port ([0-9]{1,4}):$")
_FIELD = re.compile(r"^([A-Za-z][A-Za-z ]*?):\s*(.*)$")
_DIAG = re.compile(r"^(ibpanic|ibwarn|iberror|ibstat):", re.IGNORECASE)


_DECIMAL = re.compile(r"^[0-9]{1,12}(?:\.[0-9]{1,12})?$")
_GUID = re.compile(r"0x[0-9a-fA-F]{16}", re.ASCII)
_DEVICE = re.compile(r"[A-Za-z0-9_.-]{1,63}", re.ASCII)
# the fields ibstat.c's ca_dump / port_dump print ("<node type> type" besides)
_CA_FIELDS = frozenset({"Number of ports", "Firmware version", "Hardware version", "Node GUID",
                        "System image GUID"})
_PORT_FIELDS = frozenset({"State", "Physical state", "Rate", "Base lid", "LMC", "SM lid",
                          "Capability mask", "Port GUID", "Link layer"})


def _finite(text: str, what: str) -> float:
    """A decimal as a float, refused unless finite (ParseError naming ``what``)."""
    value = float(text) if _DECIMAL.match(text) else math.nan
    if not math.isfinite(value):
        raise ParseError(f"{what} {text[:40]!r} is not a finite number")
    return value


def _lines(text: str) -> list[str]:
    return [ln.rstrip() for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]


def _int(value: str, what: str, lineno: int, limit: int = 0xFFFF) -> int:
    """An integer field; LIDs are 16-bit and NumPorts 8-bit (IBA NodeInfo/PortInfo)."""
    token = value.split()[0] if value.split() else ""
    try:
        n = int(token, 0) if len(token) <= 12 else -1
    except ValueError:
        n = -1
    if not 0 <= n <= limit:
        raise ParseError(f"ibstat: line {lineno}: {what} {value[:40]!r} is not an integer "
                         f"0-{limit}")
    return n


# --------------------------------------------------------------------------- ibstat


@dataclass(frozen=True)
class IbPort:
    """One port of one RDMA device as ibstat prints it (rate in Gb/s, as ibstat prints)."""

    number: int
    state: str  # Down | Initializing | Armed | Active | ???
    physical_state: str  # LinkUp | Polling | Disabled | Sleep | ... ; "" when not reported
    rate_gbps: float | None  # None when the tool did not report a rate (ibv_devinfo without -v)
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


class _CaBuilder:
    def __init__(self, name: str, node_type: str, lineno: int) -> None:
        self.name, self.node_type, self.lineno = name, node_type, lineno
        self.fields: dict[str, str] = {}
        self.ports: list[tuple[int, int, dict[str, str]]] = []

    def build(self) -> IbCa:
        f = self.fields
        where = f"CA '{self.name}' (line {self.lineno})"
        ports = tuple(_build_port(n, ln, pf, where) for n, ln, pf in self.ports)
        num = _int(f["Number of ports"], "Number of ports", self.lineno, 255) \
            if "Number of ports" in f else len(ports)
        listed = [p.number for p in ports]
        twice = sorted({n for n in listed if listed.count(n) > 1})
        if twice:
            raise ParseError(f"ibstat: {where} lists port {', '.join(map(str, twice))} twice "
                             "(duplicated output?)")
        numbers = {p.number for p in ports if p.number > 0}
        if len(numbers) < num:
            raise ParseError(f"ibstat: {where} declares {num} port(s) but lists "
                             f"{len(numbers)} (truncated output?)")
        if any(n > num for n in numbers):
            raise ParseError(f"ibstat: {where} declares {num} port(s) but lists port "
                             f"{max(numbers)}")
        return IbCa(self.name, self.node_type, f.get(f"{self.node_type} type", ""), num,
                    f.get("Firmware version", ""), f.get("Hardware version", ""),
                    _guid(f.get("Node GUID", ""), where, "Node GUID"),
                    _guid(f.get("System image GUID", ""), where, "System image GUID"), ports)


def _guid(value: str, where: str, what: str) -> str:
    """A GUID as ibstat prints it ("0x%016" PRIx64), or "" where the line is absent."""
    if value and not _GUID.fullmatch(value):
        raise ParseError(f"ibstat: {where}: {what} {value[:40]!r} is not 0x and 16 hex digits")
    return value


def _build_port(number: int, lineno: int, f: dict[str, str], where: str) -> IbPort:
    missing = [k for k in ("State", "Physical state", "Rate", "Link layer") if k not in f]
    if missing:
        raise ParseError(f"ibstat: {where} port {number} (line {lineno}) lacks "
                         f"{', '.join(missing)}")
    rate = f["Rate"].split()[0] if f["Rate"].split() else ""
    if not _DECIMAL.match(rate):  # float() would take 'nan', 'inf' and '1e400'
        raise ParseError(f"ibstat: {where} port {number}: Rate {f['Rate']!r} is not a "
                         "finite number of Gb/s")
    rate_gbps = _finite(rate, f"ibstat: {where} port {number}: Rate")
    return IbPort(
        number=number, state=f["State"], physical_state=f["Physical state"],
        rate_gbps=rate_gbps, link_layer=f["Link layer"],
        base_lid=_int(f["Base lid"], "Base lid", lineno) if "Base lid" in f else None,
        sm_lid=_int(f["SM lid"], "SM lid", lineno) if "SM lid" in f else None,
        port_guid=_guid(f["Port GUID"], f"{where} port {number}", "Port GUID")
        if "Port GUID" in f else None,
    )


def parse_ibstat(text: str) -> IbStat:
    """Parse ``ibstat`` (all devices, or ``ibstat <ca>``); empty output is zero CAs."""
    cas: list[_CaBuilder] = []
    errors: list[str] = []
    port: dict[str, str] | None = None
    for lineno, raw in enumerate(_lines(text), 1):
        line = raw.strip()
        if not line:
            continue
        if _DIAG.match(line):
            errors.append(line)
            continue
        m = _HEADER.match(line)
        if m:
            if not _DEVICE.fullmatch(m.group(2)):  # IB_DEVICE_NAME_MAX: 64 with its NUL
                raise ParseError(f"ibstat: line {lineno}: {line[:60]!r}: no RDMA device name")
            if any(c.name == m.group(2) for c in cas):
                raise ParseError(f"ibstat: line {lineno}: device '{m.group(2)}' listed twice")
            cas.append(_CaBuilder(m.group(2), m.group(1), lineno))
            port = None
            continue
        if not cas:
            raise ParseError(f"ibstat: line {lineno}: {line[:60]!r} before any "
                             "\"CA '<name>'\" header (is this ibstat output?)")
        m = _PORT.match(line)
        if m:
            port = {}
            cas[-1].ports.append((int(m.group(1)), lineno, port))
            continue
        m = _FIELD.match(line)
        if not m:
            raise ParseError(f"ibstat: line {lineno}: {line[:60]!r} is not 'Key: value'")
        key, value = m.group(1), m.group(2).strip()
        target = port if port is not None else cas[-1].fields
        known = _PORT_FIELDS if port is not None else {*_CA_FIELDS, f"{cas[-1].node_type} type"}
        if key not in known or len(value) > 256:  # ibstat.c prints these and no other
            raise ParseError(f"ibstat: line {lineno}: {line[:60]!r} is no "
                             f"{'port' if port is not None else 'device'} field ibstat prints"
                             + (f" ({len(value):,} characters)" if key in known else ""))
        if key in target:
            raise ParseError(f"ibstat: line {lineno}: {key!r} repeated in one block")
        target[key] = value
    if not cas and not errors and any(ln.strip() for ln in _lines(text)):
        raise ParseError("ibstat: no \"CA '<name>'\" header in non-empty output")
    return IbStat(tuple(c.build() for c in cas), tuple(errors))


# --------------------------------------------------------------------------- ibv_devinfo

_IBV_STATES = {"PORT_NOP": "???", "PORT_DOWN": "Down", "PORT_INIT": "Initializing",
               "PORT_ARMED": "Armed", "PORT_ACTIVE": "Active", "PORT_ACTIVE_DEFER": "Active"}
_IBV_PHYS = {"SLEEP": "Sleep", "POLLING": "Polling", "DISABLED": "Disabled",
             "PORT_CONFIGURATION_TRAINING": "PortConfigurationTraining", "LINK_UP": "LinkUp",
             "LINK_ERROR_RECOVERY": "LinkErrorRecovery", "PHY_TEST": "PhyTest"}
_KV = re.compile(r"^([A-Za-z_][A-Za-z0-9_ ]*?):\s*(.*)$")


@dataclass(frozen=True)
class IbvPort:
    """One ``port:`` block of ibv_devinfo; width/speed only with ``-v``."""

    number: int
    state: str  # PORT_ACTIVE, PORT_DOWN, ... (the verbs name, without the code)
    link_layer: str
    active_mtu: int | None
    phys_state: str | None  # LINK_UP, POLLING, ... (-v only)
    active_width: int | None  # lanes: 1, 2, 4, 8, 12 (-v only)
    active_speed_gbps: float | None  # per lane (-v only)

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


def _ibv_port(number: int, f: dict[str, str], hca: str) -> IbvPort:
    if "state" not in f or "link_layer" not in f:
        raise ParseError(f"ibv_devinfo: {hca} port {number} lacks state or link_layer")
    width = re.match(r"(\d{1,3})X", f.get("active_width", ""))
    speed = re.match(r"(\d{1,12}(?:\.\d{1,12})?)\s*Gbps", f.get("active_speed", ""))
    mtu = re.match(r"(\d{1,9})", f.get("active_mtu", ""))
    if not f["state"].split():
        raise ParseError(f"ibv_devinfo: {hca} port {number}: empty state")
    if speed is None and "Gbps" in f.get("active_speed", ""):
        raise ParseError(f"ibv_devinfo: {hca} port {number}: active_speed "
                         f"{f['active_speed'].split()[0][:40]!r} is not a number of Gbps")
    return IbvPort(number, f["state"].split()[0], f["link_layer"],
                   int(mtu.group(1)) if mtu else None,
                   f["phys_state"].split()[0] if f.get("phys_state", "").split() else None,
                   int(width.group(1)) if width else None,
                   _finite(speed.group(1), f"ibv_devinfo: {hca} port {number}: active_speed")
                   if speed else None)


def parse_ibv_devinfo(text: str) -> tuple[IbvDevice, ...]:
    """Parse ``ibv_devinfo [-v]``; empty output or "No IB devices found" is no device."""
    devices: list[tuple[str, dict[str, str], list[tuple[int, dict[str, str]]]]] = []
    port: dict[str, str] | None = None
    for lineno, raw in enumerate(_lines(text), 1):
        line = raw.strip()
        if not line or line == "Device ports:" or line.lower().startswith("no ib devices"):
            continue
        m = _KV.match(line)
        if not m:
            if devices and port is not None and raw.startswith(("\t\t\t\t", " " * 16)):
                continue  # -v continuation lines (GID lists, capability flags)
            if devices and raw[:1] in ("\t", " "):
                continue
            raise ParseError(f"ibv_devinfo: line {lineno}: {line[:60]!r} is not 'key: value'")
        key, value = m.group(1), m.group(2).strip()
        if key == "hca_id":
            devices.append((value, {}, []))
            port = None
        elif not devices:
            raise ParseError(f"ibv_devinfo: line {lineno}: {key!r} before any 'hca_id:' line")
        elif key == "port":
            try:
                number = int(value)
            except ValueError:
                raise ParseError(f"ibv_devinfo: line {lineno}: port {value!r} is not a "
                                 "number") from None
            port = {}
            devices[-1][2].append((number, port))
        else:
            (port if port is not None else devices[-1][1]).setdefault(key, value)
    if not devices and any(ln.strip() and not ln.strip().lower().startswith("no ib devices")
                           for ln in _lines(text)):
        raise ParseError("ibv_devinfo: no 'hca_id:' line in non-empty output")
    return tuple(IbvDevice(h, f.get("fw_ver", ""), f.get("vendor_part_id", ""),
                           tuple(_ibv_port(n, pf, h) for n, pf in ports))
                 for h, f, ports in devices)


def ibstat_from_devinfo(devices: tuple[IbvDevice, ...]) -> IbStat:
    """ibv_devinfo's view in ibstat's terms, so fabric.ports can judge either."""
    return IbStat(tuple(
        IbCa(d.hca_id, "CA", d.vendor_part_id, len(d.ports), d.fw_ver, "", "", "", tuple(
            IbPort(p.number, _IBV_STATES.get(p.state, p.state),
                   _IBV_PHYS.get(p.phys_state or "", p.phys_state or ""),
                   p.rate_gbps, p.link_layer) for p in d.ports))
        for d in devices))


__all__ = ["IbCa", "IbPort", "IbStat", "IbvDevice", "IbvPort", "ibstat_from_devinfo",
           "parse_ibstat", "parse_ibv_devinfo"]
