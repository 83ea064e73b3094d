"""One PCIe link against the profile's ``pcie`` (rackgate.hardware.PcieLink): the rule
``gpu.health`` applies to each GPU and ``fabric.nic_pcie`` to each RDMA device.

Width: narrower than the profile's is a down-trained link, wider is not the slot the profile
describes; both fail. Generation: above the profile's fails (not this link), a maximum
below it fails (card, slot, riser or BIOS cannot reach it), a current one below it is
``slow`` (a GPU lowers its link speed when idle, so gpu.health warns there unless the check
runs under load). A figure the profile states and the evidence lacks is an error.

>>> from rackgate.hardware import PcieLink
>>> want = PcieLink(width=16, generation=5, basis="a datasheet stand-in")
>>> link_findings(8, 5, 5, want, Status.WARN, "")
[(<Status.FAIL: 3>, 'PCIe link x8, the profile expects x16 (down-trained link)')]
"""

from __future__ import annotations

from rackgate.hardware import PcieLink
from rackgate.model import Status


def link_findings(width: int | None, gen: int | None, max_gen: int | None, want: PcieLink,
                  slow: Status, note: str) -> list[tuple[Status, str]]:
    """Findings for a link at x``width`` gen ``gen`` (maximum gen ``max_gen``); ``slow`` is
    the status of a current generation below the profile's, ``note`` its explanation."""
    out: list[tuple[Status, str]] = []
    if want.width is not None:
        if width is None:
            out.append((Status.ERROR, f"PCIe link width not reported; the profile expects "
                                      f"x{want.width}"))
        elif width < want.width:
            out.append((Status.FAIL, f"PCIe link x{width}, the profile expects x{want.width} "
                                     "(down-trained link)"))
        elif width > want.width:
            out.append((Status.FAIL, f"PCIe link x{width}, the profile expects x{want.width} "
                                     "(wider than the slot the profile describes: not this "
                                     "node, or the profile is wrong)"))
    if want.generation is not None:
        target = want.generation
        if gen is None:
            out.append((Status.ERROR, f"PCIe generation not reported (or link down); the "
                                      f"profile expects gen {target}"))
        elif gen > target:
            out.append((Status.FAIL, f"PCIe gen {gen}, the profile expects gen {target} (not "
                                     "the link the profile describes)"))
        if max_gen is not None and max_gen < target:
            out.append((Status.FAIL, f"PCIe max gen {max_gen}, below the profile's gen "
                                     f"{target}: the link cannot train to it (card, slot, "
                                     "riser or BIOS)"))
        elif gen is not None and gen < target:
            out.append((slow, f"PCIe gen {gen}, the profile expects gen {target}{note}"))
    return out


__all__ = ["link_findings"]
