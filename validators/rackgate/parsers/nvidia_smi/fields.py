"""The per-GPU record of ``nvidia-smi -q`` and where each of its fields is, in either form.

Both readers of ``parsers.nvidia_smi`` (XML, text) build the same tree of :class:`Node`:
an element, or a ``Label : value`` line, keyed by its snake-case name. :func:`read_gpu`
reads one GPU's node into :class:`Gpu`. Format: nvidia-smi(1), option ``-q``, and the DTD
shipped with the driver (``nvsmi_device_v12.dtd``). Element names changed across drivers;
both spellings are read:

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

A report filtered with ``-d`` (``nvidia-smi -q -d PERFORMANCE``: the header, then per GPU
only the requested sections, never Product Name or PCI) is complete but lacks what
:func:`read_gpu` needs; :func:`filtered_report` recognises it and names the sections
missing (``FULL_REPORT``), so that it is refused as filtered, not as truncated.

``N/A``, ``[N/A]`` and ``Not Supported`` read as None. The text form's labels, snake-cased,
equal the XML element names for most sections; where they differ, ``read_gpu`` names both.
A value that is not what its field holds (a number with another unit, a flag that is
neither Yes/No, Enabled/Disabled nor Active/Not Active) is a ParseError naming the GPU.

>>> gpu = Node("gpu", None, [Node("product_name", "NVIDIA H100 80GB HBM3"),
...     Node("temperature", None, [Node("gpu_temp", "41 C")])])
>>> g = read_gpu("demo", 0, "00000000:1B:00.0", gpu, text_form=False)
>>> g.product_name, g.temperature_gpu_c, g.ecc_mode_enabled
('NVIDIA H100 80GB HBM3', 41.0, None)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from rackgate.parsers import ParseError
from rackgate.parsers.nvidia_smi.node import Node

# Clock event (throttle) reasons, as the XML names them after the clocks_*_reason_ prefix.
REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
           "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost",
           "sw_thermal_slowdown", "display_clocks_setting")
# text labels (snake-cased) whose XML name differs
_TEXT_REASONS = {"idle": "gpu_idle", "display_clock_setting": "display_clocks_setting"}
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
    power_limit_min_w: float | None
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


def snake(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


class Reader:
    """Field access on one GPU node, with error messages naming the format and the GPU."""

    def __init__(self, fmt: str, node: Node, where: str) -> None:
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


# The top-level sections of one GPU that read_gpu needs, by their text label and their
# names (snake-cased label, or XML element) in either spelling. Every full report has them.
FULL_REPORT = (("Product Name", ("product_name",)), ("Persistence Mode", ("persistence_mode",)),
               ("PCI", ("pci",)),
               ("Clocks Event Reasons", ("clocks_event_reasons", "clocks_throttle_reasons")),
               ("FB Memory Usage", ("fb_memory_usage",)), ("ECC Mode", ("ecc_mode",)),
               ("ECC Errors", ("ecc_errors",)), ("Temperature", ("temperature",)),
               ("GPU Power Readings", ("gpu_power_readings", "power_readings")),
               ("Processes", ("processes",)))
# The sections each -d/--display value prints (nvidia-smi(1), -d), for the hint.
_DISPLAY = {"performance_state": "PERFORMANCE", "clocks_event_reasons": "PERFORMANCE",
            "clocks_throttle_reasons": "PERFORMANCE", "clocks": "CLOCK",
            "max_clocks": "CLOCK", "applications_clocks": "CLOCK", "fb_memory_usage": "MEMORY",
            "bar1_memory_usage": "MEMORY", "utilization": "UTILIZATION", "ecc_mode": "ECC",
            "ecc_errors": "ECC", "temperature": "TEMPERATURE", "gpu_power_readings": "POWER",
            "power_readings": "POWER", "compute_mode": "COMPUTE", "processes": "PIDS",
            "supported_clocks": "SUPPORTED_CLOCKS", "retired_pages": "PAGE_RETIREMENT",
            "remapped_rows": "ROW_REMAPPER", "gpu_reset_status": "RESET_STATUS",
            "voltage": "VOLTAGE", "accounting_mode": "ACCOUNTING",
            "encoder_stats": "ENCODER_STATS", "fbc_stats": "FBC_STATS"}
_LABEL_WORDS = {"fb": "FB", "ecc": "ECC", "pci": "PCI", "gpu": "GPU", "sm": "SM",
                "bar1": "BAR1", "hw": "HW", "sw": "SW"}


def _label(key: str) -> str:
    return " ".join(_LABEL_WORDS.get(w, w.title()) for w in key.split("_"))


def looks_filtered(gpu: Node) -> bool:
    """No Product Name (every full report starts with it) and a section -d selects."""
    keys = {c.key for c in gpu.children}
    return "product_name" not in keys and bool(keys & set(_DISPLAY))


def filtered_report(fmt: str, gpus: list[Node], attached: int | None,
                    command: str) -> ParseError | None:
    """The error for a complete report filtered with ``-d``, or None when it is not one:
    as many GPUs as announced, none with a Product Name (no -d value prints it), each
    showing the same sections, at least one of them one that -d selects. A report cut
    short fails these (a GPU missing, the last one with fewer sections) and stays
    'truncated' for its parser.

    >>> gpus = [Node("gpu", "0", [Node("performance_state", "P0")])]
    >>> err = str(filtered_report("demo", gpus, 1, "nvidia-smi -q"))
    >>> err.startswith("demo: the report has no 'Product Name',"), "-d PERFORMANCE?" in err
    (True, True)
    >>> filtered_report("demo", gpus, 2, "nvidia-smi -q") is None  # a GPU short: truncated
    True
    """
    shown = [tuple(c.key for c in g.children) for g in gpus]
    if not gpus or attached != len(gpus) or len(set(shown)) != 1 or not looks_filtered(gpus[0]):
        return None
    missing = [label for label, names in FULL_REPORT if not set(names) & set(shown[0])]
    selected = sorted({_DISPLAY[k] for k in shown[0] if k in _DISPLAY})
    return ParseError(
        f"{fmt}: the report has no {', '.join(repr(m) for m in missing)} section; each of its "
        f"{len(gpus)} GPUs shows only {', '.join(repr(_label(k)) for k in shown[0])}: "
        f"collected with -d {','.join(selected)}? The GPU health check needs the full "
        f"report ({command}, without -d)")


def read_gpu(fmt: str, index: int, bus_id: str, node: Node, text_form: bool) -> Gpu:
    where = f"GPU {index} ({bus_id})"
    r = Reader(fmt, node, where)
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
        power_limit_min_w=pw("min_power_limit"),
        temperature_gpu_c=r.number("C", temp),
        reset_required=r.flag("gpu_reset_status/reset_required"),
        drain_and_reset_recommended=r.flag("gpu_reset_status/drain_and_reset_recommended"),
        clock_event_reasons_reported=any(node.find(s) is not None for s in (
            "clocks_event_reasons", "clocks_throttle_reasons")),
    )


def _active_reasons(r: Reader, text_form: bool) -> tuple[str, ...]:
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


__all__ = ["FULL_REPORT", "REASONS", "EccCounts", "Gpu", "GpuQuery", "Node", "Reader",
           "filtered_report", "looks_filtered", "read_gpu", "snake"]
