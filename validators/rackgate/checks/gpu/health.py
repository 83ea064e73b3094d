"""gpu.health: every GPU the profile expects is present and healthy (``nvidia-smi -q -x``).

Judged against the profile's ``hardware.gpu``: count and product name exact, FB memory
when the profile gives it. Then, per GPU: uncorrectable ECC errors (volatile or aggregate),
row remapping pending or failed and page retirement pending (NVIDIA "GPU Memory Error
Management": a pending remap or retirement needs a GPU reset; a remapping failure means
the board should be replaced), GPU reset required, the PCIe link, persistence mode, ECC
mode, clock event (throttle) reasons that are not benign, and the power limit.

Power limit: where the profile states the site's cap (``hardware.gpu.power_cap``, see
``rackgate.hardware.PowerCap`` for why both directions matter), every GPU's limit in force
must be the cap within its tolerance (pass, reported as capped), any other limit fails, and
a cap outside the GPU's min..max limit, or a limit not reported, is an error. Without a cap,
a limit below the default warns (someone ran ``nvidia-smi -pl``).

PCIe: where the profile states the link (``hardware.gpu.pcie``, with its basis), the
current width must equal the profile's width: fewer lanes is a down-trained link, more is
not the slot the profile describes (a card in an x8 slot is healthy at x8 although its own
maximum is x16). Without a profile width, the current width must equal nvidia-smi's "Max".
A current *generation* below the profile's (or, without one, below "Max") is only a
warning by default: GPUs lower the link speed when idle to save power, so nvidia-smi's
PCIe "Current" generation reads below "Max" on a healthy idle GPU (nvidia-smi(1), "PCIe
Generation"; NVML ``nvmlDeviceGetCurrPcieLinkGeneration``); set ``require_max_gen`` when
the check runs under load. Link width does not drop that way. A "Max" generation below the
profile's (the most the GPU and slot together can train to) fails at any load, as does a
current generation above it. A profile figure with no such field in the output is an error.

Benign clock event reasons (NVML ``nvmlClocksEventReasons``, formerly
``nvmlClocksThrottleReasons``, in nvml.h): GpuIdle (nothing runs), ApplicationsClocksSetting
(clocks capped by the application clock setting), SwPowerCap (the power-management
algorithm keeps the GPU under its power limit, routine under load), SyncBoost and
DisplayClockSetting. HwSlowdown, HwThermalSlowdown and HwPowerBrakeSlowdown (temperature
too high, or an external power brake asserted by the system's power supply) and
SwThermalSlowdown (GPU or memory above its maximum operating temperature) point at
cooling, power delivery or a board fault, and fail by default.

Every finding is collected first; the worst status wins and the message lists them all.
Driver and VBIOS versions go to ``details`` for the certificate and rack-wide drift.

gpu.smi_table: plain ``nvidia-smi``, the summary table (``parsers.nvidia_smi.table``), a
check of its own rather than a second reader of gpu.health: the table holds none of what
gpu.health judges besides the count (no full product name, no row remapping, clock event
reasons, power limits or PCIe link), so read as gpu.health's evidence it could only be an
error, or a pass without evidence. It judges what the table shows: every GPU the profile
expects listed (indices 0..count-1, the name, cut with ``...`` where the column is too
narrow, that of the profile's model), no field reading ``ERR!`` (NVML returned an error:
a GPU fallen off the bus, XID 79, or a GSP timeout; a fail naming the GPU and the field,
"GPU 3: Temp ERR!"), no volatile uncorrectable ECC error, and no line about a GPU that
nvidia-smi could not open ("Unable to determine the device handle", "GPU is lost").

>>> from rackgate.profile import GpuSpec
>>> hw = Hardware(gpu=GpuSpec(model="NVIDIA A100-SXM4-80GB", count=1,
...                           source="a doctest, not a real profile"))
>>> gpu_applies(Hardware()), gpu_applies(hw)
('the profile expects no GPU', None)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import Field

from rackgate.checks.shared.base import NodeCheck, Params, Scope
from rackgate.checks.shared.pcie import link_findings
from rackgate.figures import figure
from rackgate.hardware import PcieLink
from rackgate.model import Judgement, Status
from rackgate.parsers.nvidia_smi import REASONS, Gpu, GpuQuery, parse_nvidia_smi_xml
from rackgate.parsers.nvidia_smi.table import ERR, SmiTable, parse_nvidia_smi_table
from rackgate.profile import Hardware, PowerCap, Threshold

Reason = Literal["gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                 "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost",
                 "sw_thermal_slowdown", "display_clocks_setting"]
BENIGN_REASONS: frozenset[Reason] = frozenset({
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "sync_boost",
    "display_clocks_setting"})
if set(get_args(Reason)) != set(REASONS):  # the parser's names and the params' must agree
    raise RuntimeError("gpu.health: Reason and parsers.nvidia_smi.REASONS differ")


class GpuHealthParams(Params):
    allowed_throttle_reasons: frozenset[Reason] = Field(
        default=BENIGN_REASONS,
        description="clock event reasons that may be Active without a finding")
    require_persistence: bool = Field(default=True, description="persistence mode off: "
                                      "fail when true, warn when false")
    require_ecc: bool = Field(default=True, description="ECC mode not Enabled: fail")
    require_max_gen: bool = Field(default=False, description="PCIe generation below max: "
                                  "fail when true (run under load), warn when false")


def gpu_health_command(params: GpuHealthParams, hostvars: Mapping[str, Any]) -> list[str]:
    return ["nvidia-smi", "-q", "-x"]


def gpu_applies(hardware: Hardware) -> str | None:
    return "the profile expects no GPU" if hardware.gpu is None else None


def _pcie_findings(g: Gpu, p: GpuHealthParams, want: PcieLink | None
                   ) -> list[tuple[Status, str]]:
    """The link against the profile's width and generation where it states them
    (checks.shared.pcie), else against the device's own maximum (nvidia-smi "Max")."""
    idle = "" if p.require_max_gen else " (may be idle power saving)"
    slow = Status.FAIL if p.require_max_gen else Status.WARN
    out = [] if want is None else link_findings(g.pcie_width_current, g.pcie_gen_current,
                                                g.pcie_gen_max, want, slow, idle)
    cur, top = g.pcie_width_current, g.pcie_width_max
    if (want is None or want.width is None) and cur is not None and top is not None \
            and cur < top:
        out.append((Status.FAIL, f"PCIe link x{cur}, max x{top} (down-trained link)"))
    cur, top = g.pcie_gen_current, g.pcie_gen_max
    if (want is None or want.generation is None) and cur is not None and top is not None \
            and cur < top:
        out.append((slow, f"PCIe gen {cur}, max gen {top}{idle}"))
    return out


