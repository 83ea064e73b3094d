"""Parser for smartmontools' ``smartctl -j`` output (JSON format version 1, smartctl 7.0
and later), as ``disk.health`` runs it: ``smartctl -a -j DEVICE`` or
``smartctl -i -H -A -j DEVICE``.

Format: smartctl(8) (``-j``, EXIT STATUS) and smartmontools' source: ``smartctl.cpp``
(``json_format_version`` [1, 0]; ``smartctl.argv``, the command line with ``argv[0]``
written as "smartctl"; ``smartctl.exit_status``, the exit status; ``smartctl.messages``,
what it would have printed as errors; ``device``: ``name`` as given on the command line,
``type``, ``protocol`` "ATA", "SCSI" or "NVMe", absent when the device could not be
opened), ``nvmeprint.cpp`` (``smart_status.passed``, false when any Critical Warning bit
is set, with ``smart_status.nvme.value`` the byte; ``nvme_smart_health_information_log``
with ``critical_warning``, ``available_spare``, ``available_spare_threshold``,
``percentage_used`` and ``media_errors``) and ``ataprint.cpp`` (``smart_status.passed``,
the SMART RETURN STATUS; ``ata_smart_attributes.table[]`` with ``id``, ``name``,
``value``, ``worst``, ``thresh``, ``when_failed`` "" / "now" / "past" where the attribute
has a threshold, ``flags.prefailure`` and ``raw.value``). 128-bit counters beyond 2^64
are also written as a decimal string ``KEY_s`` (``json.cpp``, ``set_unsafe_uint128``),
which is read where present. Members not named here are not read.

Strict as ``parsers.nvme_smart`` reads nvme-cli: a repeated key, damage, an integer in
another notation, an attribute ID listed twice are each a ParseError.

>>> r = parse_smartctl_json('{"json_format_version": [1, 0], "smartctl": {"argv": '
...     '["smartctl", "-a", "-j", "/dev/sda"], "exit_status": 0}, "device": {"name": '
...     '"/dev/sda", "type": "sat", "protocol": "ATA"}, "smart_status": {"passed": true}}')
>>> r.device_name, r.protocol, r.exit_status, r.smart_passed, r.ata_attributes
('/dev/sda', 'ATA', 0, True, None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.nvme_smart import (
    U8,
    U128,
    NvmeHealth,
    counter,
    critical_warning,
    strict_document,
    uint,
)

FMT = "smartctl JSON"
U64 = 2**64 - 1  # smartctl decodes an ATA attribute's raw bytes into a uint64
WHEN_FAILED = ("", "now", "past")
# raw.string of ata_format_attr_raw_value (atacmds.cpp): a count alone (raw48, raw56,
# raw64) or before the other packed fields in parentheses (raw16(raw16), raw16(avg16),
# raw24(raw8)); its other forms (raw8, raw16, hex48, 24/32-bit ratios, hours) are no count
_LEADING = re.compile(r"(0|[1-9][0-9]{0,19})(?: \([A-Za-z0-9 /]{1,60}\))?", re.ASCII)


@dataclass(frozen=True)
class AtaAttribute:
    """One row of ``ata_smart_attributes.table``."""

    id: int  # 1..255
    name: str
    value: int | None  # the normalized value (None: the drive gives none)
    thresh: int | None  # its threshold (None: none known)
    when_failed: str | None  # "", "now", "past"; None where there is no threshold
    prefailure: bool
    raw: int  # raw.value: the raw bytes as one number, vendor fields packed in
    # the count smartctl prints first in raw.string ("0", "8 (0 2 0)"): the attribute's
    # own figure where the drive packs other fields beside it; None: no leading count
    count: int | None


@dataclass(frozen=True)
class SmartctlReport:
    argv: tuple[str, ...]
    exit_status: int  # the status smartctl says it exits with
    messages: tuple[str, ...]  # smartctl.messages[].string
    device_name: str | None  # None: smartctl could not open the device
    device_type: str | None
    protocol: str | None
    model: str | None
    serial: str | None
    firmware: str | None
    smart_passed: bool | None  # None: no SMART health status in the output
    nvme: NvmeHealth | None  # the NVMe SMART / Health log, when the device is NVMe
    ata_attributes: tuple[AtaAttribute, ...] | None  # None: no attribute table


def _obj(doc: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, dict):
        raise ParseError(f"{FMT}: {where}{key} is not an object")
    return value


def _text(doc: dict[str, Any], key: str, where: str) -> str | None:
    value = doc.get(key)
    if value is not None and not isinstance(value, str):
        raise ParseError(f"{FMT}: {where}{key} is not a string")
    return value


def _big(doc: dict[str, Any], key: str, where: str) -> int:
    """A counter smartctl writes as a number, and as ``KEY_s`` too when it is large."""
    if f"{key}_s" in doc:
        return counter(doc[f"{key}_s"], f"{FMT}: {where}{key}_s")
    return uint(doc.get(key), f"{FMT}: {where}{key}", U128)


def _nvme(doc: dict[str, Any]) -> NvmeHealth | None:
    log = _obj(doc, "nvme_smart_health_information_log", "")
    if log is None:
        return None
    at = "nvme_smart_health_information_log."
    temperature = log.get("temperature")
    return NvmeHealth(
        critical_warning=critical_warning(log.get("critical_warning"),
                                          f"{FMT}: {at}critical_warning"),
        available_spare_pct=uint(log.get("available_spare"), f"{FMT}: {at}available_spare",
                                 U8),
        available_spare_threshold_pct=uint(log.get("available_spare_threshold"),
                                           f"{FMT}: {at}available_spare_threshold", U8),
        percentage_used_pct=uint(log.get("percentage_used"), f"{FMT}: {at}percentage_used",
                                 U8),
        media_errors=_big(log, "media_errors", at),
        temperature_c=None if temperature is None else _celsius(temperature, at),
    )


def _celsius(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -273 <= value <= 65262:
        raise ParseError(f"{FMT}: {where}temperature is {str(value)[:40]}, not degrees "
                         "Celsius of a 16-bit kelvin reading")
    return int(value)


def _attribute(row: Any, i: int) -> AtaAttribute:
    where = f"ata_smart_attributes.table[{i}]"
    if not isinstance(row, dict):
        raise ParseError(f"{FMT}: {where} is not an object")
    flags, raw = _obj(row, "flags", f"{where}."), _obj(row, "raw", f"{where}.")
    if flags is None or raw is None:
        raise ParseError(f"{FMT}: {where} has no flags or raw object")
    prefailure = flags.get("prefailure")
    if not isinstance(prefailure, bool):
        raise ParseError(f"{FMT}: {where}.flags.prefailure is not true or false")
    name = _text(row, "name", f"{where}.")
    when = _text(row, "when_failed", f"{where}.")
    if when is not None and when not in WHEN_FAILED:
        raise ParseError(f"{FMT}: {where}.when_failed is {when[:40]!r}, not one of "
                         f"{', '.join(repr(w) for w in WHEN_FAILED)}")
    value, thresh = row.get("value"), row.get("thresh")
    return AtaAttribute(
        id=uint(row.get("id"), f"{FMT}: {where}.id", U8),
        name=name or "?",
        value=None if value is None else uint(value, f"{FMT}: {where}.value", U8),
        thresh=None if thresh is None else uint(thresh, f"{FMT}: {where}.thresh", U8),
        when_failed=when,
        prefailure=prefailure,
        raw=(number := uint(raw.get("value"), f"{FMT}: {where}.raw.value", U64)),
        count=_count(raw.get("string"), number, where),
    )


def _count(text: Any, raw: int, where: str) -> int | None:
    """The leading count of raw.string (see ``_LEADING``), a part of the raw value and so
    at most it; None for the other forms."""
    if not isinstance(text, str):
        raise ParseError(f"{FMT}: {where}.raw.string is missing or not a string")
    m = _LEADING.fullmatch(text)
    if m is None:
        return None
    count = int(m.group(1))
    if count > raw:
        raise ParseError(f"{FMT}: {where}.raw.string {text[:40]!r} counts more than its raw "
                         f"value {raw}: inconsistent output")
    return count


def _attributes(doc: dict[str, Any]) -> tuple[AtaAttribute, ...] | None:
    section = _obj(doc, "ata_smart_attributes", "")
    if section is None:
        return None
    table = section.get("table")
    if not isinstance(table, list):
        raise ParseError(f"{FMT}: ata_smart_attributes.table is missing or not a list")
    rows = tuple(_attribute(row, i) for i, row in enumerate(table))
    ids = [r.id for r in rows]
    if twice := sorted({i for i in ids if ids.count(i) > 1}):
        raise ParseError(f"{FMT}: ata_smart_attributes lists attribute "
                         f"{', '.join(map(str, twice))} twice (duplicated output?)")
    return rows


def _head(doc: dict[str, Any]) -> tuple[tuple[str, ...], int, tuple[str, ...]]:
    """argv, exit status and messages from the ``smartctl`` object."""
    version = doc.get("json_format_version")
    if not (isinstance(version, list) and len(version) == 2 and version[0] == 1
            and all(isinstance(v, int) and not isinstance(v, bool) for v in version)):
        raise ParseError(f"{FMT}: json_format_version is {str(version)[:40]}, not [1, N] "
                         "(not smartctl -j output?)")
    head = _obj(doc, "smartctl", "")
    if head is None:
        raise ParseError(f"{FMT}: no smartctl object (not smartctl -j output?)")
    argv = head.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ParseError(f"{FMT}: smartctl.argv is missing or not a list of strings")
    messages = head.get("messages", [])
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("string"), str) for m in messages):
        raise ParseError(f"{FMT}: smartctl.messages is not a list of {{string, severity}}")
    return (tuple(argv), uint(head.get("exit_status"), f"{FMT}: smartctl.exit_status", U8),
            tuple(m["string"] for m in messages))


def _status(doc: dict[str, Any], nvme: NvmeHealth | None) -> bool | None:
    status = _obj(doc, "smart_status", "")
    if status is None:
        return None
    passed = status.get("passed")
    if not isinstance(passed, bool):
        raise ParseError(f"{FMT}: smart_status.passed is not true or false")
    said = _obj(status, "nvme", "smart_status.")
    if said is not None and nvme is not None:
        byte = uint(said.get("value"), f"{FMT}: smart_status.nvme.value", U8)
        if byte != nvme.critical_warning or passed != (byte == 0):
            raise ParseError(f"{FMT}: smart_status (passed {passed}, nvme.value {byte}) "
                             f"disagrees with the log's critical_warning "
                             f"{nvme.critical_warning}: inconsistent output")
    return passed


def parse_smartctl_json(text: str) -> SmartctlReport:
    """smartctl's ``-j`` output as a :class:`SmartctlReport`; ParseError for anything
    else."""
    doc = strict_document(text, FMT)
    argv, exit_status, messages = _head(doc)
    device = _obj(doc, "device", "") or {}
    nvme = _nvme(doc)
    return SmartctlReport(
        argv=argv, exit_status=exit_status, messages=messages,
        device_name=_text(device, "name", "device."),
        device_type=_text(device, "type", "device."),
        protocol=_text(device, "protocol", "device."),
        model=_text(doc, "model_name", ""), serial=_text(doc, "serial_number", ""),
        firmware=_text(doc, "firmware_version", ""),
        smart_passed=_status(doc, nvme), nvme=nvme, ata_attributes=_attributes(doc),
    )
