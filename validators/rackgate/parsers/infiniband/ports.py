"""Parser for the evidence of fabric.ports: the port probe's output
(``programs/probes/ib_ports.py``), one header line naming the tool that answered, then that
tool's own output.

The probe starts the first of the tools it is given that is on the node's PATH, each with
the one command of :data:`TOOL_ARGV` (fabric.ports asks, by default, ibstat first, then
``ibv_devinfo -v``, ``ibstatus`` and ``rdma -j link show``)::

    ### rackgate-ib-ports {"argv": ["ibv_devinfo", "-v"], "path": "/usr/bin/ibv_devinfo",
                           "not_found": ["ibstat"]}
    hca_id:	mlx5_0
    ...

The header must be the first line, a JSON object with exactly ``argv`` (one command of
:data:`TOOL_ARGV`, word for word), ``path`` (an absolute path ending in the tool's name)
and ``not_found`` (the tools asked before it, none twice, not the one that answered); the
rest is read by that tool's parser alone (``parsers.infiniband``, ``parsers.infiniband.ibv_devinfo``
with every ``-v`` line required, ``parsers.infiniband.ibstatus``, ``parsers.rdma_link`` as JSON). An
output without the header (the plain ``ibstat`` output of rackgate before the probe, or
anything else), a command rackgate does not run, or a body that is not that tool's output
is a ParseError: evidence never names one command and holds another's output.

>>> r = parse_port_reading('### rackgate-ib-ports {"argv": ["rdma", "-j", "link", "show"], '
...     '"path": "/usr/sbin/rdma", "not_found": ["ibstat", "ibv_devinfo", "ibstatus"]}\\n[]\\n')
>>> (r.tool, r.not_found, r.ports.cas)
('rdma', ('ibstat', 'ibv_devinfo', 'ibstatus'), ())
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rackgate.parsers import ParseError
from rackgate.parsers.infiniband import parse_ibstat
from rackgate.parsers.infiniband.ibstatus import parse_ibstatus
from rackgate.parsers.infiniband.ibv_devinfo import ibstat_from_devinfo, parse_ibv_devinfo
from rackgate.parsers.infiniband.model import IbStat
from rackgate.parsers.rdma_link import parse_rdma_link_json
from rackgate.parsers.strict_json import decode

MARK = "### rackgate-ib-ports "
# The one command run for each tool, in fabric.ports' default order of preference.
TOOL_ARGV: dict[str, tuple[str, ...]] = {
    "ibstat": ("ibstat",),
    "ibv_devinfo": ("ibv_devinfo", "-v"),
    "ibstatus": ("ibstatus",),
    "rdma": ("rdma", "-j", "link", "show"),
}
_READERS: dict[str, Callable[[str], IbStat]] = {
    "ibstat": parse_ibstat,
    "ibv_devinfo": lambda text: ibstat_from_devinfo(parse_ibv_devinfo(text), verbose=True),
    "ibstatus": parse_ibstatus,
    "rdma": parse_rdma_link_json,
}
_PATH = re.compile(r"/[A-Za-z0-9_.+/-]{1,4000}", re.ASCII)


@dataclass(frozen=True)
class PortReading:
    """What the port probe found: the tool that answered and its ports."""

    tool: str  # a key of TOOL_ARGV
    path: str  # where the probe found it
    not_found: tuple[str, ...]  # the tools asked before it, not on the node's PATH
    ports: IbStat


def _header(line: str) -> tuple[str, str, tuple[str, ...]]:
    doc, end = decode(line, "the port probe's header", len(MARK))
    if line[end:].strip() or not isinstance(doc, dict) or \
            set(doc) != {"argv", "path", "not_found"}:
        raise ParseError("the port probe's header is not one object of argv, path and "
                         "not_found")
    argv, path, not_found = doc["argv"], doc["path"], doc["not_found"]
    tool = argv[0] if isinstance(argv, list) and argv and isinstance(argv[0], str) else ""
    if tool not in TOOL_ARGV or argv != list(TOOL_ARGV[tool]):
        raise ParseError(f"the port probe ran {str(argv)[:80]}, which is not a command "
                         "fabric.ports asks for (" + "; ".join(
                             " ".join(a) for a in TOOL_ARGV.values()) + ")")
    if not isinstance(path, str) or not _PATH.fullmatch(path) or \
            path.rsplit("/", 1)[-1] != tool:
        raise ParseError(f"the port probe's path {str(path)[:80]!r} is not where {tool} "
                         "would be found")
    if not isinstance(not_found, list) or not all(t in TOOL_ARGV for t in not_found) or \
            tool in not_found or len(set(not_found)) != len(not_found):
        raise ParseError(f"the port probe's not_found {str(not_found)[:80]} is not a list of "
                         f"other tools, each once")
    return tool, path, tuple(not_found)


def parse_port_reading(text: str) -> PortReading:
    """Parse the port probe's output: its header, then the named tool's output."""
    first, _, body = text.partition("\n")
    if not first.startswith(MARK):
        raise ParseError("no '### rackgate-ib-ports' header on the first line: not the "
                         "port probe's output (evidence of an older rackgate, which ran "
                         "ibstat alone, must be collected again)")
    tool, path, not_found = _header(first.rstrip("\r"))
    try:
        ports = _READERS[tool](body)
    except ParseError as exc:
        raise ParseError(f"the output of {' '.join(TOOL_ARGV[tool])} (as the header says): "
                         f"{exc}") from None
    return PortReading(tool, path, not_found, ports)


__all__ = ["MARK", "TOOL_ARGV", "PortReading", "parse_port_reading"]
