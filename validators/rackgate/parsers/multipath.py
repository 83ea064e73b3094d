"""Parser for ``multipath -ll`` (multipath-tools, multipath(8); the topology format of
``libmultipath/print.c``: ``%n (%w) %d %s`` map lines, ``policy=… prio=… status=…`` path
group lines and ``%i %d %D %t %T %o`` path lines)::

    mpatha (36001405b4749195c5464576a491525dd) dm-2 LIO-ORG,data-chunk1
    size=1022M features='1 queue_if_no_path' hwhandler='1 alua' wp=rw
    |-+- policy='service-time 0' prio=50 status=active
    | `- 3:0:0:0 sdb 8:16 active ready running

A path line gives H:C:T:L, the device, major:minor, the device-mapper state
(``active``/``failed``), the path checker state (``ready``, ``ghost`` for an ALUA standby
path, ``faulty``, ``shaky``, ``i/o pending``…) and the online state (``running``,
``offline``…). The older bracket form (``\\_ 3:0:0:0 sdb 8:16 [active][ready]``) is read too.
``multipath -l`` prints the same listing without running the path checkers (multipath(8):
"information fetched in sysfs and the device mapper"; ``multipath/main.c`` asks for no
``DI_CHECKER``), so every path's checker state is ``undef`` (``snprint_chk_state``: a
state no checker set) and group priorities are not computed: such a listing is read, and
:attr:`MultipathTopology.checkers_run` says that no checker ran.
When the alias is the WWID the map line has no parentheses (``%n %d %s``), and the name is
the WWID as udev gave it, which may hold runs of spaces: a SCSI T10 vendor ID designator
is ``1`` + the 8-byte, space-padded vendor field + the vendor's id, e.g.
``1IET     00080001 dm-0 IET,VIRTUAL-DISK``. The name is everything before the first
`` dm-<minor>`` field, spaces kept. Lines before the first map (multipathd messages such
as ``1602.459062 | /etc/multipath.conf line 26, invalid keyword``) are skipped, but a
size, path group or path line there is a ParseError: the map line above it was not read,
and its paths must not vanish. No map at all is an empty record (multipath -ll prints
nothing). A vendor, product, WWID or name longer than SCSI and device-mapper allow, or an
H:C:T:L not in the kernel's ``%d`` notation, a device name over 32 characters, or a line
holding a control or format character (``parsers.damage``; only ``\\n`` ends a line) is a
ParseError.

>>> mp = parse_multipath_ll('''mpatha (3600a) dm-2 LIO-ORG,disk
... size=1G features='0' hwhandler='1 alua' wp=rw
... `-+- policy='service-time 0' prio=50 status=active
...   `- 3:0:0:0 sdb 8:16 active ready running''')
>>> p = mp.maps[0].paths[0]
>>> mp.maps[0].name, p.device, p.dm_state, p.path_state, p.healthy
('mpatha', 'sdb', 'active', 'ready', True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError
from rackgate.parsers.damage import DAMAGE

# "%n (%w) %d %s" or "%n %d %s" (libmultipath/print.c snprint_multipath_style): %n may hold
# spaces (a WWID), so it ends at the first " dm-<minor>" field
# a WWID holds no parenthesis ([^()]: each " (" is scanned to the next one, not to the
# line's next ")", which would be quadratic in a line of "(")
_MAP = re.compile(r"^(?P<name>[^\s|`\\](?:.*?\S)?)(?: \((?P<wwid>[^()]+)\))? "
                  r"(?P<dm>dm-\d+)(?: (?P<vp>.*))?$")
# what multipath prints in front of %n when it changes a map (-v2), never in -ll's listing
_ACTION = re.compile(r"^(reject|reload|switchpg|rename|create|resize|unchanged): ")
# the lines under a map line: size (PRINT_MAP_PROPS), path group and path, in the tree
# drawn by snprint_multipath_topology ("|-+- ", "| `- ", "  |- ") or the old "\_ " form
_TOPOLOGY = re.compile(r"^(?:[|` ] ?[|`]- |[|`]-\+- |\s*\\_ |\[?size=)")
# H:C:T:L and major:minor are 32-bit numbers in the kernel: at most 10 digits each
_PATH = re.compile(r"(?<![\w.+-])(?P<hctl>[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10}:[0-9]{1,10})\s+"
                   r"(?P<dev>\S+)\s+(?P<majmin>[0-9]{1,10}:[0-9]{1,10})\s+(?P<rest>.*)$")
_HCTL = re.compile(r"(?:0|[1-9][0-9]{0,9})(?::(?:0|[1-9][0-9]{0,9})){3}", re.ASCII)
_GROUP = re.compile(r"(policy=|round-robin|service-time|queue-length|historical-service-time)")
_PRIO = re.compile(r"prio=(-?[0-9]{1,9})(?![^\s\]])")
_STATUS = re.compile(r"status=(\w+)|\[(active|enabled|disabled)\]")
_DM_STATES = ("active", "failed")
# multipath-tools checker states (libmultipath/checkers.c checker_state_names)
_PATH_STATES = ("ready", "faulty", "ghost", "shaky", "i/o pending", "i/o timeout", "undef",
                "delayed", "wild", "unchecked", "disconnected")


@dataclass(frozen=True)
class MultipathPath:
    hctl: str  # SCSI host:channel:target:lun
    device: str  # "sdb"
    major_minor: str
    dm_state: str  # device-mapper's view: active / failed
    path_state: str  # the path checker's view: ready / ghost / faulty / ...
    online_state: str  # the SCSI device state: running / offline / ... ("" when not shown)
    group: int  # index of the path group in the map

    @property
    def healthy(self) -> bool:
        """Carries I/O now or on failover: dm active and checker ready (or ghost: ALUA standby)."""
        return (self.dm_state == "active" and self.path_state in ("ready", "ghost")
                and self.online_state in ("running", ""))

    @property
    def unchecked(self) -> bool:
        """No checker state (``undef``) while device-mapper has the path active and its device
        runs: not known to be broken, but not tested either."""
        return (self.dm_state == "active" and self.path_state == "undef"
                and self.online_state in ("running", ""))


@dataclass(frozen=True)
class PathGroup:
    policy: str
    prio: int | None
    status: str  # active / enabled / disabled ("" when not shown)


@dataclass(frozen=True)
class MultipathMap:
    name: str
    wwid: str
    dm_device: str  # "dm-2"
    vendor: str
    product: str
    groups: tuple[PathGroup, ...]
    paths: tuple[MultipathPath, ...]


@dataclass(frozen=True)
class MultipathTopology:
    maps: tuple[MultipathMap, ...]

    @property
    def checkers_run(self) -> bool:
        """False for a listing of paths whose every checker state is ``undef``: what
        ``multipath -l`` prints, which runs no checker (``multipath -ll`` prints a state
        for each path whose checker ran)."""
        paths = [p for m in self.maps for p in m.paths]
        return not paths or any(p.path_state != "undef" for p in paths)


def _path(line: str, group: int, lineno: int) -> MultipathPath:
    m = _PATH.search(line)
    assert m is not None
    rest = m.group("rest").replace("][", " ").replace("[", " ").replace("]", " ").strip()
    dm = next((s for s in _DM_STATES if re.match(rf"{s}\b", rest)), None)
    if dm is None:
        raise ParseError(f"multipath -ll line {lineno}: path {m.group('dev')} has no dm state "
                         f"(active/failed) in {line.strip()!r}")
    rest = rest[len(dm):].strip()
    state = next((s for s in _PATH_STATES if re.match(rf"{re.escape(s)}(\s|$)", rest)), None)
    if state is None:
        raise ParseError(f"multipath -ll line {lineno}: path {m.group('dev')} has no path "
                         f"checker state (ready/faulty/ghost/...) in {line.strip()!r}")
    online = rest[len(state):].split()
    if not online and "[" not in line:
        # the current format always ends a path line with the online state (%o); only the
        # old bracket form has none: without it the line was cut
        raise ParseError(f"multipath -ll line {lineno}: path {m.group('dev')} has no online "
                         f"state (running/offline/...) in {line.strip()!r} (truncated output?)")
    if len(m.group("dev")) > 32:  # DISK_NAME_LEN
        raise ParseError(f"multipath -ll line {lineno}: device name of "
                         f"{len(m.group('dev')):,} characters: a damaged path line")
    if not _HCTL.fullmatch(m.group("hctl")):
        raise ParseError(f"multipath -ll line {lineno}: H:C:T:L {m.group('hctl')!r} is not four "
                         "decimal numbers as the kernel prints them")
    return MultipathPath(m.group("hctl"), m.group("dev"), m.group("majmin"), dm, state,
                         online[0] if online else "", group)


def _plausible(name: str, wwid: str, vendor: str, product: str, lineno: int) -> None:
    """SCSI INQUIRY's vendor is 8 bytes and product 16 (SPC-4 6.6.1), a WWID (a SCSI name
    string designator at most 256) and an alias shorter than a kernel device name buffer
    (dm's 128): anything longer is a damaged map line."""
    for what, value, most in (("vendor", vendor, 8), ("product", product, 16),
                              ("WWID", wwid, 256), ("map name", name, 256)):
        if len(value) > most:
            raise ParseError(f"multipath -ll line {lineno}: {what} of {len(value):,} "
                             f"characters (at most {most}): a damaged map line")


def parse_multipath_ll(text: str) -> MultipathTopology:
    """Parse ``multipath -ll``; ParseError naming the line when a map holds an unknown line."""
    maps: list[MultipathMap] = []
    cur: dict[str, object] | None = None
    groups: list[PathGroup] = []
    paths: list[MultipathPath] = []

    def close() -> None:
        if cur is not None:
            maps.append(MultipathMap(groups=tuple(groups), paths=tuple(paths), **cur))  # type: ignore[arg-type]

    for lineno, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        if DAMAGE.search(line):
            raise ParseError(f"multipath -ll line {lineno}: {line.strip()[:80]!r} holds a "
                             "control or format character multipath never prints")
        if not line.strip():
            continue
        if (m := _MAP.match(line.rstrip())) and " | " not in m.group("name"):
            if _ACTION.match(line):
                raise ParseError(f"multipath -ll line {lineno}: {line.strip()[:80]!r} is a "
                                 "map change of multipath -v2, not multipath -ll's listing")
            close()
            vendor, _, product = (m.group("vp") or "").partition(",")
            _plausible(m.group("name"), m.group("wwid") or "", vendor.strip(), product.strip(),
                       lineno)
            cur = {"name": m.group("name"), "wwid": m.group("wwid") or m.group("name"),
                   "dm_device": m.group("dm"), "vendor": vendor.strip(),
                   "product": product.strip()}
            groups, paths = [], []
        elif cur is None:
            if _TOPOLOGY.match(line):
                raise ParseError(f"multipath -ll line {lineno}: a size, path group or path "
                                 f"line before any map line: the map line above it was not "
                                 f"read ({line.strip()[:80]!r})")
            continue  # multipathd messages before the first map
        elif _PATH.search(line):
            paths.append(_path(line, max(len(groups) - 1, 0), lineno))
        elif _GROUP.search(line):
            policy = re.search(r"policy='([^']*)'", line)
            prio, status = _PRIO.search(line), _STATUS.search(line)
            if prio is None and "prio=" in line:
                raise ParseError(f"multipath -ll line {lineno}: prio is not an integer in "
                                 f"{line.strip()[:80]!r}")
            groups.append(PathGroup(
                policy=policy.group(1) if policy else line.strip(" |`-+\\_").split("[")[0]
                .split(" prio")[0].strip(),
                prio=int(prio.group(1)) if prio else None,
                status=(status.group(1) or status.group(2)) if status else ""))
        elif line.lstrip().startswith(("size=", "[size=")):
            continue
        else:
            raise ParseError(f"multipath -ll line {lineno}: not a map, path group or path "
                             f"line: {line.strip()[:80]!r}")
    close()
    _unique(maps)
    return MultipathTopology(tuple(maps))


def _unique(maps: list[MultipathMap]) -> None:
    """A map or a path listed twice is duplicated output, never one more map or path."""
    for what, values in (("map", [m.name for m in maps]), ("WWID", [m.wwid for m in maps]),
                         ("dm device", [m.dm_device for m in maps]),
                         ("path device", [p.device for m in maps for p in m.paths]),
                         ("path H:C:T:L", [p.hctl for m in maps for p in m.paths])):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ParseError(f"multipath -ll: {what} {', '.join(twice)} listed twice "
                             "(duplicated output?)")
