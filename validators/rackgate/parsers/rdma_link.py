"""Parser for iproute2's ``rdma link show`` and ``rdma -j link show`` (rdma/link.c,
``link_parse_cb``; the attributes are the kernel's, drivers/infiniband/core/nldev.c
``fill_port_info``).

One record per port: ``ifindex`` (JSON only), ``ifname`` (the device), ``port``, then for a
port of the InfiniBand protocol only (nldev.c: ``rdma_protocol_ib``) ``subnet_prefix``,
``lid``, ``sm_lid`` and ``lmc``; always ``state`` (NOP, DOWN, INIT, ARMED, ACTIVE,
ACTIVE_DEFER, UNKNOWN) and ``physical_state`` (NOP, SLEEP, POLLING, DISABLED, ARMED,
LINK_UP, LINK_ERROR_RECOVER, PHY_TEST, UNKNOWN, OPA_OFFLINE, OPA_TEST); ``netdev`` and
``netdev_index`` where the port has a net device in the tool's namespace; with ``-d``
``caps``. Text: one line per port, ``link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid
12 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP netdev ib0``, and with ``-d`` a
``caps: <...>`` line under it. JSON: an array of objects with those names. Before iproute2
5.5 (rdma: "Rewrite custom JSON and prints logic", 2019) the line began ``0/1: mlx5_0/1:``
(device index and port, then the port's name) and JSON's ``ifname`` was ``mlx5_0/1``:
both are read, the port number in the name agreeing with the port's.

What the tool does not print is not guessed: there is no rate (``IbPort.rate_gbps`` is
None; fabric.ports cannot confirm a port's rate from it), and the link layer is read from
the protocol the kernel reports: InfiniBand where the four InfiniBand attributes are
printed, Ethernet (RoCE, or iWARP) where none is; some of them alone is damaged output. A
name, key or value the tool does not print, a port listed twice or a port number outside
1-255 is a ParseError. Empty output (no device), or ``[]``, is no device.

>>> st = parse_rdma_link('[{"ifindex":0,"ifname":"mlx5_2","port":1,"state":"ACTIVE",'
...     '"physical_state":"LINK_UP","netdev":"ens1f0","netdev_index":4}]')
>>> p = st.cas[0].ports[0]
>>> (st.cas[0].name, p.state, p.physical_state, p.link_layer, p.rate_gbps, p.up)
('mlx5_2', 'Active', 'LinkUp', 'Ethernet', None, True)
"""

from __future__ import annotations

import re
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.infiniband.model import IbPort, IbStat, as_ca, device_name, text_lines
from rackgate.parsers.strict_json import decode

_STATES = frozenset({"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER", "UNKNOWN"})
_PHYS = frozenset({"NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP",
                   "LINK_ERROR_RECOVER", "PHY_TEST", "UNKNOWN", "OPA_OFFLINE", "OPA_TEST"})
_AS_IBSTAT_STATE = {"DOWN": "Down", "INIT": "Initializing", "ARMED": "Armed",
                    "ACTIVE": "Active"}
_AS_IBSTAT_PHYS = {"SLEEP": "Sleep", "POLLING": "Polling", "DISABLED": "Disabled",
                   "LINK_UP": "LinkUp", "LINK_ERROR_RECOVER": "LinkErrorRecovery",
                   "PHY_TEST": "PhyTest"}
_IB = ("subnet_prefix", "lid", "sm_lid", "lmc")  # nldev.c: InfiniBand-protocol ports only
_KEYS = frozenset({"ifindex", "ifname", "port", *_IB, "state", "physical_state", "netdev",
                   "netdev_index", "caps"})
_TEXT_KEYS = ("subnet_prefix", "lid", "sm_lid", "lmc", "state", "physical_state", "netdev",
              "netdev_index")  # in the order link.c prints them
_PREFIX = re.compile(r"[0-9a-f]{4}(?::[0-9a-f]{4}){3}")
_NETDEV = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,14}", re.ASCII)  # IFNAMSIZ 16
_UINT = re.compile(r"[0-9]{1,10}")
_CAP = re.compile(r"[A-Z0-9_]{1,40}")
_OLD_TEXT = re.compile(r"([0-9]{1,10})/([0-9]{1,3}):")
_JSON_LINE = 65_536  # without -p the whole array is one line: ~200 characters a port


def _uint(value: Any, key: str, where: str, top: int, low: int = 0) -> int:
    if isinstance(value, str) and _UINT.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= top:
        raise ParseError(f"rdma link: {where}: {key} {str(value)[:40]!r} is not an integer "
                         f"{low}-{top}")
    return int(value)


