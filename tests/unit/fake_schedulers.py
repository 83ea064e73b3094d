"""Stateful stand-ins for slurmctld (``sinfo``, ``scontrol``) and a Kubernetes API server
(``kubectl``), put first on PATH, so ``rackgate drain`` runs end to end through the
collector and a test reads what the scheduler holds afterwards. Each keeps its nodes in a
JSON file the test writes and reads.

What they answer, and where it comes from:

- ``sinfo --Node --noheader --nodes=a,b --format=%N|%T|%E``: one ``name|state|reason`` line
  per listed node that exists (sinfo(1): %N node, %T extended state, %E reason; "none"
  when there is no reason); ``%H`` in the format is when the reason was set, in seconds
  since the epoch as ``SLURM_TIME_FORMAT=%s`` prints it, "Unknown" without a reason;
- ``scontrol update nodename=N state=drain reason=R``: the node drained with R (now);
  ``state=resume``: idle, no reason (scontrol(1): RESUME clears a DRAIN and its reason);
  an unknown node is an error, exit 1;
- ``srun ... --nodelist=a,b --ntasks-per-node=T ... python3 -c <probe> SIZE... --iters I
  ...``: refused (exit 1, srun's "Unable to allocate resources") unless every node is
  idle; else what rackgate's MPI all-reduce probe prints through ``srun --label``
  (programs/probes/mpi_allreduce.py: its header, then one row per size at 1 GB/s);
- ``kubectl [--kubeconfig F] get nodes N -o jsonpath=<rackgate's>``: what the real kubectl
  prints for that JSONPath (tests/unit/test_drain_kubernetes.py checks the same output
  from the real kubectl on a node document): the name, the taints as compact JSON with
  sorted keys (empty when none), rackgate's reason annotation; an unknown node is
  ``Error from server (NotFound)``, exit 1;
- ``kubectl taint nodes N key=value:Effect [--overwrite]`` and ``key:Effect-``: kubectl
  taint's rules (kubectl taint --help): without --overwrite a taint whose key and effect
  are already there is refused; removal matches key and effect, whatever the value, and
  a taint that is not there is an error ("not found");
- ``kubectl annotate nodes N k=v --overwrite`` / ``k-`` and ``kubectl label nodes N k=v ...
  --overwrite``: set or remove.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# Both hold an exclusive lock on the state file while they read and change it: the
# collector runs a command per node in parallel (forks).
SLURM = r'''
import fcntl, json, sys, time
state_file, tool, args = sys.argv[1], sys.argv[2], sys.argv[3:]
lock = open(state_file + ".lock", "w")
fcntl.flock(lock, fcntl.LOCK_EX)
nodes = json.loads(open(state_file).read())
if tool == "sinfo":
    wanted = next(a for a in args if a.startswith("--nodes=")).split("=", 1)[1].split(",")
    fmt = next(a for a in args if a.startswith("--format=")).split("=", 1)[1]
    for n in wanted:
        if n in nodes:
            node = nodes[n]
            since = node.get("since") if node["reason"] else None
            print(fmt.replace("%N", n).replace("%T", node["state"])
                  .replace("%H", str(since) if since else "Unknown")
                  .replace("%E", node["reason"] or "none"))
    sys.exit(0)
if tool == "srun":
    def opt(name, default=None):
        return next((a.split("=", 1)[1] for a in args if a.startswith(name + "=")), default)
    hosts = opt("--nodelist").split(",")
    if any(nodes.get(h, {}).get("state") != "idle" for h in hosts):
        print("srun: error: Unable to allocate resources: Requested node configuration is "
              "not available", file=sys.stderr)
        sys.exit(1)
    rest = args[args.index("-c") + 2:]
    sizes, iters = rest[:rest.index("--iters")], int(rest[rest.index("--iters") + 1])
    ranks = [h for h in hosts for _ in range(int(opt("--ntasks-per-node", "1")))]
    print("0: " + json.dumps({"probe": "mpi_allreduce", "ranks": len(ranks), "hosts": ranks,
                              "mpi": "fake MPI (tests/unit/fake_schedulers.py)"}))
    for size in sizes:
        print("0: " + json.dumps({"bytes": int(size) // 8 * 8, "iters": iters, "time_us": 10.0,
                                  "algbw_gbps": 1.0, "busbw_gbps": 1.0, "wrong": 0}))
    sys.exit(0)
kv = dict(a.split("=", 1) for a in args[1:])
name = kv["nodename"]
if args[0] != "update" or name not in nodes:
    print(f"scontrol: error: Invalid node name specified: {name}", file=sys.stderr)
    sys.exit(1)
if kv["state"] == "drain":
    nodes[name] = {"state": "drained", "reason": kv["reason"], "since": int(time.time())}
elif kv["state"] == "resume":
    nodes[name] = {"state": "idle", "reason": ""}
open(state_file, "w").write(json.dumps(nodes))
'''

KUBECTL = r'''
import fcntl, json, sys
state_file, args = sys.argv[1], sys.argv[2:]
if args[0] == "--kubeconfig":
    args = args[2:]
lock = open(state_file + ".lock", "w")
fcntl.flock(lock, fcntl.LOCK_EX)
nodes = json.loads(open(state_file).read())
verb, kind, name, rest = args[0], args[1], args[2], args[3:]
if name not in nodes:
    print(f'Error from server (NotFound): nodes "{name}" not found', file=sys.stderr)
    sys.exit(1)
node = nodes[name]
if verb == "get":
    taints = node["taints"]
    print(name)
    print(json.dumps(taints, separators=(",", ":"), sort_keys=True) if taints else "")
    sys.stdout.write(node["annotations"].get("rackgate/reason", ""))
    sys.exit(0)
if verb == "taint":
    spec, overwrite = rest[0], "--overwrite" in rest
    if spec.endswith("-"):
        key, effect = spec[:-1].split(":")
        keep = [t for t in node["taints"] if (t["key"], t["effect"]) != (key, effect)]
        if len(keep) == len(node["taints"]):
            print(f'error: taint "{spec[:-1]}" not found', file=sys.stderr)
            sys.exit(1)
        node["taints"] = keep
    else:
        kv, effect = spec.rsplit(":", 1)
        key, value = kv.split("=", 1)
        there = [t for t in node["taints"] if (t["key"], t["effect"]) == (key, effect)]
        if there and not overwrite:
            print(f"error: node {name} already has {key} taint(s) with same effect(s) and "
                  "--overwrite is false", file=sys.stderr)
            sys.exit(1)
        node["taints"] = [t for t in node["taints"] if t not in there] + [
            {"key": key, "value": value, "effect": effect}]
else:
    where = node["annotations" if verb == "annotate" else "labels"]
    for a in rest:
        if a.startswith("--"):
            continue
        if a.endswith("-"):
            where.pop(a[:-1], None)
        else:
            k, v = a.split("=", 1)
            where[k] = v
open(state_file, "w").write(json.dumps(nodes))
print(f"node/{name} {verb}ed")
'''


def _script(bin_dir: Path, name: str, body_file: Path, *args: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nimport runpy, sys\n"
                    f"sys.argv = [{str(body_file)!r}, *{list(args)!r}, *sys.argv[1:]]\n"
                    f"runpy.run_path({str(body_file)!r}, run_name='__main__')\n")
    path.chmod(0o755)


class FakeSlurm:
    """slurmctld's view of ``nodes`` ({name: (state, reason)}), through sinfo, scontrol and
    srun."""

    def __init__(self, where: Path, nodes: dict[str, tuple[str, str]]) -> None:
        where.mkdir(parents=True, exist_ok=True)
        self.bin, self.file = where / "bin", where / "slurm.json"
        body = where / "fake_slurm.py"
        body.write_text(SLURM)
        self.file.write_text(json.dumps({n: {"state": s, "reason": r}
                                         for n, (s, r) in nodes.items()}))
        for tool in ("sinfo", "scontrol", "srun"):
            _script(self.bin, tool, body, str(self.file), tool)

    def nodes(self) -> dict[str, tuple[str, str]]:
        doc: dict[str, Any] = json.loads(self.file.read_text())
        return {n: (v["state"], v["reason"]) for n, v in doc.items()}

    def set(self, node: str, state: str, reason: str, since: int | None = None) -> None:
        """``since``: when the reason was set (seconds since the epoch), if it has one."""
        doc = json.loads(self.file.read_text())
        doc[node] = {"state": state, "reason": reason, **({"since": since} if since else {})}
        self.file.write_text(json.dumps(doc))


class FakeKubernetes:
    """Nodes' taints, annotations and labels, through kubectl."""

    def __init__(self, where: Path, nodes: list[str]) -> None:
        where.mkdir(parents=True, exist_ok=True)
        self.bin, self.file = where / "bin", where / "kubernetes.json"
        body = where / "fake_kubectl.py"
        body.write_text(KUBECTL)
        self.file.write_text(json.dumps({n: {"taints": [], "annotations": {}, "labels": {}}
                                         for n in nodes}))
        _script(self.bin, "kubectl", body, str(self.file))

    def node(self, name: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.file.read_text())[name]
        return doc

    def set(self, name: str, taints: list[dict[str, str]], reason: str | None) -> None:
        doc = json.loads(self.file.read_text())
        doc[name]["taints"] = taints
        if reason is not None:
            doc[name]["annotations"]["rackgate/reason"] = reason
        self.file.write_text(json.dumps(doc))
