"""The SLURM readiness guard (programs/probes/slurm_ready.py), run as the launch host runs it:
``python3 -c <text> NODES -- COMMAND``, with a stand-in ``sinfo`` on PATH.

The stand-in prints what ``sinfo --Node --noheader --format=%N|%T|%E`` prints (sinfo(1):
node name, extended state, reason; one line per node and partition) and records the
arguments it was called with. The real sinfo runs in the demo rack (tests/e2e) and in the
slurm role's molecule scenario.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rackgate.commands.launch import when_slurm_ready
from rackgate.programs.probes.slurm_ready import node_states, not_ready


def fake_sinfo(tmp_path: Path, lines: str, rc: int = 0) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "sinfo.out").write_text(lines)
    sinfo = bin_dir / "sinfo"
    sinfo.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >"{tmp_path}/sinfo.args"\n'
                     f'cat "{tmp_path}/sinfo.out"\n'
                     f'[ {rc} -eq 0 ] || echo "slurm_load_partitions: Unable to contact slurm '
                     f'controller (connect failure)" >&2\nexit {rc}\n')
    sinfo.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}


def guard(env: dict[str, str], nodes: tuple[str, ...] = ("n1", "n2"),
          command: tuple[str, ...] = ("echo", "launched"), some: bool = False
          ) -> subprocess.CompletedProcess[str]:
    argv = when_slurm_ready(nodes, list(command), some=some)
    return subprocess.run([sys.executable, *argv[1:]], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_every_node_idle_runs_the_command(tmp_path: Path) -> None:
    env = fake_sinfo(tmp_path, "n1|idle|none\nn2|idle|none\n")
    proc = guard(env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "launched\n"
    assert (tmp_path / "sinfo.args").read_text().splitlines() == [
        "--Node", "--noheader", "--nodes=n1,n2", "--format=%N|%T|%E"]


def test_a_node_not_responding_fails_at_once_with_state_and_reason(tmp_path: Path) -> None:
    env = fake_sinfo(tmp_path, "n1|idle|none\nn2|down*|Not responding\n")
    proc = guard(env)
    assert proc.returncode == 3
    assert proc.stdout == ""  # nothing was launched
    assert proc.stderr.strip() == ("rackgate-slurm-ready: SLURM nodes not ready, nothing was "
                                   "queued: n2 down* (Not responding)")


def test_a_node_slurmctld_does_not_list_is_not_ready(tmp_path: Path) -> None:
    proc = guard(fake_sinfo(tmp_path, "n1|idle|none\n"))
    assert proc.returncode == 3
    assert "n2 not known to slurmctld" in proc.stderr


def test_sinfo_failing_is_not_ready(tmp_path: Path) -> None:
    proc = guard(fake_sinfo(tmp_path, "", rc=1))
    assert proc.returncode == 3
    assert "exited with rc 1: slurm_load_partitions: Unable to contact" in proc.stderr


def test_no_sinfo_on_the_launch_host(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}
    proc = guard(env)
    assert proc.returncode == 3
    assert "sinfo is not installed on the launch host" in proc.stderr


@pytest.mark.parametrize("state", ["idle*", "idle~", "mixed", "allocated", "drained",
                                   "draining", "completing", "unknown", "down", ""])
def test_only_plain_idle_is_ready(state: str) -> None:
    assert not_ready(["n1"], node_states(f"n1|{state}|x\n")) != {}
    assert not_ready(["n1"], node_states("n1|idle|none\n")) == {}


def test_a_node_in_two_partitions_counts_once() -> None:
    states = node_states("n1|idle|none\nn1|idle|none\n\nn2|drained|bad PSU\n")
    assert states == {"n1": ("idle", "none"), "n2": ("drained", "bad PSU")}
    assert not_ready(["n1", "n2"], states) == {"n2": "drained (bad PSU)"}


def test_node_names_are_plain_host_names() -> None:
    from rackgate.commands.launch import LaunchError

    with pytest.raises(LaunchError, match="not a plain host name"):
        when_slurm_ready(("n1", "n2;reboot"), ["srun", "x"])


def some(env: dict[str, str], nodes: tuple[str, ...] = ("n1", "n2", "n3")
         ) -> subprocess.CompletedProcess[str]:
    return guard(env, nodes, ("echo", "--nodes=@READY", "--nodelist=@READY", "x"), some=True)


def test_some_runs_on_the_ready_nodes_and_names_the_others(tmp_path: Path) -> None:
    env = fake_sinfo(tmp_path, "n1|idle|none\nn2|drained|bad PSU\nn3|idle|none\n")
    proc = some(env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "--nodes=2 --nodelist=n1,n3 x\n"
    assert proc.stderr == "rackgate-slurm-ready: not run on n2: drained (bad PSU)\n"


def test_some_with_no_node_ready_queues_nothing(tmp_path: Path) -> None:
    env = fake_sinfo(tmp_path, "n1|down*|Not responding\n")
    proc = some(env, ("n1", "n2"))
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "rackgate-slurm-ready: not run on n1: down* (Not responding)",
        "rackgate-slurm-ready: not run on n2: not known to slurmctld",
        "rackgate-slurm-ready: no node is ready, nothing was queued"]
