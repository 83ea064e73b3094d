"""Stand-ins for SLURM's ``srun`` and ``sinfo`` on PATH, for collecting ``--via slurm``
from local hosts (the unit tests of issue 28 and bench/collect_slurm_stub.py).

They do what rackgate asks of the real ones, on this machine:

- ``sinfo --Node --noheader --nodes=A,B --format=%N|%T|%E`` prints ``NODE|STATE|REASON``
  per node asked for (sinfo(1)): ``idle`` with reason ``none``, unless ``states`` names
  another state for it.
- ``srun [--OPTION[=VALUE]...] COMMAND...`` runs COMMAND once per node of
  ``--nodelist`` (one task per node: task i on the i-th node), at most ``parallel`` at a
  time, each with SLURM's task variables (``SLURMD_NODENAME``, ``SLURM_PROCID``,
  ``SLURM_NODEID``, ``SLURM_STEP_NODELIST``, ``SLURM_NTASKS``), in ``--chdir``, with
  srun's whole standard input given to every task (``--input=all``). When a task ends,
  it writes every line the task wrote to its stdout (or stderr) to its own, whole lines
  of one task together (one of the interleavings srun may give), and with ``--label``
  puts the task's number in front of each, right-aligned to the width of the highest
  task number, then ``: `` (srun(1) --label; tests/fixtures/launch keeps real layouts).
  It exits with the highest exit status of the tasks, as srun does.
- ``inject``: lines written into one node's task stdout after its command's own, as a
  process on that node that writes to the task's stdout would (issue 28, finding 6).

Only what rackgate uses is emulated; any other option is accepted and ignored.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

SRUN = r'''#!{python}
# A stand-in for SLURM's srun, written by rackgate's tests/unit/slurm_stub.py.
import os, subprocess, sys, threading
from concurrent.futures import ThreadPoolExecutor

PARALLEL, INJECT = {parallel!r}, {inject!r}


def main(argv):
    opts, i = {{}}, 0
    while i < len(argv) and argv[i].startswith("-"):
        key, _, value = argv[i].partition("=")
        opts[key], i = value, i + 1
    command = argv[i:]
    nodes = opts["--nodelist"].split(",")
    label = "--label" in opts
    data = sys.stdin.buffer.read() if opts.get("--input") == "all" else b""
    width = len(str(len(nodes) - 1))
    lock = threading.Lock()

    def forward(data, out, t):
        prefix = f"{{t:>{{width}}}}: ".encode() if label else b""
        lines = data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        with lock:
            out.write(b"".join(prefix + line + b"\n" for line in lines))
            out.flush()

    def task(t):
        node = nodes[t]
        env = {{**os.environ, "SLURMD_NODENAME": node, "SLURM_PROCID": str(t),
               "SLURM_NODEID": str(t), "SLURM_STEP_NODELIST": ",".join(nodes),
               "SLURM_NTASKS": str(len(nodes))}}
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env,
                                cwd=opts.get("--chdir") or None)
        out, err = proc.communicate(data)
        extra = os.path.join(INJECT, node)
        if os.path.exists(extra):
            with open(extra, "rb") as fh:
                out += fh.read()
        forward(out, sys.stdout.buffer, t)
        forward(err, sys.stderr.buffer, t)
        return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode

    with ThreadPoolExecutor(PARALLEL) as pool:
        rcs = list(pool.map(task, range(len(nodes))))
    sys.exit(max(rcs))


main(sys.argv[1:])
'''

SINFO = r'''#!{python}
# A stand-in for SLURM's sinfo, written by rackgate's tests/unit/slurm_stub.py.
import sys

STATES = {states!r}
nodes = next(a for a in sys.argv if a.startswith("--nodes=")).split("=", 1)[1].split(",")
for node in nodes:
    state, reason = STATES.get(node, ("idle", "none"))
    print(f"{{node}}|{{state}}|{{reason}}")
'''


def install(where: Path, states: Mapping[str, tuple[str, str]] | None = None,
            inject: Mapping[str, Sequence[str]] | None = None, parallel: int = 16) -> Path:
    """Write the stand-ins into ``where/bin`` (returned: put it first on PATH); ``states``:
    node -> (SLURM state, reason) where not idle; ``inject``: node -> lines written into
    its task's stdout after its command's own."""
    bin_dir, inject_dir = where / "bin", where / "inject"
    bin_dir.mkdir(parents=True)
    inject_dir.mkdir()
    for node, lines in (inject or {}).items():
        (inject_dir / node).write_text("".join(f"{line}\n" for line in lines))
    for name, text in (("srun", SRUN.format(python=sys.executable, parallel=parallel,
                                            inject=str(inject_dir))),
                       ("sinfo", SINFO.format(python=sys.executable,
                                              states=dict(states or {})))):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    return bin_dir


def on_path(bin_dir: Path) -> str:
    """PATH with ``bin_dir`` first and this interpreter's directory (Ansible, python3)."""
    return os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                            os.environ.get("PATH", "")])
