"""The node items: ``ib_ports`` (sysfs), ``mounts`` (/proc/self/mountinfo), ``memlock``
(/proc/<slurmd>/limits) and ``systemd_units`` (systemctl). Pure: text in, result out.

Formats, as their owners publish them:

- ``/sys/class/infiniband/<dev>/ports/<n>/state`` is "<number>: <name>", e.g. "4: ACTIVE",
  and ``rate`` "<Gb/s> Gb/sec (<width> <speed>)", e.g. "400 Gb/sec (4X NDR)" (the Linux
  kernel's Documentation/ABI/stable/sysfs-class-infiniband);
- ``/proc/self/mountinfo``: one mount per line, "ID parent major:minor root mount-point
  options [optional fields] - fstype source super-options", with space, tab, newline and
  backslash in paths written as octal escapes (proc_pid_mountinfo(5));
- ``/proc/<pid>/limits``: a table with the row "Max locked memory  <soft>  <hard>  bytes",
  each limit a number or "unlimited" (proc_pid_limits(5));
- ``systemctl is-active U...`` prints one state per unit, in order; ``systemctl --failed
  --plain --no-legend`` one unit per line, its name first (systemctl(1)).

Why slurmd's memlock: slurmd forks slurmstepd, which starts the job's tasks, so they
inherit slurmd's limits; SLURM's PropagateResourceLimits may then set the submitting
shell's soft limit, but never above slurmd's hard limit. So slurmd's soft and hard limits
must both reach the minimum (RDMA registers memory it locks: "unlimited" is usual).

>>> judge_ib_port("mlx5_0", 1, 400.0, "4: ACTIVE\\n", "400 Gb/sec (4X NDR)\\n")
'mlx5_0/1: 4: ACTIVE at 400 Gb/s'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rackgate.health import ItemResult, error, failed, passed
from rackgate.health.config import UNLIMITED, Mount

ACTIVE = frozenset({"4: ACTIVE"})  # the only port state that passes
ACTIVE_UNITS = frozenset({"active"})  # the only unit state that passes
SYSTEMCTL_FAILED = ["systemctl", "--failed", "--plain", "--no-legend", "--no-pager", "--full"]
_RATE = re.compile(r"(?P<gbps>\d+(?:\.\d+)?) Gb/sec\b")
_MEMLOCK = re.compile(r"^Max locked memory\s+(?P<soft>\S+)\s+(?P<hard>\S+)\s+bytes\s*$", re.M)
_OCTAL = re.compile(r"\\([0-7]{3})")


class PortProblem(ValueError):
    """A port that is not ACTIVE at its rate, or whose files could not be read (the message
    says which); ``evidence`` is True when the files were missing or unreadable."""

    def __init__(self, message: str, evidence: bool = False) -> None:
        super().__init__(message)
        self.evidence = evidence


def judge_ib_port(device: str, port: int, rate_gbps: float, state: str | None,
                  rate: str | None) -> str:
    """The port's line when it is ACTIVE at ``rate_gbps``, else PortProblem saying why."""
    where = f"{device}/{port}"
    if state is None or rate is None:
        raise PortProblem(f"{where}: no sysfs port (state/rate unreadable)", evidence=True)
    state, rate = state.strip(), rate.strip()
    if state not in ACTIVE:
        raise PortProblem(f"{where}: state {state!r}, expected 4: ACTIVE")
    m = _RATE.match(rate)
    if m is None:
        raise PortProblem(f"{where}: rate {rate!r} is not '<n> Gb/sec (...)'", evidence=True)
    if float(m["gbps"]) != rate_gbps:
        raise PortProblem(f"{where}: rate {m['gbps']} Gb/s, expected {rate_gbps:g}")
    return f"{where}: 4: ACTIVE at {rate_gbps:g} Gb/s"


def judge_ib_ports(problems: Sequence[PortProblem], count: int) -> ItemResult:
    """Every configured port's problem (none: pass); a missing port is evidence missing."""
    if not problems:
        return passed("ib_ports", f"{count} ports ACTIVE at their rate")
    why = "; ".join(str(p) for p in problems)
    if all(p.evidence for p in problems):
        return error("ib_ports", why)
    return failed("ib_ports", why)


@dataclass(frozen=True)
class MountEntry:
    mount_point: str
    fstype: str
    source: str


