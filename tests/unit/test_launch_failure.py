"""Finding the node(s) that broke a job launched across the nodes (srun, mpirun): one fixture
per failure mode (tests/fixtures/launch/, each saying where its format comes from), plus
the matching rules: FQDNs, nodes not under test, launcher prefixes, all-culprits, clean."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.parsers.launch_failure import (
    MAX_HOSTLIST,
    JobFailure,
    expand_hostlist,
    find_culprits,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GPUS = [f"gpu{i:02d}" for i in range(1, 11)]


def body(name: str) -> str:
    """A fixture's output, after its '# source:' / '# scenario:' header and '# ---'."""
    text = (FIXTURES / "launch" / name).read_text(encoding="utf-8")
    head, sep, rest = text.partition("\n# ---\n")
    assert sep and head.startswith("# source: written by the rackgate developers from"), name
    return rest


def blamed(failure: JobFailure) -> tuple[list[str], list[str]]:
    return sorted(failure.culprits), sorted(failure.bystanders)


def test_every_fixture_says_where_its_format_comes_from():
    files = sorted((FIXTURES / "launch").glob("*.txt"))
    assert len(files) >= 12
    for path in files:
        assert body(path.name).strip(), path.name


# --- rackgate's readiness guard -------------------------------------------------------


def test_the_readiness_guard_names_each_node_not_ready_with_its_state():
    nodes = ["rg-node01", "rg-node02", "rg-node03", "rg-node04"]
    f = find_culprits(body("slurm-ready-nodes-not-ready.txt"), nodes)
    assert dict(f.culprits) == {
        "rg-node02": "rackgate-slurm-ready: rg-node02 down* (Not responding)",
        "rg-node03": "rackgate-slurm-ready: rg-node03 drained (psu fault; ticket 4411)",
        "rg-node04": "rackgate-slurm-ready: rg-node04 not known to slurmctld",
    }
    assert f.bystanders == frozenset()


def test_the_guard_failing_for_its_own_reasons_blames_nobody():
    out = ("rackgate-slurm-ready: sinfo did not answer within 30 s: is slurmctld running?\n"
           "rackgate-slurm-ready: usage: slurm_ready NODE[,NODE...] -- srun ARG...\n")
    assert blamed(find_culprits(out, GPUS)) == ([], [])


# --- srun -------------------------------------------------------------------------------


def test_srun_the_failed_rank_is_the_culprit_the_terminated_ones_bystanders():
    # nodes under test given fully qualified; the job reports short names
    nodes = ["gpu01.rack1.example", "gpu02.rack1.example"]
    f = find_culprits(body("srun-nccl-rank-failed-others-terminated.txt"), nodes)
    assert blamed(f) == (["gpu02.rack1.example"], ["gpu01.rack1.example"])
    why = f.culprits["gpu02.rack1.example"].splitlines()
    assert why[0].startswith("gpu02:61321:61388 [1] enqueue.cc:1510 NCCL WARN Cuda failure 700")
    assert why[1].startswith("gpu02: Test NCCL failure common.cu:1150 'unhandled cuda error")
    assert why[2] == "srun: error: gpu02: task 9: Exited with exit code 3"
    assert not any(line.startswith(" 9:") or line.startswith("9:") for line in why)


def test_srun_slurmstepd_cancelled_line_blames_nobody():
    out = ("slurmstepd: error: *** STEP 80412.0 ON gpu01 CANCELLED AT 2026-11-30T10:02:11 "
           "DUE TO TASK FAILURE ***\n")
    assert blamed(find_culprits(out, GPUS)) == ([], [])


def test_srun_a_node_only_killed_is_the_culprit_when_nobody_failed_first():
    f = find_culprits(body("srun-only-killed-task.txt"), ["gpu01", "gpu02", "gpu03"])
    assert dict(f.culprits) == {"gpu03": "srun: error: gpu03: task 2: Killed"}
    assert f.bystanders == frozenset()


@pytest.mark.parametrize("status", ["Segmentation fault (core dumped)", "Aborted",
                                    "Bus error", "Out Of Memory", "Exited with exit code 127"])
def test_srun_abnormal_ends_other_than_killed_are_primary(status):
    out = (f"srun: error: gpu01: task 0: {status}\n"
           "srun: error: gpu02: task 1: Terminated\n")
    assert blamed(find_culprits(out, ["gpu01", "gpu02"])) == (["gpu01"], ["gpu02"])


