"""The fabric's port error counters, read twice: the output of ``fabric.errors``' script.

The script (``checks/fabric/errors.py``) walks the fabric once with ``ibnetdiscover
--cache`` and then runs ``ibqueryerrors --load-cache`` on that node set three times: once
with ``--counters`` (one line for every port it reads: the list of ports read), then twice
``window_s`` apart with a threshold file setting every error counter's threshold to 0 and
``-s PortXmitWait`` (congestion, not an error), so every non-zero error counter is printed.
Each section starts with a marker line ``### rackgate-fabric-errors <section>`` (``discover``,
``ports``, ``read=N uptime_s=S``) and ends with ``### rackgate-fabric-errors rc=N`` (the
tool's exit status); the last line is ``### rackgate-fabric-errors done``. The tools'
stderr is in the sections too.

ibqueryerrors' format (linux-rdma/rdma-core ``infiniband-diags/ibqueryerrors.c``, v44;
counter names are libibmad's ``mad_field_name``, IBTA Vol. 1 PortCounters):

* a node with counters above threshold: ``Errors for 0x<guid> "<node description>"`` (a
  switch) or ``Errors for "<node description>"`` (a CA); with ``--counters``: ``Data
  Counters for 0x<node guid> "<node description>"``;
* then one line per port: ``   GUID 0x<guid> port <n>: [<Counter> == <value>]...``; a value
  read from the 64-bit PortCountersExtended (IsAdditionalPortCountersExtendedSupported) is
  followed by a human-readable figure: ``[SymbolErrorCounter == 7 (7.000 )]``. A switch
  with AllPortSelect first prints the sum of its ports as ``port ALL`` and, only when that
  sum is non-zero, each port;
* the summary: ``## Summary: N nodes checked, M bad nodes found``, ``##  P ports checked,
  Q ports have errors beyond threshold``, ``## Thresholds: [<Counter> = <v>]...`` (``##
  (null)`` when no threshold file could be read), ``##  K PMA query failures`` (only when
  K > 0) and ``## Suppressed: <Counter> ...``;
* a port it could not read: ``ibwarn: [pid] <function>: <attribute> query failed on
  <node>, Lid <lid> port <n>`` on stderr (port 255: every port of the node), counted in the
  summary. Other ibwarn/iberror lines are kept as the tool's words. Output without the
  summary (``Query SA failed: ...``, ``sa_get_handle: No SM/SA found``: ibqueryerrors
  then exits 0 having printed nothing on stdout) is refused.

A port listed by ``--counters`` and absent from a read had every error counter at 0 in
that read (the thresholds are 0), unless the read names it as a failed query.

>>> rec = parse_ibcounters(EXAMPLE)
>>> [(p.node, p.port) for p in rec.ports]
[('gpu001 mlx5_0', 1), ('leaf-1', 1)]
>>> rec.second.ports[0].value("SymbolErrorCounter"), rec.window_s
(40, 30.0)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rackgate.parsers import ParseError, marked_sections

MARK = "### rackgate-fabric-errors "
# The PortCounters error counters in the order ibqueryerrors prints them, with their
# widths in bits (IBTA Vol. 1 PortCounters; libibmad fields.c): a counter stops at all
# ones. PortXmitWait (32 bits) counts congestion, not errors.
COUNTER_BITS = {
    "SymbolErrorCounter": 16, "LinkErrorRecoveryCounter": 8, "LinkDownedCounter": 8,
    "PortRcvErrors": 16, "PortRcvRemotePhysicalErrors": 16, "PortRcvSwitchRelayErrors": 16,
    "PortXmitDiscards": 16, "PortXmitConstraintErrors": 8, "PortRcvConstraintErrors": 8,
    "LocalLinkIntegrityErrors": 4, "ExcessiveBufferOverrunErrors": 4, "VL15Dropped": 16,
    "PortXmitWait": 32}
EXTENDED_BITS = 64  # PortCountersExtended
ALL_PORTS = 255  # ibqueryerrors' port of a query for every port of a node

_SECTION = re.compile(r"(discover|ports|read=([12]) uptime_s=([0-9]{1,12}(?:\.[0-9]{1,9})?)"
                      r"|rc=([0-9]{1,3})|done)\Z")
_NODE = re.compile(r'(?:Errors for (?:0x([0-9a-f]{1,16}) )?|Data Counters for 0x([0-9a-f]{1,16}) )'
                   r'"(.*)"\Z')
_PORT = re.compile(r"\s+GUID 0x([0-9a-f]{1,16}) port (ALL|[0-9]{1,3}):((?: \[.*\])?)\Z")
_COUNTER = re.compile(r" \[([A-Za-z0-9]+) == ([0-9]{1,20})(?: \(([^()\]]*)\))?\]")
# the counts are C ints (%d): at most 10 digits (a longer run is no count: int() would refuse
# 100,000 digits with a ValueError)
_SUMMARY = re.compile(r"## Summary: ([0-9]{1,10}) nodes checked, ([0-9]{1,10}) bad nodes "
                      r"found\Z")
_PORTS = re.compile(r"##\s+([0-9]{1,10}) ports checked, ([0-9]{1,10}) ports have errors "
                    r"beyond threshold\Z")
_FAILURES = re.compile(r"##\s+([0-9]{1,10}) PMA query failures\Z")
_THRESHOLDS = re.compile(r"## (?:Thresholds:\s*((?:\[[A-Za-z0-9]+ = [0-9]{1,20}\])*)|\(null\))\Z")
_THRESHOLD = re.compile(r"\[([A-Za-z0-9]+) = ([0-9]{1,20})\]")
_SUPPRESSED = re.compile(r"## Suppressed:((?: [A-Za-z0-9]+)*)\Z")
_DIAG = re.compile(r"(ibwarn|ibpanic|iberror|ibqueryerrors|ibnetdiscover)\b.*:")
_FAILED = re.compile(r"query failed on (.+), Lid [0-9]+ port ([0-9]{1,3})\Z")

EXAMPLE = """\
### rackgate-fabric-errors discover
### rackgate-fabric-errors rc=0
### rackgate-fabric-errors ports
Data Counters for 0x100000 "gpu001 mlx5_0"
   GUID 0x100000 port 1: [PortXmitData == 3600 (14.062KB)]
