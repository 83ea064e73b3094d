"""fabric.as_built and fabric.links on live output: the real ``ibnetdiscover -p`` and
``iblinkinfo`` (infiniband-diags) run against ibsim serving the net files of
tests/fixtures/fabric/nets, with the real opensm as subnet manager (``fabric_sim``).

Every committed capture under tests/fixtures/fabric/<tool>/ is taken again here, live, and
judged against tests/fixtures/fabric/plan.yml: the live output must read as the same links
and ports, and be judged with the same findings, as the committed text. So the fixtures the
unit tests judge are what the tools print today. ``PYTHONPATH=tests python
tests/integration/test_fabric_ibsim_checks.py --write`` takes them again and rewrites them
(with their headers).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fabric_sim import missing_tools, sim_fabric
from rackgate.checks.fabric.as_built import judge_as_built
from rackgate.checks.fabric.links import judge_links
from rackgate.checks.fabric.query import FabricQueryParams
from rackgate.fabric.plan import load_plan
from rackgate.parsers.infiniband.iblinkinfo import parse_iblinkinfo_ports
from rackgate.parsers.infiniband.ibnetdiscover import parse_ibnetdiscover_ports

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"
FABRIC_HOST = "gpu001 mlx5_0"  # the SM's HCA and the one the tools query through
TOOLS = {"ibnetdiscover-p": ["ibnetdiscover", "-p"], "iblinkinfo-l": ["iblinkinfo", "-l"],
         "iblinkinfo": ["iblinkinfo"]}


@dataclass(frozen=True)
class Capture:
    net: str  # a file of nets/
    fault: str  # what the capture shows
    console: tuple[str, ...] = ()  # ibsim console commands before the capture
    sm: bool = True  # opensm brought the subnet up first


CAPTURES = {
    "healthy": Capture("healthy.net", "the fabric as planned, every link Active 4X HDR"),
    "swapped-cables": Capture("swapped-cables.net", "gpu001 mlx5_0 and gpu002 mlx5_0 "
                              "swapped at su1-leaf-r0 ports 1 and 2"),
    "swapped-uplinks": Capture("swapped-uplinks.net", "the uplinks su1-leaf-r0/5 and /6 "
                               "swapped at their spine ends"),
    "wrong-port": Capture("wrong-port.net", "gpu002 mlx5_0 on su1-leaf-r0 port 3, planned 2"),
    "other-rail-leaf": Capture("other-rail-leaf.net", "gpu002 mlx5_1 (rail 1) on rail 0's "
                               "leaf su1-leaf-r0 port 3"),
    "unexpected-switch": Capture("unexpected-switch.net", "the uplink su1-leaf-r0/5 on "
                                 "spine-02 port 3, planned spine-01 port 1"),
    "extra-link": Capture("extra-link.net", "an unplanned cable su1-leaf-r0[7] - spine-01[3]"),
    "duplicate-description": Capture("duplicate-description.net", "gpu002's mlx5_0 "
                                     'describes itself as "gpu001 mlx5_0"'),
    "sharp-aggregation-nodes": Capture("sharp-aggregation-nodes.net", "each leaf's SHARP "
                                       "aggregation node on port 9, past its 8 external ports"),
    "unlinked-uplink": Capture("healthy.net", "the uplink su1-leaf-r0/5 unplugged",
                               ('Unlink "su1-leaf-r0"[5]',)),
    "spine-missing": Capture("healthy.net", "both cables of spine-02 unplugged",
                             ('Unlink "spine-02"[1]', 'Unlink "spine-02"[2]')),
    "hca-missing": Capture("healthy.net", "the cable of gpu002 mlx5_1 unplugged",
                           ('Unlink "gpu002 mlx5_1"[1]',)),
    "host-port-down": Capture("healthy.net", "the fabric host's own cable unplugged",
                              (f'Unlink "{FABRIC_HOST}"[1]',)),
    "reduced-width": Capture("reduced-width.net", "gpu002 mlx5_1's link trained at 1X"),
    "reduced-speed": Capture("reduced-speed.net", "the uplink su1-leaf-r1/6 trained at EDR"),
    "no-sm": Capture("healthy.net", "no subnet manager: every port Initialize", sm=False),
}
# which captures each tool's fixtures hold
TAKEN = {
    "ibnetdiscover-p": [
        "healthy", "swapped-cables", "swapped-uplinks", "wrong-port", "other-rail-leaf",
        "unexpected-switch", "extra-link", "duplicate-description", "unlinked-uplink",
        "spine-missing", "hca-missing", "host-port-down", "sharp-aggregation-nodes"],
    "iblinkinfo-l": ["healthy", "swapped-cables", "unlinked-uplink", "reduced-width",
                     "reduced-speed", "no-sm", "host-port-down", "duplicate-description",
                     "extra-link", "other-rail-leaf", "sharp-aggregation-nodes"],
    "iblinkinfo": ["healthy"],
}
PARAMS: list[Any] = [pytest.param(t, s, id=f"{t}-{s}") for t, names in TAKEN.items()
                     for s in names]


def take(name: str, tools: list[str], workdir: Path) -> dict[str, str]:
    """Run ``tools`` (keys of TOOLS) live for capture ``name``: tool -> stdout."""
    c = CAPTURES[name]
    out = {}
    with sim_fabric((HERE / "nets" / c.net).read_text(encoding="utf-8"), workdir,
                    sm_host=FABRIC_HOST, sm_priority=15 if c.sm else None) as fabric:
        for command in c.console:
            fabric.console(command)
        for tool in tools:
            done = fabric.tool(TOOLS[tool], host=FABRIC_HOST)
            assert done.returncode == 0, f"{TOOLS[tool]} for {name}: {done.stderr}"
            out[tool] = done.stdout
    return out


def committed(tool: str, name: str) -> str:
    text = (HERE / tool / f"{name}.txt").read_text(encoding="utf-8")
    head, sep, body = text.partition("\n# ---\n")
    assert sep and head.startswith("# source:"), f"{tool}/{name}.txt has no header"
    return body


def judged(tool: str, text: str) -> tuple[Any, list[tuple[str, str, list[str]]]]:
    """What the parser reads (links and ports, without line numbers) and the findings."""
    plan = load_plan(HERE / "plan.yml").plan
    if tool == "ibnetdiscover-p":
        d = parse_ibnetdiscover_ports(text)
        read: Any = sorted((str(k.a), k.a.guid, str(k.b), k.b.guid, k.width, k.speed)
                           for k in d.links)
        verdict = judge_as_built(d, FabricQueryParams(), {}, plan)
    else:
        info = parse_iblinkinfo_ports(text)
        read = sorted((p.name, p.port, p.guid, p.width, p.speed_text, p.state,
                       p.physical_state, str(p.peer), p.hint) for p in info.ports)
        verdict = judge_links(info, FabricQueryParams(), {}, plan)
    return read, [(f.status.label, f.message, sorted(f.hosts)) for f in verdict.findings]


@pytest.mark.skipif(bool(missing_tools()), reason=f"needs {missing_tools()}")
@pytest.mark.parametrize(("tool", "name"), PARAMS)
def test_the_committed_capture_is_what_the_tools_print_now(tool: str, name: str,
                                                            tmp_path: Path) -> None:
    live = take(name, [tool], tmp_path)[tool]
    assert judged(tool, live) == judged(tool, committed(tool, name))
    assert live == committed(tool, name), (
        f"{tool}/{name}.txt reads and is judged alike, but the tool prints other text now "
        f"(LIDs, spacing): retake it with --write")


def _versions() -> str:
    ask = ["dpkg-query", "-W", "-f", "${Package} ${Version}; ", "infiniband-diags",
           "ibsim-utils", "opensm"]
    return subprocess.run(ask, capture_output=True, text=True, check=True).stdout.strip(" ;")


def write_fixtures() -> None:
    """Take every capture of TAKEN again and rewrite its fixture file, with its header."""
    versions = _versions()
    for name in sorted({n for names in TAKEN.values() for n in names}):
        tools = [t for t, names in TAKEN.items() if name in names]
        c = CAPTURES[name]
        with tempfile.TemporaryDirectory() as work:
            out = take(name, tools, Path(work))
        for tool in tools:
            console = "; ".join(c.console) or "none"
            sm = (f'opensm -p 15 attached as "{FABRIC_HOST}", after its first sweep '
                  f"(SUBNET UP)" if c.sm else "no subnet manager running")
            head = (f"# source: captured here by tests/integration/test_fabric_ibsim_checks.py"
                    f" --write ({versions})\n"
                    f"# fabric: ibsim -s tests/fixtures/fabric/nets/{c.net}; {sm}\n"
                    f"# console before the capture: {console}\n"
                    f"# command: IBSIM_SOCKNAME=<unique> SIM_HOST=\"{FABRIC_HOST}\" ibsim-run "
                    f"{' '.join(TOOLS[tool])}\n"
                    f"# fault: {c.fault}\n# ---\n")
            (HERE / tool).mkdir(exist_ok=True)
            (HERE / tool / f"{name}.txt").write_text(head + out[tool], encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(f"usage: PYTHONPATH=tests {sys.argv[0]} --write  (retakes the captures)")
    write_fixtures()
