"""Every parser fed one long line (issue 28): time against length, to find superlinear ones.

    python bench/parse_long_lines.py [--max-kib 1024] [--repeat 3] [--only NAME]

The parsers: every check's registered ``parse`` (``rackgate.checks.REGISTRY``) and every
public ``parse_*`` function of ``rackgate.parsers`` taking one text (the judges call some
of them on part of a check's evidence: the pairwise judge parses each pair's
``ib_write_bw`` report with ``parse_ib_write_bw``). For each, the line is given alone and
in the middle of the parser's own fixture (the longest under tests/fixtures that it
parses; its tool output only, as bench/make_mixed_run.py reads it), in these shapes:

* ``token``: one word of ``x``; ``digits``: one number; ``spaces``/``tabs``: blanks, then
  ``x``; ``dashes``: ``-`` (table rules); ``brackets``: ``[`` (JSON nesting);
* ``words``: ``ab ab ...``; ``numbers``: ``1.5 1.5 ...``; separators parsers split on:
  ``colons`` (``a : a : ...``), ``keyvalues`` (``Key: v<TAB>``), ``commas``, ``pipes``,
  ``equals``, ``quotes``, ``hex`` (``0x1f``), ``xml`` (``<a>``);
* ``parens``: `` (a (a ...`` (a field in parentheses that never closes); ``newlines``:
  empty lines, not one line (a pattern that runs on over line ends);
* ``own words``: the fixture's own words, cycled (a parser's keywords, in its order);
  ``own line``: the fixture's longest line, repeated with a space between; ``own field,
  blanks`` and ``own field, words``: that line's first word (a field's name), then blanks
  and ``x``, or ``ab ab ...``.

Each case runs at 1/16 of ``--max-kib`` (1 MiB), then doubling, up to it, the median of
``--repeat`` runs (``time.perf_counter``, one process, GC on), and stops early past
``--budget-s`` (a superlinear parser would take hours at 1 MiB; a run past 4 times the
budget is cut by SIGALRM). What the parser does with the line (a ParseError, a record)
does not matter here, only the time. Reported: each parser's slowest case per byte at the
longest line it reached, and that case's growth per doubling of the line (the lower of
the last two doublings): about 2 is linear, 4 quadratic. Exit 1 when a case grows faster than
``--max-growth`` (3) per doubling and takes more than ``--min-s`` (0.05 s) at its longest
line, or stops before the longest line.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import math
import os
import pkgutil
import signal
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from make_mixed_run import body
from make_run import FIXTURES

import rackgate.parsers
from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.shared.base import AcrossCheck
from rackgate.placement.evidence import judge_launched
from rackgate.store.evidence import Evidence

Parser = Callable[[str], Any]
_H100 = load_profile("dgx-h100")


PAIRWISE_JUDGE = "fabric.pairwise_bw judge (a client's report)"


def _judge_pairwise(client: str) -> Any:
    """The pairwise check judged (judge_launched, as a run judges it) from a run of two
    nodes whose client printed ``client``: the finding's path, where each pair's report is
    parsed by parse_ib_write_bw inside the judge."""
    text = "\n".join(["### rackgate-pairwise nodes=a,b rounds=1",
                      "### pair round=1 server=a client=b rc=0", "1: rackgate-role=client",
                      *(f"1: {line}" for line in client.splitlines()), "### end"]) + "\n"
    ev = Evidence(host="head", check="fabric.pairwise_bw", argv=("timeout",),
                  outcome="completed", rc=0, started=None, ended=None, duration_s=1.0,
                  stderr="", message="", stdout_file="evidence/head/fabric.pairwise_bw.out",
                  stdout_sha256="0" * 64, stdout_bytes=len(text))
    check = REGISTRY["fabric.pairwise_bw"]
    assert isinstance(check, AcrossCheck)
    return judge_launched(check, ev, text, _H100, ["a", "b"])


def parsers() -> dict[str, Parser]:
    """name -> parse function: the registry's, every one-text ``parse_*`` of the parsers
    package, and the pairwise judge (PAIRWISE_JUDGE)."""
    found: dict[str, Parser] = {PAIRWISE_JUDGE: _judge_pairwise}
    for check in REGISTRY.values():
        found.setdefault(f"{check.parse.__module__}.{check.parse.__qualname__}", check.parse)
    for info in pkgutil.iter_modules(rackgate.parsers.__path__, "rackgate.parsers."):
        module = importlib.import_module(info.name)
        for name, fn in vars(module).items():
            if not name.startswith("parse_") or not inspect.isfunction(fn) or \
                    fn.__module__ != module.__name__:
                continue
            required = [p for p in inspect.signature(fn).parameters.values()
                        if p.default is inspect.Parameter.empty]
            if len(required) == 1:
                found.setdefault(f"{fn.__module__}.{fn.__qualname__}", fn)
    return found


# parser module -> its fixtures (globs under tests/fixtures); the longest it reads is used
FIXTURES_OF = {
    "identity": ["identity/*"], "conformance": ["conformance/*"], "nvidia_smi": ["gpu/*"],
    "topology": ["topology/topo-*"], "nvlink": ["topology/nvlink-*"],
    "nvlink_errors": ["topology/nvlink-errors-*"],
    "dcgm": ["topology/dcgm-*"], "nic_pcie": ["topology/nic-pcie-*"],
    "infiniband": ["infiniband/ibstat-*"], "ibv_devinfo": ["infiniband/ibv_devinfo-*"],
    "ib_ports": ["infiniband/probe-*"], "rdma_link": ["infiniband/rdma-*"],
    "dcb": ["infiniband/dcb-*"], "ipmi": ["redundancy/ipmi-*"],
    "multipath": ["redundancy/multipath-*"], "bonding": ["redundancy/bonding-*"],
    "redfish": ["redfish/**/*.json"], "redfish_power": ["redfish/**/*.json"],
    "fio": ["fio/*"], "nccl_tests": ["nccl/*"], "nccl_tests_json": ["nccl/*"],
    "nccl_fabric": ["nccl/*"], "mpi_allreduce": ["mpi/*"], "perftest": ["perftest/*"],
    "ibnetdiscover": ["fabric/ibnetdiscover-p/*"], "iblinkinfo": ["fabric/iblinkinfo*/*"],
    "ibcounters": ["fabric_counters/errors-*"], "sminfo": ["fabric_counters/sm-*"],
}


def _pairwise() -> str:
    """Two nodes' pairwise run (parsers/pairwise.py's format) around perftest's fixture."""
    client = body("perftest/ib_write_bw-ndr400-64k-healthy.txt").splitlines()
    return "\n".join(["### rackgate-pairwise nodes=a,b rounds=1",
                      "### pair round=1 server=a client=b rc=0", "1: rackgate-role=client",
                      *(f"1: {line}" for line in client), "### end"]) + "\n"


