"""``rackgate fabric``: write a fabric plan, check one, and derive from it the ibsim net
file and SLURM's topology.conf (or the slurm role's variables for it).

Text goes to stdout as written (no console wrapping: YAML and topology.conf lines are
long); every refusal is one line on stderr naming the file and field, with exit 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from rackgate.cli.common import command
from rackgate.fabric.design import design
from rackgate.fabric.netfile import netfile
from rackgate.fabric.plan import FabricPlan, load_plan, plan_document
from rackgate.fabric.slurm_topology import topology_conf, topology_vars
from rackgate.refusal import Refusal

EXIT_OK, EXIT_CANNOT_RUN = 0, 2
EXITS = [(EXIT_OK, "done"), (EXIT_CANNOT_RUN, "refused: an invalid plan, an impossible design "
                                              "or an output that exists (one line naming the "
                                              "file and field)")]
FABRIC_EXAMPLES = [
    "rackgate fabric plan --nodes 32 --rails 8 --leaf-ports 64 --sm-host rg-sm -o fabric.yml",
    "rackgate fabric check --plan inventory/<site>/fabric.yml",
    "rackgate fabric topology --plan inventory/<site>/fabric.yml --plugin tree",
    "rackgate fabric netfile --plan inventory/<site>/fabric.yml -o net"]



def plan_yaml(plan: FabricPlan, header: str) -> str:
    """The plan document as YAML: one line per switch, node port and link."""
    doc = plan_document(plan)
    out = [header]
    for key, value in doc.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            out.append(f"{key}:")
            out += [f"  - {_flow(item)}" for item in value]
        else:
            out.append(yaml.safe_dump({key: value}, sort_keys=False).rstrip())
    return "\n".join(out) + "\n"


def _flow(item: Any) -> str:
    return yaml.safe_dump(item, sort_keys=False, default_flow_style=True,
                          width=2**16).strip()


def _emit(text: str, path: str | None, force: bool = True) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    target = Path(path)
    if target.exists() and not force:
        raise Refusal(f"{target} exists: give --force to overwrite it")
    target.write_text(text, encoding="utf-8")
    sys.stderr.write(f"wrote {target}\n")


def _load(path: str) -> FabricPlan:
    return load_plan(Path(path)).plan


def cmd_plan(args: argparse.Namespace) -> int:
    hcas = [h.strip() for h in args.hcas.split(",")] if args.hcas else None
    plan = design(args.nodes, args.rails, args.leaf_ports, spine_ports=args.spine_ports,
                  speed=args.speed, width=args.width, host_format=args.host_format,
                  hca_format=args.hca_format, hcas=hcas, name=args.name,
                  sm_hosts=args.sm_host or (), sm_priority=args.sm_priority, rack=args.rack)
    header = (f"# Fabric plan {plan.name!r} (schema {plan_document(plan)['schema']}): a "
              f"rail-optimised fat tree written by\n#   {_wrapped(_command(args))}\n# Edit it "
              f"to the "
              f"fabric as built; `rackgate fabric check --plan FILE` validates it.")
    if plan.subnet_manager is None:
        header += ("\n# No subnet manager is planned: add subnet_manager (hosts, priority) when "
                   "hosts of the\n# inventory run it (--sm-host).")
    _emit(plan_yaml(plan, header), args.output, args.force)
    return EXIT_OK


def _wrapped(command: str) -> str:
    """A command line in comment lines of at most ~90 characters (shell continuations)."""
    lines = textwrap.wrap(command, 84, break_long_words=False, break_on_hyphens=False)
    return " \\\n#     ".join(lines)


def _command(args: argparse.Namespace) -> str:
    """The ``rackgate fabric plan`` command line that writes this plan again."""
    words = ["rackgate", "fabric", "plan"]
    for option in ("nodes", "rails", "leaf_ports", "spine_ports", "speed", "width",
                   "host_format", "hca_format", "hcas", "name", "sm_priority", "rack"):
        value = getattr(args, option)
        if value is not None and not (option == "hca_format" and args.hcas) and not (
                option == "sm_priority" and not args.sm_host):
            words += [f"--{option.replace('_', '-')}", str(value)]
    for host in args.sm_host or ():
        words += ["--sm-host", host]
    return " ".join(shlex.quote(w) for w in words)


def cmd_netfile(args: argparse.Namespace) -> int:
    _emit(netfile(_load(args.plan), args.first), args.output)
    return EXIT_OK


def cmd_topology(args: argparse.Namespace) -> int:
    plan = _load(args.plan)
    if not args.vars:
        _emit(topology_conf(plan, args.plugin), args.output)
        return EXIT_OK
    header = (f"# The slurm role's topology variables from fabric plan {args.plan} (rackgate "
              f"fabric topology --vars);\n# give them to every SLURM host (group_vars). "
              f"slurm_topology_plugin chooses the form.\n")
    _emit(header + yaml.safe_dump(topology_vars(plan, args.plugin), sort_keys=False,
                                  width=2**16), args.output)
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    loaded = load_plan(Path(args.plan))
    plan = loaded.plan
    roles = Counter(s.role for s in plan.switches)
    rails = Counter(n.rail for n in plan.nodes)
    links = plan.planned_links()
    rate = {f"{lnk.width} {lnk.speed}" for lnk in links} or {f"{plan.width} {plan.speed}"}
    sm = plan.subnet_manager
    lines = [
        f"fabric plan {loaded.source}: {plan.name!r}, valid (sha256 {loaded.sha256[:12]})",
        f"switches: {roles['leaf']} leaf, {roles['spine']} spine, {roles['core']} core",
        f"node ports: {len(plan.nodes)} on {len(plan.hosts)} hosts",
        "rails: " + _rails(rails),
        f"links: {len(links)} ({len(plan.nodes)} node, {len(plan.links)} inter-switch), "
        f"at {', '.join(sorted(rate))}",
        "subnet manager: " + (f"{', '.join(sm.hosts)} (priority {sm.priority})" if sm
                              else "none planned")]
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK


def _rails(ports: Counter[int | None]) -> str:
    """'0-7, 32 ports each', or each rail's count when they differ."""
    rails = sorted(r for r in ports if r is not None)
    counts = set(ports.values())
    if rails and None not in ports and len(counts) == 1 and rails == list(
            range(rails[0], rails[-1] + 1)):
        return f"{rails[0]}-{rails[-1]}, {counts.pop()} ports each"
    return ", ".join(f"{'none' if r is None else r}: {n} ports" for r, n in sorted(
        ports.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))) or "none"