def _gpu_findings(g: Gpu, p: GpuHealthParams, hw: Hardware) -> list[tuple[Status, str]]:
    out: list[tuple[Status, str]] = []
    spec = hw.gpu
    if spec is not None and g.product_name != spec.model:
        out.append((Status.FAIL, f"is {g.product_name!r}, expected {spec.model!r}"))
    if spec is not None and spec.memory_mib is not None \
            and g.fb_memory_total_mib != spec.memory_mib:
        out.append((Status.FAIL, f"FB memory {g.fb_memory_total_mib} MiB, expected "
                                 f"{spec.memory_mib} MiB"))
    for kind in ("volatile", "aggregate"):
        n = getattr(g.ecc, f"{kind}_uncorrectable")
        if n:
            out.append((Status.FAIL, f"{n} uncorrectable ECC error(s) ({kind})"))
    if g.ecc_mode_enabled is not True and p.require_ecc:
        state = "Disabled" if g.ecc_mode_enabled is False else "not reported"
        out.append((Status.FAIL, f"ECC mode {state}"))
    if g.remapped_rows_failure:
        out.append((Status.FAIL, "row remapping failure occurred (replace the GPU)"))
    if g.remapped_rows_pending:
        out.append((Status.FAIL, "row remapping pending (reset the GPU)"))
    if g.retired_pages_pending:
        out.append((Status.FAIL, "page retirement pending (reset the GPU)"))
    if g.reset_required:
        out.append((Status.FAIL, "GPU reset required"))
    elif g.drain_and_reset_recommended:
        out.append((Status.WARN, "drain and reset recommended"))
    out += _pcie_findings(g, p, spec.pcie if spec is not None else None)
    if g.persistence_mode_enabled is False:
        out.append((Status.FAIL if p.require_persistence else Status.WARN,
                    "persistence mode Disabled"))
    elif g.persistence_mode_enabled is None:  # every driver prints it: a line short
        out.append((Status.ERROR if p.require_persistence else Status.WARN,
                    "persistence mode not reported"))
    if not g.clock_event_reasons_reported:
        out.append((Status.ERROR, "no clock event (throttle) reasons reported: throttling "
                                  "cannot be ruled out"))
    bad = [r for r in g.clock_event_reasons_active if r not in p.allowed_throttle_reasons]
    if bad:
        out.append((Status.FAIL, f"clock event reasons active: {', '.join(bad)}"))
    out += _power_findings(g, spec.power_cap if spec is not None else None)
    return out


