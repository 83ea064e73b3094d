"""Parser for ``/proc/net/bonding/<bond>`` (Linux bonding driver, ``bond_procfs.c``;
kernel Documentation/networking/bonding.rst, "Querying Bonding Configuration"), with the
sysfs files ``redundancy.bonding`` reads beside it.

The file is ``Key: value`` lines: the bond (``Bonding Mode``, ``MII Status``, ``MII Polling
Interval (ms)``, ``Currently Active Slave``; when ARP monitoring is on, ``ARP Polling
Interval (ms)`` and ``ARP IP target/s (n.n.n.n form)``), for 802.3ad an ``802.3ad info``
block with ``Active Aggregator Info`` (``Aggregator ID``, ``Partner Mac Address``,
tab-indented), then one block per slave that starts at ``Slave Interface:`` (``MII
Status``, ``Speed``, ``Duplex``, ``Link Failure Count``, ``Aggregator ID`` and, on newer
kernels, ``details partner lacp pdu:`` with the partner's ``system mac address``). Older
kernels omit the aggregator and partner details: those fields are then None. A port in no
aggregator (``Aggregator ID: N/A``) and a bond with none active (``bond <name> has no
active aggregator``) are findings the record keeps (``parsers.bonding.fields``). The kernel
never prints ``arp_validate`` there: only ``/sys/class/net/<bond>/bonding/arp_validate``
(bond_sysfs.c, ``<name> <n>``) does, and ``/sys/class/net/<slave>/bonding_slave/state``
(bond_sysfs_slave.c) says whether a slave is ``active`` or ``backup``.

A line with a label the driver does not print (a damaged one: a byte-order mark, other
characters, longer than 64), a value over 4,096 characters, a line without a colon other
than ``802.3ad info`` and the bond's "no active aggregator", an MII status on no list, an
interface name the kernel does not allow or a MAC address that is not six hex pairs is a
ParseError: unknown labels of newer kernels are skipped, damaged ones may hide a judged
field.

Files come as ``==> path <==`` sections; a text without such a line is one bond of unknown
name. The check reads everything twice (:data:`READ_MARK` lines): ``### rackgate-bonding
read=1 uptime_s=S``, the files, ``### rackgate-bonding read=2 uptime_s=S``, the files
again, ``### rackgate-bonding done``. Evidence without those lines is one read (the
collector before issue 14): ``BondingReport.first`` is then None.

>>> r = parse_bonding("==> /proc/net/bonding/bond0 <==\\nBonding Mode: fault-tolerance "
...     "(active-backup)\\nMII Status: up\\n\\nSlave Interface: eth0\\nMII Status: up\\n")
>>> b = r.bonds[0]
>>> b.name, b.mode, b.slaves[0].interface, b.slaves[0].mii_up, r.first
('bond0', 'active-backup', 'eth0', True, None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rackgate.figures import figure
from rackgate.parsers import ParseError
from rackgate.parsers.bonding.fields import (
    aggregator_id,
    count,
    ifname,
    mac,
    mii,
    no_active_aggregator,
    speed,
    targets,
)
from rackgate.parsers.damage import DAMAGE

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
# bonding.rst arp_validate values, in the order of their numbers (sysfs prints "all 3")
ARP_VALIDATE = ("none", "active", "backup", "all", "filter", "filter_active", "filter_backup")
NO_PARTNER = "00:00:00:00:00:00"
READ_MARK = "### rackgate-bonding"
_HEADER = re.compile(r"^==> (.*) <==$")
_KV = re.compile(r"^([^:]*):(.*)$")  # label and value stripped after it (no backtracking)
# a label bond_procfs.c prints: ASCII words with a letter, at most 64 characters ("ARP IP
# target/s (n.n.n.n form)", "Aggregator selection policy (ad_select)")
_LABEL = re.compile(r"(?=[^:]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9 ()/._,+-]{0,63}", re.ASCII)
_MAX_VALUE = 4096  # a line of the seq_file: the longest, the ARP targets, is far shorter
_NS = "ns ipv6 target/s (xx::xx form):"  # its key holds "::", which _KV would split on
_READ = re.compile(r"read=([12]) uptime_s=([0-9]{1,10}(?:\.[0-9]{1,3})?)")
_SYS = re.compile(r"^/sys/class/net/([^/]+)/(bonding/arp_validate|bonding_slave/state)$")


@dataclass(frozen=True)
class BondSlave:
    interface: str
    mii_status: str  # "up" / "down" / "going back" ...: the link state the monitor keeps
    speed_mbps: int | None  # None for "Unknown"
    duplex: str | None
    link_failure_count: int | None  # times the monitor saw it fail since it was enslaved
    aggregator_id: int | None  # 802.3ad only
    partner_mac: str | None  # from "details partner lacp pdu" (newer kernels)
    state: str | None = None  # bonding_slave/state: "active", "backup"; None: not read
    no_aggregator: bool = False  # 802.3ad "Aggregator ID: N/A": its port is in no aggregator

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
    miimon_ms: int | None = None  # "MII Polling Interval (ms)"; 0: MII monitoring off
    arp_interval_ms: int | None = None  # "ARP Polling Interval (ms)"; None: ARP monitor off
    arp_targets: tuple[str, ...] = ()  # IPv4 "ARP IP target/s" and IPv6 "NS" targets
    arp_validate: str | None = None  # from sysfs: an ARP_VALIDATE name; None: not read
    no_active_aggregator: bool = False  # 802.3ad "bond <name> has no active aggregator"


@dataclass(frozen=True)
class BondingReport:
    bonds: tuple[Bond, ...]  # the last read: what the judge checks
    first: tuple[Bond, ...] | None = None  # the first of the check's two reads; None: one read
    interval_s: float | None = None  # seconds between the two reads (/proc/uptime)


def _slave_field(slave: BondSlave, key: str, value: str, where: str) -> BondSlave:
    if key == "mii status":
        return replace(slave, mii_status=mii(value, where))
    if key == "speed":
        return replace(slave, speed_mbps=speed(value, where))
    if key == "duplex":
        return replace(slave, duplex=None if value.lower() in ("", "unknown") else value)
    if key == "link failure count":
        return replace(slave, link_failure_count=count(value, "Link Failure Count", where))
    if key == "aggregator id":
        agg = aggregator_id(value, where)
        return replace(slave, aggregator_id=agg, no_aggregator=agg is None)
    return slave


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
        if m is not None and not m.group(1).strip():
            m = None
        if low.startswith(_NS):
            label, value = raw.strip()[:len(_NS) - 1], raw.strip()[len(_NS):].strip()
        elif m is None and low == "802.3ad info":
            continue  # the one heading bond_procfs.c prints without a colon
        elif m is None and slave is None and no_active_aggregator(raw, name, where):
            label, value = "no active aggregator", ""  # once, as any bond-level line
        elif m is None:
            raise ParseError(f"/proc/net/bonding: {where}: {raw.strip()[:80]!r} is no line the "
                             "bonding driver prints (a cut or damaged line?)")
        else:
            label, value = m.group(1).strip(), m.group(2)
            value = (value[1:] if value[:1].isspace() else value).rstrip()
            if not _LABEL.fullmatch(label) or len(value) > _MAX_VALUE:
                # a damaged label may be a judged one's (and carry its value)
                raise ParseError(f"/proc/net/bonding: {where}: {raw.strip()[:80]!r} is no "
                                 "'Label: value' line the bonding driver prints")
        key = label.lower()
        if key == "active aggregator info":
            section = "aggregator"
            continue
        if key == "slave interface":
            if slave is not None:
                slaves.append(slave)
            slave = BondSlave(ifname(value, where), "", None, None, None, None, None)
            section = ""
            continue
        block = len(slaves) if slave is not None else -1
        if slave is None and not (section == "aggregator" and raw.startswith(("\t", " "))):
            section = ""
        if (block, section, key) in seen:
            raise ParseError(f"/proc/net/bonding: {where}: {label!r} given twice in "
                             f"{f'slave {slave.interface}' if slave else 'the bond'}'s block "
                             "(duplicated output?)")
        seen.add((block, section, key))
        if slave is None:
            fields[f"aggregator {key}" if section == "aggregator" else key] = value
        elif section == "partner":
            if key == "system mac address":
                slave = replace(slave, partner_mac=mac(value, where))
        elif section != "actor":
            slave = _slave_field(slave, key, value, where)
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
    return _make_bond(name, fields, tuple(slaves), where)


def _make_bond(name: str, fields: dict[str, str], slaves: tuple[BondSlave, ...],
               where: str) -> Bond:
    def number(key: str, what: str) -> int | None:
        return count(fields[key], what, where) if key in fields else None

    mode_text = fields["bonding mode"]
    partner = fields.get("aggregator partner mac address")
    if "no active aggregator" in fields and "aggregator aggregator id" in fields:
        raise ParseError(f"/proc/net/bonding: {where} says it has no active aggregator and "
                         "gives one's 'Active Aggregator Info' (mixed output?)")
    return Bond(
        name=name, mode=MODES.get(mode_text.lower(), mode_text), mode_text=mode_text,
        mii_status=mii(fields["mii status"], where) if "mii status" in fields else "",
        active_slave=ifname(fields["currently active slave"], where)
        if fields.get("currently active slave") else None,
        active_aggregator_id=number("aggregator aggregator id", "Aggregator ID"),
        partner_mac=mac(partner, where) if partner else None,
        slaves=slaves,
        miimon_ms=number("mii polling interval (ms)", "MII Polling Interval (ms)"),
        arp_interval_ms=number("arp polling interval (ms)", "ARP Polling Interval (ms)"),
        arp_targets=targets(fields.get("arp ip target/s (n.n.n.n form)", ""), 4, where)
        + targets(fields.get(_NS[:-1], ""), 6, where),
        no_active_aggregator="no active aggregator" in fields,
    )


def _sysfs(path: str, body: list[str], where: str) -> tuple[str, str, str]:
    """(device, what, value) of one sysfs file: exactly one line, on the kernel's list."""
    m = _SYS.match(path)
    assert m is not None
    dev, what = m.group(1), m.group(2).split("/")[1]
    lines = [line.strip() for line in body if line.strip()]
    if len(lines) != 1:
        raise ParseError(f"{path}{where}: {len(lines)} lines, expected the one the kernel "
                         "prints (empty or duplicated output?)")
    value = lines[0]
    if what == "arp_validate":
        v = re.fullmatch(r"([a-z_]{1,16}) ([0-9])", value)
        if v is None or v.group(1) not in ARP_VALIDATE \
                or ARP_VALIDATE.index(v.group(1)) != int(v.group(2)):
            raise ParseError(f"{path}{where}: {value[:40]!r} is not an arp_validate value of "
                             "bonding.rst ('none 0', 'active 1', ... 'filter_backup 6')")
        return dev, what, v.group(1)
    if not re.fullmatch(r"[A-Za-z_]{1,16}", value):
        raise ParseError(f"{path}{where}: {value[:40]!r} is not a slave state")
    return dev, what, value.lower()


