"""Parser for rackgate's node identity probe (the ``node.identity`` check).

The probe (a fixed ``sh -c`` script, see checks/identity.py) prints one ``key=value`` line
per field, reading DMI from sysfs (``/sys/class/dmi/id/*``, Linux ABI
Documentation/ABI/testing/sysfs-class-dmi), ``uname -r`` and ``/etc/os-release``
(os-release(5)). A field the host does not expose is printed with an empty value.

One more line, ``hca_node_guids=``, lists each RDMA device's node GUID as ``device=GUID``
words separated by spaces, from ``/sys/class/infiniband/<device>/node_guid`` (Linux
Documentation/ABI/stable/sysfs-class-infiniband: four groups of four hex digits joined by
colons); it is empty on a host without RDMA devices, and evidence collected before the
probe printed it has no such line (no GUIDs known). Another ``lower_case`` key is
tolerated (a newer probe's); a key no probe prints (a byte-order mark in it), or a value
longer than a sysfs attribute can be (one page), is a ParseError.

>>> ident = parse_identity("".join(f"{k}=\\n" for k in FIELDS[:-1]) + "machine_id=0a1b\\n"
...                        "hca_node_guids=mlx5_0=1070:fd03:00a1:b2c3 \\n")
>>> ident.fields["machine_id"], ident.missing[:2], ident.hca_node_guids
('0a1b', ('sys_vendor', 'product_name'), {'mlx5_0': '1070:fd03:00a1:b2c3'})
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rackgate.parsers import ParseError, key_value_lines

FIELDS = ("sys_vendor", "product_name", "product_serial", "board_serial", "chassis_serial",
          "bios_version", "bios_date", "kernel", "os", "machine_id")
GUIDS = "hca_node_guids"  # optional: evidence from before the probe printed it lacks it
# a sysfs attribute reads at most one page (Documentation/filesystems/sysfs.rst: "sysfs
# allocates a buffer of size (PAGE_SIZE)"); uname -r and os-release lines are shorter
SYSFS_PAGE = 4096
_KEY = re.compile(r"[a-z_][a-z0-9_]*", re.ASCII)
_DEVICE = re.compile(r"[A-Za-z0-9_.-]+\Z")
_GUID = re.compile(r"[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){3}\Z")


@dataclass(frozen=True)
class Identity:
    fields: dict[str, str]  # every name in FIELDS; "" when the host does not expose it
    # RDMA device -> its node GUID, lower case (empty: none, or not recorded)
    hca_node_guids: dict[str, str] = field(default_factory=dict)

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(k for k in FIELDS if not self.fields[k])


def _guids(value: str) -> dict[str, str]:
    """``device=GUID`` words -> {device: guid}; ParseError naming a malformed word."""
    out: dict[str, str] = {}
    for word in value.split():
        device, _, guid = word.partition("=")
        if not _DEVICE.match(device) or not _GUID.match(guid):
            raise ParseError(f"identity probe: {GUIDS} word {word!r} is not DEVICE=GUID "
                             "(GUID: four groups of four hex digits joined by colons)")
        if device in out:
            raise ParseError(f"identity probe: {GUIDS} lists device {device} twice")
        out[device] = guid.lower()
    return out


def parse_identity(text: str) -> Identity:
    pairs = key_value_lines(text, "identity probe")
    for key, value in pairs:
        if key not in FIELDS and key != GUIDS and not _KEY.fullmatch(key):
            # a newer probe's key is tolerated; a damaged one may be hca_node_guids
            raise ParseError(f"identity probe: {key[:40]!r} is no key the probe prints "
                             "(damaged output?)")
        if len(value) > SYSFS_PAGE and key != GUIDS:
            raise ParseError(f"identity probe: {key} is {len(value):,} characters, more than "
                             f"a sysfs or /etc file line holds ({SYSFS_PAGE:,})")
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:  # a repeated line is duplicated output: which serial would be the node's?
        raise ParseError(f"identity probe: {', '.join(twice)} given twice")
    values = dict(pairs)
    missing = [k for k in FIELDS if k not in values]
    if missing:  # the probe prints every field, empty or not: a line short is a cut output
        raise ParseError(f"identity probe: no {', '.join(repr(k + '=') for k in missing)} "
                         "line (truncated output, or not the rackgate identity probe?)")
    return Identity({k: values.get(k, "") for k in FIELDS}, _guids(values.get(GUIDS, "")))
