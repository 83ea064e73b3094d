"""What the demo rack's boot wait (rackgate.demo.rack.up) reads on the host when a member
does not come up: whether its init still runs (podman's own status cannot say), and the
host's limits a booting systemd meets. Pure but for reading /proc and statvfs."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def process_state(pid: int, proc_root: Path = Path("/proc")) -> str:
    """``running`` (any live state), ``a zombie`` or ``gone``, from /proc/<pid>/stat."""
    try:
        stat = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return "gone"
    fields = stat.rpartition(")")[2].split()
    return "a zombie" if fields and fields[0] in ("Z", "X", "x") else "running"


def init_gone(inspected: str, state_of: Callable[[int], str] = process_state) -> str | None:
    """Why a container's init no longer runs, or None while it does, from ``podman inspect
    --format`` with :data:`INIT_FORMAT`. podman's status is only as new as conmon's exit
    file: a conmon that died or hangs leaves a container "running" whose init is gone, and
    runc then refuses every exec ("cannot exec in a stopped container"). So the init process
    is looked up on the host.

    >>> init_gone("running|41|40|0|false|", lambda pid: "running")
    >>> init_gone("running|41|40|0|false|", {41: "a zombie", 40: "gone"}.__getitem__)
    'its init (pid 41) is a zombie and conmon (pid 40) is gone, while podman says running'
    >>> init_gone("exited|0|0|255|false|")
    'podman says exited (exit code 255)'
    """
    status, pid, conmon, code, oom, error = (inspected.strip().split("|", 5) + [""] * 6)[:6]
    if status != "running":
        why = f"podman says {status or 'nothing'} (exit code {code or '?'})"
        if oom == "true":
            why += ", killed for lack of memory"
        return why + (f": {error}" if error else "")
    try:
        init, monitor = int(pid), int(conmon)
    except ValueError:
        return f"podman says running without an init pid ({inspected.strip()!r})"
    if state_of(init) == "running":
        return None
    return (f"its init (pid {init}) is {state_of(init)} and conmon (pid {monitor}) is "
            f"{state_of(monitor)}, while podman says running")


INIT_FORMAT = ("{{.State.Status}}|{{.State.Pid}}|{{.State.ConmonPid}}|{{.State.ExitCode}}|"
               "{{.State.OOMKilled}}|{{.State.Error}}")


def host_facts(proc_root: Path = Path("/proc")) -> str:
    """What the host says of the limits a booting systemd meets: free space where podman
    keeps containers and its runtime state, memory available, processes against pid_max,
    inotify instances in use against the per-user limit (systemd needs several)."""
    facts = []
    for path in ("/var/lib/containers", "/run"):
        try:
            st = os.statvfs(path)
            facts.append(f"{path} {st.f_bavail * st.f_frsize / 2**30:.1f} GiB free")
        except OSError as exc:
            facts.append(f"{path}: {exc.strerror}")
    try:
        meminfo = dict(line.split(":", 1) for line in
                       (proc_root / "meminfo").read_text().splitlines() if ":" in line)
        facts.append(f"memory available {meminfo['MemAvailable'].strip()}")
    except (OSError, KeyError):
        pass
    pids = [d for d in proc_root.iterdir() if d.name.isdigit()]
    inotify = 0
    for d in pids:
        try:
            inotify += sum(os.readlink(f) == "anon_inode:inotify" for f in (d / "fd").iterdir())
        except OSError:
            continue
    for what, count, limit in (("processes", len(pids), "sys/kernel/pid_max"),
                               ("inotify instances", inotify,
                                "sys/fs/inotify/max_user_instances")):
        try:
            facts.append(f"{what} {count} of {(proc_root / limit).read_text().strip()}")
        except OSError:
            facts.append(f"{what} {count}")
    return "; ".join(facts)
