"""The demo rack's boot wait (rackgate.demo.boot, read by rackgate.demo.rack.up): a member
whose init stopped while podman still says "running" is found from /proc, and a boot that
fails names the host's limits. The containers themselves are e2e (tests/e2e/demo_rack.py:
provision)."""

from __future__ import annotations

import os
from pathlib import Path

from rackgate.demo.boot import host_facts, init_gone, process_state


def fake_proc(root: Path, pid: int, comm: str, state: str, inotify: int = 0) -> None:
    d = root / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "stat").write_text(f"{pid} ({comm}) {state} 1 {pid} {pid} 0 -1 4194560\n")
    for fd in range(inotify):
        os.symlink("anon_inode:inotify", d / "fd" / str(fd + 3))
    os.symlink("/dev/null", d / "fd" / "0")


def test_an_init_is_running_a_zombie_or_gone_whatever_its_name(tmp_path: Path) -> None:
    fake_proc(tmp_path, 41, "init) Z (odd", "S")  # a name with ") Z (" in it
    fake_proc(tmp_path, 42, "systemd", "Z")
    assert process_state(41, tmp_path) == "running"
    assert process_state(42, tmp_path) == "a zombie"
    assert process_state(43, tmp_path) == "gone"


def test_podman_saying_running_is_not_taken_for_a_running_init(tmp_path: Path) -> None:
    fake_proc(tmp_path, 40, "conmon", "S")
    fake_proc(tmp_path, 41, "systemd", "Z")
    said = init_gone("running|41|40|0|false|\n", lambda pid: process_state(pid, tmp_path))
    assert said == ("its init (pid 41) is a zombie and conmon (pid 40) is running, while "
                    "podman says running")
    assert init_gone("running|0|0|0|false|", lambda pid: process_state(pid, tmp_path)) \
        == "its init (pid 0) is gone and conmon (pid 0) is gone, while podman says running"
    assert init_gone("running||||", process_state) == \
        "podman says running without an init pid ('running||||')"
    assert init_gone("exited|0|0|137|true|oom") == \
        "podman says exited (exit code 137), killed for lack of memory: oom"
    assert init_gone("") == "podman says nothing (exit code ?)"


def test_a_failed_boot_names_the_hosts_limits(tmp_path: Path) -> None:
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "inotify").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "pid_max").write_text("32768\n")
    (tmp_path / "sys" / "fs" / "inotify" / "max_user_instances").write_text("128\n")
    (tmp_path / "meminfo").write_text("MemTotal: 100 kB\nMemAvailable:   42 kB\n")
    fake_proc(tmp_path, 1, "init", "S", inotify=2)
    fake_proc(tmp_path, 7, "systemd", "S", inotify=4)
    facts = host_facts(tmp_path)
    assert "memory available 42 kB" in facts, facts
    assert "processes 2 of 32768; inotify instances 6 of 128" in facts, facts
    assert "/var/lib/containers " in facts and " GiB free" in facts, facts