def test_srun_task_launch_failure_names_the_node():
    f = find_culprits(body("srun-task-launch-failed.txt"), ["gpu03", "gpu04"])
    assert dict(f.culprits) == {"gpu04": "srun: error: Task launch for StepId=80413.0 failed "
                                         "on node gpu04: Slurmd could not execve job"}


@pytest.mark.parametrize("out", [
    "srun: error: Application launch failed: Slurmd could not execve job\n",
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n",
])
def test_srun_messages_without_a_node_blame_nobody(out):
    assert blamed(find_culprits(out, GPUS)) == ([], [])


def test_srun_unable_to_create_step_blames_nobody():
    assert blamed(find_culprits(body("srun-unable-to-create-step.txt"), GPUS)) == ([], [])


def test_srun_node_failure_expands_the_hostlist():
    f = find_culprits(body("srun-node-failure-hostlist.txt"), GPUS[:4])
    assert blamed(f) == (["gpu03", "gpu04"], ["gpu01"])
    assert f.culprits["gpu03"] == "srun: error: Node failure on gpu[03-04]"


def test_srun_nodes_still_not_ready():
    f = find_culprits(body("srun-nodes-still-not-ready.txt"), GPUS)
    assert blamed(f) == (["gpu07", "gpu08", "gpu10"], [])


def test_srun_task_lines_with_a_hostlist_and_task_ranges():
    out = "srun: error: gpu[01-02]: tasks 0-3,5: Exited with exit code 1\n"
    assert blamed(find_culprits(out, GPUS[:3])) == (["gpu01", "gpu02"], [])


# --- Open MPI ---------------------------------------------------------------------------


def test_mpirun_signal_names_the_node():
    f = find_culprits(body("mpirun-rank-segfault-tag-output.txt"), ["gpu01", "gpu02"])
    assert dict(f.culprits) == {"gpu02": "mpirun noticed that process rank 3 with PID 30277 "
                                         "on node gpu02 exited on signal 11 (Segmentation fault)."}


def test_prrte_signal_message_wrapped_over_two_lines():
    out = ("prterun noticed that process rank 1 with PID 4410 on node gpu02 exited on\n"
           "signal 7 (Bus error).\n")
    assert blamed(find_culprits(out, ["gpu01", "gpu02"])) == (["gpu02"], [])


def test_mpirun_sigkill_alone_is_the_culprit_sigkill_beside_a_failure_a_bystander():
    killed = ("mpirun noticed that process rank 0 with PID 1 on node gpu01 exited on signal 9 "
              "(Killed).\n")
    assert blamed(find_culprits(killed, ["gpu01", "gpu02"])) == (["gpu01"], [])
    both = killed + "srun: error: gpu02: task 1: Exited with exit code 2\n"
    assert blamed(find_culprits(both, ["gpu01", "gpu02"])) == (["gpu02"], ["gpu01"])


def test_mpirun_non_zero_exit_rank_resolved_from_its_own_tagged_lines():
    f = find_culprits(body("mpirun-nonzero-exit-rank-from-tags.txt"), ["gpu01", "gpu02"])
    assert list(f.culprits) == ["gpu02"]
    assert "process rank 2 exited with code 1" in f.culprits["gpu02"]


def test_mpirun_non_zero_exit_rank_unresolved_blames_nobody():
    text = body("mpirun-nonzero-exit-rank-from-tags.txt")
    untagged = "\n".join(line for line in text.splitlines() if not line.startswith("[1,"))
    assert blamed(find_culprits(untagged, ["gpu01", "gpu02"])) == ([], [])


def test_a_rank_seen_on_two_hosts_is_never_resolved():
    out = ("[1,2]<stderr>:gpu01:1:1 [0] NCCL INFO x\n[1,2]<stderr>:gpu02:2:2 [0] NCCL INFO x\n"
           "  Process name: [[51327,1],2]\n  Exit code:    1\n")
    assert blamed(find_culprits(out, ["gpu01", "gpu02"])) == ([], [])


def test_rank_resolved_from_nccl_tests_rank_lines_only_with_one_gpu_per_process():
    rows = ("#  Rank  0 Group  0 Pid  100 on      gpu01 device  0 [0000:18:00] NVIDIA H100\n"
            "#  Rank  1 Group  0 Pid  200 on      gpu02 device  0 [0000:18:00] NVIDIA H100\n"
            "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n"
            "with errorcode 3.\n")
    one = "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5\n"
    assert blamed(find_culprits(one + rows, ["gpu01", "gpu02"])) == (["gpu02"], [])
    eight = one.replace("nGpus 1", "nGpus 8")
    assert blamed(find_culprits(eight + rows, ["gpu01", "gpu02"])) == ([], [])


