"""Every parser of validators/rackgate/parsers that feeds a judge, with the healthy and
faulty tool outputs its family tests use, for the fuzz property tests of issue 28
(tests/unit/test_fuzz_parsers.py) and their large run (bench/fuzz_parsers.py).

A :class:`Subject` is a parser and the judge of its check with the parameters of the
family's degraded tests (the ``TestDegraded...`` classes of tests/unit/checks/, whose
sources and patterns are imported from there); its sources are the healthy outputs those
tests damage, with the lines and numbers the judge reads, and the faulty fixtures the
family's tests judge, each damaged anywhere. :func:`problem` is the oracle:

* a parser answers with a record or a ParseError, never another exception (it propagates);
* a mutant of a faulty source is never judged ``pass``;
* a mutant of a healthy source is judged ``pass`` only when its record equals the healthy
  source's: when the damage changed nothing the judge reads.

Parsers whose records no node-check judge reads (ibv_devinfo, and the fabric listings
judged against a fabric plan: iblinkinfo, ibnetdiscover, the counters, sminfo) are held
to the first rule only (``judge`` None).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import checks.fabric.test_pairwise as pairwise
import checks.fabric.test_ports as ports
import checks.fabric.test_roce_lossless as roce_lossless
import checks.gpu.test_health as gpu_health
import checks.gpu.test_topology as gpu_topology
import checks.nccl.test_local as nccl
import checks.redundancy.test_bonding as bonding
import checks.redundancy.test_multipath as multipath
import checks.redundancy.test_psu as power
import checks.storage.test_disk_health as disk
import checks.storage.test_fio as fio
import checks.test_conformance as conformance
import checks.test_cooling as cooling
import checks.test_identity as identity
import checks.test_mpi as mpi
import test_real_formats_ipmi as ipmi_formats
import test_truth3_power as truth3_power
from checks.test_cooling import DirFetcher
from degrade_helpers import LONG

from rackgate.checks import load_profile
from rackgate.checks.conformance import judge_conformance
from rackgate.checks.cooling import CduParams, PsuRedfishParams, judge_cdu, judge_psu_redfish
from rackgate.checks.fabric.nic_pcie import NicPcieParams, judge_nic_pcie
from rackgate.checks.fabric.pairwise import judge_nodes
from rackgate.checks.fabric.ports import (
    LosslessParams,
    PortsParams,
    judge_lossless,
    judge_port_reading,
    judge_ports,
)
from rackgate.checks.gpu.health import (
    GpuHealthParams,
    SmiTableParams,
    judge_gpu_health,
    judge_smi_table,
)
from rackgate.checks.gpu.nvbandwidth import (
    DeviceToDeviceParams,
    NvbandwidthParams,
    judge_device_to_device,
    judge_host_to_device,
)
from rackgate.checks.gpu.nvlink_errors import NvLinkErrorsParams, judge_nvlink_errors
from rackgate.checks.gpu.topology import (
    AffinityParams,
    DcgmDiagParams,
    NvLinkParams,
    judge_affinity,
    judge_dcgm,
    judge_nvlink,
)
from rackgate.checks.identity import IdentityParams, judge_identity
from rackgate.checks.mpi import judge_allreduce
from rackgate.checks.nccl.fabric import judge_fabric, parse_fabric
from rackgate.checks.nccl.local import NcclParams, judge_nccl
from rackgate.checks.redundancy import (
    MultipathParams,
    PsuIpmiParams,
    judge_bonding,
    judge_multipath,
    judge_psu_ipmi,
)
from rackgate.checks.storage.disk_health import judge_disk_health
from rackgate.checks.storage.fio import judge_rand_read, judge_seq_read
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.bonding import parse_bonding
from rackgate.parsers.conformance import parse_conformance
from rackgate.parsers.dcb import parse_dcb_sections
from rackgate.parsers.dcgm import parse_dcgm_diag
from rackgate.parsers.disk_health import parse_disk_health
from rackgate.parsers.fio import parse_fio_json
from rackgate.parsers.identity import parse_identity
from rackgate.parsers.infiniband import parse_ibstat, parse_ibv_devinfo
from rackgate.parsers.infiniband.counters import parse_ibcounters
from rackgate.parsers.infiniband.iblinkinfo import parse_iblinkinfo_ports
from rackgate.parsers.infiniband.ibnetdiscover import parse_ibnetdiscover_ports
from rackgate.parsers.infiniband.ibstatus import parse_ibstatus
from rackgate.parsers.infiniband.ports import parse_port_reading
from rackgate.parsers.ipmi import parse_ipmi_sdr
from rackgate.parsers.mpi_allreduce import parse_mpi_allreduce
from rackgate.parsers.multipath import parse_multipath_ll
from rackgate.parsers.nccl_tests import parse_nccl_tests
from rackgate.parsers.nic_pcie import parse_nic_pcie
from rackgate.parsers.nvbandwidth import parse_nvbandwidth
from rackgate.parsers.nvidia_smi import parse_nvidia_smi_text, parse_nvidia_smi_xml
from rackgate.parsers.nvidia_smi.table import parse_nvidia_smi_table
from rackgate.parsers.nvlink import parse_nvlink_status
from rackgate.parsers.nvlink.errors import parse_nvlink_errors
from rackgate.parsers.pairwise import parse_pairwise
from rackgate.parsers.perftest import parse_ib_write_bw
from rackgate.parsers.rdma_link import parse_rdma_link
from rackgate.parsers.redfish import parse_redfish_cooling, parse_redfish_power
from rackgate.parsers.sminfo import parse_sminfo
from rackgate.parsers.topology import parse_topo_matrix
from rackgate.profile import GpuSpec, Hardware
from rackgate.programs import redfish as collector

FIX = Path(__file__).parents[1] / "fixtures"
ANY_LINE = r"\S"
# any number standing alone (not part of a word, an address or a version): what the
# notation mutator redraws in a faulty source
ANY_NUMBER = r"(?<![\w.:/-])(-?[0-9]+(?:\.[0-9]+)?)(?![\w.:/])"


@dataclass(frozen=True)
class Source:
    name: str
    text: str
    healthy: bool
    lines: str = ANY_LINE  # the lines the mutators damage
    numbers: tuple[str, ...] = (ANY_NUMBER,)  # the numbers (group 1) they redraw


@dataclass(frozen=True)
class Subject:
    name: str
    parse: Callable[[str], Any]
    judge: Callable[[Any], Status] | None  # None: no node-check judge reads the record
    sources: tuple[Source, ...]
    # the part of the record the judge decides on, where the record holds more (raw text,
    # versions it only reports); None: all of it
    reads: Callable[[Any], Any] | None = None
    long: int = LONG  # the long line's length


def _fio_read(run: Any) -> Any:
    """fio's read judges decide on the jobs' errors and read figures (the version and job
    names are reported; options are read only when the p99 is absent, as in no source)."""
    return tuple((j.error, j.read) for j in run.jobs)


def _pairwise(run: Any) -> Any:
    """The pairwise judge reads each pair's client output with the perftest parser: the
    figures it reads, not the raw text the record keeps."""
    def perftest(text: str) -> Any:
        try:
            return parse_ib_write_bw(text)
        except ParseError as exc:
            return f"ParseError: {exc}"
    return run.nodes, run.rounds, tuple((p.round, p.server, p.client, p.rc, p.client_tasks,
                                         perftest(p.client_text)) for p in run.pairs)


def _no_lines(record: Any) -> Any:
    """``record`` with every ``line`` field 0: where in the output a row stood is for the
    messages, and a blank line or a CR before it moves it without changing it."""
    if is_dataclass(record) and not isinstance(record, type):
        return replace(record, **{f.name: 0 if f.name == "line" else
                                  _no_lines(getattr(record, f.name)) for f in fields(record)})
    if isinstance(record, (tuple, list)):
        return type(record)(_no_lines(x) for x in record)
    if isinstance(record, dict):
        return {k: _no_lines(v) for k, v in record.items()}
    return record


def _nccl(run: Any) -> Any:
    """nccl-tests' versions are reported in the details, not judged; nor are line numbers."""
    return _no_lines(replace(run, tests_version=None, nccl_version=None))


