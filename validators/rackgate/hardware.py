"""What a node of a profile is: its GPUs, NICs, power supplies and storage (``hardware:``).

Each block names the public document its figures come from (``source``); the figures a
judge compares evidence with exactly also carry their own ``basis``:

``gpu.nvlink_topology`` says how NVLink joins the GPUs, as ``nvidia-smi topo -m`` shows it
(``topology.gpu_nic_affinity`` judges the matrix against it, pair by pair):

* ``kind: nvswitch``: every GPU pair through NVSwitch, with all the GPU's links
  (``NV<nvlinks_per_gpu>`` in every GPU/GPU cell: DGX A100 NV12, DGX H100 NV18);
* ``kind: pairs``: exactly the listed ``[gpu_a, gpu_b, nvlinks]`` pairs and no others,
  e.g. ``name: hybrid-cube-mesh`` (DGX-1: each GPU has NV1 or NV2 to four of the seven
  others) or ``name: nvlink-bridge`` (two PCIe cards joined by a bridge, NV4 on RTX A6000);
* ``kind: none``: no NVLink at all; any NV# cell is a GPU the profile does not describe.

A GPU block that states NVLink figures (``nvlink_generation``, ``nvlinks_per_gpu``) must
say which of these it is: the old ``nvswitch: true`` is ``kind: nvswitch``. Bridged cards
whose chip has more link slots than the bridges wire add ``gpu.nvlink_links``
(:class:`NvLinkLinks`: the slots listed, which are wired); without it every link
``nvidia-smi nvlink`` lists must be active.

``gpu.pcie`` is the link every GPU should train to: ``width`` (lanes of the slot, which may
be fewer than the GPU's own x16) and ``generation``. ``gpu.health`` compares nvidia-smi's
current link with it (without it, with the device's own maximum). A NIC class's ``pcie``
is the link each of its ports' PCI functions trains to (``fabric.nic_pcie``, from sysfs);
the classes of one link layer must state the same link, since that is all that tells
their RDMA devices apart.

``gpu.power_cap`` is the board power limit a site sets on every GPU to fit its power budget
(``watts``, ``tolerance_w``, ``basis``; see :class:`PowerCap` for the physics): a capped rack
is accepted as capped when every GPU runs at the cap, and the cap is shown with the profile
in the report. Without it, a limit below the GPU's default is only a warning.

>>> g = GpuSpec(model="NVIDIA RTX A6000", count=2, nvlinks_per_gpu=4, source="a doctest "
...     "stand-in for a datasheet", nvlink_topology={"kind": "pairs", "name": "nvlink-bridge",
...     "pairs": [[0, 1, 4]], "basis": "one NVLink bridge joins the two cards"})
>>> g.expected_nvlink_pairs(), g.nvlink_topology.kind
({(0, 1): 4}, 'pairs')
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_SOURCE = Field(min_length=10, description="public document the figures come from")
_BASIS = Field(min_length=10, description="where the figure comes from")


class PcieLink(BaseModel):
    """The PCIe link a device trains to in its slot: lanes and generation, with the basis.

    >>> PcieLink(width=8, basis="the slot is wired x8 (vendor's system guide)").generation
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    width: Literal[1, 2, 4, 8, 16, 32] | None = Field(
        default=None, description="lanes the link trains to (the slot's, not the card's)")
    generation: int | None = Field(default=None, ge=1, le=6,
                                   description="PCIe generation under load (1 = 2.5 GT/s)")
    basis: str = _BASIS

    @model_validator(mode="after")
    def _says_something(self) -> PcieLink:
        if self.width is None and self.generation is None:
            raise ValueError("a pcie block needs width, generation or both")
        return self


