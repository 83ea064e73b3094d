"""node.identity: serial numbers and firmware versions, for the rack certificate.

Nothing is thresholded: the check passes when the node can be identified, and warns when
it cannot be bound to hardware (no DMI serial readable: a virtual machine or container,
or a BMC/BIOS that left the serial blank), because a certificate without serials cannot
tell one chassis from another. Later check families add GPU, NIC and BMC firmware.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from rackgate.checks.base import Check, Params, Scope
from rackgate.model import Judgement, Status
from rackgate.parsers.identity import FIELDS, Identity, parse_identity
from rackgate.profile import Hardware, Threshold

_DMI = [f for f in FIELDS if f not in ("kernel", "os", "machine_id")]
PROBE = (
    "for f in " + " ".join(_DMI) + "; do "
    'printf "%s=%s\\n" "$f" "$(cat /sys/class/dmi/id/$f 2>/dev/null)"; done; '
    'printf "kernel=%s\\n" "$(uname -r)"; '
    'printf "os=%s\\n" "$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"; '
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


CHECKS = (
    Check(
        name="node.identity",
        scope=Scope.NODE,
        tags=frozenset({"identity", "certificate"}),
        description="Serial numbers, BIOS, kernel and OS of the node, for the rack certificate",
        params_model=IdentityParams,
        metrics=frozenset(),
        command=identity_command,
        parse=parse_identity,
        judge=judge_identity,
    ),
)
