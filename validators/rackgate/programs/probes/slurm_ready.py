"""rackgate's SLURM readiness guard, sent to the launch host as text (``python3 -c``).

Usage: python3 -c <this text> NODE[,NODE...] -- srun ARG...

Asks slurmctld for the state of exactly these nodes (``sinfo --Node``) and starts the srun
command (exec: its output and exit status are the evidence) only when every one of them is
``idle``. Otherwise it queues nothing: it prints one line naming each node that is not
ready, with the state SLURM reports and SLURM's reason for it, and exits 3. A node that
slurmctld does not list at all is not ready either ("not known to slurmctld"); a state
with a flag (``idle*`` not responding, ``idle~`` powered off, ``drained``, ``mixed``...)
is not ``idle``.

Output format of sinfo (``--format=%N|%T|%E``, sinfo(1)): node name, extended state,
reason; one line per node and partition, so a node in two partitions appears twice.
Only Python's standard library is used.
"""

import os
import subprocess
import sys
from typing import NoReturn

READY = "idle"
NOT_READY_RC = 3
SINFO_TIMEOUT_S = 30


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


def not_ready(nodes: list[str], states: dict[str, tuple[str, str]]) -> list[str]:
    """One description per node of ``nodes`` that is not idle."""
    out = []
    for node in nodes:
        if node not in states:
            out.append(f"{node} not known to slurmctld")
            continue
        state, reason = states[node]
        if state != READY:
            why = "" if reason in ("", "none", "(null)") else f" ({reason})"
            out.append(f"{node} {state or 'no state'}{why}")
    return out


def fail(message: str) -> NoReturn:
    print(f"rackgate-slurm-ready: {message}", file=sys.stderr, flush=True)
    sys.exit(NOT_READY_RC)


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--" or not argv[0]:
        fail("usage: slurm_ready NODE[,NODE...] -- srun ARG...")
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
    if bad:
        fail(f"SLURM nodes not ready, nothing was queued: {'; '.join(bad)}")
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
