"""fabric.errors and fabric.sm on live output: their real scripts (the constant ``sh -c``
of checks/fabric/errors.py and checks/fabric/sm.py) run under libumad2sim against ibsim
serving tests/fixtures/fabric_counters/test.net, with the real opensm and infiniband-diags
(``fabric_sim``), faults injected through ibsim's console, some of them while the errors
script sleeps between its two reads.

The live tests take a capture again and check that it reads, and is judged, as the
committed fixture (figures that move from run to run, the window and the rates, masked),
so the fixtures the unit tests judge are what the tools print today.
``PYTHONPATH=tests:validators python tests/integration/test_fabric_ibsim_counters.py
--write`` takes every capture again and rewrites the fixtures with their headers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from fabric_sim import SimError, SimFabric, missing_tools, sim_fabric
from rackgate.checks.fabric.errors import (
    FabricErrorsParams,
    fabric_errors_command,
    judge_fabric_errors,
)
from rackgate.checks.fabric.query import FabricQueryParams
from rackgate.checks.fabric.sm import fabric_sm_command, judge_fabric_sm
from rackgate.fabric.plan import load_plan
from rackgate.parsers.infiniband.counters import parse_ibcounters
from rackgate.parsers.sminfo import SmInfo, parse_sminfo
from rackgate.profile import Threshold

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "fabric_counters"
FABRIC_HOST = "gpu001 mlx5_0"  # the HCA the scripts query through (SIM_HOST)
WINDOW_S = 5
FIRST_READ = "### rackgate-fabric-errors read=1"  # its next rc line ends the first read
HDR_BER_PER_H = 765.0  # 1e-12 x 4 x 53.125 Gb/s x 3600 s (the profile snippet's basis)
THRESHOLDS = {
    "symbol_error_rise": Threshold(unit="errors/h", ref=HDR_BER_PER_H, max_ratio=1.0,
                                   basis="BER 1e-12 on a 4X HDR link"),
    "rcv_error_rise": Threshold(unit="errors/h", ref=HDR_BER_PER_H, max_ratio=1.0,
                                basis="BER 1e-12 on a 4X HDR link"),
    "link_error_recovery_rise": Threshold(unit="events/h", ref=1, max_ratio=1.0,
                                          basis="no retraining during acceptance"),
    "link_downed_rise": Threshold(unit="events/h", ref=1, max_ratio=1.0,
                                  basis="no link down during acceptance"),
}


@dataclass(frozen=True)
class Capture:
    fault: str  # what the capture shows
    before: tuple[str, ...] = ()  # ibsim console commands before the script runs
    during: tuple[str, ...] = ()  # errors: commands while the script sleeps between reads
    sm: tuple[str, int] | None = (FABRIC_HOST, 7)  # opensm attached as (node, priority)
    standby: tuple[str, int] | None = None  # a second opensm after the first's SUBNET UP
    stop_sm: bool = False  # stop the SM before the script runs


def _set(node: str, port: int, counter: str, value: int) -> str:
    return f'PerformanceSet "{node}"[{port}] PortCounters.{counter}={value}'


ERRORS = {
    "healthy": Capture("the fabric as planned, no counter set"),
    "symbol-errors-rising": Capture(
        "SymbolErrorCounter of leaf-r0 port 1 (cable C-0001 to gpu001 mlx5_0) set to 40 "
        "between the reads", during=(_set("leaf-r0", 1, "SymbolErrorCounter", 40),)),
    "link-downed-rising": Capture(
        "LinkDownedCounter of spine-1 port 2 (uplink C-0103 from leaf-r1) set to 2 between "
        "the reads (ibsim's Unlink and ReLink leave LinkDownedCounter at 0)",
        during=(_set("spine-1", 2, "LinkDownedCounter", 2),)),
    "counter-cleared": Capture(
        "SymbolErrorCounter of gpu002 mlx5_1 port 1 set to 5 before the first read and to 0 "
        "between the reads", before=(_set("gpu002 mlx5_1", 1, "SymbolErrorCounter", 5),),
        during=(_set("gpu002 mlx5_1", 1, "SymbolErrorCounter", 0),)),
    "counter-saturated": Capture(
        "LinkErrorRecoveryCounter of gpu002 mlx5_0 port 1 at 255, its 8-bit maximum, in "
        "both reads", before=(_set("gpu002 mlx5_0", 1, "LinkErrorRecoveryCounter", 255),)),
    "nonzero-not-failing": Capture(
        "LinkDownedCounter of leaf-r1 port 2 (C-0004) at 3 in both reads; SymbolErrorCounter "
        "of leaf-r0 port 5 (C-0101) from 0 to 1 between the reads; SymbolErrorCounter of the "
        "unconnected spine-2 port 7 from 2 to 9",
        before=(_set("leaf-r1", 2, "LinkDownedCounter", 3),
                _set("spine-2", 7, "SymbolErrorCounter", 2)),
        during=(_set("leaf-r0", 5, "SymbolErrorCounter", 1),
                _set("spine-2", 7, "SymbolErrorCounter", 9))),
    "hca-unplugged-mid-window": Capture(
        "gpu002 mlx5_0's cable (C-0003) unplugged between the reads",
        during=('Unlink "gpu002 mlx5_0"[1]',)),
    "hca-unplugged": Capture("gpu002 mlx5_1's cable (C-0004) unplugged before the script ran",
                             before=('Unlink "gpu002 mlx5_1"[1]',)),
    "no-sm": Capture("no subnet manager: no LIDs, no SA", sm=None),
}
SM = {
    "healthy": Capture("opensm on gpu001 mlx5_0 at priority 7, as planned"),
    "no-sm": Capture("no subnet manager ever ran: every port Initialize, SM LID 0", sm=None),
    "sm-gone": Capture("opensm brought the subnet up, then was stopped", stop_sm=True),
    "wrong-priority": Capture("opensm on gpu001 mlx5_0 at priority 3, planned 7",
                              sm=(FABRIC_HOST, 3)),
    "master-on-gpu002": Capture("opensm on gpu002 mlx5_1 at priority 7: not a planned SM host",
                                sm=("gpu002 mlx5_1", 7)),
    "standby-on-gpu002": Capture("opensm on gpu001 mlx5_0 at priority 7 (master) and a second "
                                 "opensm on gpu002 mlx5_0 at priority 3 (it enters STANDBY)",
                                 standby=("gpu002 mlx5_0", 3)),
    "host-port-down": Capture("opensm up, then the fabric host's own cable unplugged",
                              before=(f'Unlink "{FABRIC_HOST}"[1]',)),
}
# Derived, not captured: ibsim with opensm 3.3.23 resolves two masters (an SM started on an
# isolated part of the fabric, then joined) before a read sees both.
TWO_MASTERS = ("sm-standby-on-gpu002.txt",
               r"(sminfo: sm lid ([0-9]+) sm guid 0x[0-9a-f]+, activity count [0-9]+ "
               r"priority [0-9]+ state )2 SMINFO_STANDBY")


@contextmanager
def _second_sm(fabric: SimFabric, node: str, priority: int,
               timeout_s: float = 90) -> Iterator[None]:
    """A second opensm attached as ``node``; waits (bounded) for it to enter STANDBY."""
    cache = fabric.workdir / "opensm2-cache"
    cache.mkdir()
    log = fabric.workdir / "opensm2.log"
    env = {**fabric.env, "OSM_CACHE_DIR": str(cache), "SIM_HOST": node}
    with open(fabric.workdir / "opensm2.out", "wb") as out:
        sm = subprocess.Popen(["ibsim-run", "opensm", "-f", str(log), "-d2", "-p",
                               str(priority)], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + timeout_s
        while "Entering STANDBY state" not in (log.read_text(errors="replace")
                                               if log.exists() else ""):
            if sm.poll() is not None or time.monotonic() > deadline:
                raise SimError(f"waited {timeout_s} s for the second opensm to enter STANDBY")
            time.sleep(0.2)
        yield
    finally:
        sm.terminate()
        try:
            sm.wait(10)
        except subprocess.TimeoutExpired:
            sm.kill()
            sm.wait(10)


def _run(fabric: SimFabric, argv: list[str], during: tuple[str, ...],
         timeout_s: float = 120) -> str:
    """The script's stdout, run as FABRIC_HOST; ``during`` goes to ibsim's console once the
    first read is over (the script then sleeps WINDOW_S before the second)."""
    env = {**fabric.env, "SIM_HOST": FABRIC_HOST}
    with open(fabric.workdir / "script.err", "wb") as err:
        proc = subprocess.Popen(["ibsim-run", *argv], stdout=subprocess.PIPE, stderr=err,
                                env=env, cwd=fabric.workdir, text=True)
    lines: list[str] = []
    first_read_done = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        in_first = False
        for line in proc.stdout:
            lines.append(line)
            in_first = in_first or line.startswith(FIRST_READ)
            if in_first and line.startswith("### rackgate-fabric-errors rc="):
                first_read_done.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if during:
            if not first_read_done.wait(timeout_s):
                raise SimError(f"waited {timeout_s} s for the first read to end")
            for command in during:
                fabric.console(command)
        proc.wait(timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(10)
    assert proc.returncode == 0, f"{argv[:3]} exited {proc.returncode}: {''.join(lines)[-800:]}"
    return "".join(lines)


def take(kind: str, name: str, workdir: Path) -> str:
    """Run the check's script live for capture ``name`` of ``kind`` (errors or sm)."""
    c = (ERRORS if kind == "errors" else SM)[name]
    net = (HERE / "test.net").read_text(encoding="utf-8")
    sm_host, priority = c.sm if c.sm is not None else (None, None)
    with sim_fabric(net, workdir, sm_host=sm_host, sm_priority=priority) as fabric:
        if c.stop_sm:
            fabric.stop_sm()
        with _second_sm(fabric, *c.standby) if c.standby else _nothing():
            for command in c.before:
                fabric.console(command)
            if any(x.startswith("Unlink") for x in c.before):
                time.sleep(2)  # bounded: opensm's resweep on the unplugged port's trap
            if kind == "errors":
                argv = fabric_errors_command(FabricErrorsParams(window_s=WINDOW_S), {})
                return _run(fabric, argv, c.during)
            return _run(fabric, fabric_sm_command(FabricQueryParams(), {}), ())


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def committed(kind: str, name: str) -> str:
    text = (HERE / f"{kind}-{name}.txt").read_text(encoding="utf-8")
    head, sep, body = text.partition("\n# ---\n")
    assert sep and head.startswith("# source:"), f"{kind}-{name}.txt has no header"
    return body