def _nvlink_speeds(status: Any) -> Any:
    """What gpu.nvlink reads of ``nvidia-smi nvlink -s``, less how many decimals a speed was
    printed with: 26.5620 is the speed 26.562 printed finer (the judge compares each speed
    at its own precision, so a finer notation never passes a lower speed)."""
    return tuple((g.index, g.name, g.uuid, g.all_links_inactive,
                  tuple((lk.index, lk.speed_gb_s) for lk in g.links)) for g in status.gpus)


def read(path: str) -> str:
    """A fixture's tool output: what follows its '# ---' line, else without '#' lines."""
    text = (FIX / path).read_text(encoding="utf-8")
    if "\n# ---\n" in text:
        return text.partition("\n# ---\n")[2]
    if path.endswith((".json", ".xml")):
        return text
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


def faulty(*paths: str) -> tuple[Source, ...]:
    return tuple(Source(p, read(p), healthy=False) for p in paths)


def _redfish(scenario: str, kind: str) -> str:
    """A mockup as the collector gathers it (tests/unit/checks/test_cooling.py), one key a line."""
    fetch = DirFetcher(FIX / "redfish" / scenario)
    found = collector.walk_power(fetch, "1") if kind == "power" else \
        collector.walk_cooling(fetch, "1")
    return json.dumps({"collector": "rackgate.redfish", "kind": kind, "resources": found},
                      indent=1) + "\n"


def _nodes(results: Any) -> Status:
    """A pairwise run passes only when every node does."""
    statuses = [r.status for r in results[0]]
    return Status.PASS if statuses and set(statuses) == {Status.PASS} else \
        Status.worst([s for s in statuses if s is not Status.PASS] or [Status.ERROR])


H100 = load_profile("dgx-h100").model.hardware
NVLINK_ERRORS = NvLinkErrorsParams.model_validate(
    load_profile("dgx-h100").model.checks["gpu.nvlink_errors"].params)