Data Counters for 0x200000 "leaf-1"
   GUID 0x200000 port 1: [PortXmitData == 3672 (14.344KB)]

## Summary: 2 nodes checked, 0 bad nodes found
##          2 ports checked, 0 ports have errors beyond threshold
## Thresholds:
## Suppressed:
### rackgate-fabric-errors rc=0
### rackgate-fabric-errors read=1 uptime_s=100.00
## Summary: 2 nodes checked, 0 bad nodes found
##          2 ports checked, 0 ports have errors beyond threshold
## Thresholds: [SymbolErrorCounter = 0]
## Suppressed: PortXmitWait
### rackgate-fabric-errors rc=0
### rackgate-fabric-errors read=2 uptime_s=130.00
Errors for 0x200000 "leaf-1"
   GUID 0x200000 port ALL: [SymbolErrorCounter == 40]
   GUID 0x200000 port 1: [SymbolErrorCounter == 40]

## Summary: 2 nodes checked, 1 bad nodes found
##          2 ports checked, 1 ports have errors beyond threshold
## Thresholds: [SymbolErrorCounter = 0]
## Suppressed: PortXmitWait
### rackgate-fabric-errors rc=1
### rackgate-fabric-errors done
"""


@dataclass(frozen=True)
class PortErrors:
    """One port's non-zero counters in one read (the tool prints no zero)."""

    node: str  # node description
    port: int
    counters: tuple[tuple[str, int], ...]
    extended: bool  # 64-bit PortCountersExtended values (else PortCounters' widths)

    def value(self, name: str) -> int:
        return next((v for n, v in self.counters if n == name), 0)

    def saturation(self, name: str) -> int:
        """The value at which counter ``name`` stops counting."""
        bits = EXTENDED_BITS if self.extended else COUNTER_BITS.get(name, EXTENDED_BITS)
        return (1 << bits) - 1


@dataclass(frozen=True)
class Walk:
    """ibqueryerrors' summary of one walk, and the ports it could not read."""

    nodes_checked: int
    ports_checked: int
    pma_failures: int
    thresholds: tuple[tuple[str, int], ...]  # the threshold file's settings as it echoed them
    suppressed: tuple[str, ...]
    failed: tuple[tuple[str, int], ...]  # (node, port) named in "query failed" warnings
    said: tuple[str, ...]  # the tool's diagnostics (ibwarn/iberror lines)


@dataclass(frozen=True)
class ListedPort:
    node: str
    guid: str  # the node GUID ibqueryerrors --counters printed
    port: int


@dataclass(frozen=True)
class ErrorsRead:
    number: int  # 1 or 2
    uptime_s: float  # the fabric host's /proc/uptime when the read started
    rc: int  # ibqueryerrors' exit status (1: a port had a counter above its threshold)
    ports: tuple[PortErrors, ...]  # the ports with a non-zero counter
    walk: Walk

    def errors(self, node: str, port: int) -> PortErrors | None:
        return next((p for p in self.ports if p.node == node and p.port == port), None)


@dataclass(frozen=True)
class FabricErrorCounters:
    ports: tuple[ListedPort, ...]  # every port the walks read (the --counters listing)
    listing: Walk
    first: ErrorsRead
    second: ErrorsRead

    @property
    def window_s(self) -> float:
        return round(self.second.uptime_s - self.first.uptime_s, 3)


def _counters(rest: str, where: str) -> tuple[tuple[tuple[str, int], ...], bool]:
    pairs, extended, pos = [], False, 0
    for m in _COUNTER.finditer(rest):
        if m.start() != pos:
            break
        pairs.append((m.group(1), int(m.group(2))))
        extended = extended or m.group(3) is not None
        pos = m.end()
    if pos != len(rest) or not pairs:
        raise ParseError(f"{where}: cannot read the counters {rest[:120]!r}")
    names = [n for n, _ in pairs]
    if len(set(names)) != len(names):
        raise ParseError(f"{where}: a counter is printed twice: {rest[:120]!r}")
    return tuple(pairs), extended