def _port(rec: dict[str, Any], where: str) -> tuple[str, IbPort]:
    """One port record (decoded JSON, or a text line's words) in ibstat's terms."""
    foreign = sorted(set(rec) - _KEYS)
    missing = [k for k in ("ifname", "port", "state", "physical_state") if k not in rec]
    if foreign or missing:
        raise ParseError(f"rdma link: {where}: " + (f"{', '.join(foreign)[:60]} is no key "
                                                    "rdma link prints" if foreign else
                                                    f"lacks {', '.join(missing)}"))
    number = _uint(rec["port"], "port", where, 255, 1)  # link.c: ports from 1, no switch
    name = rec["ifname"] if isinstance(rec["ifname"], str) else ""
    if "/" in name:  # iproute2 before 5.5: "ifname": "mlx5_0/1", the port's own number
        name, _, suffix = name.rpartition("/")
        if suffix != str(number):
            raise ParseError(f"rdma link: {where}: ifname {rec['ifname'][:40]!r} names another "
                             f"port than {number}")
    device_name(name, "rdma link", where)
    state, phys = rec["state"], rec["physical_state"]
    if state not in _STATES or phys not in _PHYS:
        raise ParseError(f"rdma link: {where}: state {str(state)[:30]!r} / physical_state "
                         f"{str(phys)[:30]!r} is not what rdma link prints")
    ib = [k for k in _IB if k in rec]
    if ib and len(ib) < len(_IB):
        raise ParseError(f"rdma link: {where}: {', '.join(ib)} without "
                         f"{', '.join(k for k in _IB if k not in ib)}: the kernel reports "
                         "all four for an InfiniBand port (damaged output?)")
    if ib and not (isinstance(rec["subnet_prefix"], str)
                   and _PREFIX.fullmatch(rec["subnet_prefix"])):
        raise ParseError(f"rdma link: {where}: subnet_prefix "
                         f"{str(rec['subnet_prefix'])[:40]!r} is not 4 groups of 4 hex digits")
    lids = {k: _uint(rec[k], k, where, 0xFFFFFFFF) for k in ("lid", "sm_lid") if ib}
    if ib:
        _uint(rec["lmc"], "lmc", where, 7)
    for key in ("ifindex", "netdev_index"):
        if key in rec:
            _uint(rec[key], key, where, 0xFFFFFFFF)
    if "netdev" in rec and not (isinstance(rec["netdev"], str)
                                and _NETDEV.fullmatch(rec["netdev"])):
        raise ParseError(f"rdma link: {where}: netdev {str(rec['netdev'])[:40]!r} is no "
                         "interface name")
    caps = rec.get("caps", [])
    if not isinstance(caps, list) or not all(isinstance(c, str) and _CAP.fullmatch(c)
                                             for c in caps):
        raise ParseError(f"rdma link: {where}: caps {str(caps)[:40]!r} is not a list of flags")
    return name, IbPort(number, _AS_IBSTAT_STATE.get(state, state),
                        _AS_IBSTAT_PHYS.get(phys, phys), None,
                        "InfiniBand" if ib else "Ethernet",
                        base_lid=lids.get("lid"), sm_lid=lids.get("sm_lid"))


def _stat(ports: list[tuple[str, IbPort]]) -> IbStat:
    devices: dict[str, list[IbPort]] = {}
    for name, port in ports:
        devices.setdefault(name, []).append(port)
    return IbStat(tuple(as_ca(name, ps, "rdma link") for name, ps in devices.items()))


def parse_rdma_link_json(text: str) -> IbStat:
    """Parse ``rdma -j link show`` (one JSON array, ``-p`` pretty-printed or not)."""
    text_lines(text, "rdma -j link", _JSON_LINE)  # no character a tool never prints
    if not text.strip():
        return IbStat(())
    doc, end = decode(text, "rdma -j link", len(text) - len(text.lstrip()))
    if text[end:].strip():
        raise ParseError(f"rdma -j link: text after the JSON array: {text[end:].strip()[:40]!r}")
    if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
        raise ParseError("rdma -j link: not a JSON array of port objects")
    return _stat([_port(r, f"entry {i}") for i, r in enumerate(doc)])


def _text_record(line: str, lineno: int) -> dict[str, Any]:
    words = line.split()
    where = f"line {lineno}"
    rec: dict[str, Any] = {}
    old = _OLD_TEXT.fullmatch(words[0]) if words else None
    if old and len(words) > 1 and words[1].endswith(":"):  # before 5.5: "0/1: mlx5_0/1: ..."
        rec["ifindex"] = old.group(1)
        words = ["link", words[1][:-1], *words[2:]]
        if old.group(2) != words[1].rpartition("/")[2]:
            raise ParseError(f"rdma link: {where}: {line[:60]!r} names two port numbers")
    dev, slash, port = words[1].rpartition("/") if len(words) > 1 else ("", "", "")
    if words[:1] != ["link"] or not slash or len(words) % 2:
        raise ParseError(f"rdma link: {where}: {line[:60]!r} is not 'link DEV/PORT key value "
                         "...'")
    rec.update({"ifname": dev, "port": port})
    keys = words[2::2]
    order = [k for k in _TEXT_KEYS if k in keys]
    if keys != order or len(set(keys)) != len(keys):
        raise ParseError(f"rdma link: {where}: keys {' '.join(keys)[:60]!r} are not rdma "
                         "link's, once each, in its order")
    rec.update(zip(keys, words[3::2], strict=True))
    return rec


def parse_rdma_link(text: str) -> IbStat:
    """Parse ``rdma link show`` text, or its ``-j`` JSON (an output starting with ``[``)."""
    if text.lstrip(" \t\r\n").startswith("["):
        return parse_rdma_link_json(text)
    ports: list[tuple[str, IbPort]] = []
    caps_ok = False
    for lineno, raw in enumerate(text_lines(text, "rdma link"), 1):
        line = raw.strip()
        if not line:
            continue
        if caps_ok and re.fullmatch(r"caps: <[A-Z0-9_, ]{0,400}>", line):
            caps_ok = False  # -d: the flags of the port above, once
            continue
        ports.append(_port(_text_record(line, lineno), f"line {lineno}"))
        caps_ok = True
    return _stat(ports)


__all__ = ["parse_rdma_link", "parse_rdma_link_json"]