def _power_findings(g: Gpu, cap: PowerCap | None) -> list[tuple[Status, str]]:
    """The limit in force against the profile's cap (hardware.PowerCap): at the cap within
    its tolerance, nothing; any other limit fails; a cap the GPU cannot be set to (above
    its max limit, below its min) is the profile's error. Without a cap: a limit below the
    default warns (someone lowered it)."""
    limit = g.power_limit_w
    if limit is not None and not math.isfinite(limit):
        return [(Status.ERROR, f"power limit reported as {limit}: not a number of watts")]
    if cap is None:
        default = g.power_limit_default_w or g.power_limit_max_w
        if limit is not None and default is not None and limit < default:
            return [(Status.WARN, f"power limit {figure(limit)} W, below the default "
                                  f"{figure(default)} W")]
        return []
    want = f"the profile's power cap {figure(cap.watts)} W"
    top, bottom = g.power_limit_max_w, g.power_limit_min_w
    if limit is None:
        return [(Status.ERROR, f"no power limit reported: {want} cannot be checked")]
    if top is None or not math.isfinite(top):
        return [(Status.ERROR, f"no max power limit reported: {want} cannot be checked "
                               "against what the GPU accepts")]
    if cap.watts > top:
        return [(Status.ERROR, f"{want} is above the GPU's max power limit {figure(top)} W: "
                               "no GPU of this kind can be set to it (profile error)")]
    if bottom is not None and math.isfinite(bottom) and cap.watts < bottom:
        return [(Status.ERROR, f"{want} is below the GPU's min power limit {figure(bottom)} "
                               "W: no GPU of this kind can be set to it (profile error)")]
    if abs(limit - cap.watts) <= cap.tolerance_w:
        return []
    if limit > cap.watts:
        return [(Status.FAIL, f"power limit {figure(limit)} W, above {want} (± "
                              f"{figure(cap.tolerance_w)} W): it may draw more than the "
                              "rack's power budget")]
    return [(Status.FAIL, f"power limit {figure(limit)} W, below {want} (± "
                          f"{figure(cap.tolerance_w)} W): slower than the rack was sized for")]


def judge_gpu_health(q: GpuQuery, params: GpuHealthParams,
                     thresholds: Mapping[str, Threshold], hardware: Hardware) -> Judgement:
    spec = hardware.gpu
    if spec is None:  # applies() skips this case; a direct call must not pass silently
        return Judgement(Status.ERROR, "the profile expects no GPU: nothing to judge against")
    node: list[tuple[Status, str]] = []
    if len(q.gpus) != spec.count:
        node.append((Status.FAIL, f"found {len(q.gpus)} GPU(s), expected {spec.count} x "
                                  f"{spec.model}"))
    if q.attached_gpus is not None and q.attached_gpus != len(q.gpus):
        node.append((Status.FAIL, f"nvidia-smi counts {q.attached_gpus} attached GPU(s) but "
                                  f"reports {len(q.gpus)} (output incomplete, or a GPU could "
                                  "not be queried)"))
    node += [(Status.FAIL, f"nvidia-smi: {e}") for e in q.device_errors]
    for what, values in (("PCI bus id", [g.pci_bus_id for g in q.gpus]),
                         ("UUID", [g.uuid for g in q.gpus if g.uuid]),
                         ("minor number", [str(g.minor_number) for g in q.gpus
                                           if g.minor_number is not None])):
        for value in sorted({v for v in values if values.count(v) > 1}):
            node.append((Status.ERROR, f"{what} {value} is listed for {values.count(value)} "
                                       "GPUs: duplicated output, the GPUs cannot be counted"))
    grouped: dict[tuple[Status, str], list[str]] = {}
    for g in q.gpus:
        for status, text in _gpu_findings(g, params, hardware):
            grouped.setdefault((status, text), []).append(str(g.index))
    findings = node + [(s, f"GPU {', '.join(ids)}: {t}") for (s, t), ids in grouped.items()]
    findings.sort(key=lambda f: -f[0])
    details: dict[str, float | str] = {
        "gpu_count": len(q.gpus),
        "driver_version": q.driver_version or "unknown",
        "cuda_version": q.cuda_version or "unknown",
        "vbios_versions": ", ".join(sorted({g.vbios_version or "?" for g in q.gpus})),
    }
    for g in q.gpus:
        details[f"gpu{g.index}"] = (f"{g.pci_bus_id} serial {g.serial or '?'} "
                                    f"{g.uuid or '?'} VBIOS {g.vbios_version or '?'}")
        if g.temperature_gpu_c is not None:
            details[f"gpu{g.index}_temp_c"] = g.temperature_gpu_c
        if g.power_limit_w is not None and math.isfinite(g.power_limit_w):
            details[f"gpu{g.index}_power_limit_w"] = g.power_limit_w
    cap = spec.power_cap
    if cap is not None:
        details["power_cap_w"] = cap.watts
        details["power_cap_tolerance_w"] = cap.tolerance_w
    for i, (status, text) in enumerate(findings, 1):
        details[f"finding{i}"] = f"{status.label}: {text}"
    status = Status.worst(s for s, _ in findings)
    what = f"{len(q.gpus)} x {spec.model}, driver {q.driver_version or 'unknown'}"
    expected = f"{spec.count} x {spec.model}"
    if cap is not None:
        expected += f", power capped at {figure(cap.watts)} W (± {figure(cap.tolerance_w)} W)"
    if not findings:
        capped = "" if cap is None else f", power capped at {figure(cap.watts)} W"
        return Judgement(Status.PASS, f"{what}: healthy{capped}", expected=expected,
                         details=details)
    return Judgement(status, f"{what}: {len(findings)} finding(s): "
                             + "; ".join(f"{s.label}: {t}" for s, t in findings),
                     expected=expected, details=details)


