"""What the fabric checks (``fabric.as_built``, ``.links``, ``.errors``, ``.sm``) share:
the HCA port their tools query the fabric through, what those tools need on the fabric
host, and how a finding about a link names its place and the nodes it bears on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from pydantic import Field

from rackgate.checks.shared.base import HostNeeds, Params
from rackgate.fabric.plan import FabricPlan, PlannedLink

Key = tuple[str, int]  # (node description, port)


class FabricQueryParams(Params):
    """The HCA port the fabric host's tool queries the fabric through (infiniband-diags'
    ``-C``/``-P``); unset: the tool's own choice, the host's first HCA port that is up."""

    ca: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
                           description="the RDMA device to query from (-C), e.g. mlx5_0")
    port: int | None = Field(default=None, ge=1, le=254, description="its port (-P)")
    timeout_s: int = Field(default=180, ge=5, description="a large fabric takes a while")


def query_args(params: FabricQueryParams) -> list[str]:
    """``-C <ca> -P <port>`` as set (values validated by the params model)."""
    return (["-C", params.ca] if params.ca is not None else []) + (
        ["-P", str(params.port)] if params.port is not None else [])


def query_needs(tool: str) -> Any:
    """A ``Check.needs`` for an infiniband-diags tool querying through the params' HCA."""
    def needs(params: FabricQueryParams, hostvars: Mapping[str, Any]) -> HostNeeds:
        return HostNeeds(rdma_devices=(params.ca,) if params.ca is not None else (),
                         root=f"{tool} opens /dev/infiniband/umad*, root's only by default")
    return needs


def whole_fabric_or_union(sets: Iterable[frozenset[str]]) -> frozenset[str]:
    """The union of the nodes findings bear on; an empty set (the whole fabric) wins."""
    out: set[str] = set()
    for s in sets:
        if not s:
            return frozenset()
        out |= s
    return frozenset(out)


def bears_on(plan: FabricPlan, names: Iterable[str]) -> frozenset[str]:
    """Whom a link between these nodes bears on: the hosts of its planned HCAs, else the
    hosts behind its planned leaves, else (empty) the whole fabric."""
    names = list(names)
    hosts = frozenset(plan.hca_host[n] for n in names if n in plan.hca_host)
    if hosts:
        return hosts
    return frozenset(h for n in names if n in plan.switch and plan.switch[n].role == "leaf"
                     for h in plan.hosts_behind(n))


def link_hosts(plan: FabricPlan, link: PlannedLink) -> frozenset[str]:
    return bears_on(plan, (link.a.name, link.b.name))


def at(plan: FabricPlan, *names: str) -> str:
    """'; at leaf-1 (rack r01 U40), ...' for the planned switches among ``names``."""
    switches = [n for n in dict.fromkeys(names) if n in plan.switch]
    return f"; at {', '.join(plan.where(s) for s in switches)}" if switches else ""


class Named(Protocol):  # End, PortEnd, and iblinkinfo's ports and peers
    @property
    def name(self) -> str: ...

    @property
    def port(self) -> int: ...


def key(end: Named) -> Key:
    return (end.name, end.port)
