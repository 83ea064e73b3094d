"""Benchmark: parsing and judging the fabric checks' listings of a large planned fabric.

A healthy fabric of ``--nodes`` nodes on 8 rails (64-port switches, ``rackgate fabric plan``'s
design) is written as the two listings the real tools would print for it, ``ibnetdiscover -p``
(both ends of every link) and ``iblinkinfo -l`` (every linked port), in the formats
``parsers.infiniband.ibnetdiscover`` and ``parsers.infiniband.iblinkinfo`` read (the captures in
tests/fixtures/fabric show them). Then each is parsed and judged against the plan, as judging a
stored run does; with ``--fault``, one spine is left out of both listings (every
one of its links missing: the most findings a single fault gives). Prints one line per
stage with its wall time, and the median of ``--repeat`` runs.

    python bench/fabric_judge.py --nodes 2048 --repeat 3 [--fault]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from rackgate.checks.fabric.as_built import judge_as_built
from rackgate.checks.fabric.links import judge_links
from rackgate.checks.fabric.query import FabricQueryParams
from rackgate.fabric.design import design
from rackgate.fabric.plan import FabricPlan
from rackgate.parsers.infiniband.iblinkinfo import parse_iblinkinfo_ports
from rackgate.parsers.infiniband.ibnetdiscover import parse_ibnetdiscover_ports


def listings(plan: FabricPlan, without: str | None) -> tuple[str, str]:
    """(ibnetdiscover -p, iblinkinfo -l) of the fabric as planned, less switch ``without``."""
    guid: dict[str, str] = {}
    lid: dict[str, int] = {}

    def g(name: str) -> str:
        return guid.setdefault(name, f"0x{len(guid) + 0x100000:016x}")

    def n(name: str) -> int:
        return lid.setdefault(name, len(lid) + 1)

    disc, info = [], []
    for link in plan.planned_links():
        if without in (link.a.name, link.b.name):
            continue
        a, b = link.a, link.b
        kinds = {a.name: "CA" if a.kind == "hca" else "SW", b.name: "SW"}
        for x, y in ((a, b), (b, a)):
            disc.append(f"{kinds[x.name]} {n(x.name)} {x.port} {g(x.name)} 4x HDR - "
                        f"{kinds[y.name]} {n(y.name)} {y.port} {g(y.name)} "
                        f"( '{x.name}' - '{y.name}' )")
            info.append(f'{g(x.name)} "{x.name:>30}" {n(x.name)} {x.port}[  ] ==( 4X        '
                        f'53.125 Gbps Active/  LinkUp)==>  {g(y.name)} {n(y.name)} '
                        f'{y.port}[  ] "{y.name}" ( )')
    return "\n".join(disc) + "\n", "\n".join(info) + "\n"


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fault", action="store_true", help="one spine missing from the listings")
    args = ap.parse_args()
    plan, t_design = timed(lambda: design(args.nodes, 8, 64, speed="HDR"))
    spine = next(s.name for s in plan.switches if s.role == "spine") if args.fault else None
    disc, info = listings(plan, spine)
    p = FabricQueryParams()
    print(f"plan: {args.nodes} nodes, {len(plan.switches)} switches, "
          f"{len(plan.planned_links())} links (designed and validated in {t_design:.2f} s); "
          f"listings {len(disc) >> 10} KiB and {len(info) >> 10} KiB"
          + (f"; {spine} left out" if spine else ""))
    stages: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        d, t = timed(parse_ibnetdiscover_ports, disc)
        stages.setdefault("parse ibnetdiscover -p", []).append(t)
        v, t = timed(judge_as_built, d, p, {}, plan)
        stages.setdefault("judge fabric.as_built", []).append(t)
        li, t = timed(parse_iblinkinfo_ports, info)
        stages.setdefault("parse iblinkinfo -l", []).append(t)
        w, t = timed(judge_links, li, p, {}, plan)
        stages.setdefault("judge fabric.links", []).append(t)
    for stage, times in stages.items():
        print(f"{stage:<24} median {statistics.median(times):6.2f} s "
              f"({', '.join(f'{x:.2f}' for x in times)})")
    print(f"findings: as_built {len(v.findings)}, links {len(w.findings)}")


if __name__ == "__main__":
    main()
