"""``gpu.nvlink_errors``: no NVLink's error counters above the profile's limits.

Reads ``nvidia-smi nvlink -e`` (``parsers.nvlink.errors``): per GPU, per link, the data-link
layer's error counters since the driver loaded or since ``nvidia-smi nvlink -re`` reset
them. Each counter is judged by its kind against the profile's limit for that kind
(``params``: ``replay``, ``recovery``, ``crc``, ``ecc``; each ``{max_count, basis}``):

* ``recovery``: the link left its active state and retrained (NVML's data-link recovery
  counter). A link within its specification never needs that: default 0.
* ``replay``: the transmitter resent data the receiver did not acknowledge, after a CRC or
  ECC error; ``crc``: flits or data received with a bad CRC; ``ecc``: data the receiver's
  ECC corrected. The link recovers from each, but each is a bit error on the wire, and a
  healthy NVLink shows none over an acceptance window (public health checks read all of
  them with a threshold of 0: Meta's GCM ``check-dcgmi nvlink``; DCGM's NVLink health
  watch counts every one as an incident): default 0.

A site that accepts a rack after a long burn-in without resetting the counters may allow a
per-link count, with its basis (a measured error rate over that time). Every GPU the
profile has and every link it expects (``checks.gpu.nvlink_links``: all ``nvlinks_per_gpu``
links, or the wired ones of bridged cards) must be listed: a GPU missing fails, a link
without counters, a GPU or link the profile does not have are errors. A GPU printed as
"all links are inActive" fails (no active NVLink).

>>> NvLinkErrorsParams().recovery.max_count
0
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from rackgate.checks.gpu.nvlink_links import expected_links
from rackgate.checks.shared.base import NodeCheck, Params, Scope
from rackgate.model import Judgement, Status
from rackgate.parsers.nvlink.errors import GpuLinkErrors, NvLinkErrors, parse_nvlink_errors
from rackgate.profile import Hardware, Threshold

_ZERO = ("a healthy NVLink shows none over an acceptance window: public health checks "
         "judge these counters with a threshold of 0 (checks.gpu.nvlink_errors)")


class CounterLimit(BaseModel):
    """The most errors of one kind a link may have counted, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_count: int = Field(ge=0, le=2**64 - 1, description="per link, since the counters "
                                                           "were last reset")
    basis: str = Field(min_length=10, description="where the limit comes from")


class NvLinkErrorsParams(Params):
    replay: CounterLimit = Field(default=CounterLimit(max_count=0, basis=_ZERO),
                                 description="Replay Errors per link")
    recovery: CounterLimit = Field(default=CounterLimit(max_count=0, basis=_ZERO),
                                   description="Recovery Errors per link (link retrained)")
    crc: CounterLimit = Field(default=CounterLimit(max_count=0, basis=_ZERO),
                              description="CRC Errors (or CRC Flit / CRC Data Errors) per link")
    ecc: CounterLimit = Field(default=CounterLimit(max_count=0, basis=_ZERO),
                              description="ECC Errors per link, where the driver prints them")


def nvlink_errors_applies(hw: Hardware) -> str | None:
    if hw.gpu is None:
        return "the profile has no GPU"
    if not hw.gpu.nvlinks_per_gpu:
        return "the profile expects no NVLink (nvlinks_per_gpu unset)"
    return None


def _gpu_findings(g: GpuLinkErrors, hw: Hardware,
                  params: NvLinkErrorsParams) -> list[tuple[Status, str]]:
    assert hw.gpu is not None
    if g.all_links_inactive:
        return [(Status.FAIL, f"GPU {g.index}: no active NVLink (all links inactive)")]
    listed, wired = expected_links(hw.gpu, g.index)
    present = [lk.index for lk in g.links]
    out: list[tuple[Status, str]] = []
    if wired is not None and (missing := sorted(wired - set(present))):
        out.append((Status.ERROR, f"GPU {g.index}: no error counters for links "
                                  f"{', '.join(map(str, missing))}: no evidence of their "
                                  "health"))
    elif wired is None and len(present) < (want := hw.gpu.nvlinks_per_gpu or 0):
        out.append((Status.ERROR, f"GPU {g.index} lists error counters for {len(present)} "
                                  f"links, the profile's bridges wire {want}: no evidence of "
                                  "the others' health"))
    foreign = [i for i in present if i >= listed]
    if foreign:
        out.append((Status.ERROR, f"GPU {g.index} lists counters for links "
                                  f"{', '.join(map(str, foreign))}, beyond the {listed} "
                                  "links the profile expects (not this node's GPU?)"))
    over = [f"link {lk.index} {c.name} {c.count:,} (limit {limit:,})"
            for lk in g.links for c in lk.counters
            if c.count > (limit := getattr(params, c.kind).max_count)]
    if over:
        out.append((Status.FAIL, f"GPU {g.index}: {'; '.join(over)}"))
    return out


def judge_nvlink_errors(e: NvLinkErrors, params: NvLinkErrorsParams,
                        thresholds: Mapping[str, Threshold], hw: Hardware) -> Judgement:
    reason = nvlink_errors_applies(hw)
    if reason is not None or hw.gpu is None:
        return Judgement(Status.SKIP, reason or "the profile has no GPU")
    count = hw.gpu.count
    findings: list[tuple[Status, str]] = []
    if len(e.gpus) < count:
        findings.append((Status.FAIL, f"nvidia-smi lists {len(e.gpus)} GPUs, the profile "
                                      f"expects {count} (no counters for GPU "
                                      f"{', '.join(str(i) for i in range(len(e.gpus), count))})"))
    foreign = [g.index for g in e.gpus if g.index >= count]
    if foreign:
        findings.append((Status.ERROR, f"counters for GPU {', '.join(map(str, foreign))}, "
                                       f"which the profile's {count} GPUs do not include"))
    for g in e.gpus:
        if g.index < count:
            findings += _gpu_findings(g, hw, params)
    total = sum(c.count for g in e.gpus for lk in g.links for c in lk.counters)
    links = sum(len(g.links) for g in e.gpus)
    limits = ", ".join(f"{k} <= {getattr(params, k).max_count:,}"
                       for k in ("replay", "recovery", "crc", "ecc"))
    if not findings:
        return Judgement(Status.PASS, f"{links} NVLinks of {len(e.gpus)} GPUs within their "
                                      f"error limits ({total:,} errors counted)", float(total),
                         "errors", f"per link: {limits}", None, {"links": links}, "lower")
    worst = Status.worst(s for s, _ in findings)
    message = "; ".join(m for s, m in sorted(findings, key=lambda f: -f[0]))
    return Judgement(worst, message, float(total), "errors", f"per link: {limits}", None,
                     {"links": links}, "lower")


CHECKS = (
    NodeCheck(
        name="gpu.nvlink_errors",
        scope=Scope.NODE,
        tags=frozenset({"gpu", "nvlink"}),
        description="No NVLink's replay, recovery, CRC or ECC error counter above the "
                    "profile's limit (nvidia-smi nvlink -e)",
        params_model=NvLinkErrorsParams,
        metrics=frozenset(),
        command=lambda p, hv: ["nvidia-smi", "nvlink", "-e"],
        parse=parse_nvlink_errors,
        judge=judge_nvlink_errors,
        applies=nvlink_errors_applies,
    ),
)

__all__ = ["CHECKS", "CounterLimit", "NvLinkErrorsParams", "judge_nvlink_errors"]
