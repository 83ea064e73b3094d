"""GPU copy bandwidth from NVIDIA's ``nvbandwidth`` (github.com/NVIDIA/nvbandwidth): the
copy engines' host-to-device, device-to-host and device-to-device copies, each judged cell
by cell against the profile's floor.

Three checks, one per direction, each one run of nvbandwidth and one metric, ``copy_bw``
(GB/s, 10^9 bytes/s), so that each figure has one physical bound and the peer comparison
compares like with like:

* ``nvbandwidth.host_to_device`` (``host_to_device_memcpy_ce``) and
  ``nvbandwidth.device_to_host`` (``device_to_host_memcpy_ce``): one copy at a time between
  pinned host memory and each GPU, over the GPU's PCIe link; the link's rate bounds it
  (Gen5 x16: 32 GT/s x 16 lanes x 128/130 / 8 = 63 GB/s each way);
* ``nvbandwidth.device_to_device`` (``device_to_device_memcpy_read_ce`` and/or
  ``_write_ce``): one copy at a time between each ordered GPU pair, over NVLink (through
  NVSwitch: the GPU's NVLink rate one way, half ``nvlink_gb_s_per_gpu``) or PCIe.

The judge, for the evidence of the command it asked for (``--testcase`` in its order, and
``--json`` or not):

* the testcases in the evidence are exactly those asked for, each once, in order (a waived
  testcase the text output leaves unnamed takes its place's name); another, a missing or a
  repeated one is an ``error``, as is output in the other format;
* waived (no GPU pair with peer access) fails; an error the tool reports, or a testcase
  started without a result, is an ``error``;
* each testcase printed one matrix, with the description its testcase prints; its columns
  are the profile's GPUs (``hardware.gpu.count``; one row, the CPU, for the host tests, one
  per GPU for device-to-device): another count fails, and a device list that disagrees
  with the matrix is an ``error``;
* the device-to-device diagonal is ``N/A`` by design (no copy from a GPU to itself): a figure
  there is an ``error``; ``N/A`` anywhere else is a pair without peer access and fails (a
  host test always measures: ``N/A`` there is an ``error``);
* every figure is finite and below the link's physical maximum: the threshold's limit
  (``limit: true``) and, where the profile's hardware states it, the link itself (PCIe
  generation and width, or NVLink's rate); above it (x1.05) is implausible evidence, an
  ``error``, never a pass; each figure at least the floor, else the check fails naming the
  GPU (pair).

The measured figure is the lowest cell; details hold the tool's version lines (the
certificate records which nvbandwidth measured), each testcase's lowest cell and SUM.
A node without nvbandwidth is an ``error`` (``cannot execute ... is it installed?``), as for
every check whose program is missing; no role installs it, so the shipped GPU profiles carry
these checks with their floors but disabled, for a site whose node image has it to enable.

>>> device_to_device_command(DeviceToDeviceParams(), {})[:5]
['nvbandwidth', '--bufferSize', '512', '--testSamples', '3']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, field_validator

from rackgate.checks.shared.base import LIMIT_TOLERANCE, NodeCheck, Params, Scope, compare
from rackgate.commands.launch import PROGRAM, plain
from rackgate.figures import figure, with_unit
from rackgate.model import Judgement, Status
from rackgate.parsers.nvbandwidth import parse_nvbandwidth
from rackgate.parsers.nvbandwidth.model import NvbandwidthRun, Testcase
from rackgate.profile import Hardware, Threshold
from rackgate.thresholds import band

Kind = Literal["host_to_device", "device_to_host", "device_to_device"]
D2dTestcase = Literal["device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce"]
METRIC = "copy_bw"
# each testcase judged, and the description its matrix prints (testcases_ce.cpp, 0.2-0.8)
DESCRIPTIONS = {
    "host_to_device_memcpy_ce": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
    "device_to_host_memcpy_ce": "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)",
    "device_to_device_memcpy_read_ce": "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
    "device_to_device_memcpy_write_ce": "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)",
}
# PCIe generation -> (GT/s per lane, line code): PCI Express Base Specification 1.0 to 5.0
_PCIE = {1: (2.5, 8 / 10), 2: (5.0, 8 / 10), 3: (8.0, 128 / 130), 4: (16.0, 128 / 130),
         5: (32.0, 128 / 130)}
_SHOWN = 12  # findings a message lists before "and N more"


class NvbandwidthParams(Params):
    timeout_s: int = Field(default=300, ge=30, le=3600)
    program: str = Field(default="nvbandwidth",
                         description="the nvbandwidth program: on PATH, or an absolute path")
    buffer_size_mib: int = Field(default=512, ge=64, le=65536,
                                 description="--bufferSize (MiB); 512 is the tool's default")
    samples: int = Field(default=3, ge=1, le=100, description="--testSamples (median of)")
    json_output: bool = Field(default=True, description="--json (nvbandwidth 0.5+); false: "
                                                        "the text output")

    @field_validator("program")
    @classmethod
    def _plain_program(cls, value: str) -> str:
        return plain(PROGRAM, value, "program")


class DeviceToDeviceParams(NvbandwidthParams):
    testcases: tuple[D2dTestcase, ...] = Field(
        default=("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce"),
        min_length=1, description="the device-to-device copy engine testcases, in order")

    @field_validator("testcases")
    @classmethod
    def _once_each(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("a testcase is listed twice")
        return value


def asked(kind: Kind, p: NvbandwidthParams) -> tuple[str, ...]:
    """The testcases the command asks for, in order."""
    if isinstance(p, DeviceToDeviceParams):
        return tuple(p.testcases)
    return (f"{kind}_memcpy_ce",)


def _command(kind: Kind) -> Callable[[NvbandwidthParams, Mapping[str, Any]], list[str]]:
    def command(p: NvbandwidthParams, hostvars: Mapping[str, Any]) -> list[str]:
        return [p.program, "--bufferSize", str(p.buffer_size_mib), "--testSamples",
                str(p.samples), *(["--json"] if p.json_output else []), "--testcase",
                *asked(kind, p)]
    return command


device_to_device_command = _command("device_to_device")


def link_ceiling(kind: Kind, hw: Hardware) -> tuple[float, str] | None:
    """The most the profile's link can carry one way (GB/s), and how: PCIe generation x
    width for the host copies (and device-to-device without NVLink), half the NVLink rate
    per GPU through NVSwitch. None where the profile does not state the link."""
    spec = hw.gpu
    topo = getattr(spec.nvlink_topology, "kind", None) if spec else None
    if spec is not None and kind == "device_to_device" and topo == "nvswitch":
        if spec.nvlink_gb_s_per_gpu is None:
            return None
        return spec.nvlink_gb_s_per_gpu / 2, (f"NVLink {figure(spec.nvlink_gb_s_per_gpu)} "
                                              "GB/s per GPU both ways / 2")
    if spec is None or spec.pcie is None or (kind == "device_to_device" and topo != "none"):
        return None
    gen, width = spec.pcie.generation, spec.pcie.width
    if gen not in _PCIE or width is None:
        return None
    rate, code = _PCIE[gen]
    return rate * width * code / 8, f"PCIe Gen{gen} x{width}"


def _aligned(found: Sequence[Testcase], want: Sequence[str]
             ) -> tuple[list[tuple[str, Testcase]], list[str]]:
    """(name, testcase) of each one asked for and found once, and what does not match."""
    if len(found) == len(want):
        names = [c.name or w for c, w in zip(found, want, strict=True)]
    else:
        names = [c.name or "?" for c in found]
    problems = [f"testcase {n} is in the evidence, the command did not ask for it" if n != "?"
                else "a waived testcase the text output does not name, beyond those asked for"
                for n in dict.fromkeys(names) if n not in want]
    problems += [f"testcase {n} is listed {names.count(n)} times (duplicated output?)"
                 for n in dict.fromkeys(names) if n in want and names.count(n) > 1]
    problems += [f"no result for testcase {w}, which the command asked for (cut output?)"
                 for w in want if w not in names]
    if not problems and names != list(want):
        problems.append(f"testcases in the order {', '.join(names)}, the command asked for "
                        f"{', '.join(want)}")
    return [(n, c) for n, c in zip(names, found, strict=True)
            if n in want and names.count(n) == 1], problems


Cell = tuple[float, str]  # a figure and where it stands
Finding = tuple[Status, str]


def _cells(kind: Kind, name: str, case: Testcase, count: int,
           run: NvbandwidthRun) -> tuple[list[Cell], list[Finding]]:
    if case.status == "waived":
        return [], [(Status.FAIL, f"nvbandwidth waived {name}: the system cannot run it (for "
                                  "device-to-device, no GPU pair has peer access)")]
    if case.status == "error":
        return [], [(Status.ERROR, f"nvbandwidth reported an error for {name}: "
                                   f"{case.message[:200] or 'no message'}")]
    if case.status == "running" or len(case.matrices) != 1:
        return [], [(Status.ERROR, f"{name} printed {len(case.matrices)} result matrices, "
                                   "one expected (cut or mixed output?)")]
    m, out, cells = case.matrices[0], [], []
    if m.description != DESCRIPTIONS[name]:
        out.append((Status.ERROR, f"{name} printed {m.description[:80]!r}, not "
                                  f"{DESCRIPTIONS[name]!r}: not this testcase's evidence"))
    host = kind != "device_to_device"
    rows = 1 if host else count
    if (len(m.rows), m.columns) != (rows, count):
        out.append((Status.FAIL, f"{name}: a {len(m.rows)} x {m.columns} matrix, "
                                 f"{rows} x {count} expected for {count} GPUs"))
    if run.devices is not None and len(run.devices) != m.columns:
        out.append((Status.ERROR, f"{name}: {m.columns} GPU columns, but the device list "
                                  f"names {len(run.devices)} GPUs (mixed output?)"))
    arrow = "<-" if "<-" in m.description else "->"
    for r, row in enumerate(m.rows):
        for c, value in enumerate(row):
            where = f"{name} GPU {c}" if host else f"{name} GPU {r} {arrow} GPU {c}"
            if not host and r == c:
                if value is not None:
                    out.append((Status.ERROR, f"{where}: a figure on the diagonal, where "
                                              "nvbandwidth prints N/A (no copy to itself)"))
            elif value is None:
                out.append((Status.ERROR, f"{where}: N/A, where nvbandwidth always "
                                          "measures") if host else
                           (Status.FAIL, f"{where}: N/A, no peer access between the GPUs"))
            else:
                cells.append((value, where))
    return cells, out


def judge_copy(kind: Kind, run: NvbandwidthRun, p: NvbandwidthParams,
               thresholds: Mapping[str, Threshold], hw: Hardware) -> Judgement:
    spec, t = hw.gpu, thresholds.get(METRIC)
    if spec is None:
        return Judgement(Status.ERROR, "the profile expects no GPU: nothing to judge against")
    if t is None:
        return Judgement(Status.ERROR, f"the profile gives no {METRIC} threshold for "
                                       f"nvbandwidth.{kind}")
    details: dict[str, float | str] = {
        "nvbandwidth_version": run.version, "git_version": run.git_version or "unknown",
        "driver_version": run.driver_version or "unknown",
        "cuda_runtime_version": str(run.cuda_runtime_version or "unknown")}
    findings: list[Finding] = []
    want_form = "json" if p.json_output else "text"
    if run.form != want_form:
        findings.append((Status.ERROR, f"{run.form} output, but the command asked for "
                                       f"{want_form}: not this command's evidence"))
    if run.error:
        findings.append((Status.ERROR, f"nvbandwidth reported: {run.error[:200]}"))
    if run.devices is not None and len(run.devices) != spec.count:
        findings.append((Status.FAIL, f"nvbandwidth lists {len(run.devices)} GPU(s), the "
                                      f"profile expects {spec.count} x {spec.model}"))
    cases, problems = _aligned(run.testcases, asked(kind, p))
    findings += [(Status.ERROR, f"{why}: evidence that does not match the command")
                 for why in problems]
    cells: list[Cell] = []
    for name, case in cases:
        got, found = _cells(kind, name, case, spec.count, run)
        findings += found
        cells += got
        if got:
            low = min(got)
            details[f"{name}_min_gb_s"] = low[0]
            details[f"{name}_min_at"] = low[1].removeprefix(name + " ")
            details[f"{name}_sum_gb_s"] = case.matrices[0].sum_gb_s
    link = link_ceiling(kind, hw)
    for value, where in cells:
        if link is not None and value > link[0] * LIMIT_TOLERANCE:
            findings.append((Status.ERROR, f"{where} {with_unit(value, 'GB/s')} is above the "
                                           f"{with_unit(link[0], 'GB/s')} the profile's link "
                                           f"carries ({link[1]}): implausible evidence"))
            continue
        j = compare(value, t, where)
        if j.status is not Status.PASS:
            findings.append((j.status, j.message))
    findings.sort(key=lambda f: -f[0])
    for i, (status, text) in enumerate(findings[:64], 1):
        details[f"finding{i}"] = f"{status.label}: {text}"
    said = [text for _, text in findings[:_SHOWN]]
    if len(findings) > _SHOWN:
        said.append(f"and {len(findings) - _SHOWN} more (details)")
    if not cells:
        # nothing measured: what the findings say (a waived testcase fails), else an error
        return Judgement(Status.worst(s for s, _ in findings) if findings else Status.ERROR,
                         "; ".join(said) or "no figure measured", expected=band(t),
                         details=details)
    value, where = min(cells)
    j = compare(value, t, f"lowest of {len(cells)} copies ({where})")
    if findings:
        status = Status.worst([j.status, *(s for s, _ in findings)])
        return Judgement(status, "; ".join([j.message, *said]), j.measured, j.unit,
                         j.expected, j.percent_of_limit, details, j.better)
    return Judgement(j.status, j.message, j.measured, j.unit, j.expected, j.percent_of_limit,
                     details, j.better)


def _applies(kind: Kind) -> Callable[[Hardware], str | None]:
    def applies(hw: Hardware) -> str | None:
        if hw.gpu is None:
            return "the profile expects no GPU"
        topo = getattr(hw.gpu.nvlink_topology, "kind", None)
        if kind == "device_to_device" and hw.gpu.count < 2:
            return "one GPU: no GPU pair to copy between"
        if kind == "device_to_device" and topo not in (None, "nvswitch", "none"):
            return (f"nvlink_topology kind {topo}: GPU pairs over different links (NVLink "
                    "and PCIe) cannot share one device-to-device floor")
        return None
    return applies


def _judge(kind: Kind) -> Callable[..., Judgement]:
    def judge(run: NvbandwidthRun, p: NvbandwidthParams, thresholds: Mapping[str, Threshold],
              hw: Hardware) -> Judgement:
        return judge_copy(kind, run, p, thresholds, hw)
    return judge


judge_host_to_device = _judge("host_to_device")
judge_device_to_host = _judge("device_to_host")
judge_device_to_device = _judge("device_to_device")
_WHAT = {"host_to_device": ("host-to-device", "pinned host memory to each GPU, over PCIe"),
         "device_to_host": ("device-to-host", "each GPU to pinned host memory, over PCIe"),
         "device_to_device": ("device-to-device", "every GPU to every other, over NVLink "
                                                  "or PCIe")}

_KINDS: tuple[tuple[Kind, Callable[..., Judgement]], ...] = (
    ("host_to_device", judge_host_to_device), ("device_to_host", judge_device_to_host),
    ("device_to_device", judge_device_to_device))

CHECKS = tuple(
    NodeCheck(name=f"nvbandwidth.{kind}", scope=Scope.NODE,
          tags=frozenset({"gpu", "nvbandwidth", "bandwidth"}),
          description=f"nvbandwidth {_WHAT[kind][0]} copy-engine bandwidth, "
                      f"{_WHAT[kind][1]}: every cell at least the floor (GB/s)",
          params_model=DeviceToDeviceParams if kind == "device_to_device" else
          NvbandwidthParams,
          metrics=frozenset({METRIC}), command=_command(kind), parse=parse_nvbandwidth,
          judge=judge, applies=_applies(kind), baseline=((METRIC, "measured"),),
          better={METRIC: "higher"})
    for kind, judge in _KINDS)

__all__ = ["CHECKS", "DESCRIPTIONS", "DeviceToDeviceParams", "NvbandwidthParams", "asked",
           "device_to_device_command", "judge_copy", "judge_device_to_device",
           "judge_device_to_host", "judge_host_to_device", "link_ceiling"]
