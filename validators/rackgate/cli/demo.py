"""``rackgate demo up|down|status|inject|heal``: the podman demo rack (``rackgate.demo``):
its containers, its simulated BMCs, and the faults a demo injects into them."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from rackgate.cli.common import command
from rackgate.demo.rack import DemoError
from rackgate.inventory import load_inventory

out = Console()


def _say(line: str) -> None:
    out.print(f"rackgate demo: {line}", markup=False, highlight=False, soft_wrap=True)


def cmd_demo(args: argparse.Namespace) -> int:
    from rackgate.demo import rack as demo_rack

    # the demo's own inventory unless given; its vault identity: rackgate.environment
    inv = load_inventory(args.inventory or ["inventory/demo"])
    if args.action == "up":
        out.print("Starting the demo rack (builds the base image on first use)...")
        states = demo_rack.up(inv, say=_say)
    elif args.action == "inject":
        if not args.fault:
            raise DemoError(f"inject needs a fault: {', '.join(demo_rack.FAULTS)}")
        what = demo_rack.inject(inv, args.fault)
        out.print(f"Injected {args.fault}: {what}. Validate to see the REJECT; "
                  "`rackgate demo heal` undoes it.", markup=False, highlight=False)
        states = demo_rack.status(inv)
    elif args.action == "heal":
        states = demo_rack.heal(inv, say=_say)
    elif args.action == "down":
        demo_rack.down(inv)
        states = demo_rack.status(inv)
    else:
        states = demo_rack.status(inv)
    table = Table(title="demo rack")
    for col in ("container / BMC", "state", "systemd"):
        table.add_column(col)
    for s in states:
        table.add_row(s.name, s.state, s.systemd)
    out.print(table)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate demo`` to the top-level parser."""
    d = command(
        sub, "demo", summary="manage the podman demo rack",
        description="The podman demo rack (inventory/demo): its containers and simulated "
                    "BMCs. up starts it (building the base image on first use), down removes "
                    "it, status shows it; inject puts a fault into it (a failed or absent "
                    "PSU, a coolant leak, low coolant flow, a node down) for validate to find, "
                    "and heal undoes every fault.",
        examples=["rackgate demo up", "rackgate demo inject psu-failure",
                  "rackgate demo heal", "rackgate demo down"],
        exit_codes=[(0, "done"), (2, "podman or the demo rack refused (the message says "
                                     "why)")])
    d.add_argument("action", choices=["up", "down", "status", "inject", "heal"],
                   help="what to do with the demo rack")
    d.add_argument("fault", nargs="?", help="with inject: psu-failure, psu-absent, leak, "
                                            "flow-low or node-down")
    d.add_argument("-i", "--inventory", action="append", default=None,
                   help="demo inventory (default: inventory/demo)")
    d.set_defaults(func=cmd_demo)
