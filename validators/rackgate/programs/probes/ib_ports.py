"""rackgate's port-state probe, sent to the node as text (``python3 -c``).

Usage: python3 -c <this text> -- TOOL [ARG...] [-- TOOL [ARG...]]...

Starts the first TOOL (in the order given) that is on the node's PATH, with its own
arguments, and nothing else: each ``--`` group is one whole command, fixed by rackgate
(``fabric.ports``: ``ibstat``, ``ibv_devinfo -v``, ``ibstatus``, ``rdma -j link show``),
never built from data, and no shell is involved. Which one answered is written first, as
one line on standard output::

    ### rackgate-ib-ports {"argv": ["ibv_devinfo", "-v"], "path": "/usr/bin/ibv_devinfo",
                           "not_found": ["ibstat"]}

(one line: the tool's argv, where it was found, and the tools of the earlier groups that
are not on PATH), then the tool replaces this program (exec): its output, standard error
and exit status are the evidence, exactly as if it had been run alone. When no group's
tool is on PATH, nothing is started: a line on stderr names them all, and the exit status
is 3. A TOOL that is not a plain program name (a path, an empty word) is refused (exit 2).
Only Python's standard library is used.
"""

import json
import os
import re
import shutil
import sys
from typing import NoReturn

MARK = "### rackgate-ib-ports "
NONE_FOUND_RC = 3
USAGE_RC = 2
PROGRAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")


def groups(argv: list[str]) -> list[list[str]]:
    """The ``--``-separated commands of ``argv`` (which starts with ``--``).

    >>> groups(["--", "ibstat", "--", "rdma", "-j", "link", "show"])
    [['ibstat'], ['rdma', '-j', 'link', 'show']]
    """
    if not argv or argv[0] != "--":
        raise ValueError("the commands must start with '--'")
    out: list[list[str]] = []
    for word in argv:
        if word == "--":
            out.append([])
        else:
            out[-1].append(word)
    for cmd in out:
        if not cmd or not PROGRAM.fullmatch(cmd[0]):
            raise ValueError(f"{cmd[:1]!r} is not a plain program name")
    return out


def fail(message: str, rc: int) -> NoReturn:
    print(f"rackgate-ib-ports: {message}", file=sys.stderr, flush=True)
    sys.exit(rc)


def main(argv: list[str]) -> None:
    try:
        commands = groups(argv)
    except ValueError as exc:
        fail(f"{exc} (usage: ib_ports -- TOOL [ARG...] [-- TOOL [ARG...]]...)", USAGE_RC)
    not_found: list[str] = []
    for cmd in commands:
        path = shutil.which(cmd[0])
        if path is None:
            not_found.append(cmd[0])
            continue
        header = json.dumps({"argv": cmd, "path": path, "not_found": not_found},
                            separators=(", ", ": "))
        sys.stdout.write(MARK + header + "\n")
        sys.stdout.flush()
        os.execv(path, cmd)
    fail(f"none of {', '.join(not_found)} is on PATH ({os.environ.get('PATH', '')}): "
         "no tool to read the RDMA ports with", NONE_FOUND_RC)


if __name__ == "__main__":
    main(sys.argv[1:])
