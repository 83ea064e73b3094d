"""``rackgate list profiles|checks``: the shipped profiles, one name a line; or every
registered check in aligned columns (name, scope, where its command runs, tags,
description), the rack-level judgements last."""

from __future__ import annotations

import argparse

from rackgate.checks import RACK_REGISTRY, REGISTRY
from rackgate.cli.common import aligned, command
from rackgate.placement import placement_of
from rackgate.profile import available_profiles


def check_lines() -> list[str]:
    """Every check and rack-level judgement, one aligned line each, a header first."""
    rows = [["check", "scope", "runs", "tags", "description"]]
    rows += [[c.name, c.scope.value, placement_of(c).where, ",".join(sorted(c.tags)) or "-",
              c.description] for c in REGISTRY.values()]
    rows += [[r.name, r.scope.value, "over every result", ",".join(sorted(r.tags)) or "-",
              r.description] for r in RACK_REGISTRY.values()]
    return aligned(rows)


def cmd_list(args: argparse.Namespace) -> int:
    lines = list(available_profiles()) if args.what == "profiles" else check_lines()
    print("\n".join(lines))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate list`` to the top-level parser."""
    ls = command(
        sub, "list", summary="list shipped profiles or registered checks",
        description="The shipped hardware profiles (names --profile takes), or every "
                    "registered check: its name, scope, where its command runs, its tags "
                    "(--checks takes names and tags) and what it checks; the rack-level "
                    "judgements, made over every result, last.",
        examples=["rackgate list profiles", "rackgate list checks"],
        exit_codes=[(0, "listed")])
    ls.add_argument("what", choices=["profiles", "checks"],
                    help="profiles: the shipped profiles; checks: every check and tag")
    ls.set_defaults(func=cmd_list)
