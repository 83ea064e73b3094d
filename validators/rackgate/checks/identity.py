"""The identity family: who each node is, and that no two nodes are the same one.

- ``node.identity``: serial numbers, firmware versions, the OS's machine-id and the RDMA
  devices' node GUIDs, for the rack certificate. Nothing is thresholded: the check passes
  when the node can be identified, and warns when it cannot be bound to hardware (no DMI
  serial readable: a virtual machine or container, or a BMC/BIOS that left the serial
  blank), because a certificate without serials cannot tell one chassis from another.
- ``node.duplicate_identity`` (rack-level): two nodes with the same machine-id (a cloned
  OS image: systemd, journald and DHCP clients identify the host by it), the same DMI
  system serial (a mislabelled or reflashed board, or a placeholder serial) or the same
  HCA node GUID (the subnet manager then routes two ports as one) both fail, each naming
  the other. Which identities must differ is the profile's ``compare``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rackgate.checks.shared.base import HostNeeds, NodeCheck, Params, RackCheck, Scope
from rackgate.model import Judgement, Result, Status
from rackgate.parsers.identity import FIELDS, GUIDS, Identity, parse_identity
from rackgate.profile import Hardware, Threshold

NAME = "node.identity"
DUPLICATES = "node.duplicate_identity"
GUID_DETAIL = "hca_node_guid."  # details key prefix: one per RDMA device

_DMI = [f for f in FIELDS if f not in ("kernel", "os", "machine_id")]
PROBE = (
    "for f in " + " ".join(_DMI) + "; do "
    'printf "%s=%s\\n" "$f" "$(cat /sys/class/dmi/id/$f 2>/dev/null)"; done; '
    'printf "kernel=%s\\n" "$(uname -r)"; '
    'printf "os=%s\\n" "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"; '
    f'printf "{GUIDS}="; for g in /sys/class/infiniband/*/node_guid; do '
    '[ -r "$g" ] || continue; d=${g%/node_guid}; '
    'printf "%s=%s " "${d##*/}" "$(cat "$g")"; done; echo; '
    'printf "machine_id=%s\\n" "$(cat /etc/machine-id 2>/dev/null)"'
)


class IdentityParams(Params):
    timeout_s: int = Field(default=30, ge=5)


def identity_command(params: IdentityParams, hostvars: Mapping[str, Any]) -> list[str]:
    return ["sh", "-c", PROBE]


def judge_identity(ident: Identity, params: IdentityParams,
                   thresholds: Mapping[str, Threshold], hardware: Hardware | None = None,
                   ) -> Judgement:
    details: dict[str, float | str] = {k: v for k, v in ident.fields.items() if v}
    details.update({GUID_DETAIL + dev: guid for dev, guid in ident.hca_node_guids.items()})
    serials = [ident.fields[k] for k in ("product_serial", "board_serial", "chassis_serial")
               if ident.fields[k]]
    if not serials:
        return Judgement(Status.WARN, "no DMI serial number readable: the certificate cannot "
                                      "bind this node to a chassis (virtual machine or "
                                      "container?)", details=details)
    model = ident.fields["product_name"] or "unknown model"
    bios = ident.fields["bios_version"] or "?"
    return Judgement(Status.PASS, f"identified: {model} serial {serials[0]}, BIOS {bios}",
                     details=details)


IDENTITY = NodeCheck(
    name=NAME,
    scope=Scope.NODE,
    tags=frozenset({"identity", "certificate"}),
    description="Serial numbers, BIOS, kernel and OS of the node, for the rack certificate",
    params_model=IdentityParams,
    metrics=frozenset(),
    command=identity_command,
    parse=parse_identity,
    judge=judge_identity,
    # the kernel makes /sys/class/dmi/id/*_serial readable by root only (mode 0400)
    needs=lambda p, hv: HostNeeds(root="DMI serial numbers (/sys/class/dmi/id/*_serial) "
                                       "are readable by root only"),
)


# --------------------------------------------------------------- node.duplicate_identity

Identifier = Literal["machine_id", "system_serial", "hca_node_guid"]
_WHAT = {"machine_id": "machine-id", "system_serial": "system serial",
         "hca_node_guid": "HCA node GUID"}


class DuplicateParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    compare: list[Identifier] = Field(min_length=1, description="identities no two nodes "
                                                                "may share")


def _identifiers(r: Result, compare: Sequence[Identifier]) -> list[tuple[str, str]]:
    """(kind, value) of every identity ``r`` (a node.identity result) recorded."""
    out = []
    if "machine_id" in compare and r.details.get("machine_id"):
        out.append(("machine_id", str(r.details["machine_id"]).strip().lower()))
    if "system_serial" in compare and r.details.get("product_serial"):
        out.append(("system_serial", str(r.details["product_serial"]).strip()))
    if "hca_node_guid" in compare:
        out += sorted({("hca_node_guid", str(v).lower()) for k, v in r.details.items()
                       if k.startswith(GUID_DETAIL) and v})
    return out


def judge_duplicates(results: Sequence[Result], p: DuplicateParams) -> list[Result]:
    """One result per node whose identity was read: ``fail`` naming the nodes it shares an
    identity with. A node whose ``node.identity`` is an error or a skip gets none (that
    result already keeps it from being accepted), nor does any node when ``node.identity``
    is not in the run.

    >>> def ident(node, mid):
    ...     return Result(node, NAME, Status.PASS, "ok", details={"machine_id": mid})
    >>> out = judge_duplicates([ident("n1", "aa"), ident("n2", "bb"), ident("n3", "aa")],
    ...                        DuplicateParams(compare=["machine_id"]))
    >>> [(r.node, r.status.label) for r in out]
    [('n1', 'fail'), ('n2', 'pass'), ('n3', 'fail')]
    >>> out[0].message
    'machine-id aa is also the machine-id of n3'
    """
    nodes = list(dict.fromkeys(r.node for r in results))
    idents = {r.node: r for r in results if r.check == NAME}
    if not idents:
        return []  # node.identity was not run: there is nothing to compare (no result)
    known = {n: _identifiers(r, p.compare) for n, r in idents.items()
             if r.status not in (Status.ERROR, Status.SKIP)}
    owners: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node, ids in known.items():
        for key in dict.fromkeys(ids):
            owners[key].append(node)
    wanted = ", ".join(_WHAT[k] for k in p.compare)
    out = []
    for node in nodes:
        if node not in known:
            continue  # its own node.identity result (error, skip, none) already says why
        ids = known[node]
        if not ids:
            out.append(Result(node, DUPLICATES, Status.SKIP, f"nothing to compare: the node "
                              f"recorded no {wanted}"))
            continue
        shared = [(kind, value, [o for o in owners[(kind, value)] if o != node])
                  for kind, value in dict.fromkeys(ids)]
        shared = [s for s in shared if s[2]]
        compared = ", ".join(dict.fromkeys(_WHAT[k] for k, _ in ids))
        if shared:
            others = sorted({o for _, _, os_ in shared for o in os_})
            out.append(Result(node, DUPLICATES, Status.FAIL, "; ".join(
                f"{_WHAT[kind]} {value} is also the {_WHAT[kind]} of {', '.join(os_)}"
                for kind, value, os_ in shared), details={"same_as": ", ".join(others)}))
        else:
            out.append(Result(node, DUPLICATES, Status.PASS, f"{compared}: differ from every "
                              f"other node's ({len(known)} nodes compared)"))
    return out


DUPLICATE_IDENTITY = RackCheck(
    name=DUPLICATES,
    description="no two nodes share a machine-id, system serial or HCA node GUID (cloned "
                "images, reflashed boards): both fail, each naming the other",
    params_model=DuplicateParams,
    judge=judge_duplicates,
    tags=frozenset({"identity", "rack"}),
)

CHECKS = (IDENTITY, DUPLICATE_IDENTITY)
