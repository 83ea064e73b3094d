"""rackgate's plan probe, sent to a host as text (``python3 -c``) by ``rackgate validate --plan``.

Usage: python3 -c <this text> [--tool NAME]... [--dir PATH BYTES]... [--rdma NAME]...
       [--net NAME]... [--root] [--secret FILE] [--slurm NODE[,NODE...] COUNT PARTITION]

Looks, without changing anything but a temporary file it removes, for what a check needs on
this host: each tool on PATH (``command -v``: ``shutil.which``), each directory (exists, is
a directory, a file can be created in it, its free bytes: ``statvfs`` ``f_bavail x
f_frsize``), each RDMA device (``/sys/class/infiniband/<name>``) and netdev
(``/sys/class/net/<name>``), the user the commands run as (``id -u``; not root: whether
``sudo -n true`` works), that a credential file is there and not empty (never its content),
and SLURM: ``sinfo`` answers, and ``srun --test-only`` accepts a job on exactly the nodes
(SLURM validates the request and runs nothing; an empty PARTITION: the default one).
Every input is its own argument: nothing is read by a shell. It prints one JSON document
and exits 0; what it finds is for rackgate to judge. Only Python's standard library is used.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

TIMEOUT_S = 30


def _run(argv: list[str]) -> dict[str, object]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                              check=False, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return {"rc": None, "output": f"{argv[0]}: not found"}
    except subprocess.TimeoutExpired:
        return {"rc": None, "output": f"{argv[0]}: no answer within {TIMEOUT_S} s"}
    return {"rc": proc.returncode, "output": (proc.stdout + proc.stderr).strip()[-600:]}


def directory(path: str) -> dict[str, object]:
    out: dict[str, object] = {"exists": os.path.exists(path), "dir": os.path.isdir(path),
                              "writable": False, "free_bytes": None, "error": ""}
    if not out["dir"]:
        return out
    try:
        st = os.statvfs(path)
        out["free_bytes"] = st.f_bavail * st.f_frsize
    except OSError as exc:
        out["error"] = f"statvfs: {exc.strerror}"
    try:
        fd, name = tempfile.mkstemp(prefix=".rackgate-plan-", dir=path)
        os.close(fd)
        os.unlink(name)
        out["writable"] = True
    except OSError as exc:
        out["error"] = f"cannot create a file there: {exc.strerror}"
    return out


def listing(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def main(argv: list[str]) -> None:
    doc: dict[str, object] = {"uid": os.getuid(), "sudo": None}
    tools, dirs, rdma, net = {}, {}, {}, {}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--tool":
            tools[argv[i + 1]] = shutil.which(argv[i + 1])
            i += 2
        elif word == "--dir":
            dirs[argv[i + 1]] = directory(argv[i + 1])
            i += 3
        elif word == "--rdma":
            rdma[argv[i + 1]] = os.path.exists(f"/sys/class/infiniband/{argv[i + 1]}")
            i += 2
        elif word == "--net":
            net[argv[i + 1]] = os.path.exists(f"/sys/class/net/{argv[i + 1]}")
            i += 2
        elif word == "--root":
            if os.getuid() != 0:
                doc["sudo"] = _run(["sudo", "-n", "true"])["rc"] == 0
            i += 1
        elif word == "--secret":
            path = argv[i + 1]
            doc["secret"] = {"present": os.path.isfile(path),
                             "nonempty": os.path.isfile(path) and os.path.getsize(path) > 0}
            i += 2
        elif word == "--slurm":
            nodes, count, partition = argv[i + 1], argv[i + 2], argv[i + 3]
            doc["sinfo"] = _run(["sinfo", "--noheader", "--format=%P|%a|%D|%T"])
            srun = ["srun", "--test-only", f"--nodes={count}", f"--nodelist={nodes}"]
            if partition:
                srun.append(f"--partition={partition}")
            doc["srun"] = _run([*srun, "true"])
            i += 4
        else:
            sys.exit(f"rackgate-plan: unknown argument {word!r}")
    doc.update(tools=tools, dirs=dirs, rdma=rdma, net=net,
               rdma_found=listing("/sys/class/infiniband"), net_found=listing("/sys/class/net"))
    print(json.dumps(doc, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