def _dcb() -> str:
    """One interface's dcb probe output (parsers/dcb.py's format) around dcb's fixtures."""
    return "".join(f"### rackgate-dcb dev=eth2 what={what} rc=0\n{body(rel).strip()}\n"
                   for what, rel in (("pfc", "infiniband/dcb-pfc-prio3-only.json"),
                                     ("app", "infiniband/dcb-app-dscp26-to-prio3.json")))


# parsers of rackgate's own composite formats -> (a name for it, the text built)
_IB_WRITE_BW = "perftest/ib_write_bw-ndr400-64k-healthy.txt"
COMPOSED: dict[str, tuple[str, Callable[[], str]]] = {
    PAIRWISE_JUDGE: (_IB_WRITE_BW, lambda: body(_IB_WRITE_BW)),
    "rackgate.parsers.pairwise.parse_pairwise": ("pairwise of perftest", _pairwise),
    "rackgate.parsers.dcb.parse_dcb_sections": ("dcb probe of dcb fixtures", _dcb)}


def own_fixture(name: str, parse: Parser) -> tuple[str, str] | None:
    """The longest of the parser's fixtures (FIXTURES_OF, or COMPOSED) that it reads
    without an exception; None when it has none (the line is then given alone only)."""
    if name in COMPOSED:
        what, make = COMPOSED[name]
        parse(make())  # a composite the parser refuses is a bug here
        return what, make()
    module = name.split(".")[-2]
    paths = sorted({p for g in FIXTURES_OF.get(module, []) for p in FIXTURES.glob(g)
                    if p.is_file() and p.suffix != ".md"})
    read = []
    for path in paths:
        rel = str(path.relative_to(FIXTURES))
        text = body(rel)
        with contextlib.suppress(Exception):
            parse(text)
            read.append((len(text), rel, text))
    if not read:
        return None
    _, rel, text = max(read, key=lambda r: r[0])  # the first of the longest
    return rel, text


