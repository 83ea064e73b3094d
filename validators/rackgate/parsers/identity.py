"""Parser for rackgate's node identity probe (the ``node.identity`` check).

The probe (a fixed ``sh -c`` script, see checks/identity.py) prints one ``key=value`` line
per field, reading DMI from sysfs (``/sys/class/dmi/id/*``, Linux ABI
Documentation/ABI/testing/sysfs-class-dmi), ``uname -r`` and ``/etc/os-release``
(os-release(5)). A field the host does not expose is printed with an empty value.

>>> ident = parse_identity("".join(f"{k}=\\n" for k in FIELDS[:-1]) + "machine_id=0a1b\\n")
>>> ident.fields["machine_id"], ident.missing[:2]
('0a1b', ('sys_vendor', 'product_name'))
"""

from __future__ import annotations

from dataclasses import dataclass

from rackgate.parsers import ParseError, key_value_lines

FIELDS = ("sys_vendor", "product_name", "product_serial", "board_serial", "chassis_serial",
          "bios_version", "bios_date", "kernel", "os", "machine_id")


@dataclass(frozen=True)
class Identity:
    fields: dict[str, str]  # every name in FIELDS; "" when the host does not expose it

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(k for k in FIELDS if not self.fields[k])


def parse_identity(text: str) -> Identity:
    pairs = [(k, v) for k, v in key_value_lines(text, "identity probe") if k in FIELDS]
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:  # a repeated line is duplicated output: which serial would be the node's?
        raise ParseError(f"identity probe: {', '.join(twice)} given twice")
    values = dict(pairs)
    missing = [k for k in FIELDS if k not in values]
    if missing:  # the probe prints every field, empty or not: a line short is a cut output
        raise ParseError(f"identity probe: no {', '.join(repr(k + '=') for k in missing)} "
                         "line (truncated output, or not the rackgate identity probe?)")
    return Identity({k: values.get(k, "") for k in FIELDS})
