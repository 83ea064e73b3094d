"""What the shipped profiles' ``node.conformance`` demands, against what the common role
provisions by default: a rack that ``site.yml`` provisions must not be rejected for a
baseline the roles were never told to set (issue 17).

Read from the files themselves: each profile's YAML and roles/common/defaults/main.yml.
A profile that asks for a governor, a kernel command-line item or a memlock limit the
role's defaults do not give fails here, naming the profile and the setting.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "validators" / "rackgate" / "profiles").glob("*.yaml"))
COMMON = yaml.safe_load((ROOT / "roles" / "common" / "defaults" / "main.yml").read_text())


def conformance_params(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    check = (doc.get("checks") or {}).get("node.conformance") or {}
    return check.get("params") or {}


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_profile_baseline_is_what_common_sets_by_default(path: Path) -> None:
    params = conformance_params(path)
    if params.get("governor") is not None:
        assert params["governor"] == COMMON["common_cpu_governor"], path.name
    missing = sorted(set(params.get("cmdline") or []) - set(COMMON["common_kernel_cmdline"]))
    assert not missing, f"{path.name}: kernel command line {missing} is not in " \
                        f"common_kernel_cmdline {COMMON['common_kernel_cmdline']}"
    if params.get("default_memlock", "infinity") == "infinity":
        assert COMMON["common_memlock_limit"] == "unlimited", path.name


def test_the_gpudirect_profiles_ask_for_the_whole_baseline() -> None:
    """The profiles whose nodes do GPUDirect RDMA (nvidia_peermem listed) ask for every
    item of the baseline: governor, ACS disabled, IOMMU passthrough and memlock."""
    gpudirect = [p for p in PROFILES if "nvidia_peermem" in conformance_params(p).get(
        "modules", [])]
    assert gpudirect, "no profile lists nvidia_peermem"
    for path in gpudirect:
        params = conformance_params(path)
        assert params.get("governor") == "performance", path.name
        assert params.get("acs_disabled") is True, path.name
        assert "iommu=pt" in params.get("cmdline", []), path.name
        assert params.get("default_memlock") == "infinity", path.name