class NvSwitchTopology(BaseModel):
    """Every GPU pair joined through NVSwitch by all of the GPU's links."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["nvswitch"]
    basis: str = _BASIS


class NvLinkPairs(BaseModel):
    """Exactly these GPU pairs are joined by NVLink, each by this many links."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["pairs"]
    name: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]*$",
                             description="what the pattern is called: hybrid-cube-mesh, "
                                         "nvlink-bridge")
    pairs: list[tuple[int, int, int]] = Field(
        min_length=1, description="[gpu_a, gpu_b, nvlinks]: nvidia-smi indexes, NV# bond")
    basis: str = _BASIS

    @model_validator(mode="after")
    def _pairs_are_pairs(self) -> NvLinkPairs:
        seen: set[tuple[int, int]] = set()
        for a, b, links in self.pairs:
            if a < 0 or b < 0 or a == b or links < 1:
                raise ValueError(f"pair [{a}, {b}, {links}]: needs two different GPU "
                                 "indexes (0 or more) and at least 1 link")
            key = (min(a, b), max(a, b))
            if key in seen:
                raise ValueError(f"pair GPU{key[0]}-GPU{key[1]} is listed twice")
            seen.add(key)
        return self


class NoNvLink(BaseModel):
    """No NVLink between any GPUs (PCIe cards without a bridge, or a single GPU)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["none"]
    basis: str = _BASIS


NvLinkTopology = Annotated[NvSwitchTopology | NvLinkPairs | NoNvLink,
                           Field(discriminator="kind")]


class NvLinkLinks(BaseModel):
    """The link slots ``nvidia-smi nvlink`` lists per GPU where bridges wire only some of
    them: PCIe cards joined by NVLink bridges list every slot the chip has and the unwired
    ones as ``<inactive>`` (two H100 PCIe cards: 18 listed, 12 wired by three bridges).

    ``wired`` names the link indexes that must be active, the same on every GPU (a list)
    or per GPU (``{gpu: [links]}``, every GPU named); without it, any ``nvlinks_per_gpu``
    of the listed slots may be the active ones. Either way every other slot must be
    inactive. Only with ``nvlink_topology`` kind ``pairs`` (bridged cards): an NVSwitch
    board wires every link.

    >>> NvLinkLinks(listed=18, wired={0: [0, 1], 1: [2, 3]}, basis="bridge map of the "
    ...     "vendor's guide").wired_on(1)
    frozenset({2, 3})
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    listed: int = Field(ge=1, le=64, description="link slots nvidia-smi lists per GPU (the "
                                                 "chip's: 18 on H100)")
    wired: list[int] | dict[int, list[int]] | None = Field(
        default=None, description="link indexes the bridges wire: one list for every GPU, "
                                  "or one per GPU; absent: any nvlinks_per_gpu of them")
    basis: str = _BASIS

    @model_validator(mode="after")
    def _wired_within_listed(self) -> NvLinkLinks:
        sets = self.wired.values() if isinstance(self.wired, dict) else [self.wired or []]
        for links in sets:
            if len(set(links)) != len(links) or not all(0 <= i < self.listed for i in links):
                raise ValueError(f"wired {links}: needs distinct link indexes from 0 to "
                                 f"{self.listed - 1} (listed: {self.listed})")
        return self

    def wired_on(self, gpu: int) -> frozenset[int] | None:
        """The link indexes wired on ``gpu``; None: only their count is known."""
        if isinstance(self.wired, dict):
            return frozenset(self.wired.get(gpu, ()))
        return None if self.wired is None else frozenset(self.wired)


