"""What ``disk.health`` finds on one disk, from one smartctl or nvme-cli run: the rules
and their basis (the judge of the whole check, over every disk, is ``checks.storage.disk_health``).

NVMe, from the SMART / Health Information log (NVM Express Base Specification, Log
Identifier 02h), read by either tool:

* every set bit of Critical Warning fails, each named as the specification names it
  (:data:`CRITICAL_WARNING`; bits 7:6 are reserved, and a set reserved bit fails too: the
  controller signals a warning this reading cannot name);
* Media and Data Integrity Errors above 0 fails: the controller counts each unrecovered
  data integrity error (uncorrectable ECC, CRC, LBA tag mismatch), i.e. data it lost;
* Available Spare below Available Spare Threshold fails (the condition of Critical
  Warning bit 0, judged on the figures too); either outside 0 to 100 is implausible;
* Percentage Used at or above the limit fails: 100 by default, where the specification
  says the rated endurance is consumed (``params.percentage_used_limit`` sets another,
  with its basis).

smartctl, besides (smartctl(8), EXIT STATUS: a bit mask, recorded per disk):

* bits 0 to 2 (command line, device open, a SMART command or checksum failed): the health
  could not be read, an ``error`` quoting smartctl's messages;
* bit 3 or ``smart_status.passed`` false ("DISK FAILING"), bit 4 (a pre-failure attribute
  at or below its threshold now) and bit 7 (errors in the self-test log): ``fail``;
* bit 5 (an attribute was at or below its threshold in the past) and bit 6 (the device
  error log holds records): ``warn``;
* ATA attributes (``ata_smart_attributes``): one whose ``when_failed`` is "now" fails,
  "past" warns; raw counts of 5 (reallocated sectors), 197 (current pending sectors) and
  198 (offline uncorrectable sectors) above 0 fail, as smartd(8) reports them by default
  (smartd.conf(5): ``-C 197``, ``-U 198``; a pending or uncorrectable sector is one the
  disk cannot read now). A site whose disks carry reallocated sectors it accepts sets
  ``params.reallocated_sectors_allowed`` with its basis; there is none for 197 and 198.
* Evidence that is not the run asked for is an ``error``: ``smartctl.argv`` other than the
  command, ``device.name`` other than the disk, ``exit_status`` other than the status the
  script saw, a protocol other than ATA or NVMe (SCSI/SAS health is not read), a
  missing health status or attribute table or NVMe log.
"""

from __future__ import annotations

from collections.abc import Sequence

from rackgate.checks.shared.findings import Finding
from rackgate.model import Status
from rackgate.parsers.disk_health import DiskRun
from rackgate.parsers.nvme_smart import NvmeHealth
from rackgate.parsers.smartctl import SmartctlReport

# NVM Express Base Specification, SMART / Health Information log, byte 0 (Critical
# Warning), bits 0 to 5 (bit 5 from revision 1.4); bits 7:6 are reserved.
CRITICAL_WARNING = {
    0: "the available spare capacity has fallen below the threshold",
    1: "a temperature is at or above an over-temperature threshold or at or below an "
       "under-temperature threshold",
    2: "the NVM subsystem reliability has been degraded by significant media-related or "
       "internal errors",
    3: "all of the media has been placed in read-only mode",
    4: "the volatile memory backup device has failed",
    5: "the Persistent Memory Region has become read-only or unreliable",
}
DEFAULT_PERCENTAGE_USED_LIMIT = 100
PERCENTAGE_USED_BASIS = ("NVM Express Base Specification, SMART / Health Information log, "
                         "Percentage Used: 100 means the rated endurance is consumed")

# smartctl(8), EXIT STATUS: bit -> (status, meaning)
EXIT_BITS = {
    0: (Status.ERROR, "the command line did not parse"),
    1: (Status.ERROR, "the device could not be opened, returned no IDENTIFY data, or is "
                      "in a low-power mode"),
    2: (Status.ERROR, "a SMART or other command to the disk failed, or a SMART data "
                      "structure had a checksum error"),
    3: (Status.FAIL, "SMART status check returned DISK FAILING"),
    4: (Status.FAIL, "pre-failure attributes are at or below their thresholds"),
    5: (Status.WARN, "some attributes were at or below their thresholds in the past"),
    6: (Status.WARN, "the device error log contains records of errors"),
    7: (Status.FAIL, "the device self-test log contains records of errors"),
}
UNREADABLE = 0b111  # bits 0 to 2: the health was not read
# ATA attribute ID -> what its raw value counts; smartd.conf(5) -C 197, -U 198 (defaults)
COUNTED = {5: "reallocated sectors", 197: "current pending sectors",
           198: "offline uncorrectable sectors"}
SMARTCTL_ARGS = {"all": ("-a", "-j"), "health": ("-i", "-H", "-A", "-j")}


