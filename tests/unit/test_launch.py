"""rackgate.launch: srun and mpirun command lines for multi-node checks."""

from __future__ import annotations

import pytest

from rackgate.commands.launch import Launch, LaunchError, hostfile, mpirun_argv, srun_argv


def launch(**kw: object) -> Launch:
    base: dict[str, object] = {"nodes": ("gpu001", "gpu002"), "tasks_per_node": 8,
                               "program": ("/opt/nccl-tests/build/all_reduce_perf", "-g", "1")}
    base.update(kw)
    return Launch(**base)  # type: ignore[arg-type]


def test_srun_runs_exactly_the_given_nodes_with_the_plugin_and_a_time_limit() -> None:
    argv = srun_argv(launch(timeout_s=601, mpi="pmix"), job_name="rackgate-nccl.all_reduce")
    assert argv[0] == "srun"
    assert "--nodes=2" in argv and "--nodelist=gpu001,gpu002" in argv
    assert "--ntasks-per-node=8" in argv and "--mpi=pmix" in argv
    assert "--time=11" in argv  # 601 s rounds up to 11 minutes, never down
    assert "--kill-on-bad-exit=1" in argv and "--label" in argv
    assert argv[-3:] == ["/opt/nccl-tests/build/all_reduce_perf", "-g", "1"]


def test_srun_environment_keeps_commas_in_one_word() -> None:
    argv = srun_argv(launch(env={"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1", "NCCL_DEBUG": "WARN"}),
                     job_name="j")
    i = argv.index("env")
    assert argv[i + 1:i + 3] == ["NCCL_DEBUG=WARN", "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1"]
    assert not any(a.startswith("--export") for a in argv)


def test_srun_partition_gres_and_queue_wait() -> None:
    argv = srun_argv(launch(partition="gpu", gpus_per_node=8, queue_wait_s=60), job_name="j")
    assert "--partition=gpu" in argv and "--gres=gpu:8" in argv and "--immediate=60" in argv
    assert argv.index("--gres=gpu:8") < argv.index("/opt/nccl-tests/build/all_reduce_perf")


def test_mpirun_hostfile_and_environment() -> None:
    spec = launch(env={"NCCL_IB_HCA": "=mlx5_0:1,mlx5_3:1"})
    assert hostfile(spec) == "gpu001 slots=8\ngpu002 slots=8\n"
    argv = mpirun_argv(spec, "/run/rackgate/hosts", allow_run_as_root=True)
    assert argv[:5] == ["mpirun", "--hostfile", "/run/rackgate/hosts", "-np", "16"]
    assert "ppr:8:node" in argv and "--allow-run-as-root" in argv
    assert argv[argv.index("-x") + 1] == "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1"


@pytest.mark.parametrize(("kw", "message"), [
    ({"nodes": ()}, "no nodes"),
    ({"nodes": ("gpu[001-004]",)}, "not a plain host name"),
    ({"nodes": ("a", "a")}, "listed twice"),
    ({"tasks_per_node": 0}, "tasks_per_node must be >= 1, got 0"),
    ({"program": ()}, "no program"),
    ({"timeout_s": 0}, "timeout_s must be >= 1"),
    ({"env": {"NCCL IB": "x"}}, "'NCCL IB' is not an environment variable name"),
    ({"env": {"NCCL_DEBUG": "a\nb"}}, "NCCL_DEBUG contains a newline"),
    ({"gpus_per_node": 0}, "gpus_per_node must be >= 1"),
    ({"queue_wait_s": 0}, "queue_wait_s must be >= 1"),
])
def test_bad_launches_are_refused_naming_the_value(kw: dict[str, object], message: str) -> None:
    with pytest.raises(LaunchError, match=message.replace("[", r"\[")):
        launch(**kw)