_MOVING = re.compile(r"[0-9][0-9,]*(?:\.[0-9]+)? (?:s\b|errors/h|events/h)|\([0-9.,]+/h")


def judged(kind: str, text: str) -> tuple[Any, list[tuple[str, str, list[str]]]]:
    """What the parser reads (figures that move from run to run left out) and the findings
    (the window and the rates masked)."""
    plan = load_plan(HERE / "plan.yml").plan
    if kind == "errors":
        rec = parse_ibcounters(text)
        read: Any = (sorted((p.node, p.port) for p in rec.ports),
                     [(sorted((p.node, p.port, p.counters) for p in r.ports),
                       replace(r.walk, said=()), r.rc) for r in (rec.first, rec.second)])
        verdict = judge_fabric_errors(rec, FabricErrorsParams(window_s=WINDOW_S), THRESHOLDS,
                                      plan)
    else:
        sm = parse_sminfo(text)
        steady = replace(sm, master=replace(sm.master, activity=0)
                         if isinstance(sm.master, SmInfo) else sm.master,
                         sms=tuple(replace(s, info=replace(s.info, activity=0)
                                           if isinstance(s.info, SmInfo) else s.info)
                                   for s in sm.sms))
        read = steady
        verdict = judge_fabric_sm(sm, FabricQueryParams(), {}, plan)
    return read, [(f.status.label, _MOVING.sub("#", f.message), sorted(f.hosts))
                  for f in verdict.findings]