def _walk(lines: list[str], rc: int, what: str, listing: bool
          ) -> tuple[Walk, list[tuple[str, str, int, str]]]:
    """A walk's summary and its port lines (node, guid, port, counters text)."""
    node: str | None = None
    ports: list[tuple[str, str, int, str]] = []
    said: list[str] = []
    failed: list[tuple[str, int]] = []
    other: list[str] = []
    counts: dict[str, int] = {}
    thresholds: tuple[tuple[str, int], ...] | None = None
    suppressed: tuple[str, ...] | None = None
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if (m := _NODE.match(stripped)) is not None:
            if (m.group(2) is not None) != listing:
                other.append(stripped)
                continue
            node = m.group(3)
        elif (m := _PORT.match(line.rstrip())) is not None:
            if node is None:
                raise ParseError(f"{what}: port line before any node: {line[:120]!r}")
            if m.group(2) != "ALL":
                ports.append((node, m.group(1), int(m.group(2)), m.group(3)))
        elif (m := _SUMMARY.match(stripped)) is not None:
            counts["nodes"] = int(m.group(1))
        elif (m := _PORTS.match(stripped)) is not None:
            counts["ports"] = int(m.group(1))
        elif (m := _FAILURES.match(stripped)) is not None:
            counts["failures"] = int(m.group(1))
        elif (m := _THRESHOLDS.match(stripped)) is not None:
            thresholds = tuple((n, int(v)) for n, v in _THRESHOLD.findall(m.group(1) or ""))
        elif (m := _SUPPRESSED.match(stripped)) is not None:
            suppressed = tuple(m.group(1).split())
        elif _DIAG.match(stripped):
            said.append(re.sub(r"^(\w+): \[[0-9]+\] ", r"\1: ", stripped))
            at = stripped.find("query failed on ")  # the first: .+ takes any later one
            if at >= 0 and (f := _FAILED.match(stripped, at)) is not None:
                failed.append((f.group(1), int(f.group(2))))
        else:
            other.append(stripped)
    if "nodes" not in counts or "ports" not in counts or thresholds is None \
            or suppressed is None or rc not in (0, 1):
        words = "; ".join([*said, *other][-6:]) or "nothing"
        raise ParseError(f"{what} did not complete (rc {rc}, no summary): it said: {words}")
    if other:
        raise ParseError(f"{what}: unexpected line {other[0][:120]!r}")
    return Walk(counts["nodes"], counts["ports"], counts.get("failures", 0), thresholds,
                suppressed, tuple(failed), tuple(said)), ports


def _read(number: int, uptime: str, lines: list[str], rc: int) -> ErrorsRead:
    what = f"ibqueryerrors read {number}"
    walk, lines_ = _walk(lines, rc, what, listing=False)
    ports, seen = [], set()
    for node, _guid, port, rest in lines_:
        if (node, port) in seen:
            raise ParseError(f"{what}: \"{node}\"[{port}] is printed twice")
        seen.add((node, port))
        counters, extended = _counters(rest, f'{what}, "{node}"[{port}]')
        ports.append(PortErrors(node, port, counters, extended))
    up = float(uptime)
    if not math.isfinite(up):
        raise ParseError(f"{what}: uptime {uptime!r} is not a finite number")
    return ErrorsRead(number, up, rc, tuple(ports), walk)


def parse_ibcounters(text: str) -> FabricErrorCounters:
    """The listing and both reads of the fabric.errors script; ParseError naming what is
    missing or damaged (a tool that failed is quoted)."""
    sections = list(marked_sections(text, MARK, _SECTION, "fabric.errors"))
    names = [s[0].split(" ")[0] for s in sections]
    if names != ["discover", "ports", "read=1", "read=2"]:
        raise ParseError(f"fabric.errors output: sections {names}, expected discover, ports, "
                         "read=1, read=2")
    (_, found, found_rc), (_, listed, listed_rc) = sections[0], sections[1]
    if found_rc != 0:
        words = "; ".join(x.strip() for x in found if x.strip())[-400:] or "nothing"
        raise ParseError(f"ibnetdiscover --cache failed (rc {found_rc}): it said: {words}")
    listing, rows = _walk(listed, listed_rc, "ibqueryerrors --counters (the ports read)",
                          listing=True)
    reads = []
    for name, lines, rc in sections[2:]:
        m = _SECTION.match(name)
        assert m is not None
        reads.append(_read(int(m.group(2)), m.group(3), lines, rc))
    record = FabricErrorCounters(tuple(ListedPort(n, g, p) for n, g, p, _ in rows), listing,
                                 reads[0], reads[1])
    if record.window_s <= 0:
        raise ParseError(f"fabric.errors output: read 2 (uptime {reads[1].uptime_s} s) is not "
                         f"after read 1 (uptime {reads[0].uptime_s} s)")
    return record


__all__ = ["ALL_PORTS", "COUNTER_BITS", "ErrorsRead", "FabricErrorCounters", "ListedPort",
           "PortErrors", "Walk", "parse_ibcounters"]
