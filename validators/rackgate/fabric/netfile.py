"""A fabric plan as an ibsim net file: the fabric as designed, for the simulator.

The format is ibsim's (``/usr/share/doc/ibsim-utils/net-examples``; README there): one
record per node, a header line ``Switch <ports> "<name>"`` or ``Hca <ports> "<name>"``,
then one line per connected port, ``[<port>] "<remote name>"[<remote port>]`` with the
port's enabled width and speed as options. Every link is written at both of its ends.
ibsim 0.10's options, checked by running it (iblinkinfo shows what the port trained at):

* ``w=`` LinkWidthEnabled, a bitmask: 1 = 1X, 16 = 2X, 2 = 4X, 4 = 8X, 8 = 12X;
* ``s=`` LinkSpeedEnabled: 1 = SDR, 2 = DDR, 4 = QDR (written with ``e=0``);
* ``e=`` LinkSpeedExtEnabled: 1 = FDR, 2 = EDR, 4 = HDR. It takes nothing above 7, so
  NDR and XDR cannot be simulated, nor Mellanox's FDR10 (not an IBTA speed code).

The first record is the node tools attach to when ``SIM_HOST`` is unset (and the SM port
for ``opensm`` started without it): ``first``, by default the subnet manager's first HCA.
ibsim 0.10 holds 2048 nodes, 256 switches and 13312 ports unless started with larger
``-N``/``-S``/``-P``; the 32-node, 8-rail plan is 268 nodes and 1024 ports.

>>> from rackgate.fabric.design import design
>>> print(netfile(design(1, 1, 4, name="tiny")))  # doctest: +NORMALIZE_WHITESPACE
# ibsim net file of fabric plan "tiny" (rackgate fabric netfile): 2 switches, 1 HCAs,
# 3 links, each at its planned width and speed (ibsim 0.10 options w= s= e=).
Hca 1 "gpu001 mlx5_0"
[1] "su1-leaf-r0"[1] w=2 e=4
<BLANKLINE>
Switch 4 "su1-leaf-r0"
[1] "gpu001 mlx5_0"[1] w=2 e=4
[3] "spine-01"[1] w=2 e=4
[4] "spine-01"[2] w=2 e=4
<BLANKLINE>
Switch 4 "spine-01"
[1] "su1-leaf-r0"[3] w=2 e=4
[2] "su1-leaf-r0"[4] w=2 e=4
<BLANKLINE>
"""

from __future__ import annotations

from collections import defaultdict

from rackgate.fabric.plan import FabricPlan, PlannedLink

WIDTH_MASK = {"1X": 1, "2X": 16, "4X": 2, "8X": 4, "12X": 8}
SPEED_OPTS = {"SDR": "s=1 e=0", "DDR": "s=2 e=0", "QDR": "s=4 e=0", "FDR": "e=1",
              "EDR": "e=2", "HDR": "e=4"}


def link_options(link: PlannedLink) -> str:
    """The ibsim port options of a planned link; ValueError for a speed ibsim lacks."""
    if link.speed not in SPEED_OPTS:
        raise ValueError(
            f"cable {link.cable} ({link.a} to {link.b}) is planned at {link.speed}, which "
            f"ibsim 0.10 cannot simulate (its speeds: {', '.join(SPEED_OPTS)}): simulate a "
            f"copy of the plan with another speed")
    return f"w={WIDTH_MASK[link.width]} {SPEED_OPTS[link.speed]}"


def netfile(plan: FabricPlan, first: str | None = None) -> str:
    """The net file of ``plan``: the record of node ``first`` (a node description of the
    plan; default the subnet manager's first HCA, else the plan's first HCA), then the
    switches (leaves, spines, cores, in plan order), then the HCAs."""
    ports: dict[str, list[str]] = defaultdict(list)
    hca_ports: dict[str, int] = {}
    links = plan.planned_links()
    for link in links:
        opts = link_options(link)
        for here, there in ((link.a, link.b), (link.b, link.a)):
            ports[here.name].append(f'[{here.port}] "{there.name}"[{there.port}] {opts}')
        if link.a.kind == "hca":
            hca_ports[link.a.name] = link.a.port
    records = {s.name: f"Switch {s.ports} \"{s.name}\"" for s in
               sorted(plan.switches, key=lambda s: ("leaf", "spine", "core").index(s.role))}
    records |= {name: f'Hca {port} "{name}"' for name, port in hca_ports.items()}
    if first is None:
        sm = plan.subnet_manager
        on_sm = [n.desc for n in plan.nodes if sm is not None and n.host == sm.hosts[0]]
        first = (on_sm or [n.desc for n in plan.nodes] or [plan.switches[0].name])[0]
    if first not in records:
        raise ValueError(f"--first {first!r} is not a node of fabric plan {plan.name!r} "
                         f"(an HCA's node description, \"<host> <hca>\", or a switch name)")
    order = [first, *(n for n in records if n != first)]
    head = (f'# ibsim net file of fabric plan "{plan.name}" (rackgate fabric netfile): '
            f"{len(plan.switches)} switches, {len(hca_ports)} HCAs,\n# {len(links)} links, "
            f"each at its planned width and speed (ibsim 0.10 options w= s= e=).\n")
    body = "\n".join("\n".join([records[n], *sorted(ports[n], key=_port_no)]) + "\n"
                     for n in order)
    return head + body


def _port_no(line: str) -> int:
    return int(line[1:line.index("]")])
