"""Parser for rackgate's node conformance probe (the ``node.conformance`` check).

The probe (a fixed ``sh -c`` script, see checks/conformance.py) prints ``key=value``
lines: ``modules`` (from /proc/modules, proc(5)), ``service.<unit>`` (``systemctl
is-active``, systemctl(1)), ``default_memlock`` (``systemctl show -p DefaultLimitMEMLOCK``,
systemd-system.conf(5)), ``cmdline`` (/proc/cmdline), ``governors`` (the distinct
``scaling_governor`` values, Linux cpufreq ABI; empty without cpufreq) and
``acs_enabled_bridges`` (bridges whose ``lspci -vvv`` ACSCtl shows ``SrcValid+``, or
``unknown`` without lspci). A key the probe does not print, a module, unit or governor
name no kernel or systemd gives, or a value longer than its source holds is a ParseError.

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
# what the sources can hold: a module name (/proc/modules; MODULE_NAME_LEN is 56 with its
# NUL on 64-bit, '-' written '_'), a systemd unit name (systemd.unit(5): ASCII letters,
# digits, ":-_.\\" and one "@", at most 255), a cpufreq governor (CPUFREQ_NAME_LEN 16),
# a line of /proc/cmdline (COMMAND_LINE_SIZE: 2,048 on x86, at most 4,096) or of the other
# sources (a page)
_MODULE = re.compile(r"[A-Za-z0-9_]{1,55}", re.ASCII)
_UNIT = re.compile(r"[A-Za-z0-9:_.\\@-]{1,255}", re.ASCII)
_GOVERNOR = re.compile(r"[A-Za-z0-9_]{1,15}", re.ASCII)
_PAGE = 4096


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
        if key not in _REQUIRED if target is values else not _UNIT.fullmatch(name):
            raise ParseError(f"conformance probe: unknown key {key[:60]!r} (damaged output, or "
                             "not the rackgate conformance probe?)")
        if len(value) > _PAGE:
            raise ParseError(f"conformance probe: {key} is {len(value):,} characters, more "
                             f"than the probe's sources hold ({_PAGE:,})")
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
    modules = [m for m in values["modules"].split(",") if m]
    if bad := [m for m in modules if not _MODULE.fullmatch(m)]:
        raise ParseError(f"conformance probe: module {bad[0][:60]!r} is no kernel module name")
    governors = [g for g in values["governors"].split(",") if g]
    if bad := [g for g in governors if not _GOVERNOR.fullmatch(g)]:
        raise ParseError(f"conformance probe: governor {bad[0][:60]!r} is no cpufreq governor")
    return Conformance(
        modules=frozenset(modules),
        services=services,
        default_memlock=values["default_memlock"],
        cmdline=tuple(values["cmdline"].split()),
        governors=frozenset(governors),
        acs_enabled_bridges=None if acs == "unknown" else int(acs),
    )