def shapes(fixture: str | None) -> dict[str, Callable[[int], str]]:
    """shape -> (length -> one line of that length, no newline)."""
    def cycle(unit: str) -> Callable[[int], str]:
        return lambda n: (unit * (n // len(unit) + 1))[:n]

    out = {
        "token": cycle("x"), "digits": cycle("7"), "spaces": lambda n: " " * (n - 1) + "x",
        "tabs": lambda n: "\t" * (n - 1) + "x", "dashes": cycle("-"), "brackets": cycle("["),
        "words": cycle("ab "), "numbers": cycle("1.5 "), "colons": cycle("a : "),
        "keyvalues": cycle("Key: v\t"), "commas": cycle("1,"), "pipes": cycle("| a "),
        "equals": cycle("a=1 "), "quotes": cycle('"a", '), "hex": cycle("0x1f "),
        "xml": cycle("<a>"), "parens": cycle(" (a"), "newlines": cycle("\n"),
    }
    if fixture:
        words = " ".join(dict.fromkeys(fixture.split())) + " "
        line = max(fixture.splitlines(), key=len) + " "
        out["own words"], out["own line"] = cycle(words), cycle(line)
        field = (line.split() or ["x"])[0]
        out["own field, blanks"] = lambda n: (field + " " * n)[:n - 1] + "x"
        out["own field, words"] = lambda n: (field + " " + "ab " * (n // 3 + 1))[:n]
    return out


@dataclass(frozen=True)
class Case:
    parser: str
    placement: str  # "alone" or "in <fixture>"
    shape: str
    times: tuple[tuple[int, float], ...]  # (line length, median seconds)
    max_len: int  # the length it was to reach

    @property
    def growth(self) -> float:
        """Time ratio per doubling, the lower of the last two doublings' (about 2: linear;
        4: quadratic, at every doubling; one step, such as the line outgrowing a CPU cache
        between 256 and 512 KiB, raises one of them only); inf when the line never reached
        ``--max-kib``."""
        if self.times[-1][1] == math.inf or self.times[-1][0] < self.max_len:
            return math.inf
        if len(self.times) < 3:
            return 0.0
        (_, t0), (_, t1), (_, t2) = self.times[-3:]
        return min(t1 / t0, t2 / t1) if t0 > 0 and t1 > 0 else 0.0


def per_byte(case: Case) -> float:
    n, t = case.times[-1]
    return t / n


class _Overrun(BaseException):  # not an Exception, which a judge turns into an error result
    pass


def _overrun(signum: int, frame: Any) -> None:
    raise _Overrun


def timed(parse: Parser, text: str, repeat: int, limit_s: float) -> float:
    """The median of ``repeat`` runs; ``inf`` when one runs past ``limit_s`` (cut by
    SIGALRM: Python code and the regular expression engine stop at a signal)."""
    runs = []
    old = signal.signal(signal.SIGALRM, _overrun)
    try:
        for _ in range(repeat):
            t0 = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, limit_s, 0.1)  # again, until cleared
            try:
                parse(text)
            except _Overrun:
                return math.inf
            except Exception:  # a ParseError (or a bug) still costs its time
                pass
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            runs.append(time.perf_counter() - t0)
    finally:
        signal.signal(signal.SIGALRM, old)
    return statistics.median(runs)


def run_case(parse: Parser, make: Callable[[int], str], around: tuple[str, str],
             max_len: int, repeat: int, budget_s: float) -> tuple[tuple[int, float], ...]:
    times = []
    n = max_len // 16
    while n <= max_len:
        t = timed(parse, around[0] + make(n) + around[1], repeat, 4 * budget_s)
        times.append((n, t))
        if t > budget_s:
            break
        n *= 2
    return tuple(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-kib", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=2.0)
    ap.add_argument("--max-growth", type=float, default=3.0)
    ap.add_argument("--min-s", type=float, default=0.05,
                    help="a case faster than this at its longest line is not judged")
    ap.add_argument("--only", help="parsers whose name contains this")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = ap.parse_args(argv)
    print(f"rackgate from {Path(rackgate.parsers.__file__).parents[1]}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    cases: list[Case] = []
    for name, parse in sorted(parsers().items()):
        if args.only and args.only not in name:
            continue
        own = own_fixture(name, parse)
        placements = {"alone": ("", "")}
        if own:
            lines = own[1].splitlines(keepends=True)
            half = len(lines) // 2
            placements[f"in {own[0]}"] = ("".join(lines[:half]), "\n" + "".join(lines[half:]))
        for shape, make in shapes(own[1] if own else None).items():
            for where, around in placements.items():
                cases.append(Case(name, where, shape, run_case(
                    parse, make, around, args.max_kib * 1024, args.repeat, args.budget_s),
                    args.max_kib * 1024))
                if args.verbose:
                    print(f"    {shape:10s} {where:50s} " + ", ".join(
                        f"{n // 1024}K {t * 1e3:.1f}ms" for n, t in cases[-1].times),
                        flush=True)
        worst = max((c for c in cases if c.parser == name), key=per_byte)
        n, t = worst.times[-1]
        print(f"  {name:58s} {t * 1e3:9.1f} ms at {n // 1024:5d} KiB "
              f"({worst.shape}, {worst.placement}; x{worst.growth:.1f} per doubling)",
              flush=True)
    bad = [c for c in cases if c.growth > args.max_growth and
           (c.times[-1][1] > args.min_s or c.times[-1][0] < c.max_len)]
    slowest = max(cases, key=per_byte)
    n, t = slowest.times[-1]
    print(f"slowest per byte: {slowest.parser} ({slowest.shape}, {slowest.placement}): "
          f"{t * 1e3:.1f} ms at {n // 1024} KiB; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for c in bad:
        print(f"SUPERLINEAR: {c.parser} ({c.shape}, {c.placement}): "
              + ", ".join(f"{n // 1024} KiB {t * 1e3:.0f} ms" for n, t in c.times))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
