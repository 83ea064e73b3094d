"""Parser for ``/proc/net/bonding/<bond>`` (Linux bonding driver, ``bond_procfs.c``;
kernel Documentation/networking/bonding.rst, "Querying Bonding Configuration").

The file is ``Key: value`` lines: the bond (``Bonding Mode``, ``MII Status``, ``Currently
Active Slave``), for 802.3ad an ``802.3ad info`` block with ``Active Aggregator Info``
(``Aggregator ID``, ``Partner Mac Address``, tab-indented), then one block per slave that
starts at ``Slave Interface:`` (``MII Status``, ``Speed``, ``Duplex``, ``Link Failure
Count``, ``Aggregator ID`` and, on newer kernels, ``details partner lacp pdu:`` with the
partner's ``system mac address``). Older kernels omit the aggregator and partner details:
those fields are then None.

Several bonds come in one text as ``==> /proc/net/bonding/bond0 <==`` sections (what
``tail``/the check's loop print); a text without such a line is one bond of unknown name.

>>> r = parse_bonding("==> /proc/net/bonding/bond0 <==\\nBonding Mode: fault-tolerance "
...     "(active-backup)\\nMII Status: up\\n\\nSlave Interface: eth0\\nMII Status: up\\n")
>>> b = r.bonds[0]
>>> b.name, b.mode, b.slaves[0].interface, b.slaves[0].mii_up
('bond0', 'active-backup', 'eth0', True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rackgate.parsers import ParseError

# "Bonding Mode:" text -> the mode name of bonding.rst / ip-link(8)
MODES = {
    "load balancing (round-robin)": "balance-rr",
    "fault-tolerance (active-backup)": "active-backup",
    "load balancing (xor)": "balance-xor",
    "fault-tolerance (broadcast)": "broadcast",
    "ieee 802.3ad dynamic link aggregation": "802.3ad",
    "transmit load balancing": "balance-tlb",
    "adaptive load balancing": "balance-alb",
}
NO_PARTNER = "00:00:00:00:00:00"
_HEADER = re.compile(r"^==> (.*) <==$")
_KV = re.compile(r"^\s*([^:]+?)\s*:\s?(.*?)\s*$")


@dataclass(frozen=True)
class BondSlave:
    interface: str
    mii_status: str  # "up" / "down" / "going back" ...
    speed_mbps: int | None  # None for "Unknown"
    duplex: str | None
    link_failure_count: int | None
    aggregator_id: int | None  # 802.3ad only
    partner_mac: str | None  # from "details partner lacp pdu" (newer kernels)

    @property
    def mii_up(self) -> bool:
        return self.mii_status == "up"


@dataclass(frozen=True)
class Bond:
    name: str  # "" when the text did not say which file it came from
    mode: str  # bonding.rst name: "802.3ad", "active-backup", ... or the raw text if unknown
    mode_text: str
    mii_status: str
    active_slave: str | None
    active_aggregator_id: int | None  # 802.3ad "Active Aggregator Info"
    partner_mac: str | None  # 802.3ad "Active Aggregator Info: Partner Mac Address"
    slaves: tuple[BondSlave, ...]


@dataclass(frozen=True)
class BondingReport:
    bonds: tuple[Bond, ...]


def _int(value: str) -> int | None:
    """A decimal count, or None ("Unknown"); str.isdigit would accept '²', which int refuses."""
    return int(value) if re.fullmatch(r"[0-9]{1,18}", value) else None


def _count(value: str, what: str, where: str) -> int:
    """A count the judge reads (aggregator IDs, failure counts): ParseError unless decimal."""
    n = _int(value)
    if n is None:
        raise ParseError(f"/proc/net/bonding: {where}: {what} {value[:40]!r} is not a count")
    return n


def _speed(value: str, where: str) -> int | None:
    """'100000 Mbps', or None for 'Unknown' (a link that is down); ParseError otherwise."""
    if value.lower() in ("", "unknown"):
        return None
    m = re.fullmatch(r"([0-9]{1,9}) ?Mbps", value)
    if m is None:
        raise ParseError(f"/proc/net/bonding: {where}: Speed {value[:40]!r} is not 'N Mbps' "
                         "or 'Unknown'")
    return int(m.group(1))


def _bond(name: str, lines: list[str], where: str) -> Bond | None:
    fields: dict[str, str] = {}
    slaves: list[BondSlave] = []
    slave: BondSlave | None = None
    section = ""  # "", "aggregator", "actor", "partner"
    seen: set[tuple[int, str, str]] = set()  # (block, section, key): each key once per block
    for raw in lines:
        if not raw.strip():
            continue
        low = raw.strip().lower()
        if low in ("details partner lacp pdu:", "details actor lacp pdu:"):
            section = low.split()[1]
            continue
        m = _KV.match(raw)
        if m is None:
            continue  # "802.3ad info" and similar headings
        key, value = m.group(1).lower(), m.group(2)
        if key == "active aggregator info":
            section = "aggregator"
            continue
        if key == "slave interface":
            if slave is not None:
                slaves.append(slave)
            slave = BondSlave(value, "", None, None, None, None, None)
            section = ""
            continue
        block = len(slaves) if slave is not None else -1
        if slave is None and not (section == "aggregator" and raw.startswith(("\t", " "))):
            section = ""
        if (block, section, key) in seen:
            raise ParseError(f"/proc/net/bonding: {where}: {m.group(1)!r} given twice in "
                             f"{f'slave {slave.interface}' if slave else 'the bond'}'s block "
                             "(duplicated output?)")
        seen.add((block, section, key))
        if slave is None:
            if section == "aggregator" and raw.startswith(("\t", " ")):
                fields.setdefault(f"aggregator {key}", value)
            else:
                section = ""
                fields.setdefault(key, value)
        elif section == "partner":
            if key == "system mac address":
                slave = replace(slave, partner_mac=value.lower())
        elif section == "actor":
            continue
        elif key == "mii status":
            slave = replace(slave, mii_status=value.lower())
        elif key == "speed":
            slave = replace(slave, speed_mbps=_speed(value, where))
        elif key == "duplex":
            slave = replace(slave, duplex=None if value.lower() in ("", "unknown") else value)
        elif key == "link failure count":
            slave = replace(slave, link_failure_count=_count(value, "Link Failure Count", where))
        elif key == "aggregator id":
            slave = replace(slave, aggregator_id=_count(value, "Aggregator ID", where))
    if slave is not None:
        slaves.append(slave)
    names = [x.interface for x in slaves]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ParseError(f"/proc/net/bonding: {where} lists slave {', '.join(twice)} twice "
                         "(duplicated output?)")
    if "bonding mode" not in fields:
        if not fields and not slaves:
            return None
        raise ParseError(f"/proc/net/bonding: {where} has no 'Bonding Mode:' line")
    mode_text = fields["bonding mode"]
    partner = fields.get("aggregator partner mac address")
    return Bond(
        name=name, mode=MODES.get(mode_text.lower(), mode_text), mode_text=mode_text,
        mii_status=fields.get("mii status", "").lower(),
        active_slave=fields.get("currently active slave") or None,
        active_aggregator_id=_count(fields["aggregator aggregator id"], "Aggregator ID", where)
        if "aggregator aggregator id" in fields else None,
        partner_mac=partner.lower() if partner else None,
        slaves=tuple(slaves),
    )


def parse_bonding(text: str) -> BondingReport:
    """Parse one or more /proc/net/bonding files; an empty text means no bond."""
    sections: list[tuple[str, list[str]]] = []
    name, lines = "", list[str]()
    for line in text.splitlines():
        if m := _HEADER.match(line.strip()):
            if lines or name:
                sections.append((name, lines))
            name, lines = m.group(1).rsplit("/", 1)[-1], []
        else:
            lines.append(line)
    sections.append((name, lines))
    bonds: list[Bond] = []
    for bond_name, body in sections:
        where = f"/proc/net/bonding/{bond_name}" if bond_name else "the bond"
        if "*" in bond_name:  # an unmatched shell glob: no bonding driver, no bond
            continue
        bond = _bond(bond_name, body, where)
        if bond is None:
            if bond_name:
                raise ParseError(f"/proc/net/bonding: {where} is empty")
            if any(line.strip() for line in body):
                raise ParseError("/proc/net/bonding: no 'Bonding Mode:' line in the output")
            continue
        if any(b.name == bond.name for b in bonds):
            raise ParseError(f"/proc/net/bonding: {where} appears twice (duplicated output?)")
        bonds.append(bond)
    return BondingReport(tuple(bonds))
