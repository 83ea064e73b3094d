"""Issue 11, launch command lines (rackgate.launch and the launched checks' commands):
identifiers are checked in full, so no value carries a newline or shell syntax into a
command line or into the evidence's section lines."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rackgate.checks import REGISTRY
from rackgate.checks.fabric.pairwise import PairwiseParams
from rackgate.checks.mpi import AllreduceParams
from rackgate.checks.nccl.fabric import NcclFabricParams
from rackgate.checks.shared.base import CommandError
from rackgate.commands.launch import Across, Launch, LaunchError, when_slurm_ready


def launch(**kw: object) -> Launch:
    base: dict[str, object] = {"nodes": ("gpu01", "gpu02"), "tasks_per_node": 1,
                               "program": ("hostname",)}
    return Launch(**{**base, **kw})  # type: ignore[arg-type]


def test_sound_14_a_node_name_with_a_trailing_newline_is_refused() -> None:
    refused("gpu01\n")  # re.match with '$' accepted it: '$' matches before a final newline


@pytest.mark.parametrize("node", ["gpu01\r", "gpu01\n$(id)", "gpu01 ", "-gpu01", ""])
def test_other_odd_node_names_stay_refused(node: str) -> None:
    refused(node)


def refused(node: str) -> None:
    with pytest.raises(LaunchError, match="not a plain host name"):
        launch(nodes=(node, "gpu02"))
    with pytest.raises(LaunchError, match="not a plain host name"):
        when_slurm_ready((node, "gpu02"), ["srun", "hostname"])
    across = Across((node, "gpu02"))
    for check, params in (("mpi.allreduce", AllreduceParams(sizes=[1 << 22])),
                          ("nccl.fabric_all_reduce", NcclFabricParams()),
                          ("fabric.pairwise_bw", PairwiseParams())):
        with pytest.raises(CommandError, match="not a plain host name"):
            REGISTRY[check].command(params, {}, across)


def test_sound_14_an_environment_name_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(LaunchError, match="not an environment variable name"):
        launch(env={"NCCL_DEBUG\n": "WARN"})
    with pytest.raises(ValidationError, match="NCCL_"):
        NcclFabricParams(nccl_env={"NCCL_DEBUG\n": "WARN"})


@pytest.mark.parametrize("partition", ["gpu;reboot", "gpu batch", "gpu\n", "$(id)", ",gpu"])
def test_sound_8_a_partition_is_a_slurm_partition_name(partition: str) -> None:
    with pytest.raises(LaunchError, match="partition"):
        launch(partition=partition)


def test_plain_names_still_launch() -> None:
    spec = launch(nodes=("gpu-a01.rack1", "gpu_a02"), partition="gpu,gpu-large",
                  env={"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"})
    assert spec.ntasks == 2


def test_sound_8_nccl_settings_are_plain_values() -> None:
    for value in ("{{ lookup('pipe', 'id') }}", "$(id)", "WARN; id", "a b", "`id`"):
        with pytest.raises(ValidationError, match="nccl_env"):
            NcclFabricParams(nccl_env={"NCCL_DEBUG": value})
    NcclFabricParams(nccl_env={"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1", "NCCL_SOCKET_IFNAME":
                               "^docker,lo", "NCCL_DEBUG_FILE": "/tmp/nccl.%h.%p"})


def test_no_launched_argv_word_is_a_template_the_collector_would_evaluate() -> None:
    """The collector hands argv to Ansible (validators/rackgate/ansible/collect.yml), whose
    templating reads '{{', '{%' and '{#'. The collector tags every argv string !unsafe;
    besides, no word of a launched command (probe texts included) has one."""
    from rackgate.checks import load_profile

    for name in ("dgx-h100", "dgx-a100", "hgx-h200", "demo"):
        profile = load_profile(name)
        for check in ("nccl.fabric_all_reduce", "mpi.allreduce", "fabric.pairwise_bw"):
            cp = profile.check(check)
            if cp is None:
                continue
            params = REGISTRY[check].params_model.model_validate(cp.params)
            argv = REGISTRY[check].command(params, {}, Across(("gpu01", "gpu02", "gpu03")))
            assert not [w for w in argv if "{{" in w or "{%" in w or "{#" in w], (name, check)


# 12. A launched job never runs beside another run's benchmark on a node ------------------

def test_sound_12_every_launched_job_takes_the_nodes_lock_shared() -> None:
    """srun's tasks take the node lock shared (flock) before the program, on whole nodes
    (--exclusive); each launched check passes the nodes' lock file through."""
    from rackgate.commands.launch import srun_argv

    argv = srun_argv(launch(node_lock="/var/lock/rackgate.lock"), job_name="j")
    assert "--exclusive" in argv
    i = argv.index("flock")
    assert argv[i:i + 7] == ["flock", "--shared", "--no-fork", "--timeout=600",
                             "--conflict-exit-code=75", "/var/lock/rackgate.lock", "hostname"]
    across = Across(("gpu01", "gpu02"), "/run/lock/rg.lock")
    for name, params in (("mpi.allreduce", AllreduceParams()),
                         ("nccl.fabric_all_reduce", NcclFabricParams()),
                         ("fabric.pairwise_bw", PairwiseParams())):
        words = REGISTRY[name].command(params, {}, across)
        assert "/run/lock/rg.lock" in words or any("/run/lock/rg.lock" in w for w in words), name
    with pytest.raises(LaunchError, match="node lock"):
        launch(node_lock="relative/lock")


def test_sound_12_a_shared_job_lock_waits_for_another_runs_benchmark(tmp_path) -> None:
    """The flock words srun runs on a node, for real: while another run's command holds the
    node lock (exclusively, as the collector's lock wrapper does), the job gives up after
    its bounded wait with the lock's busy code instead of running beside it."""
    import subprocess
    import time

    from rackgate.commands.launch import srun_argv

    lock = tmp_path / "rackgate.lock"
    holder = subprocess.Popen(["flock", "--no-fork", str(lock), "sleep", "20"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # bounded: until the holder has the lock
            if subprocess.run(["flock", "-n", str(lock), "true"], check=False).returncode:
                break
            time.sleep(0.05)
        argv = srun_argv(launch(node_lock=str(lock), lock_wait_s=1, program=("echo", "ran")),
                         job_name="j")
        on_node = argv[argv.index("flock"):]
        busy = subprocess.run(on_node, capture_output=True, text=True, timeout=30, check=False)
        assert busy.returncode == 75 and "ran" not in busy.stdout
    finally:
        holder.kill()
        holder.wait(timeout=10)
    free = subprocess.run(on_node, capture_output=True, text=True, timeout=30, check=False)
    assert free.returncode == 0 and free.stdout == "ran\n"