class PowerCap(BaseModel):
    """The board power limit the site sets on every GPU (``nvidia-smi -pl``; the gpu_driver
    role's ``gpu_driver_power_limits``), and why.

    ``gpu.health`` judges the limit in force (nvidia-smi "Current Power Limit") against it:
    within ``tolerance_w`` passes and is reported as capped; any other limit fails. Above
    the cap, the GPU may draw more than its share of the power the rack was provisioned for
    (PDU, busbar and cooling budgets are sized as GPUs x cap, so a few uncapped boards can
    trip a breaker or overheat the row under a synchronised load); below it, the power
    management algorithm holds the clocks lower than the rack was sized for, so jobs run
    slower than planned. The cap must be a limit the GPU accepts: one above its
    power.max_limit (or below power.min_limit) is a profile error, judged ``error``.

    Capping lowers throughput: figures a profile's thresholds state from uncapped runs (NCCL
    bus bandwidth where the reduction is compute-bound, DCGM's targeted stress tests) may
    not be reached by a capped GPU. The judge does not scale them by the cap: measure the
    capped rack (``rackgate baseline``) and say so in each threshold's basis.

    >>> PowerCap(watts=550, tolerance_w=5, basis="site power budget: 8 x 550 W per node").watts
    550.0
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    watts: float = Field(gt=0, allow_inf_nan=False,
                         description="the limit every GPU must be set to, in W")
    tolerance_w: float = Field(default=1.0, ge=0, allow_inf_nan=False,
                               description="how far the limit in force may be from it, in W "
                                           "(nvidia-smi prints 2 decimals)")
    basis: str = _BASIS

    @model_validator(mode="after")
    def _tolerance_below_cap(self) -> PowerCap:
        if self.tolerance_w >= self.watts:
            raise ValueError(f"tolerance_w {self.tolerance_w} W is not below the cap "
                             f"{self.watts} W: any limit would pass")
        return self


class GpuSpec(BaseModel):
    """The GPUs every node must have, as nvidia-smi names them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1, description="nvidia-smi -q 'Product Name'")
    count: int = Field(ge=1)
    memory_mib: int | None = Field(default=None, gt=0, description="'FB Memory Usage' Total")
    nvlink_generation: int | None = Field(default=None, ge=1, le=5)
    nvlinks_per_gpu: int | None = Field(default=None, ge=0)
    nvlink_gb_s_per_gpu: float | None = Field(default=None, gt=0,
                                              description="total NVLink GB/s per GPU, "
                                                          "both directions")
    nvlink_topology: NvLinkTopology | None = Field(
        default=None, description="how NVLink joins the GPUs (nvidia-smi topo -m)")
    nvlink_links: NvLinkLinks | None = Field(
        default=None, description="bridged cards: the link slots listed per GPU and which "
                                  "are wired (absent: every listed link is wired)")
    pcie: PcieLink | None = Field(default=None, description="the link every GPU trains to")
    power_cap: PowerCap | None = Field(
        default=None, description="the site's board power limit per GPU (nvidia-smi -pl); "
                                  "absent: the GPUs run at their default limit")
    source: str = _SOURCE

    @model_validator(mode="before")
    @classmethod
    def _no_nvswitch_flag(cls, data: Any) -> Any:
        if isinstance(data, dict) and "nvswitch" in data:
            raise ValueError("nvswitch is replaced by nvlink_topology: write nvlink_topology: "
                             "{kind: nvswitch, basis: ...} (or kind: pairs / none)")
        return data

    @model_validator(mode="after")
    def _topology_fits(self) -> GpuSpec:
        topo, links = self.nvlink_topology, self.nvlinks_per_gpu
        if topo is None:
            if self.nvlink_generation or links:
                raise ValueError("the GPU block states NVLink figures but not how the GPUs "
                                 "are joined: add nvlink_topology (kind nvswitch, pairs or "
                                 "none)")
        elif isinstance(topo, NoNvLink):
            if links:
                raise ValueError(f"nvlink_topology kind none, but nvlinks_per_gpu is {links}")
        elif isinstance(topo, NvSwitchTopology):
            if not links:
                raise ValueError("nvlink_topology kind nvswitch needs nvlinks_per_gpu (the "
                                 "NV# every GPU pair shows)")
        else:
            self._check_pairs(topo, links)
        if self.nvlink_links is not None:
            self._check_links(self.nvlink_links, topo, links or 0)
        return self

    def _check_links(self, spec: NvLinkLinks, topo: Any, links: int) -> None:
        if not isinstance(topo, NvLinkPairs) or not links:
            raise ValueError("nvlink_links describes bridged cards: it needs nvlink_topology "
                             "kind pairs and nvlinks_per_gpu (the links the bridges wire)")
        if spec.listed < links:
            raise ValueError(f"nvlink_links lists {spec.listed} slots per GPU, fewer than "
                             f"nvlinks_per_gpu {links}")
        if isinstance(spec.wired, dict) and set(spec.wired) != set(range(self.count)):
            raise ValueError(f"nvlink_links.wired names GPUs {sorted(spec.wired)}; per GPU it "
                             f"must name GPU0 to GPU{self.count - 1}, each once")
        off = [f"GPU{g} {len(w)}" for g in range(self.count)
               if (w := spec.wired_on(g)) is not None and len(w) != links]
        if off:
            raise ValueError(f"nvlink_links.wired gives {', '.join(off)} links, but "
                             f"nvlinks_per_gpu is {links} for every GPU")

    def _check_pairs(self, topo: NvLinkPairs, links: int | None) -> None:
        per_gpu = dict.fromkeys(range(self.count), 0)
        for a, b, n in topo.pairs:
            for g in (a, b):
                if g not in per_gpu:
                    raise ValueError(f"nvlink_topology pair [{a}, {b}, {n}] names GPU{g}; "
                                     f"the node has GPU0 to GPU{self.count - 1}")
                per_gpu[g] += n
        if links:  # gpu.nvlink expects that many links on every GPU
            off = [f"GPU{g} {n}" for g, n in per_gpu.items() if n != links]
            if off:
                raise ValueError(f"nvlink_topology pairs give {', '.join(off)} links, but "
                                 f"nvlinks_per_gpu is {links} for every GPU")

    def expected_nvlink_pairs(self) -> dict[tuple[int, int], int] | None:
        """(gpu_a, gpu_b) with a < b -> NV# bond the matrix must show; every other pair no
        NVLink. None: the profile says nothing about NVLink."""
        topo = self.nvlink_topology
        if topo is None:
            return None
        if isinstance(topo, NvSwitchTopology):
            n = self.nvlinks_per_gpu or 0
            return {(a, b): n for a in range(self.count) for b in range(a + 1, self.count)}
        if isinstance(topo, NvLinkPairs):
            return {(min(a, b), max(a, b)): n for a, b, n in topo.pairs}
        return {}


