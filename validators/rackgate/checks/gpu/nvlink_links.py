"""Which NVLink links of each GPU must be active, and a link's speed at its printed precision.

Used by ``gpu.nvlink`` (checks/gpu/topology.py) and ``gpu.nvlink_errors``
(checks/gpu/nvlink_errors.py).

Which links: without the profile's ``gpu.nvlink_links`` every GPU lists exactly
``nvlinks_per_gpu`` links, all of them wired (an NVSwitch board, an SXM hybrid cube-mesh).
PCIe cards joined by NVLink bridges list every link slot their chip has and the unwired ones
as ``<inactive>`` (two H100 PCIe cards: 18 listed, 12 wired): with ``nvlink_links`` each GPU
lists ``listed`` slots, the ``wired`` ones (or, where the profile names none, any
``nvlinks_per_gpu`` of them) active and every other one inactive. A wired link that is down,
or an active link the profile does not wire, fails.

Speed: nvidia-smi prints a link's rate rounded to at most three decimals (14.0625 GB/s, the
RTX A6000 bridge's nominal rate, prints as ``14.062``). A printed speed is below a floor
only when it is below the floor rounded to the digits printed (half to even, as C's printf
rounds an exact tie such as 14.0625): the precision comes from the printed figure itself,
never a blanket tolerance, so 14.062 meets 14.0625 and 14.061 does not.

>>> printed_floor(14.0625, 3), printed_floor(26.5625, 3), printed_floor(25.0, 0)
(14.062, 26.562, 25.0)
>>> exact(14.0625), exact(25.0)
('14.0625', '25')
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from rackgate.hardware import GpuSpec
from rackgate.model import Status
from rackgate.parsers.nvlink import NvLinkGpu


def printed_floor(floor: float, decimals: int) -> float:
    """``floor`` rounded to ``decimals`` places, half to even: what a speed printed with
    that many decimals is compared with."""
    step = Decimal(1).scaleb(-decimals)
    return float(Decimal(repr(floor)).quantize(step, rounding=ROUND_HALF_EVEN))


def exact(value: float) -> str:
    """``value`` in plain decimals, every digit of a rate such as 14.0625 kept (``figure``
    keeps four significant ones)."""
    return f"{value:.9f}".rstrip("0").rstrip(".")


def expected_links(spec: GpuSpec, gpu: int) -> tuple[int, frozenset[int] | None]:
    """(link slots listed on ``gpu``, the indexes that must be active; None where only their
    count, ``nvlinks_per_gpu``, is known)."""
    want = spec.nvlinks_per_gpu or 0
    if spec.nvlink_links is None:
        return want, frozenset(range(want))
    return spec.nvlink_links.listed, spec.nvlink_links.wired_on(gpu)


def bridged_link_findings(g: NvLinkGpu, spec: GpuSpec) -> list[tuple[Status, str]]:
    """A GPU's listed links against the profile's ``nvlink_links``: the slot count, every
    wired link active, every other link inactive."""
    listed, wired = expected_links(spec, g.index)
    want = spec.nvlinks_per_gpu or 0
    out: list[tuple[Status, str]] = []
    if len(g.links) != listed:
        out.append((Status.FAIL, f"GPU {g.index} lists {len(g.links)} links, expected {listed} "
                                 "(the profile's nvlink_links.listed)"))
    active = {lk.index for lk in g.links if lk.active}
    if wired is None:
        if len(active) != want:
            out.append((Status.FAIL, f"GPU {g.index} has {len(active)} active links "
                                     f"({', '.join(map(str, sorted(active))) or 'none'}), the "
                                     f"profile's bridges wire {want}"))
        return out
    down = sorted(wired - active)
    extra = sorted(active - wired)
    if down:
        out.append((Status.FAIL, f"GPU {g.index} links {', '.join(map(str, down))} are "
                                 "inactive (wired in the profile's nvlink_links)"))
    if extra:
        out.append((Status.FAIL, f"GPU {g.index} links {', '.join(map(str, extra))} are "
                                 "active but not wired in the profile's nvlink_links (the "
                                 "profile does not describe this node)"))
    return out
