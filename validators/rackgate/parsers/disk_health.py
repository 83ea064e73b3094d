"""Parser for ``disk.health``'s script: one smartctl or nvme-cli run per disk the profile
names, each in marked sections (``parsers.marked_sections``).

For each disk the script writes ``### rackgate-disk-health TOOL DEVICE``, the tool's
standard output, ``### rackgate-disk-health rc=N`` (the tool's exit status), then
``### rackgate-disk-health stderr TOOL DEVICE``, the tool's standard error and
``### rackgate-disk-health rc=N`` (cat's); ``### rackgate-disk-health done`` ends it.
TOOL is ``smartctl`` (``parsers.smartctl``) or ``nvme`` (``parsers.nvme_smart``); DEVICE
matches :data:`DEVICE`. A section out of turn, a stderr section for another disk than
the one before it, or output that never says done is a ParseError; so is damaged tool
output. A tool that printed nothing (not installed: rc 127; nvme-cli's failures, which
go to standard error) gives a run without a report, for the judge to name.

>>> runs = parse_disk_health(
...     "### rackgate-disk-health nvme /dev/nvme0\\n"
...     '{"critical_warning":0,"avail_spare":100,"spare_thresh":10,"percent_used":1,'
...     '"media_errors":0}\\n### rackgate-disk-health rc=0\\n'
...     "### rackgate-disk-health stderr nvme /dev/nvme0\\n### rackgate-disk-health rc=0\\n"
...     "### rackgate-disk-health done\\n")
>>> [(r.tool, r.device, r.rc, r.report.percentage_used_pct) for r in runs]
[('nvme', '/dev/nvme0', 0, 1)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from rackgate.parsers import ParseError, marked_sections
from rackgate.parsers.nvme_smart import NvmeHealth, parse_nvme_smart_log
from rackgate.parsers.smartctl import SmartctlReport, parse_smartctl_json

MARK = "### rackgate-disk-health "
Tool = Literal["smartctl", "nvme"]
# The disks a profile may name: a kernel name (NVMe controller or namespace, SCSI disk) or
# a udev /dev/disk/by-id link (its name: letters, digits and . _ : + -, never '/').
DEVICE = (r"/dev/(?:nvme[0-9]{1,4}(?:n[0-9]{1,5})?|sd[a-z]{1,4})"
          r"|/dev/disk/by-id/[A-Za-z0-9][A-Za-z0-9._:+-]{0,199}")
NVME_DEVICE = r"/dev/nvme[0-9]{1,4}(?:n[0-9]{1,5})?|/dev/disk/by-id/nvme-[A-Za-z0-9._:+-]{1,195}"
_SECTION = re.compile(rf"(stderr )?(smartctl|nvme) ({DEVICE})\Z")


@dataclass(frozen=True)
class DiskRun:
    """One tool run on one disk, as the script recorded it."""

    tool: Tool
    device: str
    rc: int  # the tool's exit status
    report: SmartctlReport | NvmeHealth | None  # None: the tool printed nothing to read
    stdout: str  # what it printed, when no report was read from it ("" otherwise)
    stderr: tuple[str, ...]  # its standard error, line by line (blank lines left out)


def _run(tool: str, device: str, rc: int, out: list[str], err: list[str]) -> DiskRun:
    text = "\n".join(out)
    report: SmartctlReport | NvmeHealth | None = None
    if text.strip() and (tool == "smartctl" or rc == 0):
        # smartctl writes its JSON whatever its exit status (the status is in it too);
        # nvme-cli writes the log only when it read it
        where = f"{tool} {device}"
        try:
            report = parse_smartctl_json(text) if tool == "smartctl" else \
                parse_nvme_smart_log(text)
        except ParseError as exc:
            raise ParseError(f"{where}: {exc}") from None
    said = "" if report is not None else text.strip()[:400]
    return DiskRun("smartctl" if tool == "smartctl" else "nvme", device, rc, report, said,
                   tuple(line.rstrip() for line in err if line.strip()))


def parse_disk_health(text: str) -> tuple[DiskRun, ...]:
    """The runs of the disk.health script, in order; ParseError for a broken sequence or
    damaged tool output."""
    sections = list(marked_sections(text, MARK, _SECTION, "disk.health"))
    runs = []
    for i in range(0, len(sections), 2):
        name, out, rc = sections[i]
        head = _SECTION.match(name)
        assert head is not None  # marked_sections matched it
        if head.group(1):
            raise ParseError(f"disk.health output: section {name!r} follows no run of "
                             f"{head.group(2)} on {head.group(3)}")
        if i + 1 >= len(sections) or sections[i + 1][0] != f"stderr {name}":
            got = sections[i + 1][0] if i + 1 < len(sections) else "the end"
            raise ParseError(f"disk.health output: {name!r} is followed by {got!r}, not its "
                             f"'stderr {name}' section")
        _, err, cat_rc = sections[i + 1]
        if cat_rc != 0:
            raise ParseError(f"disk.health output: the standard error of {name!r} could not "
                             f"be read back (rc {cat_rc})")
        runs.append(_run(head.group(2), head.group(3), rc, out, err))
    return tuple(runs)
