"""Parser for rackgate's node conformance probe (the ``node.conformance`` check).

The probe (a fixed ``sh -c`` script, see checks/conformance.py) prints ``key=value``
lines: ``modules`` (from /proc/modules, proc(5)), ``service.<unit>`` (``systemctl
is-active``, systemctl(1)), ``default_memlock`` (``systemctl show -p DefaultLimitMEMLOCK``,
systemd-system.conf(5)), ``cmdline`` (/proc/cmdline), ``governors`` (the distinct
``scaling_governor`` values, Linux cpufreq ABI; empty without cpufreq) and
``acs_enabled_bridges`` (bridges whose ``lspci -vvv`` ACSCtl shows ``SrcValid+``, or
``unknown`` without lspci).

>>> c = parse_conformance("modules=nvidia,mlx5_core\\nservice.chrony=active\\n"
...                       "default_memlock=infinity\\ncmdline=ro iommu=pt\\n"
...                       "governors=performance\\nacs_enabled_bridges=0\\n")
>>> sorted(c.modules), c.services, c.acs_enabled_bridges
(['mlx5_core', 'nvidia'], {'chrony': 'active'}, 0)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError, key_value_lines

_REQUIRED = ("modules", "default_memlock", "cmdline", "governors", "acs_enabled_bridges")


@dataclass(frozen=True)
class Conformance:
    modules: frozenset[str]
    services: dict[str, str]  # unit -> systemctl is-active state
    default_memlock: str  # "infinity" or a number of bytes
    cmdline: tuple[str, ...]
    governors: frozenset[str]  # empty: no cpufreq (virtual machines)
    acs_enabled_bridges: int | None  # None: lspci not available


def parse_conformance(text: str) -> Conformance:
    values: dict[str, str] = {}
    services: dict[str, str] = {}
    for key, value in key_value_lines(text, "conformance probe"):
        target, name = (services, key.removeprefix("service.")) if key.startswith("service.") \
            else (values, key)
        if name in target:  # a repeated line is duplicated output, never a second answer
            raise ParseError(f"conformance probe: {key!r} is given twice")
        target[name] = value
    missing = [k for k in _REQUIRED if k not in values]
    if missing:
        raise ParseError(f"conformance probe: no {', '.join(missing)} line(s) (truncated "
                         "output, or not the rackgate conformance probe?)")
    acs = values["acs_enabled_bridges"]
    if acs != "unknown" and not re.fullmatch(r"[0-9]{1,9}", acs):  # isdigit() takes '²'
        raise ParseError(f"conformance probe: acs_enabled_bridges is {acs[:40]!r}, not a count")
    return Conformance(
        modules=frozenset(m for m in values["modules"].split(",") if m),
        services=services,
        default_memlock=values["default_memlock"],
        cmdline=tuple(values["cmdline"].split()),
        governors=frozenset(g for g in values["governors"].split(",") if g),
        acs_enabled_bridges=None if acs == "unknown" else int(acs),
    )
