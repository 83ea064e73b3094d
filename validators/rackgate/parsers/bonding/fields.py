"""The values of ``/proc/net/bonding/<bond>`` lines (``parsers.bonding``), each read as the
kernel's ``drivers/net/bonding/bond_procfs.c`` prints it, or a ParseError naming the file.

802.3ad adds two outputs that are findings, not damage. A slave whose port belongs to no
aggregator is printed ``Aggregator ID: N/A`` (``bond_info_show_slave``: the port's
aggregator pointer is NULL; its churn and LACP PDU lines are then left out): read by
:func:`aggregator_id` as None. A bond without an active aggregator prints ``bond <name> has no
active aggregator`` (``bond_info_show_master``, where the ``Active Aggregator Info:`` block
would be; the one line of the file without a colon besides ``802.3ad info``): read by
:func:`no_active_aggregator`.

>>> aggregator_id("2", "bond0"), aggregator_id("N/A", "bond0")
(2, None)
>>> no_active_aggregator("bond bond0 has no active aggregator", "bond0", "bond0")
True
>>> no_active_aggregator("MII Status: up", "bond0", "bond0")
False
"""

from __future__ import annotations

import ipaddress
import re

from rackgate.parsers import ParseError

MII_STATES = ("up", "down", "going down", "going back", "unknown")  # bonding.h
U32_MAX = 2**32 - 1  # the kernel's link_failure_count is a u32 (printed with %u)
_IFNAME = re.compile(r"[^\s/:]{1,15}")
_MAC = re.compile(r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}", re.ASCII)
# bond_info_show_master: "bond %s has no active aggregator\n" (bond->dev->name)
_NO_ACTIVE = re.compile(r"bond (\S{1,40}) has no active aggregator")


def _int(value: str) -> int | None:
    """A decimal count, or None ("Unknown"); str.isdigit would accept '²', which int refuses."""
    return int(value) if re.fullmatch(r"[0-9]{1,18}", value) else None


def count(value: str, what: str, where: str) -> int:
    """A count the judge reads (aggregator IDs, failure counts, intervals): ParseError unless
    decimal and within the kernel's u32."""
    n = _int(value)
    if n is None or n > U32_MAX:
        raise ParseError(f"/proc/net/bonding: {where}: {what} {value[:40]!r} is not a count"
                         + (" (above the kernel's 32-bit counter)" if n is not None else ""))
    return n


def aggregator_id(value: str, where: str) -> int | None:
    """A slave's ``Aggregator ID``: the aggregator's number, or None for the ``N/A`` the
    kernel prints for a port in no aggregator (exactly that text; anything else is damage)."""
    return None if value == "N/A" else count(value, "Aggregator ID", where)


def no_active_aggregator(line: str, name: str, where: str) -> bool:
    """Whether ``line`` is the kernel's ``bond <name> has no active aggregator``; a ParseError
    when it names another bond than the file's (``name``; "" when the file is unnamed)."""
    m = _NO_ACTIVE.fullmatch(line.strip())
    if m is None:
        return False
    bond = ifname(m.group(1), where)
    if name and bond != name:
        raise ParseError(f"/proc/net/bonding: {where}: {line.strip()[:80]!r} names bond {bond}, "
                         f"not {name} (not this bond's file?)")
    return True


def ifname(value: str, where: str) -> str:
    """An interface name as the kernel allows it (IFNAMSIZ 16 with its NUL; no space, '/' or
    ':'), or "None" (no active slave)."""
    if not _IFNAME.fullmatch(value):
        raise ParseError(f"/proc/net/bonding: {where}: {value[:40]!r} is no interface name")
    return value


def mii(value: str, where: str) -> str:
    """An MII status bond_procfs.c prints (bond_slave_link_status, or the bond's up/down)."""
    if value.lower() not in MII_STATES:
        raise ParseError(f"/proc/net/bonding: {where}: MII Status {value[:40]!r} is none of "
                         f"{', '.join(MII_STATES)}")
    return value.lower()


def mac(value: str, where: str) -> str:
    """A MAC address as the kernel prints it (%pM: six colon-separated hex pairs)."""
    if not _MAC.fullmatch(value):
        raise ParseError(f"/proc/net/bonding: {where}: MAC address {value[:40]!r} is not six "
                         "hex pairs joined by ':'")
    return value.lower()


def speed(value: str, where: str) -> int | None:
    """'100000 Mbps', or None for 'Unknown' (a link that is down); ParseError otherwise."""
    if value.lower() in ("", "unknown"):
        return None
    m = re.fullmatch(r"([0-9]{1,9}) ?Mbps", value)
    if m is None:
        raise ParseError(f"/proc/net/bonding: {where}: Speed {value[:40]!r} is not 'N Mbps' "
                         "or 'Unknown'")
    return int(m.group(1))


def targets(value: str, version: int, where: str) -> tuple[str, ...]:
    """bond_procfs.c prints ' %pI4' (or ' %pI6c') per target, ',' between them."""
    out = []
    for item in (x.strip() for x in value.split(",")) if value.strip() else ():
        try:
            address = ipaddress.ip_address(item)
        except ValueError:
            address = None
        if address is None or address.version != version:
            raise ParseError(f"/proc/net/bonding: {where}: ARP/NS target {item[:40]!r} is not "
                             f"an IPv{version} address")
        out.append(str(address))
    return tuple(out)