class NicSpec(BaseModel):
    """One class of network ports (compute fabric, storage, management)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["compute", "storage", "management"]
    count: int = Field(ge=1, description="ports of this class per node")
    rate_gbps: float = Field(gt=0, description="line rate per port, Gb/s")
    link_layer: Literal["InfiniBand", "Ethernet"]
    model: str | None = None
    pcie: PcieLink | None = Field(default=None, description="the link each port's PCI "
                                  "function trains to (fabric.nic_pcie)")
    source: str = _SOURCE

    @model_validator(mode="after")
    def _host_pcie_only(self) -> NicSpec:
        if self.pcie is not None and self.role == "management":
            raise ValueError("a management port (the BMC's) is no PCIe device of the host: "
                             "it has no pcie block")
        return self


class PsuSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(ge=1)
    redundancy: Literal["none", "N+1", "N+2", "N+N"]
    watts_each: float | None = Field(default=None, gt=0)
    source: str = _SOURCE


class StorageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    local_nvme_count: int | None = Field(default=None, ge=0)
    multipath_paths_per_lun: int | None = Field(default=None, ge=1)
    parallel_fs_mount: str | None = Field(default=None, pattern=r"^/")
    source: str = _SOURCE


class Hardware(BaseModel):
    """What a node of this profile is: absent parts are not expected (the demo has no GPU)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: GpuSpec | None = None
    nics: list[NicSpec] = Field(default_factory=list)
    psu: PsuSpec | None = None
    storage: StorageSpec | None = None

    @model_validator(mode="after")
    def _nic_classes_told_apart(self) -> Hardware:
        """fabric.nic_pcie tells the RDMA devices' classes apart by link layer only."""
        for layer in ("InfiniBand", "Ethernet"):
            links = {n.pcie for n in self.nics if n.role != "management"
                     and n.link_layer == layer}
            if len({(p.width, p.generation) if p else None for p in links}) > 1:
                raise ValueError(f"the {layer} NIC classes state different pcie links (or "
                                 "one states none): fabric.nic_pcie cannot tell their "
                                 "devices apart, so give them the same one")
        return self
