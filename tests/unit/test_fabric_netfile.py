"""The plan as an ibsim net file (rackgate.fabric.netfile): its text, and the real ibsim,
opensm and ibnetdiscover finding every planned link at its planned width and speed."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from fabric_sim import SimFabric
from rackgate.fabric.design import design
from rackgate.fabric.netfile import netfile
from rackgate.fabric.plan import SCHEMA, FabricPlan, plan_from_document

NEEDS_IBSIM = pytest.mark.skipif(
    shutil.which("ibsim") is None,
    reason="ibsim is not installed (scripts/bootstrap.sh --with-tests installs ibsim-utils, "
           "opensm and infiniband-diags)")

# One port line of `ibnetdiscover -p` (infiniband-diags 44): type, LID, port, GUID, width,
# speed, then the same for the remote end, then both node descriptions.
PORT_LINE = re.compile(
    r"(?:CA|SW)\s+\d+\s+(?P<port>\d+)\s+0x[0-9a-f]+\s+(?P<width>\d+x)\s+(?P<speed>\S+)\s+-\s+"
    r"(?:CA|SW)\s+\d+\s+(?P<rport>\d+)\s+0x[0-9a-f]+\s+"
    r"\( '(?P<name>[^']*)' - '(?P<rname>[^']*)' \)\Z")
# ... and of a port with nothing cabled to it: no remote end, the node description alone.
UNCABLED = re.compile(
    r"(?:CA|SW)\s+\d+\s+(?P<port>\d+)\s+0x[0-9a-f]+\s+\d+x\s+\S+\s+'(?P<name>[^']*)'\Z")


def mixed_plan(hca_port: int = 1) -> FabricPlan:
    """One leaf, one node (cabled from ``hca_port`` of its HCA), and an uplink at each
    width and speed ibsim can simulate."""
    rates = [("1X", "SDR"), ("4X", "DDR"), ("8X", "QDR"), ("12X", "FDR"), ("2X", "EDR"),
             ("4X", "HDR")]
    return plan_from_document({
        "schema": SCHEMA, "name": "mixed", "width": "4X", "speed": "EDR",
        "switches": [{"name": "leaf-1", "role": "leaf", "ports": 8},
                     {"name": "spine-1", "role": "spine", "ports": 8}],
        "nodes": [{"host": "n1", "hca": "mlx5_0", "port": hca_port, "switch": "leaf-1",
                   "switch_port": 1, "cable": "C0"}],
        "links": [{"a": {"switch": "leaf-1", "port": i + 2},
                   "b": {"switch": "spine-1", "port": i + 1}, "cable": f"C{i + 1}",
                   "width": w, "speed": s} for i, (w, s) in enumerate(rates)]}, "mixed")


def test_every_link_is_written_at_both_ends_with_its_width_and_speed():
    text = netfile(mixed_plan(hca_port=2))
    assert text.splitlines()[:2] == [
        '# ibsim net file of fabric plan "mixed" (rackgate fabric netfile): 2 switches, 1 HCAs,',
        "# 7 links, each at its planned width and speed (ibsim 0.10 options w= s= e=)."]
    records = text.split("\n\n")
    assert records[0].splitlines()[2:] == ['Hca 2 "n1 mlx5_0"', '[2] "leaf-1"[1] w=2 e=2']
    assert records[1].splitlines() == [
        'Switch 8 "leaf-1"', '[1] "n1 mlx5_0"[2] w=2 e=2', '[2] "spine-1"[1] w=1 s=1 e=0',
        '[3] "spine-1"[2] w=2 s=2 e=0', '[4] "spine-1"[3] w=4 s=4 e=0',
        '[5] "spine-1"[4] w=8 e=1', '[6] "spine-1"[5] w=16 e=2', '[7] "spine-1"[6] w=2 e=4']
    assert records[2].splitlines() == [
        'Switch 8 "spine-1"', '[1] "leaf-1"[2] w=1 s=1 e=0', '[2] "leaf-1"[3] w=2 s=2 e=0',
        '[3] "leaf-1"[4] w=4 s=4 e=0', '[4] "leaf-1"[5] w=8 e=1', '[5] "leaf-1"[6] w=16 e=2',
        '[6] "leaf-1"[7] w=2 e=4']
    assert len(records) == 3 and text.endswith("\n")


def test_the_subnet_managers_hca_comes_first_unless_another_is_named():
    plan = design(4, 2, 4, sm_hosts=["gpu003"])
    assert netfile(plan).splitlines()[2] == 'Hca 1 "gpu003 mlx5_0"'
    assert netfile(plan, "spine-01").splitlines()[2] == 'Switch 4 "spine-01"'
    assert netfile(design(4, 2, 4)).splitlines()[2] == 'Hca 1 "gpu001 mlx5_0"'
    with pytest.raises(ValueError, match="--first 'head01 mlx5_0' is not a node"):
        netfile(plan, "head01 mlx5_0")


@pytest.mark.parametrize("speed", ["NDR", "XDR", "FDR10"])
def test_speeds_ibsim_cannot_simulate_are_refused(speed):
    with pytest.raises(ValueError, match=f"planned at {speed}, which ibsim 0.10 cannot"):
        netfile(design(2, 1, 4, speed=speed))


Cabled = set[tuple[str, int, str, int, str, str]]


def discovered(fabric: SimFabric) -> tuple[Cabled, set[tuple[str, int]]]:
    """Every port line of `ibnetdiscover -p`: the cabled ports as (name, port, remote,
    port, width, speed), and the ports with nothing cabled; any other line fails."""
    run = fabric.tool(["ibnetdiscover", "-p"], timeout_s=120)
    assert run.returncode == 0, run.stderr
    cabled, uncabled = set(), set()
    for line in run.stdout.splitlines():
        if m := PORT_LINE.match(line.strip()):
            cabled.add((m["name"], int(m["port"]), m["rname"], int(m["rport"]),
                        m["width"].upper(), m["speed"]))
        elif u := UNCABLED.match(line.strip()):
            uncabled.add((u["name"], int(u["port"])))
        else:
            pytest.fail(f"not an ibnetdiscover -p port line: {line!r}")
    return cabled, uncabled


def planned(plan: FabricPlan) -> Cabled:
    return {(x.name, x.port, y.name, y.port, link.width, link.speed)
            for link in plan.planned_links() for x, y in ((link.a, link.b), (link.b, link.a))}


@NEEDS_IBSIM
def test_ibsim_trains_each_link_at_its_planned_width_and_speed(tmp_path: Path):
    plan = mixed_plan()
    fabric = SimFabric(netfile(plan), tmp_path)
    try:
        cabled, uncabled = discovered(fabric)
        assert cabled == planned(plan)
        assert uncabled == {("leaf-1", 8), ("spine-1", 7), ("spine-1", 8)}
    finally:
        fabric.close()


@NEEDS_IBSIM
def test_the_32_node_plan_comes_up_under_opensm_with_every_planned_link(tmp_path: Path):
    plan = design(32, 8, 64, sm_hosts=["gpu001"], sm_priority=14)
    fabric = SimFabric(netfile(plan), tmp_path)
    try:
        cache = tmp_path / "opensm-cache"
        cache.mkdir()
        started = time.monotonic()
        sweep = subprocess.run(  # one sweep, then exit: no SM is left running
            ["ibsim-run", "opensm", "-o", "-f", str(tmp_path / "opensm.log"), "-p", "14"],
            env={**fabric.env, "OSM_CACHE_DIR": str(cache), "SIM_HOST": "gpu001 mlx5_0"},
            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
        took_s = time.monotonic() - started
        log = (tmp_path / "opensm.log").read_text(errors="replace")
        assert sweep.returncode == 0 and "SUBNET UP" in log, (sweep.stdout, log[-800:])
        print(f"opensm's sweep of the 32-node fabric (268 nodes, 512 links): {took_s:.2f} s")
        cabled, uncabled = discovered(fabric)
        assert len(cabled) == 2 * 512 and uncabled == set()  # every switch port is cabled
        assert cabled == planned(plan)
        links = fabric.tool(["iblinkinfo", "--switches-only", "-l"], timeout_s=120)
        assert links.returncode == 0, links.stderr
        active = re.findall(r"==\( *4X +53.125 Gbps +Active/ +LinkUp\)==>", links.stdout)
        assert len(active) == 768  # the leaves' 512 cabled ports and the spines' 256
    finally:
        fabric.close()