def _unescape(field: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m[1], 8)), field)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """/proc/self/mountinfo -> its mounts, in order; ValueError names a line without " - ".

    >>> parse_mountinfo("36 35 98:0 / /mnt/my\\\\040disk rw,noatime master:1 - ext3 "
    ...                 "/dev/root rw,errors=continue")
    [MountEntry(mount_point='/mnt/my disk', fstype='ext3', source='/dev/root')]
    """
    mounts = []
    for line in text.splitlines():
        if not line.strip():
            continue
        head, sep, tail = line.partition(" - ")
        fields, after = head.split(), tail.split()
        if not sep or len(fields) < 6 or len(after) < 2:
            raise ValueError(f"mountinfo line {line[:120]!r} is not "
                             "'ID parent dev root mount-point options ... - fstype source ...'")
        mounts.append(MountEntry(_unescape(fields[4]), after[0], _unescape(after[1])))
    return mounts


def judge_mounts(mounts: Sequence[MountEntry], required: Sequence[Mount]) -> ItemResult:
    """Each required path mounted with its fstype (the last mount on a path is the one seen).

    >>> judge_mounts([MountEntry("/scratch", "nfs4", "srv:/x")], [Mount("/scratch", "lustre")]).why
    '/scratch: fstype nfs4 (from srv:/x), expected lustre'
    """
    if not required:
        return passed("mounts", "no mount required")
    top = {m.mount_point: m for m in mounts}
    bad = []
    for want in required:
        have = top.get(want.path)
        if have is None:
            bad.append(f"{want.path}: not mounted (expected {want.fstype})")
        elif have.fstype != want.fstype:
            bad.append(f"{want.path}: fstype {have.fstype} (from {have.source[:60]}), "
                       f"expected {want.fstype}")
    if bad:
        return failed("mounts", "; ".join(bad))
    return passed("mounts", f"{len(required)} mounts present with their fstype")


def parse_memlock(text: str) -> tuple[int, int]:
    """The "Max locked memory" soft and hard limits in bytes, UNLIMITED for "unlimited".

    >>> parse_memlock("Limit  Soft Limit  Hard Limit  Units\\n"
    ...               "Max locked memory         8388608              unlimited            bytes")
    (8388608, -1)
    """
    m = _MEMLOCK.search(text)
    if m is None:
        raise ValueError("no 'Max locked memory <soft> <hard> bytes' row in the limits")
    values = []
    for v in (m["soft"], m["hard"]):
        if v != "unlimited" and not v.isdigit():
            raise ValueError(f"memlock limit {v!r} is neither a number nor unlimited")
        values.append(UNLIMITED if v == "unlimited" else int(v))
    return values[0], values[1]


def _show(v: int) -> str:
    return "unlimited" if v == UNLIMITED else f"{v} bytes"


def judge_memlock(soft: int, hard: int, minimum: int, whose: str) -> ItemResult:
    """Both limits at least ``minimum`` (UNLIMITED: both must be unlimited).

    >>> judge_memlock(65536, 65536, -1, "slurmd (pid 7)").why
    'slurmd (pid 7): memlock soft 65536 bytes, hard 65536 bytes; at least unlimited needed'
    """
    def enough(v: int) -> bool:
        return v == UNLIMITED or (minimum != UNLIMITED and v >= minimum)

    why = f"{whose}: memlock soft {_show(soft)}, hard {_show(hard)}"
    if enough(soft) and enough(hard):
        return passed("memlock", why)
    return failed("memlock", f"{why}; at least {_show(minimum)} needed")


def judge_units(units: Sequence[str], is_active: str, failed_list: str,
                allowed_failed: frozenset[str]) -> ItemResult:
    """Every required unit "active" (one line of ``systemctl is-active`` per unit, in
    order), and no failed unit outside ``allowed_failed``.

    >>> judge_units(["munge.service"], "inactive\\n", "", frozenset()).why
    'munge.service: inactive (expected active)'
    """
    states = [s.strip() for s in is_active.splitlines() if s.strip()]
    if len(states) != len(units):
        return error("systemd_units", f"systemctl is-active printed {len(states)} states for "
                     f"{len(units)} units: {' '.join(states)[:120]!r}")
    bad = [f"{u}: {s} (expected active)" for u, s in zip(units, states, strict=True)
           if s not in ACTIVE_UNITS]
    failed_units = [words[1] if words[0] == "\u25cf" and len(words) > 1 else words[0]
                    for words in (line.split() for line in failed_list.splitlines())
                    if words]
    extra = [u for u in failed_units if u not in allowed_failed]
    if extra:
        bad.append(f"failed units: {', '.join(extra[:5])}"
                   + (f" (+{len(extra) - 5} more)" if len(extra) > 5 else ""))
    if bad:
        return failed("systemd_units", "; ".join(bad))
    return passed("systemd_units", f"{len(units)} units active, no failed unit"
                  + (f" outside {len(failed_units)} allowed" if failed_units else ""))