# the bridged cards of tests/unit/checks/gpu/test_nvlink_errors.py: a judge per card
# (H100 PCIe, A6000)
BRIDGED_CARDS = {
    "NVIDIA H100 PCIe": GpuSpec(
        model="NVIDIA H100 PCIe", count=2, nvlink_generation=4, nvlinks_per_gpu=12,
        nvlink_gb_s_per_gpu=600, source="issue 29's bridged pair",
        nvlink_topology={"kind": "pairs", "pairs": [[0, 1, 12]], "basis": "three bridges"},
        nvlink_links={"listed": 18, "wired": [0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15],
                      "basis": "the bridges' wiring"}),
    "NVIDIA RTX A6000": GpuSpec(
        model="NVIDIA RTX A6000", count=2, nvlink_generation=3, nvlinks_per_gpu=4,
        nvlink_gb_s_per_gpu=112.5, source="issue 29's bridged pair",
        nvlink_topology={"kind": "pairs", "pairs": [[0, 1, 4]], "basis": "one bridge"})}
# the figures disk.health judges: smartctl's and nvme-cli's health fields, attribute IDs
# and raw counts, exit statuses (in the JSON and the script's rc lines)
DISK_NUMBERS = (r'(?:"(?:critical_warning|available_spare(?:_threshold)?|avail_spare|'
                r'spare_thresh|percentage_used|percent_used|media_errors|exit_status|id|'
                r'value)" ?: ?"?|rc=)([0-9]+)')
_DGX = load_profile("dgx-h100")


def _nvbw(name: str, judge: Callable[..., Any], params: type[NvbandwidthParams]
          ) -> Callable[[Any], Status]:
    """The dgx-h100 profile's nvbandwidth check ``name``, asking for the record's own form
    (text or --json: the form the command asked for is tested in checks/gpu/test_nvbandwidth.py)."""
    section = _DGX.check(name)
    assert section is not None

    def judged(run: Any) -> Status:
        p = params.model_validate({**section.params, "json_output": run.form == "json"})
        status: Status = judge(run, p, section.thresholds, H100).status
        return status
    return judged


def _nvbandwidth(run: Any) -> Any:
    """What the nvbandwidth judges read: the form, how many GPUs the list names, the
    testcases; not the versions and names they only report, nor line numbers."""
    return _no_lines((run.form, None if run.devices is None else len(run.devices),
                      run.testcases, run.error))


NVBW_LINES = r"^(?: ?[0-9]+ .*|SUM .*|Running .*|Device .*|memcpy .*|Waived.*)$"
# fabric.ports' port probe (issue 29): each reader's output behind the probe's header; the
# lines and numbers its judge reads (states with their codes, rates, LIDs)
PROBE_LINES = r"\S"
PROBE_NUMBERS = (r"(?:state|phys state):\s+([0-9]+): ", r"rate:\s+([0-9]+) Gb",
                 r"\(([0-9]+)\)$", r"(?:Rate|port_lid|sm_lid): +\t*([0-9]+)",
                 r'"(?:lid|sm_lid|port|lmc|ifindex)":([0-9]+)')
IBSTAT_PROBE = ('### rackgate-ib-ports {"argv": ["ibstat"], "path": "/usr/sbin/ibstat", '
                '"not_found": []}\n')


def _accepted(status: Status) -> Status:
    """``pass`` for what a node's verdict accepts (pass, or the warn of a port whose rate
    rdma link cannot print, under unconfirmed_rate: warn); any other status as it is."""
    return Status.PASS if status in (Status.PASS, Status.WARN) else status

IPMI_READ = r"^(PSU1 Status|PSU2 Status|PSU1 Power In|PS Redundancy) "
IPMI_NUMBERS = (r"\| ([0-9]+) Watts", r"^(?:PSU|PS Red)[^|]*\| ([0-9A-F]{2}h) \|",
                r"^(?:PSU|PS Red)[^|]*\|[^|]*\|[^|]*\| +([0-9]+)\.[0-9]+ \|",
                r"^(?:PSU|PS Red)[^|]*\|[^|]*\|[^|]*\| +[0-9]+\.([0-9]+) \|")

# issue 29 r2: four supplies in six bays (two Absent), read with both status rules
REDFISH_RULES = truth3_power.params(**truth3_power.ASSUME_ENABLED, **truth3_power.ASSUME_OK)
REDFISH_HW4 = truth3_power.hw("N+2", 4)
_EMPTY = truth3_power.EMPTY_5_6
REDFISH_BAYS = (
    ("four supplies, two empty bays", _EMPTY, True),
    ("health without state, two empty bays",
     {**_EMPTY, **{f"Bay{n}": {"Health": "OK"} for n in range(1, 5)}}, True),
    ("state without health, two empty bays",
     {**_EMPTY, **{f"Bay{n}": {"State": "Enabled"} for n in range(1, 5)}}, True),
    ("bay2 critical beside empty bays", {**_EMPTY, "Bay2": {"Health": "Critical"}}, False),
    ("bay3 warning without health", {**_EMPTY, "Bay3": {"State": "Enabled",
                                                        "HealthRollup": "Warning"}}, False),
    ("bay4 offline without health", {**_EMPTY, "Bay4": {"State": "UnavailableOffline"}}, False),
    ("three of four present", {**_EMPTY, "Bay4": {"State": "Absent"}}, False),
)