def nvme_findings(who: str, log: NvmeHealth, used_limit: int) -> list[Finding]:
    """The NVMe SMART / Health log's findings (``who``: "scratch disk /dev/nvme0")."""
    out: list[Finding] = []
    byte = log.critical_warning
    for bit in range(8):
        if byte >> bit & 1:
            what = CRITICAL_WARNING.get(bit, "a reserved bit is set (a warning this reading "
                                             "cannot name)")
            out.append((Status.FAIL, f"{who}: critical warning bit {bit} ({byte:#04x}): "
                                     f"{what}"))
    if log.media_errors > 0:
        out.append((Status.FAIL, f"{who}: {log.media_errors:,} media and data integrity "
                                 "errors (unrecovered: uncorrectable ECC, CRC, LBA tag)"))
    spare, floor = log.available_spare_pct, log.available_spare_threshold_pct
    if spare > 100 or floor > 100:
        out.append((Status.ERROR, f"{who}: available spare {spare} % / threshold {floor} %: "
                                  "normalized percentages are 0 to 100 (implausible)"))
    elif spare < floor:
        out.append((Status.FAIL, f"{who}: available spare {spare} % is below its "
                                 f"threshold {floor} %"))
    used = log.percentage_used_pct
    if used >= used_limit:
        out.append((Status.FAIL, f"{who}: percentage used {used} % reaches the "
                                 f"{used_limit} % limit (the rated endurance is used up)"))
    return out


def _exit_bits(who: str, report: SmartctlReport) -> list[Finding]:
    said = "; ".join(report.messages)[:300]
    out: list[Finding] = []
    for bit, (status, meaning) in EXIT_BITS.items():
        if report.exit_status >> bit & 1:
            tail = f": {said}" if said and status is Status.ERROR else ""
            out.append((status, f"{who}: smartctl exit status {report.exit_status} bit {bit}:"
                                f" {meaning}{tail}"))
    return out


def _ata(who: str, report: SmartctlReport, reallocated_allowed: int) -> list[Finding]:
    if report.ata_attributes is None:
        return [(Status.ERROR, f"{who}: no ata_smart_attributes in smartctl's output: "
                               "cannot judge the ATA attributes (SMART disabled?)")]
    out: list[Finding] = []
    for a in report.ata_attributes:
        label = f"attribute {a.id} {a.name}"
        if a.when_failed == "now":
            out.append((Status.FAIL, f"{who}: {label} value {a.value} is at or below its "
                                     f"threshold {a.thresh} now"))
        elif a.when_failed == "past":
            out.append((Status.WARN, f"{who}: {label} was at or below its threshold "
                                     f"{a.thresh} in the past"))
        allowed = reallocated_allowed if a.id == 5 else 0
        if a.id not in COUNTED:
            continue
        if a.count is None:
            out.append((Status.ERROR, f"{who}: {label}: no count of {COUNTED[a.id]} in its "
                                      "raw value"))
        elif a.count > allowed:
            out.append((Status.FAIL, f"{who}: {label}: {a.count:,} {COUNTED[a.id]}, more "
                                     f"than the {allowed:,} allowed"))
    return out


def smartctl_findings(who: str, run: DiskRun, report: SmartctlReport,
                      argv: Sequence[str], used_limit: int,
                      reallocated_allowed: int) -> list[Finding]:
    """What smartctl's report says of the disk ``run`` asked for with ``argv``."""
    mismatch = []
    if report.argv != tuple(argv):
        mismatch.append(f"its argv {' '.join(report.argv)[:200]!r} is not the command "
                        f"{' '.join(argv)!r}")
    if report.exit_status != run.rc:
        mismatch.append(f"it says it exits with {report.exit_status} but exited with "
                        f"{run.rc}")
    if mismatch:
        return [(Status.ERROR, f"{who}: smartctl's output is not this run's: "
                               f"{'; '.join(mismatch)}")]
    out = _exit_bits(who, report)
    if report.exit_status & UNREADABLE:
        return out
    if report.device_name != run.device:
        return [*out, (Status.ERROR, f"{who}: smartctl reports device "
                                     f"{report.device_name!r}, not {run.device}")]
    if report.smart_passed is None:
        out.append((Status.ERROR, f"{who}: smartctl gives no SMART health status "
                                  "(smart_status): SMART unsupported or disabled?"))
    elif not report.smart_passed:
        out.append((Status.FAIL, f"{who}: SMART overall-health self-assessment: FAILED"))
    if report.protocol == "NVMe":
        if report.nvme is None:
            out.append((Status.ERROR, f"{who}: NVMe device without "
                                      "nvme_smart_health_information_log in the output"))
        else:
            out += nvme_findings(who, report.nvme, used_limit)
    elif report.protocol == "ATA":
        out += _ata(who, report, reallocated_allowed)
    else:
        out.append((Status.ERROR, f"{who}: protocol {report.protocol!r}: rackgate reads the "
                                  "health of ATA and NVMe disks only (not SCSI/SAS)"))
    return out
