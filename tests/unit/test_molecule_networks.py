"""Molecule scenarios whose containers have fixed addresses keep them on a network of their
own (scripts/molecule-network.sh says why): read from every roles/*/molecule/*/molecule.yml.

CI on 2026-12-02 failed when the slurm cluster's fixed 10.88.240.12 on podman's default
network went to another scenario's container: host-local IPAM hands out the address after
the last one reserved. These tests fail on that layout."""

from __future__ import annotations

import ipaddress
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackgate.demo import rack

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "molecule-network.sh"
PODMAN_DEFAULT = ipaddress.IPv4Network("10.88.0.0/16")
# networks with fixed subnets elsewhere: the demo rack, bootstrap's self-check and the
# overhead benchmark (both 10.89.250.0/24)
OTHERS = {"demo rack": ipaddress.IPv4Network(rack.SUBNET),
          "self-check and bench": ipaddress.IPv4Network("10.89.250.0/24")}
SCENARIOS = sorted(ROOT.glob("roles/*/molecule/*/molecule.yml"))


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def _fixed(path: Path) -> bool:
    return any("ip" in p for p in _load(path).get("platforms", []))


FIXED = [p for p in SCENARIOS if _fixed(p)]


def _network(path: Path) -> tuple[str, ipaddress.IPv4Network]:
    """The scenario's network and subnet, as its dependency step creates them."""
    dependency = _load(path).get("dependency", {})
    assert dependency.get("name") == "shell" and dependency.get("enabled") is True, (
        f"{path}: fixed addresses need the dependency step that makes their network")
    argv = shlex.split(dependency["command"])
    assert argv[0].endswith("/scripts/molecule-network.sh") and len(argv) == 3, (
        f"{path}: dependency command {dependency['command']!r}")
    return argv[1], ipaddress.IPv4Network(argv[2])


def test_the_fixed_address_scenarios_are_found() -> None:
    names = {p.relative_to(ROOT).parts[1] for p in FIXED}
    assert {"slurm", "monitoring", "cooling_telemetry"} <= names


@pytest.mark.parametrize("path", FIXED, ids=lambda p: str(p.relative_to(ROOT).parent))
def test_every_fixed_address_is_on_the_scenarios_own_network(path: Path) -> None:
    name, subnet = _network(path)
    assert not subnet.overlaps(PODMAN_DEFAULT), f"{path}: {subnet} is podman's default network"
    platforms = _load(path)["platforms"]
    addresses = {}
    for platform in platforms:
        assert "ip" in platform, f"{path}: {platform['name']} has no fixed address"
        assert platform.get("extra_opts") == [f"--network={name}"], (
            f"{path}: {platform['name']} must join {name} (and only that) through extra_opts")
        assert "network" not in platform, (
            f"{path}: {platform['name']}: the driver's `network` would remove it at destroy")
        address = ipaddress.ip_address(platform["ip"])
        assert address in subnet and address not in (subnet[0], subnet[1], subnet[-1]), (
            f"{path}: {platform['name']}'s {address} is not a host address of {subnet} "
            "(.1 is the gateway)")
        addresses[platform.get("hostname", platform["name"])] = str(address)
    assert len(set(addresses.values())) == len(addresses), f"{path}: an address twice"
    for platform in platforms:
        for host, address in platform.get("etc_hosts", {}).items():
            assert addresses.get(host) == address, (
                f"{path}: {platform['name']}'s /etc/hosts says {host} is {address}; "
                f"the scenario gives it {addresses.get(host)}")


def test_the_scenarios_networks_are_distinct_and_clear_of_the_others() -> None:
    seen: dict[str, tuple[str, ipaddress.IPv4Network]] = {}
    for path in FIXED:
        name, subnet = _network(path)
        where = str(path.relative_to(ROOT))
        for other, (other_name, other_subnet) in seen.items():
            assert name != other_name and not subnet.overlaps(other_subnet), (where, other)
        for other, other_subnet in OTHERS.items():
            assert not subnet.overlaps(other_subnet), f"{where}: {subnet} overlaps the {other}'s"
        seen[where] = (name, subnet)


@pytest.mark.parametrize(("args", "says"), [
    (["rg-molecule-slurm", "10.88.240.0/24"], "is not one of the scenarios' subnets"),
    (["rg-molecule-slurm", "10.89.241.0/24;true"], "is not one of the scenarios' subnets"),
    (["podman", "10.89.241.0/24"], "is not a scenario network name"),
    (["rg-molecule-slurm"], "usage"),
])
def test_the_network_script_refuses_what_is_not_a_scenario_network(
        args: list[str], says: str) -> None:
    done = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 2 and says in done.stderr, done