SUBJECTS: tuple[Subject, ...] = (
    Subject("ipmi", parse_ipmi_sdr, lambda r: judge_psu_ipmi(
        r, PsuIpmiParams(), {}, power.HW2).status, (
        Source("elist healthy", power.IPMI, True, IPMI_READ, IPMI_NUMBERS),
        Source("ipmi_sim elist", "\n".join(power.IPMI.splitlines()[:3]) + "\n", True,
               IPMI_READ, IPMI_NUMBERS),
        Source("sensor healthy", ipmi_formats.IPMITOOL_SENSOR, True, IPMI_READ,
               (r"\| ([0-9]+\.[0-9]+) +\| Watts",)),
        Source("freeipmi healthy", ipmi_formats.FREEIPMI, True,
               r"^[0-9]+ +\| (PSU1 Status|PSU2 Status|PSU1 Power In|PS Redundancy) ",
               (r"\| ([0-9]+\.[0-9]+) +\| W", r"^([0-9]+) +\| P")),
        Source("hp ilo healthy", read("redundancy/ipmi-elist-hp-ilo-psu-watts-healthy.txt"),
               True, r"^Power Suppl", (r"\| ([0-9]+) Watts",)),
        *(Source(f"freeipmi {name}", read(f"redundancy/ipmi-freeipmi-sensors-{name}.txt"), True,
                 r"^[0-9]+,(PSU1 Status|PSU2 Status|PSU1 Power In|PS Redundancy),",
                 (r",([0-9]+\.[0-9]+),W", r"^([0-9]+),P", r",([0-9]+\.[0-9]+),N/A,'OK'$"))
          for name in ("csv-noheader-healthy-2psu", "thresholds-csv-noheader-healthy-2psu")),
        *faulty(*(f"redundancy/{p.name}" for p in sorted((FIX / "redundancy").glob("ipmi-*"))
                  if "healthy" not in p.name)))),
    Subject("redfish power", parse_redfish_power, lambda r: judge_psu_redfish(
        r, PsuRedfishParams(), {}, power.HW6).status, (
        Source("healthy mockup", _redfish("healthy", "power"), True, ANY_LINE,
               (rf'"(?:{power.READ_NUMBERS})": (-?[0-9.]+)',)),
        *(Source(s, _redfish(s, "power"), False) for s in (
            "psu-absent", "psu-collection-expanded-bay3-offline",
            "psu-standby-spare-bay6-critical", "psu-capacity-not-a-number")))),
    Subject("redfish power, empty bays and the profile's status rules", parse_redfish_power,
            lambda r: judge_psu_redfish(r, REDFISH_RULES, {}, REDFISH_HW4).status, (
        *(Source(name, truth3_power.collected(truth3_power.bays(bays)), healthy, ANY_LINE,
                 (rf'"(?:{power.READ_NUMBERS})": (-?[0-9.]+)',))
          for name, bays, healthy in REDFISH_BAYS),)),
    Subject("redfish cooling", parse_redfish_cooling, lambda r: judge_cdu(
        r, CduParams(), cooling.LIMITS).status, (
        Source("healthy mockup", cooling.DEGRADABLE_COOLING, True, ANY_LINE,
               (r'"(?:Reading|Members@odata\.count)": (-?[0-9.]+)',)),
        *(Source(s, _redfish(s, "cooling"), False) for s in ("leak", "flow-low")))),
    Subject("nvidia-smi xml", parse_nvidia_smi_xml, lambda r: judge_gpu_health(
        r, GpuHealthParams(), {}, gpu_health.H100).status, (
        Source("h100 8 gpus", gpu_health.XML, True, gpu_health.XML_LINES,
               (rf"<(?:{gpu_health.XML_TAGS})>(-?[0-9.]+)",)),
        *faulty(*(f"gpu/h100-{n}.xml" for n in (
            "7-of-8-gpus", "ecc-uncorrectable", "hw-slowdown", "pcie-x8-downtrained",
            "persistence-disabled", "power-limit-lowered", "remap-failure", "remap-pending",
            "reset-required", "truncated"))))),
    Subject("nvidia-smi text", parse_nvidia_smi_text, lambda r: judge_gpu_health(
        r, GpuHealthParams(), {}, gpu_health.H100_TWO).status, (
        Source("h100 2 gpus", gpu_health.TEXT, True, gpu_health.TEXT_LINES,
               (rf"^\s*(?:{gpu_health.TEXT_LABELS})\s*: (-?[0-9.]+)",)),
        *faulty("gpu/h100-2gpu-filtered-d-performance-truncated.txt"))),
    # issue 29: plain nvidia-smi, the summary table (the index and ECC count are read)
    Subject("nvidia-smi table", parse_nvidia_smi_table, lambda r: judge_smi_table(
        r, SmiTableParams(), {}, H100).status, (
        Source("h100 8 gpus r570", read("gpu/nvidia-smi-table-8xh100-r570-healthy.txt"), True,
               ANY_LINE, (r"^\|\s+([0-9]+)  NVIDIA", r"Off \|\s+([0-9]+) \|$")),
        *faulty(*(f"gpu/nvidia-smi-table-{n}.txt" for n in (
            "8xh100-r570-gpu3-temp-err", "8xh100-r580-gpu5-device-handle-unknown-error",
            "8xa40-r525-gpu4-all-err", "no-devices-found")))),
        lambda t: _no_lines(replace(t, driver_version=None, cuda_version=None))),
    Subject("nvlink", parse_nvlink_status, lambda r: judge_nvlink(
        r, NvLinkParams(), {}, gpu_topology.HW).status, (
        Source("h100 18 links", gpu_topology.NVL, True, r"^\s*(?:GPU|Link) ",
               (r"Link [0-9]+: ([0-9.]+) GB/s",)),
        *faulty(*(f"topology/nvlink-{n}.txt" for n in (
            "7gpus-listed", "gpu2-link3-slow", "gpu5-link7-inactive",
            "gpu6-all-links-inactive")))), _nvlink_speeds),
    Subject("nvlink bridged", parse_nvlink_status, lambda r: judge_nvlink(
        r, NvLinkParams(), {}, Hardware(gpu=BRIDGED_CARDS.get(
            r.gpus[0].name, BRIDGED_CARDS["NVIDIA H100 PCIe"]))).status, (
        Source("2 h100 pcie 3 bridges", read("topology/nvlink-2x-h100-pcie-3-bridges-healthy.txt"),
               True, r"^\s*(?:GPU|Link) ", (r"Link [0-9]+: ([0-9.]+) GB/s",)),
        Source("2 rtx a6000", read("topology/nvlink-2x-rtx-a6000-bridge-healthy.txt"), True,
               r"^\s*(?:GPU|Link) ", (r"Link [0-9]+: ([0-9.]+) GB/s",)),
        *faulty("topology/nvlink-2x-h100-pcie-3-bridges-gpu1-link7-inactive.txt",
                "topology/nvlink-2x-rtx-a6000-bridge-gpu0-link2-half-rate.txt")),
        _nvlink_speeds),
    Subject("nvlink errors", parse_nvlink_errors, lambda r: judge_nvlink_errors(
        r, NVLINK_ERRORS, {}, H100).status, (
        Source("h100 18 links", read("topology/nvlink-errors-h100-18links-healthy.txt"), True,
               r"^\s*(?:GPU|Link) ", (r"Errors: ([0-9]+)$",)),
        *faulty(*(f"topology/nvlink-errors-{n}.txt" for n in (
            "gpu3-link5-replay-crc", "gpu6-link11-recovery", "7gpus-listed"))))),
    Subject("topo", parse_topo_matrix, lambda r: judge_affinity(
        r, AffinityParams(), {}, gpu_topology.HW).status, (
        Source("8 gpus 8 nics", gpu_topology.TOPO, True, r"^(?:GPU|NIC)[0-9]+\t", (r"NV([0-9]+)",)),
        *faulty(*(f"topology/topo-{n}.txt" for n in (
            "7gpus-gpu7-missing", "gpu1-nic-node", "gpu3-nic-sys", "missing-nvlink-pair"))))),
    Subject("dcgm", parse_dcgm_diag, lambda r: judge_dcgm(
        r, DcgmDiagParams(), {}, gpu_topology.HW).status, (
        Source("r2 pass", gpu_topology.DCGM, True, ANY_LINE, (r'"entity_id": ([0-9]+)',)),
        *faulty(*(f"topology/dcgm-diag-{n}" for n in (
            "r1-all-skip.json", "r2-memory-fail.json", "r2-pcie-warn.json",
            "r2-v3.3-text-gpu3-memory-fail.txt", "r2-v4-text-gpu3-memory-fail.txt"))))),
    # level 1 (issue 29): node-level Deployment results, judged at the level they are
    Subject("dcgm level 1", parse_dcgm_diag, lambda r: judge_dcgm(
        r, DcgmDiagParams(level=1), {}, gpu_topology.HW).status, (
        Source("r1 v3 json", read("topology/dcgm-diag-r1-v3-json-healthy.json"), True),
        Source("r1 v3.3 text", read("topology/dcgm-diag-r1-v3.3-text-healthy.txt"), True),
        Source("r1 v4 json", read("topology/dcgm-diag-r1-v4-json-healthy.json"), True,
               ANY_LINE, (r'"entity_id": ([0-9]+)',)),
        *faulty("topology/dcgm-diag-r1-v3-json-gpu3-row-remap-fail.json",
                "topology/dcgm-diag-r1-v3.3-text-gpu3-row-remap-fail.txt")),
        lambda d: replace(d, version=None)),  # the version is reported, not judged
    Subject("mpi allreduce", parse_mpi_allreduce, lambda r: judge_allreduce(
        r, mpi.PARAMS, mpi.T, mpi.HW, nodes=mpi.NODES).status, (
        Source("2 nodes", mpi.HEALTHY, True, ANY_LINE, (r'": (-?[0-9.]+)',)),
        *faulty("mpi/allreduce-2nodes-wrong-elements.txt",
                "mpi/allreduce-no-rank-started.txt"))),
    Subject("nccl-tests", parse_nccl_tests, lambda r: judge_nccl(
        r, NcclParams(), nccl.NODE_T, nccl.HW).status, (
        Source("8 h100 text", nccl.HEALTHY, True, nccl.ROW.pattern,
               (r"^\s*[0-9]+\s+[0-9]+\s+\w+\s+\w+\s+-?[0-9]+\s+([0-9.]+)",)),
        Source("8 h100 json", nccl.JSON, True, ANY_LINE,
               (r'"(?:time|alg_bw|bus_bw|size|count)": (-?[0-9.]+)',)),
        *faulty(*(f"nccl/{n}.txt" for n in (
            "allreduce-8xh100-nvlink-gpu3-slow", "allreduce-8xh100-wrong-elements",
            "allreduce-8xh100-init-failed-no-rows", "allreduce-8xh100-truncated-mid-row",
            "allreduce-mpirun-not-enough-slots", "allreduce-8xv100-v1-res-out-of-bounds-failed",
            "allreduce-2node-srun-task-exited-mid-table")))), _nccl),
    Subject("nccl rails", parse_fabric, lambda r: judge_fabric(
        r, nccl.RAILS, nccl.FABRIC.thresholds, nccl.HW).status, (
        Source("8 rails", nccl.PER_RAIL, True, rf"^###|{nccl.ROW.pattern}",
               (r"^\s*[0-9]+\s+([0-9]+)",)),
        Source("one rail at hdr", nccl.PER_RAIL.replace(
            nccl.RAIL.rstrip(), read("nccl/allreduce-2node-rail-at-hdr-degraded.txt").rstrip(),
            1), False)), _no_lines),
    Subject("pairwise", parse_pairwise, lambda r: _nodes(judge_nodes(
        r, pairwise.PARAMS_64K, {}, pairwise.HW, pairwise.NODES, "evidence/x.out")), (
        Source("4 nodes", pairwise.RUN, True, r"^(?:### |1:\s+[0-9]+\s+[0-9])",
               (r"^1:\s+65536\s+[0-9]+\s+([0-9.]+)",)),
        *(Source(n, pairwise.pairwise_output(pairwise.perftest(n)), False) for n in (
            "ib_write_bw-ndr-port-at-hdr-degraded.txt", "ib_write_bw-client-couldnt-connect.txt",
            "ib_write_bw-sweep-truncated.txt"))), _pairwise),
    Subject("ibstat", parse_ibstat, lambda r: judge_ports(
        r, PortsParams(), {}, ports.DGX_IB_AND_STORAGE).status, (
        Source("8 ndr", ports.IBSTAT, True, ANY_LINE,
               (r"(?:Rate|Base lid|SM lid|Number of ports): ([0-9]+)",)),
        *faulty(*(f"infiniband/ibstat-{n}.txt" for n in (
            "empty-no-hca", "hdr-instead-of-ndr", "initializing-no-sm-mlx5_10",
            "port-down-mlx5_3"))))),
    Subject("dcb", parse_dcb_sections, lambda r: judge_lossless(
        r, LosslessParams(interfaces=["eth2"]), {}).status, (
        Source("pfc and app", roce_lossless.DCB, True, ANY_LINE, (r"(?:rc=|\[)([0-9]+)",)),
        *(Source(n, roce_lossless.DCB.replace(read(f"infiniband/{good}").strip(),
                                      read(f"infiniband/{n}").strip()), False)
          for n, good in (("dcb-pfc-disabled.json", "dcb-pfc-prio3-only.json"),
                          ("dcb-pfc-prio3-and-4.json", "dcb-pfc-prio3-only.json"),
                          ("dcb-app-no-dscp-pcp-trust.json", "dcb-app-dscp26-to-prio3.json"))))),
    Subject("bonding", parse_bonding, lambda r: judge_bonding(
        r, bonding.BONDS, {}, ports.DGX_IB_AND_STORAGE).status, (
        Source("lacp and active-backup", bonding.BONDING, True,
               r"^\s*(?:Bonding Mode|MII Status|Slave Interface|Aggregator ID|"
               r"Partner Mac Address|system mac address|Currently Active Slave):",
               (r"(?:Aggregator ID|Link Failure Count|Speed): ([0-9]+)",)),
        *faulty(*(f"redundancy/bonding-{n}.txt" for n in (
            "active-backup-member-down", "lacp-member-down", "lacp-no-partner",
            "wrong-mode-round-robin", "no-link-monitoring", "none",
            "lacp-member-not-aggregated", "lacp-no-active-aggregator"))))),
    Subject("fio seq read", parse_fio_json, lambda r: judge_seq_read(
        r, None, fio.READ_BW).status, (  # type: ignore[arg-type]
        Source("seq read", fio.SEQ, True, fio.FIO_LINES, (fio.FIO_NUMBERS,)),
        *faulty("fio/seq-read-open-failed-enoent.json", "fio/write-only-no-read-data.json")),
        _fio_read),
    Subject("fio rand read", parse_fio_json, lambda r: judge_rand_read(
        r, None, fio.RAND).status, (  # type: ignore[arg-type]
        Source("rand read", fio.RANDREAD, True, fio.FIO_LINES, (fio.FIO_NUMBERS,)),
        *faulty("fio/rand-read-4k-clat-percentiles-off.json",
                "fio/rand-read-4k-gtod-reduce-no-percentiles.json")), _fio_read),
    Subject("multipath", parse_multipath_ll, lambda r: judge_multipath(
        r, MultipathParams(lun_count=2), {}, multipath.HW_TWO_PATHS).status, (
        Source("2 maps 2 paths", multipath.MULTIPATH, True,
               r"dm-[0-9]|[0-9]+:[0-9]+:[0-9]+:[0-9]+ ", (r"(?:prio=|`- )([0-9]+)",)),
        *faulty(*(f"redundancy/multipath-{n}.txt" for n in (
            "mpatha-single-path", "mpathb-path-failed-faulty", "no-maps",
            "mpatha-path-line-duplicated", "wwid-with-spaces-path-failed-faulty",
            # multipath -l (no checker run): at best a warn, never a pass
            "l-healthy-checker-not-run", "l-path-failed-checker-not-run"))))),
    Subject("identity", parse_identity, lambda r: judge_identity(
        r, IdentityParams(), {}).status, (
        Source("server with dmi", identity.IDENTITY, True, r"=", ()),
        *faulty("identity/vm-without-dmi.txt"))),
    Subject("conformance", parse_conformance, lambda r: judge_conformance(
        r, conformance.GPU_NODE, {}).status, (
        Source("gpu node", conformance.CONFORMANCE, True, r"=", (r"acs_enabled_bridges=([0-9]+)",)),
        *faulty("conformance/gpu-node-fabricmanager-failed-acs-on.txt",
                "conformance/demo-container-chrony-inactive.txt"))),
    Subject("nic pcie", parse_nic_pcie, lambda r: judge_nic_pcie(
        r, NicPcieParams(), {}, H100).status, (
        Source("dgx h100 12 ports",
               read("topology/nic-pcie-dgx-h100-12-ports-gen5-x16-healthy.txt"), True, r"=",
               (r"=([0-9]+(?:\.[0-9]+)?)$",)),
        *faulty("topology/nic-pcie-mlx5-4-x8-downtrained.txt"))),
    Subject("disk health", parse_disk_health, lambda r: judge_disk_health(
        r, disk.params(*disk.HEALTHY_PARAMS), {}).status, (
        Source("nvme sata and nvme-cli", disk.HEALTHY, True, ANY_LINE, (DISK_NUMBERS,)),
        *(Source(n, disk.HEALTHY.replace(disk.HEALTHY_NVME, disk.smartctl_section(
            n, "/dev/nvme0")), False) for n in (
            "smartctl-nvme-spare-low-reliability-degraded-media-errors.json",
            "smartctl-nvme-endurance-used-100.json")),
        *(Source(n, disk.HEALTHY.replace(disk.HEALTHY_SSD, disk.smartctl_section(
            n, "/dev/sda")), False) for n in (
            "smartctl-sata-hdd-pending-offline-uncorrectable.json",
            "smartctl-sata-hdd-failing-reallocated-now.json",
            "smartctl-open-failed-no-such-device.json")),
        Source("nvme-cli read-only", disk.HEALTHY.replace(disk.NVME_CLI_V2, disk.section(
            "nvme", "/dev/nvme1n1", 0, disk.fixture(
                "nvme-cli-2.11-smart-log-read-only-reliability-degraded.json"))), False))),
    Subject("port probe", parse_port_reading, lambda r: judge_port_reading(
        r, PortsParams(), {}, ports.DGX_IB_AND_STORAGE).status, (
        Source("ibstat 8 ndr", IBSTAT_PROBE + ports.IBSTAT, True, PROBE_LINES, PROBE_NUMBERS),
        Source("ibstatus 8 ndr", read("infiniband/probe-ibstatus-8x-ndr-healthy.txt"), True,
               PROBE_LINES, PROBE_NUMBERS),
        Source("ibv_devinfo -v 8 ndr", read("infiniband/probe-ibv_devinfo-v-8x-ndr-healthy.txt"),
               True, PROBE_LINES, PROBE_NUMBERS),
        Source("ibstat port down", IBSTAT_PROBE + read("infiniband/ibstat-port-down-mlx5_3.txt"),
               False),
        *faulty(*(f"infiniband/probe-{n}.txt" for n in (
            "ibstatus-port-down-mlx5_3", "ibstatus-hdr-instead-of-ndr-mlx5_9",
            "ibv_devinfo-v-port-down-mlx5_3", "rdma-8x-ndr-healthy"))))),
    Subject("port probe rdma", parse_port_reading, lambda r: _accepted(judge_port_reading(
        r, PortsParams(unconfirmed_rate="warn"), {}, ports.DGX_IB_AND_STORAGE).status), (
        Source("rdma 12 ports", read("infiniband/probe-rdma-8x-ndr-healthy.txt"), True,
               PROBE_LINES, PROBE_NUMBERS),
        *faulty("infiniband/probe-rdma-port-down-mlx5_3.txt"))),
    Subject("ibstatus", parse_ibstatus, None, (
        Source("8 ndr", read("infiniband/probe-ibstatus-8x-ndr-healthy.txt").partition("\n")[2],
               True),)),
    Subject("rdma link", parse_rdma_link, None, (
        Source("text -d", read("infiniband/rdma-d-link-show-port-down-mlx5_3.txt"), True),
        Source("json", read("infiniband/probe-rdma-8x-ndr-healthy.txt").partition("\n")[2],
               True))),
    Subject("ibv_devinfo", parse_ibv_devinfo, None, (
        Source("ndr mlx5_3 down", ports.DEVINFO, True),)),
    Subject("iblinkinfo", parse_iblinkinfo_ports, None, tuple(
        Source(p.name, read(f"fabric/iblinkinfo-l/{p.name}"), True)
        for p in sorted((FIX / "fabric" / "iblinkinfo-l").glob("*.txt")))),
    Subject("ibnetdiscover", parse_ibnetdiscover_ports, None, tuple(
        Source(p.name, read(f"fabric/ibnetdiscover-p/{p.name}"), True)
        for p in sorted((FIX / "fabric" / "ibnetdiscover-p").glob("*.txt")))),
    Subject("ibcounters", parse_ibcounters, None, tuple(
        Source(p.name, read(f"fabric_counters/{p.name}"), True)
        for p in sorted((FIX / "fabric_counters").glob("errors-*.txt"))
        if p.name != "errors-no-sm.txt")),  # ibqueryerrors' failure: a ParseError as it is
    Subject("sminfo", parse_sminfo, None, tuple(
        Source(p.name, read(f"fabric_counters/{p.name}"), True)
        for p in sorted((FIX / "fabric_counters").glob("sm-*.txt")))),
    Subject("nvbandwidth host", parse_nvbandwidth, _nvbw(
        "nvbandwidth.host_to_device", judge_host_to_device, NvbandwidthParams), (
        Source("8 h100 text", read("nvbandwidth/h2d-8xh100-v0.8-healthy.txt"), True,
               NVBW_LINES),
        Source("8 h100 json", read("nvbandwidth/h2d-8xh100-v0.8-healthy.json"), True),
        *faulty(*(f"nvbandwidth/h2d-{n}.txt" for n in (
            "8xh100-gpu5-x8-degraded", "8xh100-gpu2-above-link", "7xh100-gpu7-missing")))),
        _nvbandwidth),
    Subject("nvbandwidth device", parse_nvbandwidth, _nvbw(
        "nvbandwidth.device_to_device", judge_device_to_device, DeviceToDeviceParams), (
        Source("8 h100 text", read("nvbandwidth/d2d-8xh100-v0.8-read-write-healthy.txt"),
               True, NVBW_LINES),
        Source("8 h100 json", read("nvbandwidth/d2d-8xh100-v0.8-read-write-healthy.json"),
               True),
        *faulty(*(f"nvbandwidth/d2d-8xh100-{n}" for n in (
            "gpu2-gpu3-no-peer-access.txt", "gpu6-half-links-degraded.txt",
            "v0.8-waived.txt", "v0.8-write-error.json")))), _nvbandwidth),
)


