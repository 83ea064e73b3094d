"""RDMA device names under a naming policy: the names rdma-core's udev rule gives an HCA
(``rdma_rename <name> <policy>``, rdma-core kernel-boot/rdma_rename.c and its udev.md),
which the inventory chooses per host with ``rdma_device_naming`` (the rdma role writes the
rule). A profile that names ``mlx5_0`` for a host whose policy renames it ``ibp24s0``
names a device that will not exist, so the plan before collecting refuses it.

The patterns are the rdma role's (roles/rdma/vars/main.yml, ``__rdma_device_name_patterns``;
a unit test compares the two). A persistent name is a type prefix (ib, roce, iw, opa, usnic;
rdma for another protocol) and o<index> (onboard), x<node GUID> (guid), or
[P<domain>]p<bus>s<slot> / s<hot-plug slot> with f<function>[v<VF>] (pci); a kernel name
is the driver's (mlx5_0, bnxt_re0).

>>> misnamed(["mlx5_0", "ibp24s0"], "kernel")
['ibp24s0']
>>> misnamed(["mlx5_0", "ibp24s0", "rocep3s0f1"], "pci")
['mlx5_0']
>>> policy_problem("NAME_PCI")
"rdma_device_naming is 'NAME_PCI', not one of kernel, pci, guid, onboard, fallback"
"""

from __future__ import annotations

import re
from collections.abc import Sequence

NAMING_VAR = "rdma_device_naming"

_TYPE = "(ib|roce|iw|opa|usnic|rdma)"
_PCI = "(P[0-9]+)?(p[0-9]+s[0-9]+|s[0-9]+)(f[0-9]+(v[0-9]+)?)?"
_KERNEL = f"(?!{_TYPE}(o[0-9]+|x[0-9a-f]{{16}}|{_PCI})$)[a-z][a-z0-9_]*[0-9]"

# policy -> the names it gives (NAME_ONBOARD keeps the kernel name of a device without a
# firmware index; NAME_FALLBACK is onboard, else pci, so every PCI HCA gets a new name)
PATTERNS: dict[str, str] = {
    "kernel": f"^{_KERNEL}$",
    "pci": f"^{_TYPE}{_PCI}$",
    "guid": f"^{_TYPE}x[0-9a-f]{{16}}$",
    "onboard": f"^({_TYPE}o[0-9]+|{_KERNEL})$",
    "fallback": f"^{_TYPE}(o[0-9]+|{_PCI})$",
}
EXAMPLES: dict[str, str] = {
    "kernel": "mlx5_0",
    "pci": "ibp24s0, rocep24s0f1",
    "guid": "ibx0c42a10300a1b2c4",
    "onboard": "ibo3, or the kernel name without a firmware index",
    "fallback": "ibo3, ibp24s0",
}
_COMPILED = {policy: re.compile(p) for policy, p in PATTERNS.items()}


def policy_problem(policy: object) -> str | None:
    """Why ``policy`` is no naming policy, or None."""
    if isinstance(policy, str) and policy in PATTERNS:
        return None
    return f"{NAMING_VAR} is {policy!r}, not one of {', '.join(PATTERNS)}"


def misnamed(devices: Sequence[str], policy: str) -> list[str]:
    """The ``devices`` (RDMA device names, no port) that ``policy`` does not give."""
    return [d for d in devices if not _COMPILED[policy].match(d)]


def misnamed_message(profile: str, check: str, device: str, policy: str) -> str:
    """The plan's error for one device of a profile that the host's policy never names."""
    return (f"profile {profile}, check {check}: RDMA device {device} does not fit "
            f"{NAMING_VAR}={policy} (the inventory's udev naming policy names devices like "
            f"{EXAMPLES[policy]}): name the device as the policy does, or set the policy "
            f"that gives that name")