def test_rank_resolved_from_rackgate_allreduce_probe_header():
    out = ('0: {"probe": "mpi_allreduce", "ranks": 2, "hosts": ["gpu01", "gpu02"], '
           '"mpi": "Open MPI v4.1.8"}\n'
           "  Process name: [[51327,1],1]\n  Exit code:    9\n")
    assert blamed(find_culprits(out, ["gpu01", "gpu02"])) == (["gpu02"], [])


def test_mpirun_exiting_improperly_and_calling_abort():
    improper = ("mpirun has exited due to process rank 5 with PID 0 on\n"
                "node gpu02 exiting improperly. There are three reasons this could occur:\n")
    abort = ("mpirun has exited due to process rank 0 with PID 0 on\n"
             'node gpu01 calling "abort". This may have caused other processes\n')
    assert blamed(find_culprits(improper, ["gpu01", "gpu02"])) == (["gpu02"], [])
    assert blamed(find_culprits(abort, ["gpu01", "gpu02"])) == (["gpu01"], [])


def test_open_mpi_process_node_blocks():
    out = ("A critical communication path was lost to:\n\n  My name:      [[1,0],0]\n"
           "  Process name: [[1,1],4]\n  Node:         gpu02\n")
    assert blamed(find_culprits(out, ["gpu01", "gpu02"])) == (["gpu02"], [])


def test_prrte_lost_daemon_blames_the_remote_node_not_mpiruns_host():
    f = find_culprits(body("prrte-lost-remote-daemon.txt"), ["gpu01", "gpu02", "gpu03"])
    assert blamed(f) == (["gpu03"], [])
    # mpirun on a node under test: the HNP's node is still not blamed
    orte = body("prrte-lost-remote-daemon.txt").replace("PRTE", "ORTE").replace("login1", "gpu01")
    assert blamed(find_culprits(orte, ["gpu01", "gpu02", "gpu03"])) == (["gpu03"], [])


def test_orte_daemons_not_started_blames_the_nodes_ssh_named():
    f = find_culprits(body("orte-daemons-not-started-ssh.txt"), GPUS)
    assert blamed(f) == (["gpu04", "gpu05"], [])
    assert f.culprits["gpu04"] == "ssh: connect to host gpu04 port 22: No route to host"
    alone = body("orte-daemons-not-started-ssh.txt").split("\n", 2)[2]
    assert blamed(find_culprits(alone, GPUS)) == ([], [])


# --- NCCL and nccl-tests ----------------------------------------------------------------


@pytest.mark.parametrize("line", [
    "gpu02:7:7 [3] NCCL WARN Cuda failure 'unspecified launch failure'",
    "gpu02:7:9 [3] init.cc:1710 NCCL WARN Cuda failure 'unspecified launch failure'",
    "gpu02:7:9 [3] init.cc:1710 (ncclCommInitRank) NCCL WARN Cuda failure 'x'",
    "[2026-11-30 10:00:00] gpu02:7:9 [3] NCCL WARN Cuda failure 'x'",
    "gpu02:7:9 [0] NCCL ERROR something failed",
    "gpu02: Test CUDA failure common.cu:990 'out of memory'",
    "gpu02: Test NCCL failure common.cu:1005 'unhandled cuda error / '",
])
def test_nccl_and_nccl_tests_failures_blame_their_host(line):
    assert dict(find_culprits(line + "\n", ["gpu01", "gpu02"]).culprits) == {"gpu02": line}


def test_nccl_info_lines_and_test_failure_traces_blame_nobody():
    out = ("gpu02:7:7 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB\n"
           " .. gpu02 pid 7: Test failure common.cu:891\n")
    assert blamed(find_culprits(out, ["gpu01", "gpu02"])) == ([], [])


def test_a_remote_peer_error_is_not_resolved_to_either_end():
    f = find_culprits(body("nccl-remote-peer-error-unresolved.txt"), ["gpu01", "gpu02"])
    assert blamed(f) == ([], [])


# --- host names, prefixes, all-culprits, clean output ------------------------------------


def test_fqdn_in_the_output_matches_a_short_node_name_never_a_longer_number():
    out = "srun: error: gpu01.rack1.example: task 0: Exited with exit code 1\n"
    assert blamed(find_culprits(out, ["gpu01", "gpu011"])) == (["gpu01"], [])
    assert blamed(find_culprits(out, ["gpu011", "gpu010"])) == ([], [])
    assert blamed(find_culprits("srun: error: gpu011: task 0: Aborted\n", ["gpu01"])) == ([], [])