def _read(lines: list[str], label: str = "") -> tuple[Bond, ...]:
    """The bonds of one read: its /proc/net/bonding files, with their sysfs files applied."""
    suffix = f" ({label})" if label else ""
    sections: list[tuple[str, list[str]]] = []
    path, body = "", list[str]()
    for line in lines:
        if m := _HEADER.match(line.strip()):
            if body or path:
                sections.append((path, body))
            path, body = m.group(1), []
        else:
            body.append(line)
    sections.append((path, body))
    bonds: dict[str, Bond] = {}
    extra: dict[tuple[str, str], str] = {}
    for path, body in sections:
        if "*" in path:  # an unmatched shell glob: no bonding driver, no bond
            continue
        if _SYS.match(path):
            dev, what, value = _sysfs(path, body, suffix)
            if (dev, what) in extra:
                raise ParseError(f"{path}{suffix} appears twice (duplicated output?)")
            extra[(dev, what)] = value
            continue
        name = path.rsplit("/", 1)[-1]
        where = (f"/proc/net/bonding/{name}" if name else "the bond") + suffix
        bond = _bond(name, body, where)
        if bond is None:
            if name:
                raise ParseError(f"/proc/net/bonding: {where} is empty")
            if any(line.strip() for line in body):
                raise ParseError(f"/proc/net/bonding: no 'Bonding Mode:' line in the "
                                 f"output{suffix}")
            continue
        if bond.name in bonds:
            raise ParseError(f"/proc/net/bonding: {where} appears twice (duplicated output?)")
        bonds[bond.name] = bond
    for (dev, what), value in extra.items():
        if what == "arp_validate":
            if dev not in bonds:
                raise ParseError(f"/sys/class/net/{dev}/bonding/arp_validate{suffix}: no "
                                 f"/proc/net/bonding/{dev} in the same read")
            bonds[dev] = replace(bonds[dev], arp_validate=value)
        else:  # a slave's state, on the bond that lists it (none: enslaved between the loops)
            for b in [b for b in bonds.values() if any(s.interface == dev for s in b.slaves)]:
                bonds[b.name] = replace(b, slaves=tuple(
                    replace(s, state=value) if s.interface == dev else s for s in b.slaves))
    return tuple(bonds.values())