class SmiTableParams(Params):
    """No settings: the table is judged against the profile's ``hardware.gpu``."""


def _named(name: str, model: str) -> bool:
    """Whether the table's name is the model's: equal, or its start cut with '...'."""
    return name == model or (name.endswith("...") and len(name) > 3
                             and model.startswith(name[:-3].rstrip()))


def judge_smi_table(t: SmiTable, params: SmiTableParams, thresholds: Mapping[str, Threshold],
                    hardware: Hardware) -> Judgement:
    spec = hardware.gpu
    if spec is None:  # applies() skips this case; a direct call must not pass silently
        return Judgement(Status.ERROR, "the profile expects no GPU: nothing to judge against")
    findings = [(Status.FAIL, f"nvidia-smi: {e[:160]}") for e in t.device_errors]
    if len(t.gpus) != spec.count:
        findings.append((Status.FAIL, f"the table lists {len(t.gpus)} GPU(s), expected "
                                      f"{spec.count} x {spec.model}"))
    foreign = sorted({g.index for g in t.gpus} - set(range(spec.count)))
    if foreign:
        findings.append((Status.FAIL, f"GPU index {', '.join(map(str, foreign))} is not one "
                                      f"of the profile's GPUs 0 to {spec.count - 1}"))
    for g in t.gpus:
        if g.errors:
            findings.append((Status.FAIL, f"GPU {g.index}: "
                                          + ", ".join(f"{f} {ERR}" for f in g.errors)))
        if g.name != ERR and not _named(g.name, spec.model):
            findings.append((Status.FAIL, f"GPU {g.index}: is {g.name!r}, expected "
                                          f"{spec.model!r}"))
        if g.ecc_uncorrectable:
            findings.append((Status.FAIL, f"GPU {g.index}: {g.ecc_uncorrectable} uncorrectable "
                                          "ECC error(s) (volatile)"))
    findings += [(Status.FAIL, f"{row} ({ERR})") for row in t.other_errors]
    hint = " (ERR!: NVML returned an error for the field: a GPU fallen off the bus, XID " \
        "79, or a driver/GSP fault)" if any(g.errors for g in t.gpus) else ""
    details: dict[str, float | str] = {"gpu_count": len(t.gpus),
                                       "driver_version": t.driver_version or "unknown",
                                       "cuda_version": t.cuda_version or "unknown"}
    for g in t.gpus:
        details[f"gpu{g.index}"] = f"{g.bus_id} {g.name}"
    expected = f"{spec.count} x {spec.model}, no ERR!"
    if not findings:
        return Judgement(Status.PASS, f"{len(t.gpus)} x {spec.model} in nvidia-smi's table: "
                         "no ERR! field, no uncorrectable ECC error", float(len(t.gpus)),
                         "GPUs", expected, None, details)
    return Judgement(Status.worst(s for s, _ in findings), "; ".join(m for _, m in findings)
                     + hint, float(len(t.gpus)), "GPUs", expected, None, details)


CHECKS = (
    NodeCheck(
        name="gpu.health",
        scope=Scope.NODE,
        tags=frozenset({"gpu", "health"}),
        description="GPU count and model, ECC, row remapping, PCIe link, throttling, "
                    "persistence and power limit (nvidia-smi -q -x)",
        params_model=GpuHealthParams,
        metrics=frozenset(),
        command=gpu_health_command,
        parse=parse_nvidia_smi_xml,
        judge=judge_gpu_health,
        applies=gpu_applies,
    ),
    NodeCheck(
        name="gpu.smi_table",
        scope=Scope.NODE,
        tags=frozenset({"gpu"}),
        description="nvidia-smi's summary table: every GPU listed, no ERR! field (NVML "
                    "error: a GPU fallen off the bus), no uncorrectable ECC error",
        params_model=SmiTableParams,
        metrics=frozenset(),
        command=lambda p, hv: ["nvidia-smi"],
        parse=parse_nvidia_smi_table,
        judge=judge_smi_table,
        applies=gpu_applies,
    ),
)

__all__ = ["BENIGN_REASONS", "CHECKS", "GpuHealthParams", "SmiTableParams", "gpu_applies",
           "gpu_health_command", "judge_gpu_health", "judge_smi_table"]
