"""Issue 15's acceptance on a simulated fabric: the 32-node, 8-rail, two-level fat tree
that ``rackgate fabric plan --nodes 32 --rails 8 --leaf-ports 64 --speed HDR`` designs,
served by ibsim from the net file ``rackgate fabric netfile`` writes, brought up by the
real opensm, and queried by each fabric check's own command (the real infiniband-diags
under ibsim's preload, as ``rackgate_fabric_wrapper: [ibsim-run]`` would run them).

Each fault is injected the way it happens on a real floor, and each must fail the check
that owns it, naming the nodes, both ends and the cable: two cables swapped (a net file
cabled otherwise than the plan), an inter-switch link unplugged (ibsim's console, while
the subnet is up), a link trained at 1X (a net file), a port whose symbol errors rise
during the window (the console, between the two reads), and no subnet manager. The
healthy fabric passes every check on every node. Every wait is bounded (fabric_sim).
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from fabric_sim import SimFabric, missing_tools, sim_fabric
from rackgate.checks import REGISTRY, load_profile
from rackgate.fabric.design import design
from rackgate.fabric.findings import node_results
from rackgate.fabric.netfile import netfile
from rackgate.fabric.plan import FabricPlan, plan_document, plan_from_document
from rackgate.model import Result, Status

pytestmark = pytest.mark.skipif(bool(missing_tools()),
                                reason=f"needs {', '.join(missing_tools())} "
                                       f"(scripts/bootstrap.sh --test installs them)")

PLAN = design(32, 8, 64, speed="HDR", sm_hosts=["gpu001"], sm_priority=14,
              name="sim32", rack="r01")
SM = "gpu001 mlx5_0"  # the SM's HCA: the fabric host queries through it
PROFILE = load_profile("dgx-h100")
WINDOW_S = 6


def run(fabric: SimFabric, name: str, params: Mapping[str, Any] | None = None,
        during: str | None = None) -> dict[str, Result]:
    """Check ``name``'s own command on the fabric host, parsed and judged against PLAN;
    ``during``: a console command injected while the command runs (after its first read)."""
    check = REGISTRY[name]
    cp = PROFILE.check(name)
    assert cp is not None and check.judge_plan is not None
    p = check.params_model.model_validate({**cp.params, "ca": None, "port": None,
                                           **(params or {})})
    argv = check.command(p, {})
    proc = subprocess.Popen(["ibsim-run", *argv], env={**fabric.env, "SIM_HOST": SM},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = ""
    if during is not None:  # after the first read's end marker, within the window
        assert proc.stdout is not None
        deadline = time.monotonic() + check.timeout_s(p)
        while not re.search(r"read=1 .*\n(?:.*\n)*### rackgate-fabric-errors rc=", head):
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, f"no end of read 1 in {head!r}"
            head += line
        fabric.console(during)
    out, err = proc.communicate(timeout=check.timeout_s(p))
    out = head + out
    assert proc.returncode == 0, f"{name}: rc {proc.returncode}: {err[-500:]}"
    verdict = check.judge_plan(check.parse(out), p, cp.thresholds, PLAN)
    return {r.node: r for r in node_results(verdict, PLAN.hosts, name, None)}


def failing(results: Mapping[str, Result]) -> dict[str, str]:
    return {n: r.message for n, r in results.items() if r.status is not Status.PASS}


def replanned(**changes: Any) -> FabricPlan:
    """PLAN with some node ports or links changed: the fabric as (mis)built."""
    doc = plan_document(PLAN)
    for i, port in changes.get("nodes", {}).items():
        doc["nodes"][i].update(port)
    for i, link in changes.get("links", {}).items():
        doc["links"][i].update(link)
    return plan_from_document(doc, "as built")


def node_index(host: str, hca: str) -> int:
    return next(i for i, n in enumerate(PLAN.nodes) if (n.host, n.hca) == (host, hca))


def test_the_plan_is_the_32_node_8_rail_two_level_tree():
    roles = [s.role for s in PLAN.switches]
    assert (roles.count("leaf"), roles.count("spine"), roles.count("core")) == (8, 4, 0)
    assert len(PLAN.nodes) == 256 and len(PLAN.links) == 256
    assert {n.rail for n in PLAN.nodes if n.hca == "mlx5_3"} == {3}


def test_the_healthy_fabric_passes_every_check_on_every_node(tmp_path: Path):
    with sim_fabric(netfile(PLAN, SM), tmp_path, sm_host=SM, sm_priority=14) as fabric:
        for name in ("fabric.as_built", "fabric.links", "fabric.sm"):
            assert failing(run(fabric, name)) == {}, name
        assert failing(run(fabric, "fabric.errors", {"window_s": WINDOW_S})) == {}


def test_two_swapped_cables_fail_both_nodes_naming_both_cables(tmp_path: Path):
    a, b = node_index("gpu003", "mlx5_2"), node_index("gpu004", "mlx5_2")
    built = replanned(nodes={a: {"switch_port": PLAN.nodes[b].switch_port},
                             b: {"switch_port": PLAN.nodes[a].switch_port}})
    with sim_fabric(netfile(built, SM), tmp_path, sm_host=SM, sm_priority=14) as fabric:
        bad = failing(run(fabric, "fabric.as_built"))
    assert set(bad) == {"gpu003", "gpu004"}
    assert "swapped" in bad["gpu003"] and PLAN.nodes[a].cable in bad["gpu003"]
    assert PLAN.nodes[b].cable in bad["gpu003"] and "rack r01" in bad["gpu003"]
    print("swapped:", bad["gpu003"])


def test_an_unplugged_inter_switch_link_is_missing_and_down(tmp_path: Path):
    uplink = PLAN.links[0]  # su1-leaf-r0's first uplink
    with sim_fabric(netfile(PLAN, SM), tmp_path, sm_host=SM, sm_priority=14) as fabric:
        fabric.console(f'Unlink "{uplink.a.switch}"[{uplink.a.port}]')
        built, links = run(fabric, "fabric.as_built"), run(fabric, "fabric.links")
    for results, word in ((built, "missing"), (links, "down")):
        bad = failing(results)
        # every node of the one scalable unit is behind that leaf
        assert set(bad) == set(PLAN.hosts)
        assert uplink.cable in bad["gpu017"] and word in bad["gpu017"]
        print(f"unlinked ({word}):", bad["gpu017"])


def test_a_link_trained_at_1x_is_down_trained(tmp_path: Path):
    built = replanned(links={5: {"width": "1X"}})
    with sim_fabric(netfile(built, SM), tmp_path, sm_host=SM, sm_priority=14) as fabric:
        bad = failing(run(fabric, "fabric.links"))
    assert bad and all("4X planned, 1X found" in m for m in bad.values())
    assert PLAN.links[5].cable in bad["gpu001"]
    print("1X:", bad["gpu001"])


def test_rising_symbol_errors_name_the_port_and_its_cable(tmp_path: Path):
    port = PLAN.nodes[node_index("gpu007", "mlx5_5")]
    with sim_fabric(netfile(PLAN, SM), tmp_path, sm_host=SM, sm_priority=14) as fabric:
        results = run(fabric, "fabric.errors", {"window_s": WINDOW_S},
                      during=f'PerformanceSet "{port.switch}"[{port.switch_port}] '
                             f'PortCounters.SymbolErrorCounter=500')
    bad = failing(results)
    assert set(bad) == {"gpu007"}
    assert "SymbolErrorCounter" in bad["gpu007"] and port.cable in bad["gpu007"]
    print("symbol errors:", bad["gpu007"])


def test_no_subnet_manager_fails_every_node(tmp_path: Path):
    with sim_fabric(netfile(PLAN, SM), tmp_path, sm_priority=None) as fabric:
        bad = failing(run(fabric, "fabric.sm"))
    assert set(bad) == set(PLAN.hosts)
    print("no SM:", bad["gpu001"])


def test_a_master_at_another_priority_fails(tmp_path: Path):
    with sim_fabric(netfile(PLAN, SM), tmp_path, sm_host=SM, sm_priority=3) as fabric:
        bad = failing(run(fabric, "fabric.sm"))
    assert set(bad) == set(PLAN.hosts) and "14" in bad["gpu001"] and "3" in bad["gpu001"]
    print("priority:", bad["gpu001"])