def judged(subject: Subject, text: str) -> tuple[Status, Any]:
    """The status of ``text`` and its record (None after a ParseError, which is ``error``);
    any other exception propagates."""
    try:
        record = subject.parse(text)
    except ParseError:
        return Status.ERROR, None
    return (subject.judge(record) if subject.judge else Status.ERROR), record


@functools.cache
def _reads(subject: str, source: str) -> Any:
    s = next(x for x in SUBJECTS if x.name == subject)
    record = s.parse(next(x for x in s.sources if x.name == source).text)
    return s.reads(record) if s.reads else record


def problem(subject: Subject, source: Source, mutant: str) -> str | None:
    """None when ``mutant`` of ``source`` is judged as it must be, else what is wrong."""
    status, record = judged(subject, mutant)
    if status is not Status.PASS:
        return None
    if not source.healthy:
        return f"{subject.name}: a mutant of the faulty {source.name} passed"
    if (subject.reads(record) if subject.reads else record) == _reads(subject.name, source.name):
        return None  # nothing the judge reads changed
    return f"{subject.name}: a mutant of {source.name} that changed what the judge reads passed"


def sources() -> list[tuple[Subject, Source]]:
    return [(s, src) for s in SUBJECTS for src in s.sources]


__all__ = ["SUBJECTS", "Source", "Subject", "judged", "problem", "sources"]
