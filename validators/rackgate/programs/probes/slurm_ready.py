"""rackgate's SLURM readiness guard, sent to the launch host as text (``python3 -c``).

Usage: python3 -c <this text> [--some] [--records=FILE --stderr=FILE] NODE[,NODE...] -- srun ARG...

Asks slurmctld for the state of exactly these nodes (``sinfo --Node``) and starts the srun
command (exec: its output and exit status are the evidence) only when every one of them is
``idle``. Otherwise it queues nothing: it prints one line naming each node that is not
ready, with the state SLURM reports and SLURM's reason for it, and exits 3. A node that
slurmctld does not list at all is not ready either ("not known to slurmctld"); a state
with a flag (``idle*`` not responding, ``idle~`` powered off, ``drained``, ``mixed``...)
is not ``idle``.

With ``--some`` (the collection job: every node's own checks as one job), the job runs on
the nodes that are ready and leaves the others out: each node left out gets one line on
stderr, ``rackgate-slurm-ready: not run on NODE: STATE (REASON)``, and the argv words
``--nodes=@READY`` and ``--nodelist=@READY`` become the count and list of the ready nodes;
when no node is ready nothing is queued (exit 3).

With ``--records=FILE --stderr=FILE`` (the collection job: its output must not pass
through an Ansible result, whose size ansible-runner bounds), both files are created
(never an existing file or a link; mode 0600), everything this guard and srun write goes
to them, and the first line of FILE is this guard's decision, before srun starts::

    rackgate-slurm-ready {"ready": [NODE, ...], "left_out": {"NODE": "STATE (REASON)"}}

so the control host knows which nodes SLURM was asked to run whatever the job printed.

Output format of sinfo (``--format=%N|%T|%E``, sinfo(1)): node name, extended state,
reason; one line per node and partition, so a node in two partitions appears twice.
Only Python's standard library is used.
"""

import json
import os
import subprocess
import sys
from typing import NoReturn

READY = "idle"
HEADER = "rackgate-slurm-ready"  # the records file's first line (--records)
NOT_READY_RC = 3
SINFO_TIMEOUT_S = 30
USAGE = "usage: slurm_ready [--some] [--records=FILE --stderr=FILE] NODE[,NODE...] -- srun ARG..."


def node_states(text: str) -> dict[str, tuple[str, str]]:
    """sinfo lines -> {node: (state, reason)} (a node listed twice keeps its first line)."""
    states: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, _, rest = line.partition("|")
        state, _, reason = rest.partition("|")
        states.setdefault(name.strip(), (state.strip(), reason.strip()))
    return states


def not_ready(nodes: list[str], states: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Per node of ``nodes`` that is not idle, what SLURM says of it."""
    out = {}
    for node in nodes:
        if node not in states:
            out[node] = "not known to slurmctld"
            continue
        state, reason = states[node]
        if state != READY:
            why = "" if reason in ("", "none", "(null)") else f" ({reason})"
            out[node] = f"{state or 'no state'}{why}"
    return out


def on_ready(argv: list[str], ready: list[str]) -> list[str]:
    """``argv`` with its ``@READY`` words naming the ``ready`` nodes."""
    words = {"--nodes=@READY": f"--nodes={len(ready)}",
             "--nodelist=@READY": f"--nodelist={','.join(ready)}"}
    return [words.get(a, a) for a in argv]


def fail(message: str) -> NoReturn:
    print(f"rackgate-slurm-ready: {message}", file=sys.stderr, flush=True)
    sys.exit(NOT_READY_RC)


def into_files(records: str, stderr: str) -> None:
    """Standard output to ``records``, standard error to ``stderr``, both created here."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    try:
        out, err = os.open(records, flags, 0o600), os.open(stderr, flags, 0o600)
    except OSError as exc:
        fail(f"cannot create the job's output files: {exc}")
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)


def decision(ready: list[str], bad: dict[str, str]) -> None:
    """The first line of the records file (see the module's docstring)."""
    doc = json.dumps({"ready": ready, "left_out": bad}, separators=(",", ":"))
    print(f"{HEADER} {doc}", flush=True)


def main(argv: list[str]) -> None:
    some = argv[:1] == ["--some"]
    argv = argv[1:] if some else argv
    words = [a.partition("=") for a in argv[:2]]
    files = [w[2] for w in words] if [w[:2] for w in words] == [
        ("--records", "="), ("--stderr", "=")] else []
    if files:
        if not all(files):
            fail(USAGE)
        argv = argv[2:]
        into_files(*files)
    if len(argv) < 3 or argv[1] != "--" or not argv[0]:
        fail(USAGE)
    nodes = argv[0].split(",")
    query = ["sinfo", "--Node", "--noheader", f"--nodes={argv[0]}", "--format=%N|%T|%E"]
    try:
        proc = subprocess.run(query, capture_output=True, text=True, timeout=SINFO_TIMEOUT_S,
                              check=False)
    except FileNotFoundError:
        fail("sinfo is not installed on the launch host: cannot ask SLURM for the nodes")
    except subprocess.TimeoutExpired:
        fail(f"sinfo did not answer within {SINFO_TIMEOUT_S} s: is slurmctld running?")
    if proc.returncode != 0:
        fail(f"{' '.join(query)} exited with rc {proc.returncode}: "
             f"{' '.join(proc.stderr.split())[-300:]}")
    bad = not_ready(nodes, node_states(proc.stdout))
    if some:
        for node, why in bad.items():
            print(f"rackgate-slurm-ready: not run on {node}: {why}", file=sys.stderr)
        ready = [n for n in nodes if n not in bad]
        if files:
            decision(ready, bad)
        if not ready:
            fail("no node is ready, nothing was queued")
        os.execvp(argv[2], on_ready(argv[2:], ready))
    if files:
        decision([] if bad else nodes, bad)
    if bad:
        fail("SLURM nodes not ready, nothing was queued: "
             f"{'; '.join(f'{n} {why}' for n, why in bad.items())}")
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
