"""Parsers for ``nvidia-smi -q -x`` (XML) and ``nvidia-smi -q`` (text): per-GPU health.

Format: nvidia-smi(1), option ``-q`` / ``-x``, and the DTD shipped with the driver
(``nvsmi_device_v12.dtd``, named in the output's ``<!DOCTYPE>``). The root
``nvidia_smi_log`` holds ``driver_version``, ``cuda_version``, ``attached_gpus`` and one
``gpu id="<pci bus id>"`` per device. Element names changed across drivers; both spellings
are read:

* ``clocks_throttle_reasons/clocks_throttle_reason_*`` (before r535) and
  ``clocks_event_reasons/clocks_event_reason_*`` (r535 on); text "Clocks Throttle
  Reasons" / "Clocks Event Reasons"; each reason is ``Active`` or ``Not Active``.
* ``power_readings`` (``power_limit``, ``enforced_power_limit``; before r530) and
  ``gpu_power_readings`` (``current_power_limit``; ``power_draw``, or
  ``instant_power_draw`` / ``average_power_draw`` from r550).
* ``ecc_errors/{volatile,aggregate}``: ``single_bit/total`` and ``double_bit/total``
  (older drivers), or per-location counters (``sram_correctable``,
  ``sram_uncorrectable_parity``, ``dram_uncorrectable``, ...) that are summed here.
* ``retired_pages`` (Volta and older: ``pending_blacklist`` / ``pending_retirement``) and
  ``remapped_rows`` (Ampere on: ``remapped_row_{corr,unc,pending,failure}``).

``N/A``, ``[N/A]`` and ``Not Supported`` read as None. The text form is nvidia-smi's
indented ``Label : value`` layout (4 spaces per level); its labels are read as snake-case
keys, which for most sections equal the XML element names.

Incomplete output is refused, never read as a smaller healthy node: XML must be
well-formed up to the closing ``</nvidia_smi_log>``; in the text form every GPU block
must reach its last section, ``Processes``.

>>> q = parse_nvidia_smi_xml('<nvidia_smi_log><driver_version>535.54.03</driver_version>'
...     '<attached_gpus>1</attached_gpus><gpu id="00000000:01:00.0">'
...     '<product_name>NVIDIA A100-SXM4-80GB</product_name>'
...     '<fb_memory_usage><total>81920 MiB</total></fb_memory_usage></gpu></nvidia_smi_log>')
>>> q.driver_version, q.gpus[0].pci_bus_id, q.gpus[0].fb_memory_total_mib
('535.54.03', '00000000:01:00.0', 81920)
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from rackgate.parsers import ParseError

# Clock event (throttle) reasons, as the XML names them after the clocks_*_reason_ prefix.
REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
           "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost",
           "sw_thermal_slowdown", "display_clocks_setting")
# text labels (snake-cased) whose XML name differs
_TEXT_REASONS = {"idle": "gpu_idle", "display_clock_setting": "display_clocks_setting"}
_NA = {"", "n/a", "[n/a]", "not supported", "[not supported]", "n/a %"}
_DEVICE_ERROR = re.compile(r"Unable to determine the device handle|GPU is lost|"
                           r"No devices were found|NVIDIA-SMI has failed", re.IGNORECASE)
_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
_GPU_LINE = re.compile(rf"^GPU ({_BUS_ID})\s*$")
_KV_LINE = re.compile(r"^( *)(\S.*?)\s*:(?: (.*))?$")
_NUMBER = re.compile(r"^(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z%]*)$")


@dataclass(frozen=True)
class EccCounts:
    """ECC error counts since the driver loaded (volatile) and over the board's life
    (aggregate); each the sum over memory locations; None when the GPU reports N/A."""

    volatile_correctable: int | None
    volatile_uncorrectable: int | None
    aggregate_correctable: int | None
    aggregate_uncorrectable: int | None


@dataclass(frozen=True)
class Gpu:
    index: int  # position in nvidia-smi's listing (its -i index: PCI bus order)
    pci_bus_id: str
    product_name: str
    serial: str | None
    uuid: str | None
    minor_number: int | None
    vbios_version: str | None
    persistence_mode_enabled: bool | None
    fb_memory_total_mib: int | None
    ecc_mode_enabled: bool | None
    ecc: EccCounts
    retired_pages_single_bit: int | None
    retired_pages_double_bit: int | None
    retired_pages_pending: bool | None
    remapped_rows_correctable: int | None
    remapped_rows_uncorrectable: int | None
    remapped_rows_pending: bool | None
    remapped_rows_failure: bool | None
    pcie_gen_current: int | None
    pcie_gen_max: int | None
    pcie_width_current: int | None  # lanes
    pcie_width_max: int | None
    clock_event_reasons_active: tuple[str, ...]  # names from REASONS (or unknown ones)
    power_draw_w: float | None
    power_limit_w: float | None  # the limit in force (current / enforced)
    power_limit_default_w: float | None
    power_limit_max_w: float | None
    temperature_gpu_c: float | None
    reset_required: bool | None
    drain_and_reset_recommended: bool | None
    clock_event_reasons_reported: bool = True  # False: no clocks event/throttle section


@dataclass(frozen=True)
class GpuQuery:
    format: Literal["xml", "text"]
    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int | None
    gpus: tuple[Gpu, ...]
    device_errors: tuple[str, ...] = ()  # e.g. "Unable to determine the device handle ..."


@dataclass
class _Node:
    """One element (XML) or one ``Label : value`` line (text), keyed by snake-case name."""

    key: str
    value: str | None
    children: list[_Node] = field(default_factory=list)

    def find(self, path: str) -> _Node | None:
        """The one node at ``path``; ParseError when a step matches twice (a duplicated
        line or element: which of the two would be the GPU's?)."""
        node: _Node | None = self
        for part in path.split("/"):
            if node is None:
                return None
            found = [c for c in node.children if c.key == part]
            if len(found) > 1:
                raise ParseError(f"nvidia-smi: {path} appears {len(found)} times in one block "
                                 "(duplicated output?)")
            node = found[0] if found else None
        return node

    def text(self, *paths: str) -> str | None:
        """Value at the first of ``paths`` that exists and is not N/A."""
        for path in paths:
            node = self.find(path)
            if node is not None and node.value is not None \
                    and node.value.strip().lower() not in _NA:
                return node.value.strip()
        return None


def _snake(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


class _Reader:
    """Field access on one GPU node, with error messages naming the format and the GPU."""

    def __init__(self, fmt: str, node: _Node, where: str) -> None:
        self.fmt, self.node, self.where = fmt, node, where

    def number(self, unit: str, *paths: str) -> float | None:
        raw = self.node.text(*paths)
        if raw is None:
            return None
        m = _NUMBER.match(raw)
        if not m or (m.group(2) and m.group(2).lower() != unit.lower()):
            raise ParseError(f"{self.fmt}: {self.where} {paths[0]} is {raw[:60]!r}, expected "
                             f"a number{f' of {unit}' if unit else ''}")
        value = float(m.group(1))
        if not math.isfinite(value):  # a digit string too long for a float
            raise ParseError(f"{self.fmt}: {self.where} {paths[0]} is {raw[:60]!r}, not a "
                             "finite number")
        return value

    def integer(self, unit: str, *paths: str) -> int | None:
        value = self.number(unit, *paths)
        return None if value is None else int(value)

    def flag(self, *paths: str) -> bool | None:
        raw = self.node.text(*paths)
        if raw is None:
            return None
        word = raw.lower()
        if word in ("yes", "enabled", "active"):
            return True
        if word in ("no", "disabled", "not active"):
            return False
        raise ParseError(f"{self.fmt}: {self.where} {paths[0]} is {raw!r}, expected "
                         "Yes/No, Enabled/Disabled or Active/Not Active")

    def ecc_sum(self, group: str, kind: Literal["correctable", "uncorrectable"]) -> int | None:
        node = self.node.find(f"ecc_errors/{group}")
        if node is None:
            return None
        old = "single_bit" if kind == "correctable" else "double_bit"
        if node.find(old) is not None:  # drivers before r460: single/double bit totals
            return self.integer("", f"ecc_errors/{group}/{old}/total")
        total, seen = 0, False
        for child in node.children:
            is_unc = "uncorrectable" in child.key
            if (kind == "uncorrectable") != is_unc or "correctable" not in child.key:
                continue
            count = self.integer("", f"ecc_errors/{group}/{child.key}")
            if count is not None:
                total, seen = total + count, True
        return total if seen else None


def _gpu(fmt: str, index: int, bus_id: str, node: _Node, text_form: bool) -> Gpu:
    where = f"GPU {index} ({bus_id})"
    r = _Reader(fmt, node, where)
    name = node.text("product_name")
    if name is None:
        raise ParseError(f"{fmt}: {where} has no product name")
    if text_form:
        rp = ("retired_pages/single_bit_ecc", "retired_pages/double_bit_ecc",
              "retired_pages/pending_page_blacklist", "retired_pages/pending_page_retirement")
        rr = ("remapped_rows/correctable_error", "remapped_rows/uncorrectable_error",
              "remapped_rows/pending", "remapped_rows/remapping_failure_occurred")
        link = "pci/gpu_link_info/pcie_generation", "pci/gpu_link_info/link_width"
        serial, uuid, temp = "serial_number", "gpu_uuid", "temperature/gpu_current_temp"
        power_draw = ("power_draw", "instantaneous_power_draw", "average_power_draw")
        gen_cur, gen_max, width_cur, width_max = "current", "max", "current", "max"
        ecc_mode = "ecc_mode/current"
    else:
        rp = ("retired_pages/multiple_single_bit_retirement/retired_count",
              "retired_pages/double_bit_retirement/retired_count",
              "retired_pages/pending_blacklist", "retired_pages/pending_retirement")
        rr = ("remapped_rows/remapped_row_corr", "remapped_rows/remapped_row_unc",
              "remapped_rows/remapped_row_pending", "remapped_rows/remapped_row_failure")
        link = "pci/pci_gpu_link_info/pcie_gen", "pci/pci_gpu_link_info/link_widths"
        serial, uuid, temp = "serial", "uuid", "temperature/gpu_temp"
        power_draw = ("power_draw", "instant_power_draw", "average_power_draw")
        gen_cur, gen_max = "current_link_gen", "max_link_gen"
        width_cur, width_max = "current_link_width", "max_link_width"
        ecc_mode = "ecc_mode/current_ecc"
    power = next((p for p in ("gpu_power_readings", "power_readings")
                  if node.find(p) is not None), "gpu_power_readings")

    def pw(*names: str) -> float | None:
        return r.number("W", *(f"{power}/{n}" for n in names))

    return Gpu(
        index=index, pci_bus_id=bus_id, product_name=name,
        serial=node.text(serial), uuid=node.text(uuid),
        minor_number=r.integer("", "minor_number"), vbios_version=node.text("vbios_version"),
        persistence_mode_enabled=r.flag("persistence_mode"),
        fb_memory_total_mib=r.integer("MiB", "fb_memory_usage/total"),
        ecc_mode_enabled=r.flag(ecc_mode),
        ecc=EccCounts(r.ecc_sum("volatile", "correctable"), r.ecc_sum("volatile", "uncorrectable"),
                      r.ecc_sum("aggregate", "correctable"),
                      r.ecc_sum("aggregate", "uncorrectable")),
        retired_pages_single_bit=r.integer("", rp[0]),
        retired_pages_double_bit=r.integer("", rp[1]),
        retired_pages_pending=r.flag(rp[2], rp[3]),
        remapped_rows_correctable=r.integer("", rr[0]),
        remapped_rows_uncorrectable=r.integer("", rr[1]),
        remapped_rows_pending=r.flag(rr[2]), remapped_rows_failure=r.flag(rr[3]),
        pcie_gen_current=r.integer("", f"{link[0]}/{gen_cur}"),
        pcie_gen_max=r.integer("", f"{link[0]}/{gen_max}"),
        pcie_width_current=r.integer("x", f"{link[1]}/{width_cur}"),
        pcie_width_max=r.integer("x", f"{link[1]}/{width_max}"),
        clock_event_reasons_active=_active_reasons(r, text_form),
        power_draw_w=pw(*power_draw),
        power_limit_w=pw("current_power_limit", "enforced_power_limit", "power_limit"),
        power_limit_default_w=pw("default_power_limit"),
        power_limit_max_w=pw("max_power_limit"),
        temperature_gpu_c=r.number("C", temp),
        reset_required=r.flag("gpu_reset_status/reset_required"),
        drain_and_reset_recommended=r.flag("gpu_reset_status/drain_and_reset_recommended"),
        clock_event_reasons_reported=any(node.find(s) is not None for s in (
            "clocks_event_reasons", "clocks_throttle_reasons")),
    )


def _active_reasons(r: _Reader, text_form: bool) -> tuple[str, ...]:
    section = next((s for s in ("clocks_event_reasons", "clocks_throttle_reasons")
                    if r.node.find(s) is not None), None)
    node = r.node.find(section) if section else None
    if node is None:
        return ()
    active = []
    keys = [c.key for c in node.children]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ParseError(f"{r.fmt}: {r.where} {section} lists {', '.join(twice)} twice "
                         "(duplicated output?)")
    for child in node.children:  # the text form's HW sub-reasons read as siblings here
        name = re.sub(r"^clocks_(event|throttle)_reason_", "", child.key)
        name = _TEXT_REASONS.get(name, name) if text_form else name
        # only "Active" counts: later drivers may add figures (counters) to this section
        if (child.value or "").strip().lower() == "active":
            active.append(name)
    return tuple(active)


_MAX_DEPTH = 64  # nvidia-smi nests about 6 levels; recursion must never be exhausted


def _depth(root: ET.Element) -> int:
    """Nesting depth, iteratively (a recursive walk could exhaust the stack)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        el, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > _MAX_DEPTH:
            break
        stack.extend((c, d + 1) for c in el)
    return deepest


def _from_xml_element(el: ET.Element) -> _Node:
    node = _Node(el.tag, el.text.strip() if el.text and el.text.strip() else None)
    node.children = [_from_xml_element(c) for c in el if isinstance(c.tag, str)]
    return node


def _device_errors(lines: Iterator[str] | list[str]) -> tuple[str, ...]:
    return tuple(line.strip() for line in lines if _DEVICE_ERROR.search(line))


def parse_nvidia_smi_xml(text: str) -> GpuQuery:
    """Parse ``nvidia-smi -q -x``; raise ParseError on anything else or on truncation."""
    fmt = "nvidia-smi -q -x XML"
    text = text.replace("\r\n", "\n")
    start = next((m.start() for m in re.finditer(r"(?m)^\s*<", text)), None)
    if start is None:
        raise ParseError(f"{fmt}: no line starts with '<' (empty output, or not run with -x?)"
                         + (f": {text.strip()[:120]!r}" if text.strip() else ""))
    prefix, body = text[:start], text[start:]
    if "<!ENTITY" in body:
        raise ParseError(f"{fmt}: entity declarations are not part of nvidia-smi's format")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        line, col = exc.position
        raise ParseError(f"{fmt}: not well-formed at line {line + prefix.count(chr(10))} "
                         f"column {col}: {exc} (truncated output?)") from None
    except ValueError as exc:  # text the XML parser cannot even encode
        raise ParseError(f"{fmt}: unreadable text: {str(exc)[:80]}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"{fmt}: the root element is <{str(root.tag)[:40]}>, expected "
                         "<nvidia_smi_log>")
    if _depth(root) > _MAX_DEPTH:
        raise ParseError(f"{fmt}: elements nested deeper than {_MAX_DEPTH} levels: not "
                         "nvidia-smi's layout")
    top = _from_xml_element(root)
    attached = _Reader(fmt, top, "the log").integer("", "attached_gpus")
    gpus = []
    for i, el in enumerate(root.findall("gpu")):
        node = _from_xml_element(el)
        listed = node.text("pci/pci_bus_id")
        bus = el.get("id") or listed or f"gpu[{i}]"
        if listed is not None and listed.lower() != bus.lower():
            raise ParseError(f"{fmt}: <gpu id={bus!r}> holds pci_bus_id {listed!r}: two GPUs' "
                             "output mixed?")
        gpus.append(_gpu(fmt, i, bus, node, text_form=False))
    return GpuQuery("xml", top.text("driver_version"), top.text("cuda_version"), attached,
                    tuple(gpus), _device_errors(prefix.splitlines()))


_LISTS = ("processes", "accounted_processes")  # sections that repeat their keys per entry


def _text_tree(lines: list[str], fmt: str) -> tuple[_Node, list[tuple[str, _Node]], list[str]]:
    top = _Node("", None)
    gpus: list[tuple[str, _Node]] = []
    errors: list[str] = []
    stack: list[tuple[int, _Node]] = [(-1, top)]
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("====="):
            continue
        if _DEVICE_ERROR.search(line):
            errors.append(line.strip())
            continue
        gpu = _GPU_LINE.match(line)
        if gpu:
            node = _Node("gpu", gpu.group(1))
            gpus.append((gpu.group(1), node))
            stack = [(-1, top), (0, node)]
            continue
        indent = len(line) - len(line.lstrip(" "))
        kv = _KV_LINE.match(line)
        key, value = (kv.group(2), kv.group(3) or "") if kv else (line.strip(), None)
        while stack[-1][0] >= indent:
            stack.pop()
        if not stack:
            raise ParseError(f"{fmt}: line {n} is indented less than its section: {line!r}")
        if indent > 0 and len(stack) == 1:
            raise ParseError(f"{fmt}: line {n} is indented but belongs to no GPU: {line!r}")
        child = _Node(_snake(key), value)
        parent = stack[-1][1]
        if parent.key not in _LISTS and any(c.key == child.key for c in parent.children):
            raise ParseError(f"{fmt}: line {n}: {key.strip()!r} given twice in "
                             f"{parent.key or 'the header'} (duplicated output?)")
        parent.children.append(child)
        if value is None:
            stack.append((indent, child))
    return top, gpus, errors


def parse_nvidia_smi_text(text: str) -> GpuQuery:
    """Parse ``nvidia-smi -q`` (the text report) into the same record as the XML parser."""
    fmt = "nvidia-smi -q text"
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    banner = text.find("==============NVSMI LOG==============")
    prefix = text[:banner] if banner >= 0 else ""
    lines = text[banner:].split("\n") if banner >= 0 else text.split("\n")
    top, blocks, errors = _text_tree(lines, fmt)
    errors = [*_device_errors(prefix.splitlines()), *errors]
    attached = _Reader(fmt, top, "the header").integer("", "attached_gpus")
    if attached is None and not blocks:
        raise ParseError(f"{fmt}: no 'Attached GPUs' line and no 'GPU <bus id>' block "
                         "(empty or truncated output, or not nvidia-smi -q?)")
    gpus = []
    for i, (bus, node) in enumerate(blocks):
        if node.find("processes") is None:
            announced = f" of {attached} announced" if attached is not None else ""
            raise ParseError(f"{fmt}: GPU {i}{announced} ({bus}) ends before its 'Processes' "
                             "section: truncated output")
        gpus.append(_gpu(fmt, i, bus, node, text_form=True))
    return GpuQuery("text", top.text("driver_version"), top.text("cuda_version"), attached,
                    tuple(gpus), tuple(errors))


def parse_nvidia_smi(text: str) -> GpuQuery:
    """Either form: XML when the first line that starts with '<' comes before the banner."""
    xml_at = re.search(r"(?m)^\s*<", text)
    banner = text.find("NVSMI LOG")
    parse: Callable[[str], GpuQuery] = parse_nvidia_smi_xml \
        if xml_at and (banner < 0 or xml_at.start() < banner) else parse_nvidia_smi_text
    return parse(text)