def run(args: argparse.Namespace) -> int:
    """Run a fabric command; a plan error or an impossible design (both ValueError) is its
    refusal."""
    try:
        code: int = args.fabric_func(args)
        return code
    except ValueError as exc:
        raise Refusal(str(exc)) from None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate fabric`` and its commands to the top-level parser."""
    f = command(
        sub, "fabric", summary="write, check and derive from a fabric plan "
                               "(inventory/<site>/fabric.yml)",
        description="The InfiniBand fabric as inventory data (inventory/<site>/fabric.yml): "
                    "switches, links, rails and each node port's switch and port. plan "
                    "designs one, check validates one, and topology and netfile derive SLURM's "
                    "topology.conf and an ibsim net file from it. Each command has its own "
                    "help: rackgate fabric COMMAND --help.",
        examples=FABRIC_EXAMPLES, exit_codes=EXITS)
    f.set_defaults(func=run, one_line=True)
    fs = f.add_subparsers(dest="fabric_command", required=True, metavar="COMMAND")

    p = command(fs, "plan", summary="design a rail-optimised fat tree and write its plan",
                description="Design a rail-optimised fat tree for --nodes nodes with --rails "
                            "HCAs each on leaves of --leaf-ports ports, and write its plan "
                            "(YAML) to edit to the fabric as built.",
                examples=[FABRIC_EXAMPLES[0]], exit_codes=EXITS)
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--rails", type=int, required=True, help="HCAs (and leaves) per node/SU")
    p.add_argument("--leaf-ports", type=int, required=True, help="ports of a leaf switch")
    p.add_argument("--spine-ports", type=int, help="ports of a spine/core (default: leaf's)")
    p.add_argument("--speed", default="HDR", help="link speed (default: HDR)")
    p.add_argument("--width", default="4X", help="link width (default: 4X)")
    p.add_argument("--host-format", default="gpu{:03d}", help="node names, numbered from 1: "
                   "text with {} fields, each an integer's format at most 99 wide "
                   "(default: gpu{:03d})")
    p.add_argument("--hca-format", default="mlx5_{}", help="HCA of rail r, the same way "
                                                           "(default: mlx5_{})")
    p.add_argument("--hcas", help="the HCAs of rails 0, 1, ... comma-separated "
                                  "(instead of --hca-format)")
    p.add_argument("--name", default="fabric", help="the plan's name (default: fabric)")
    p.add_argument("--sm-host", action="append", help="a host running the subnet manager "
                                                      "(repeat for standbys)")
    p.add_argument("--sm-priority", type=int, default=15, help="SM priority (default: 15)")
    p.add_argument("--rack", help="the rack every switch sits in")
    p.add_argument("-o", "--output", help="write the plan here (default: stdout)")
    p.add_argument("--force", action="store_true", help="overwrite --output")
    p.set_defaults(fabric_func=cmd_plan, where="rackgate fabric plan")

    n = command(fs, "netfile", summary="the plan as an ibsim net file",
                description="The fabric plan as an ibsim net file: Debian's fabric simulator "
                            "then serves the planned fabric to infiniband-diags, to rehearse "
                            "the fabric checks.",
                examples=[FABRIC_EXAMPLES[3]], exit_codes=EXITS)
    n.add_argument("--plan", required=True)
    n.add_argument("--first", help='the node tools attach to by default ("<host> <hca>"; '
                                   "default: the subnet manager's first HCA)")
    n.add_argument("-o", "--output", help="write the net file here (default: stdout)")
    n.set_defaults(fabric_func=cmd_netfile, where="rackgate fabric netfile")

    t = command(fs, "topology", summary="SLURM's topology.conf from the plan",
                description="SLURM's topology.conf (tree or block plugin) from the fabric "
                            "plan, or with --vars the slurm role's variables that write it.",
                examples=[FABRIC_EXAMPLES[2], FABRIC_EXAMPLES[2] + " --vars"], exit_codes=EXITS)
    t.add_argument("--plan", required=True)
    t.add_argument("--plugin", choices=["tree", "block"], default="tree")
    t.add_argument("--vars", action="store_true", help="the slurm role's variables (YAML)")
    t.add_argument("-o", "--output", help="write it here (default: stdout)")
    t.set_defaults(fabric_func=cmd_topology, where="rackgate fabric topology")

    c = command(fs, "check", summary="validate a plan and summarise it",
                description="Validate a fabric plan (every switch, port, link and rail) and "
                            "summarise what it holds.",
                examples=[FABRIC_EXAMPLES[1]],
                exit_codes=[(EXIT_OK, "the plan is valid"),
                            (EXIT_CANNOT_RUN, "it is not (one line naming the file and "
                                              "field)")])
    c.add_argument("--plan", required=True)
    c.set_defaults(fabric_func=cmd_check, where="rackgate fabric check")