MISSING = missing_tools() + [t for t in ("ibqueryerrors", "smpquery", "saquery")
                            if shutil.which(t) is None]
needs_ibsim = pytest.mark.skipif(bool(MISSING), reason=f"needs {MISSING}")


@needs_ibsim
def test_symbol_errors_injected_mid_window_fail_the_link_as_committed(tmp_path: Path) -> None:
    live = take("errors", "symbol-errors-rising", tmp_path)
    read, findings = judged("errors", live)
    assert [(s, h) for s, _, h in findings] == [("fail", ["gpu001"])]
    assert findings[0][1].startswith('cable C-0001 ("gpu001 mlx5_0"[1] <-> "leaf-r0"[1]): '
                                     'SymbolErrorCounter of "leaf-r0"[1] rose from 0 to 40 in')
    assert (read, findings) == judged("errors", committed("errors", "symbol-errors-rising"))


@needs_ibsim
@pytest.mark.parametrize("name", ["no-sm", "standby-on-gpu002"])
def test_the_sm_captures_are_what_the_tools_print_now(name: str, tmp_path: Path) -> None:
    live = take("sm", name, tmp_path)
    assert judged("sm", live) == judged("sm", committed("sm", name))


def _versions() -> str:
    ask = ["dpkg-query", "-W", "-f", "${Package} ${Version}; ", "infiniband-diags",
           "ibsim-utils", "opensm"]
    return subprocess.run(ask, capture_output=True, text=True, check=True).stdout.strip(" ;")


