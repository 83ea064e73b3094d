"""Every nvidia-smi -q / -q -x capture in ../shared/corpus parses, or fails with a ParseError
that names the format and what is missing; degraded captures are never judged as passing."""

from __future__ import annotations

import re

import pytest

from conftest import corpus_params
from rackgate.checks.gpu.health import GpuHealthParams, judge_gpu_health
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.nvidia_smi import parse_nvidia_smi
from rackgate.profile import GpuSpec, Hardware

# fault words a corpus note may name (e.g. "'HW Slowdown : Active' on all 8 GPUs")
_FAULT = re.compile(r"DEGRADED|HW Slowdown\W+:\s*Active|TRUNCATED|Pending\s*:\s*Yes|"
                    r"uncorrectable [1-9]", re.IGNORECASE)


def _hardware_as_captured(q) -> Hardware:
    """The profile the capture's own node would have: the judge then finds only faults."""
    g = q.gpus[0]
    return Hardware(gpu=GpuSpec(model=g.product_name, count=len(q.gpus),
                                source="the corpus capture's own GPUs"))


@pytest.mark.parametrize("corpus", corpus_params("nvidia-smi", "q-*"))
def test_corpus_parses_or_names_what_is_missing(corpus):
    try:
        q = parse_nvidia_smi(corpus.body)
    except ParseError as exc:
        assert str(exc).startswith("nvidia-smi -q"), exc
        assert re.search(r"truncated|missing|no |not well-formed|expected", str(exc)), exc
        return
    assert q.gpus, f"{corpus.path.name}: parsed with no GPU"
    for g in q.gpus:
        assert g.product_name and g.pci_bus_id
    if corpus.degraded or _FAULT.search(corpus.header):
        j = judge_gpu_health(q, GpuHealthParams(), {}, _hardware_as_captured(q))
        assert j.status is not Status.PASS, f"{corpus.path.name}: {j.message}"


def test_hw_slowdown_capture_names_the_reasons():
    (corpus,) = [p.values[0] for p in corpus_params("nvidia-smi", "q-8xH100-*hwslowdown*")] \
        or [None]
    if corpus is None:
        pytest.skip("no corpus")
    q = parse_nvidia_smi(corpus.body)
    j = judge_gpu_health(q, GpuHealthParams(), {}, _hardware_as_captured(q))
    assert j.status is Status.FAIL
    assert "GPU 0, 1, 2, 3, 4, 5, 6, 7: clock event reasons active: hw_slowdown" in j.message


def test_healthy_text_capture_has_one_power_brake_gpu():
    """The capture's note calls it healthy ("HW Slowdown Not Active on all GPUs"), and the
    HW Slowdown line is Not Active everywhere; but on its third GPU (00000000:75:00.0) the
    nested "HW Power Brake Slowdown" and "SW Thermal Slowdown" lines read Active. Those are
    faults by NVML's definitions, so that GPU, and only it, is reported."""
    params = corpus_params("nvidia-smi", "q-8xH100-*-healthy.txt")
    if not params or params[0].values[0] is None:
        pytest.skip("no corpus")
    q = parse_nvidia_smi(params[0].values[0].body)
    j = judge_gpu_health(q, GpuHealthParams(), {}, _hardware_as_captured(q))
    assert j.status is Status.FAIL
    assert j.message.endswith("1 finding(s): fail: GPU 2: clock event reasons active: "
                              "hw_power_brake_slowdown, sw_thermal_slowdown")