def _timed(lines: list[str], marks: list[tuple[int, str]]) -> BondingReport:
    """The check's two reads: read=1, read=2, done, in that order and nothing else."""
    got = [text for _, text in marks]
    if any(line.strip() for line in lines[:marks[0][0]]):
        raise ParseError(f"/proc/net/bonding: output before the first '{READ_MARK} read=1' "
                         "line")
    reads = [_READ.fullmatch(t) for t in got[:2]]
    if reads[0] is None or reads[0].group(1) != "1":
        raise ParseError(f"/proc/net/bonding: the first marker is '{READ_MARK} {got[0][:60]}', "
                         "expected 'read=1 uptime_s=<seconds>'")
    if len(got) < 2 or reads[1] is None or reads[1].group(1) != "2":
        raise ParseError("/proc/net/bonding: read 2 is missing: "
                         + ("the output ends after read 1 (cut short?)" if len(got) < 2 else
                            f"after read 1 comes '{READ_MARK} {got[1][:60]}'"))
    if len(got) < 3 or got[2] != "done":
        raise ParseError(f"/proc/net/bonding: no '{READ_MARK} done' line after read 2 "
                         "(the output was cut short?)" if len(got) < 3 else
                         f"/proc/net/bonding: after read 2 comes '{READ_MARK} {got[2][:60]}', "
                         "expected 'done'")
    if len(got) > 3 or any(line.strip() for line in lines[marks[2][0] + 1:]):
        raise ParseError(f"/proc/net/bonding: output after '{READ_MARK} done' (repeated?)")
    up1, up2 = (float(m.group(2)) for m in reads if m is not None)
    if up2 < up1:
        raise ParseError(f"/proc/net/bonding: uptime went back from {figure(up1)} s (read 1) to "
                         f"{figure(up2)} s (read 2): not two reads of one boot")
    first = _read(lines[marks[0][0] + 1:marks[1][0]], "read 1")
    last = _read(lines[marks[1][0] + 1:marks[2][0]], "read 2")
    return BondingReport(last, first, round(up2 - up1, 3))


def parse_bonding(text: str) -> BondingReport:
    """Parse one or more /proc/net/bonding files (and their sysfs files), read once or twice;
    an empty text means no bond. Only \\n ends a line; a line holding a character no
    kernel file holds (a CR inside it, a byte-order mark: ``parsers.damage``) is refused."""
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if m := DAMAGE.search(text):
        at = text.count("\n", 0, m.start())
        raise ParseError(f"/proc/net/bonding: line {at + 1} {lines[at][:80]!r} holds "
                         f"{m.group()!r}, which the kernel never prints (damaged output?)")
    marks = [(i, line.strip()[len(READ_MARK):].strip()) for i, line in enumerate(lines)
             if line.strip().startswith(READ_MARK)]
    if marks:
        return _timed(lines, marks)
    return BondingReport(_read(lines))
