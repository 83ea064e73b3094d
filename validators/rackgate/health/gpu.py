"""The GPU items: ``gpu_count``, ``gpu_ecc`` (nvidia-smi) and ``gpu_xid`` (the kernel log).

nvidia-smi is asked once (:data:`NVIDIA_SMI`) for one CSV line per GPU, as NVIDIA's
``nvidia-smi --help-query-gpu`` documents the fields: ``index``, ``pci.bus_id`` and
``ecc.errors.uncorrected.volatile.total`` (uncorrectable ECC errors since the driver last
loaded; "[N/A]" when ECC is off, "[Not Supported]" where the GPU has none).

XIDs are the NVIDIA driver's error reports in the kernel log, one line each:
``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.`` (NVIDIA's "XID
Errors" guide). Some XIDs name an application's fault rather than the GPU's (13, 31, 43,
45 in that guide); the configuration lists those allowed, and any other fails the item.

>>> gpus = parse_gpus("0, 00000000:18:00.0, 0\\n1, 00000000:2A:00.0, 2\\n")
>>> judge_count(gpus, 2).health.name, judge_ecc(gpus).why
('PASS', 'GPU 1 (00000000:2A:00.0): 2 uncorrectable ECC errors since the driver loaded')
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rackgate.health import ItemResult, error, failed, passed

NVIDIA_SMI = ["nvidia-smi", "--query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total",
              "--format=csv,noheader,nounits"]
JOURNAL_KERNEL = ["journalctl", "--dmesg", "--boot", "--quiet", "--no-pager", "--output=cat"]
XID_MARK = "NVRM: Xid"  # the lines of the kernel log the program keeps
_XID = re.compile(r"NVRM: Xid \((?P<dev>[^)]{1,64})\): (?P<xid>\d{1,4})\b")
_NOT_REPORTED = ("[N/A]", "[Not Supported]", "N/A")


class GpuParseError(ValueError):
    """A line of nvidia-smi's CSV that is not index, bus id, count."""


@dataclass(frozen=True)
class Gpu:
    """One GPU as nvidia-smi lists it; ``ecc_uncorrected_volatile`` is None when the
    driver does not report the counter ("[N/A]": ECC off, "[Not Supported]")."""

    index: int
    bus_id: str
    ecc_uncorrected_volatile: int | None


def parse_gpus(text: str) -> list[Gpu]:
    """nvidia-smi's CSV (:data:`NVIDIA_SMI`) -> the GPUs; GpuParseError names a bad line.

    >>> parse_gpus("0, 00000000:18:00.0, [N/A]")
    [Gpu(index=0, bus_id='00000000:18:00.0', ecc_uncorrected_volatile=None)]
    """
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 3 or not fields[0].isdigit() or not fields[1]:
            raise GpuParseError(f"nvidia-smi line {line[:120]!r} is not "
                                "'index, pci.bus_id, ecc.errors.uncorrected.volatile.total'")
        if fields[2].isdigit():
            ecc: int | None = int(fields[2])
        elif fields[2] in _NOT_REPORTED:
            ecc = None
        else:
            raise GpuParseError(f"nvidia-smi line {line[:120]!r}: ECC count {fields[2]!r} is "
                                "neither a number nor [N/A]/[Not Supported]")
        gpus.append(Gpu(int(fields[0]), fields[1], ecc))
    return gpus


def judge_count(gpus: Sequence[Gpu], expected: int) -> ItemResult:
    """Exactly ``expected`` GPUs; nvidia-smi printing none is a failure, not a pass."""
    found = len(gpus)
    if found == expected:
        return passed("gpu_count", f"{found} GPUs, as expected")
    return failed("gpu_count", f"{found} GPUs found, {expected} expected")


def judge_ecc(gpus: Sequence[Gpu]) -> ItemResult:
    """Every GPU reports its volatile uncorrectable ECC count, and it is 0.

    >>> judge_ecc([Gpu(0, "b0", None)]).health.name
    'ERROR'
    """
    if not gpus:
        return error("gpu_ecc", "nvidia-smi listed no GPU, so no ECC count was read")
    bad = [f"GPU {g.index} ({g.bus_id}): {g.ecc_uncorrected_volatile} uncorrectable ECC errors "
           "since the driver loaded" for g in gpus if g.ecc_uncorrected_volatile]
    if bad:
        return failed("gpu_ecc", "; ".join(bad))
    unknown = [str(g.index) for g in gpus if g.ecc_uncorrected_volatile is None]
    if unknown:
        return error("gpu_ecc", f"GPU {', '.join(unknown)}: no uncorrectable ECC count "
                     "([N/A]: ECC is off or not supported); set gpu_ecc false to skip")
    return passed("gpu_ecc", f"0 uncorrectable ECC errors on {len(gpus)} GPUs")


def parse_xids(text: str) -> Counter[tuple[int, str]]:
    """The XIDs in kernel-log text: (xid, device) -> how many lines.

    >>> parse_xids("NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\\n"
    ...            "usb 1-1: new device\\n")
    Counter({(79, 'PCI:0000:3b:00'): 1})
    """
    return Counter((int(m["xid"]), m["dev"]) for m in _XID.finditer(text))


def judge_xids(xids: Counter[tuple[int, str]], allowed: frozenset[int]) -> ItemResult:
    """No XID since boot except those in ``allowed``.

    >>> judge_xids(Counter({(13, "PCI:0000:3b:00"): 2}), frozenset({13})).health.name
    'PASS'
    """
    bad = sorted((xid, dev, n) for (xid, dev), n in xids.items() if xid not in allowed)
    if bad:
        shown = ", ".join(f"Xid {x} on {d} (x{n})" for x, d, n in bad[:3])
        more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
        return failed("gpu_xid", f"{shown}{more} since boot; allowed: "
                      f"{sorted(allowed) or 'none'}")
    seen = sum(xids.values())
    return passed("gpu_xid", f"no XID since boot outside {sorted(allowed) or 'none'}"
                  + (f" ({seen} allowed)" if seen else ""))