def test_a_short_name_matching_two_fqdn_nodes_is_not_guessed():
    out = "gpu01: Test CUDA failure common.cu:990 'out of memory'\n"
    assert blamed(find_culprits(out, ["gpu01.a.example", "gpu01.b.example"])) == ([], [])
    assert blamed(find_culprits(out, ["gpu01.a.example", "gpu01"])) == (["gpu01"], [])


def test_a_node_not_under_test_is_never_a_culprit():
    out = ("srun: error: gpu09: task 3: Exited with exit code 1\n"
           "srun: error: Unknown: task 4: Exited with exit code 1\n"
           "srun: error: gpu01: task 0: Terminated\n")
    f = find_culprits(out, ["gpu01", "gpu02"])
    # the only node under test named was killed: by the rule, it is the culprit
    assert blamed(f) == (["gpu01"], [])


@pytest.mark.parametrize("prefix", ["9: ", "  9: ", "[1,9]<stderr>:", "[1,9]<stdout>: ",
                                    "Mon Nov 30 10:00:00 2026[1,9]<stderr>:"])
def test_launcher_prefixes_are_stripped(prefix):
    line = "gpu02: Test NCCL failure common.cu:1005 'unhandled system error / '"
    f = find_culprits(prefix + line + "\n", ["gpu01", "gpu02"])
    assert dict(f.culprits) == {"gpu02": line}


def test_every_node_a_culprit_is_returned_as_such():
    out = ("srun: error: gpu01: task 0: Exited with exit code 1\n"
           "srun: error: gpu02: task 1: Exited with exit code 1\n")
    assert blamed(find_culprits(out, ["gpu01", "gpu02"])) == (["gpu01", "gpu02"], [])
    killed = out.replace("Exited with exit code 1", "Killed")
    assert blamed(find_culprits(killed, ["gpu01", "gpu02"])) == (["gpu01", "gpu02"], [])


@pytest.mark.parametrize("out", ["", "\n\n", "hello\r\n", "0: # Out of bounds values : 0 OK\n"])
def test_output_that_names_nothing_has_no_culprit(out):
    assert find_culprits(out, GPUS) == JobFailure({}, frozenset())


def test_a_healthy_run_names_nothing():
    text = (FIXTURES / "nccl" / "allreduce-2node-srun-label.txt").read_text(encoding="utf-8")
    assert blamed(find_culprits(text, ["gpu-a07", "gpu-a08", "gpu-b01"])) == ([], [])


def test_culprits_are_read_only_and_reasons_are_trimmed():
    out = "srun: error: gpu01: task 0: Exited with exit code 1   " + "x" * 500 + "\n"
    f = find_culprits(out * 10, ["gpu01"])
    with pytest.raises(TypeError):
        f.culprits["gpu02"] = "x"  # type: ignore[index]
    assert len(f.culprits["gpu01"]) == 240 and "\n" not in f.culprits["gpu01"]


def test_hostlist_expansion_is_bounded_and_keeps_malformed_ranges():
    assert len(expand_hostlist("n[0-99999999]")) == MAX_HOSTLIST
    assert len(expand_hostlist("a[0-9999]b[0-9999]")) == MAX_HOSTLIST
    assert expand_hostlist("n[x-2],m1") == ["n[x-2]", "m1"]
    assert expand_hostlist("n[3-1]") == ["n[3-1]"]
    assert expand_hostlist("gpu[8-10]") == ["gpu8", "gpu9", "gpu10"]


@settings(max_examples=80, deadline=None)
@given(cut=st.integers(min_value=0, max_value=2000), junk=st.text(max_size=200))
def test_cut_or_damaged_output_never_raises_and_blames_only_nodes_under_test(cut, junk):
    text = "".join(body(p.name) for p in sorted((FIXTURES / "launch").glob("*.txt")))
    f = find_culprits(text[:cut] + junk + text[cut:cut + 500], ["gpu02", "gpu03"])
    assert set(f.culprits) <= {"gpu02", "gpu03"} and f.bystanders <= {"gpu02", "gpu03"}
    assert not set(f.culprits) & f.bystanders


def test_a_huge_line_without_spaces_is_read_in_linear_time():
    start = time.monotonic()
    find_culprits("x" * 1_000_000 + "\n" + "srun: error: " + "y" * 200_000, ["gpu01"])
    assert time.monotonic() - start < 5