def _header(kind: str, c: Capture, versions: str) -> str:
    script = {"errors": "ERRORS_SCRIPT of validators/rackgate/checks/fabric/errors.py",
              "sm": "SM_SCRIPT of validators/rackgate/checks/fabric/sm.py"}[kind]
    args = f"rackgate-fabric-errors {WINDOW_S} '' ''" if kind == "errors" \
        else "rackgate-fabric-sm '' ''"
    sm = "no subnet manager running" if c.sm is None else (
        f'opensm -p {c.sm[1]} attached as "{c.sm[0]}", after its first sweep (SUBNET UP)'
        + ("; then stopped" if c.stop_sm else ""))
    if c.standby:
        sm += f'; a second opensm -p {c.standby[1]} attached as "{c.standby[0]}" (STANDBY)'
    return (f"# source: captured here by tests/integration/test_fabric_ibsim_counters.py "
            f"--write ({versions})\n"
            f"# fabric: ibsim -s tests/fixtures/fabric_counters/test.net; {sm}\n"
            f"# console before the script: {'; '.join(c.before) or 'none'}\n"
            + (f"# console between the two reads: {'; '.join(c.during) or 'none'}\n"
               if kind == "errors" else "")
            + f'# command: IBSIM_SOCKNAME=<unique> SIM_HOST="{FABRIC_HOST}" ibsim-run sh -c '
            f'"$SCRIPT" {args}  (SCRIPT: {script})\n'
            f"# fault: {c.fault}\n# ---\n")


def write_fixtures() -> None:
    versions = _versions()
    for kind, captures in (("errors", ERRORS), ("sm", SM)):
        for name, c in captures.items():
            with tempfile.TemporaryDirectory() as work:
                out = take(kind, name, Path(work))
            (HERE / f"{kind}-{name}.txt").write_text(_header(kind, c, versions) + out,
                                                     encoding="utf-8")
    source, pattern = TWO_MASTERS
    head, _, body = (HERE / source).read_text(encoding="utf-8").partition("\n# ---\n")
    found = re.findall(pattern, body)
    assert len(found) == 1, f"{source}: not one STANDBY answer to derive two-masters from"
    changed = re.sub(pattern, r"\g<1>3 SMINFO_MASTER", body)
    (HERE / "sm-two-masters.txt").write_text(
        f"# source: derived by tests/integration/test_fabric_ibsim_counters.py --write from "
        f"the capture {source} (its header follows), its one STANDBY answer (sminfo "
        f"{found[0][1]}) changed from state 2 SMINFO_STANDBY to state 3 SMINFO_MASTER as "
        "infiniband-diags sminfo.c prints it: ibsim with opensm 3.3.23 resolves two masters "
        "before a read can see both\n"
        f"# fault: two SMs answer SMINFO_MASTER (the fabric host's at LID 1, another at LID "
        f"{found[0][1]})\n" + "\n".join(f"# | {x[2:]}" for x in head.splitlines())
        + "\n# ---\n" + changed, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(f"usage: PYTHONPATH=tests:validators {sys.argv[0]} --write  (retakes them)")
    write_fixtures()
