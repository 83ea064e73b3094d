"""The plan before collecting (``rackgate validate --plan``): every problem that would spoil a
run, found in seconds and before any benchmark runs, all of them at once.

Three parts, the first two pure:

- :func:`build` turns a run's view and checks into a :class:`Preflight`: the problems
  planning itself finds (a check's command that cannot be built for a host, a missing
  credential variable: ``collect.schedule``'s ``NotRun`` records; multi-node checks without a
  launch host) and one probe :class:`~rackgate.commands.task.Task` per host with what it
  asks (:class:`Need`): each check's tools (``command -v``), the directories it writes into
  (exists, writable, room for fio's files), the RDMA devices and netdevs the profile names
  (and, where the inventory sets rdma_device_naming, that the policy gives those names),
  root where a check needs it; on the control host, that each BMC credential decrypts and is
  not empty; on the launch host, that ``sinfo`` answers and ``srun --test-only`` accepts
  the nodes. The probe is ``programs/probes/preflight.py`` sent as text, every input its own
  argv word, each identifier checked against ``commands.launch``'s patterns first.
  A check that runs the first of several tools it finds (fabric.ports) needs one of them.
- :func:`judge` turns the probes' answers into :class:`Problem` records, each naming the
  host, the check and the input (variable, path, tool, device).
- :func:`run` runs the probes through the collector into a temporary directory (never a run
  directory) without the node lock: a probe never waits for another run's benchmark.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rackgate.checks.shared.base import SECRET_FILE, Check, HostNeeds
from rackgate.collect.ansible import collect
from rackgate.collect.preflight_naming import naming_problems, needs_on
from rackgate.collect.preflight_records import Answer, Kind, Need, Preflight, Probe, Problem
from rackgate.collect.schedule import plan
from rackgate.collect.stop import Stop
from rackgate.commands.failure import ControlSideError, did_not_answer, same_failure
from rackgate.commands.launch import NODE_NAME, PARTITION, PATH_NAME, PROGRAM, RDMA_DEVICE
from rackgate.commands.task import Task
from rackgate.documents import load_json
from rackgate.fabric.rails import rail_mismatches
from rackgate.placement import (
    ACROSS_NODES,
    MIN_NODES_ACROSS,
    NO_FABRIC_HOST,
    NO_LAUNCH_HOST,
    NO_LAUNCH_VAR,
    NO_PLAN,
    ON_FABRIC,
    NotRun,
    RunView,
    placement_of,
)
from rackgate.placement.evidence import not_applicable
from rackgate.programs.probes import source
from rackgate.refusal import Refusal
from rackgate.store.evidence import EvidenceError, EvidenceStore

PLAN_NODE, PLAN_CONTROL, PLAN_LAUNCH = "plan.node", "plan.control", "plan.launch"
PROBE_TIMEOUT_S = 90  # the probe's own commands (sinfo, srun --test-only) wait 30 s each
_SHELLS = frozenset({"sh", "bash", "/bin/sh", "/bin/bash"})
_LAUNCHERS = frozenset({"srun", "mpirun"})

class _Asks:
    """The needs of one probe, merged by (kind, subject)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], Need] = {}

    def add(self, kind: Kind, subject: str, check: str, room: int = 0, what: str = "") -> None:
        old = self.items.get((kind, subject))
        if old is None:
            self.items[(kind, subject)] = Need(kind, subject, (check,), room, what)
        else:
            checks = old.checks if check in old.checks else (*old.checks, check)
            self.items[(kind, subject)] = replace(old, checks=checks,
                                                  room_bytes=max(old.room_bytes, room),
                                                  what=old.what or what)

    def add_needs(self, needs: HostNeeds, check: str) -> None:
        for tool in needs.tools:
            self.add("tool", tool, check)
        if needs.any_tool:
            self.add("any_tool", " ".join(needs.any_tool), check)
        for path, room, var in needs.dirs:
            self.add("dir", path, check, room, var)
        for dev in needs.rdma_devices:
            self.add("rdma", dev, check)
        for dev in needs.net_devices:
            self.add("net", dev, check)
        if needs.root:
            self.add("root", "uid 0", check, what=needs.root)


_PATTERNS: Mapping[str, tuple[Any, str]] = {
    "tool": (PROGRAM, "tool name"), "dir": (PATH_NAME, "path"),
    "rdma": (RDMA_DEVICE, "RDMA device name"), "net": (RDMA_DEVICE, "netdev name"),
}


def _argv(python: str, needs: Sequence[Need]) -> tuple[str, ...]:
    argv = [python, "-c", source("preflight")]
    for n in needs:
        if n.kind == "dir":
            argv += ["--dir", n.subject, str(n.room_bytes)]
        elif n.kind in ("tool", "rdma", "net"):
            argv += [f"--{n.kind}", n.subject]
        elif n.kind == "any_tool":
            argv += [w for t in n.subject.split() for w in ("--tool", t)]
        elif n.kind == "root":
            argv.append("--root")
        elif n.kind == "secret":
            argv += ["--secret", SECRET_FILE]
        else:
            argv += ["--slurm", n.subject, str(n.subject.count(",") + 1), n.what]
    return tuple(argv)


def _probe(host: str, name: str, asks: _Asks, problems: list[Problem], python: str = "python3",
           on_control: bool = False, secret_var: str | None = None) -> Probe | None:
    """The probe task of ``asks``; a need whose name is not plain becomes a problem."""
    needs = []
    for n in asks.items.values():
        pattern = _PATTERNS.get("tool" if n.kind == "any_tool" else n.kind)
        subjects = n.subject.split(" ") if n.kind == "any_tool" else [n.subject]
        if pattern is not None and not all(pattern[0].fullmatch(x) and ".." not in x.split("/")
                                           for x in subjects):
            problems.append(Problem(host, ", ".join(n.checks),
                                    f"{pattern[1]} {n.subject!r} is not a plain name "
                                    f"(letters, digits, '.', '_', '-'): not probed"))
        else:
            needs.append(n)
    if not needs:
        return None
    task = Task(host, name, _argv(python, needs), PROBE_TIMEOUT_S, on_control=on_control,
                secret_var=secret_var, lock_file=None)
    return Probe(task, tuple(needs))


def _params(check: Check, view: RunView, host: str) -> Any:
    cp = view.profiles[host].check(check.name)
    return None if cp is None else check.params_model.model_validate(cp.params)


def _host_needs(check: Check, view: RunView, host: str, asks: _Asks) -> None:
    needs = needs_on(check, view, host)
    if needs is not None:
        asks.add_needs(needs, check.name)


def _across(view: RunView, checks: Sequence[Check], problems: list[Problem]) -> list[Check]:
    """The multi-node checks that would run; without a launch host, why they cannot (an
    error) or the site's reason to skip them (a note)."""
    prof = view.rack_profile
    across = [c for c in checks if placement_of(c) is ACROSS_NODES
              and prof.check(c.name) is not None
              and not_applicable(view.nodes[0], c, prof) is None]
    if not across:
        return []
    names = ", ".join(c.name for c in across)
    if len(view.nodes) < MIN_NODES_ACROSS:
        problems.append(Problem(None, names, "multi-node checks skipped: one node under test",
                                "note"))
        return []
    if view.launch_host is not None:
        return across
    reasons = {n: view.hostvars.get(n, {}).get(NO_LAUNCH_VAR) for n in view.nodes}
    given = {str(r).strip() for r in reasons.values() if isinstance(r, str) and r.strip()}
    lacking = [n for n, r in reasons.items() if not (isinstance(r, str) and r.strip())]
    if len(given) == 1 and not lacking:
        problems.append(Problem(None, names, f"multi-node checks skipped: {given.pop()}",
                                "note"))
    elif given:  # judging skips them only when every node gives the same reason
        problems.append(Problem(None, names, f"{NO_LAUNCH_VAR} must be set for every "
                                             f"node under test, in the same words (not set "
                                             f"for: {', '.join(lacking) or 'none'}; reasons "
                                             f"given: {len(given)})"))
    else:
        problems.append(Problem(None, names, f"{NO_LAUNCH_HOST}, or set "
                                             f"{NO_LAUNCH_VAR} (why this site runs "
                                             f"no multi-node check)"))
    return []


def build(view: RunView, checks: Sequence[Check]) -> Preflight:
    """What the plan asks every host, and the problems found without asking. Pure."""
    problems: list[Problem] = []
    the_plan = plan(view, checks, lambda host, check: False)
    by_name = {c.name: c for c in checks}
    node_asks = {n: _Asks() for n in view.nodes}
    control: dict[tuple[str, str | None], _Asks] = {}
    launch = _Asks()
    for item in the_plan.planned:
        if isinstance(item, NotRun):
            problems.append(Problem(item.host, item.check, item.why))
        if not isinstance(item, Task):
            continue
        check, tool = by_name[item.check], item.argv[0]
        if item.on_control:
            asks = control.setdefault((item.host, item.secret_var), _Asks())
            if item.secret_var:
                asks.add("secret", item.secret_var, item.check)
            if tool != view.python:
                asks.add("tool", tool, item.check)
        elif placement_of(check) is ACROSS_NODES:
            for word in _LAUNCHERS.intersection(item.argv):
                launch.add("tool", word, item.check)
            if "srun" in item.argv and all(NODE_NAME.fullmatch(n) for n in view.nodes):
                partition = getattr(_params(check, view, view.nodes[0]), "partition", None)
                launch.add("slurm", ",".join(view.nodes), item.check,
                           what=partition if isinstance(partition, str)
                           and PARTITION.fullmatch(partition) else "")
        else:  # on the node, or on the fabric host (which may be no node under test)
            asks = node_asks.setdefault(item.host, _Asks())
            if tool not in _SHELLS:
                asks.add("tool", tool, item.check)
            if item.host in view.profiles:
                _host_needs(check, view, item.host, asks)
    fabric = [c.name for c in checks if placement_of(c) is ON_FABRIC]
    if fabric and (view.fabric is None or view.fabric_host is None):
        problems.append(Problem(None, ", ".join(fabric),
                                NO_PLAN if view.fabric is None else NO_FABRIC_HOST))
    for check in checks:  # GPU i's HCA on rail i, as the fabric plan cables it
        hcas = getattr(_params(check, view, view.nodes[0]), "rail_hcas", None) or ()
        problems += [Problem(None, check.name, f"{why} (GPU i's HCA must be on rail i)")
                     for why in (rail_mismatches(view.fabric, hcas, view.nodes)
                                 if view.fabric is not None else ())]
    problems += naming_problems(view, checks)
    for check in _across(view, checks, problems):
        for node in view.nodes:
            _host_needs(check, view, node, node_asks[node])
    probes: list[Probe | None] = []
    for node, asks in node_asks.items():
        probes.append(_probe(node, PLAN_NODE, asks, problems))
    for (host, var), asks in control.items():
        name = PLAN_CONTROL if var is None else f"{PLAN_CONTROL}.{var}"
        probes.append(_probe(host, name, asks, problems, view.python, True, var))
    if view.launch_host is not None and launch.items:
        probes.append(_probe(view.launch_host, PLAN_LAUNCH, launch, problems))
    return Preflight(tuple(problems), tuple(p for p in probes if p is not None),
                     tuple(view.nodes))


# ---------------------------------------------------------------------------- judging

_GIB = float(1 << 30)


def _where(task: Task) -> str:
    return "the control host" if task.on_control else f"host {task.host}"


def _need_problems(task: Task, need: Need, doc: Mapping[str, Any]) -> list[str]:
    """Why ``need`` is not met on the probed host, from its answer (empty: it is met)."""
    host, where, subject = task.host, _where(task), need.subject
    if need.kind == "tool":
        if not doc.get("tools", {}).get(subject):
            return [f"{subject} is not on {where} (command -v {subject} finds nothing)"]
    elif need.kind == "any_tool":
        if not any(doc.get("tools", {}).get(t) for t in subject.split()):
            return [f"none of {', '.join(subject.split())} is on {where} (command -v finds "
                    "none; the check reads with the first it finds)"]
    elif need.kind == "dir":
        d = doc.get("dirs", {}).get(subject) or {}
        named = f"{need.what} {subject} on {where}"
        if not d.get("exists"):
            return [f"{named} does not exist"]
        if not d.get("dir"):
            return [f"{named} is not a directory"]
        out = [] if d.get("writable") else [f"{named} is not writable: {d.get('error', '?')}"]
        free = d.get("free_bytes")
        if isinstance(free, int) and free < need.room_bytes:
            out.append(f"{named} has {free / _GIB:.1f} GiB free, fio writes "
                       f"{need.room_bytes / _GIB:.1f} GiB there (size x numjobs)")
        return out
    elif need.kind in ("rdma", "net"):
        if not doc.get(need.kind, {}).get(subject):
            found = ", ".join(doc.get(f"{need.kind}_found") or []) or "none"
            sys_dir = "infiniband" if need.kind == "rdma" else "net"
            return [f"{'RDMA device' if need.kind == 'rdma' else 'netdev'} {subject}, named by "
                    f"the profile, is not on {where} (/sys/class/{sys_dir}/{subject}; found: "
                    f"{found})"]
    elif need.kind == "root":
        uid = doc.get("uid")
        if uid != 0:
            sudo = {True: "; sudo -n true works there", False: "; sudo -n true fails there",
                    None: ""}[doc.get("sudo")]
            return [f"needs root on {where} ({need.what}), but commands run there as uid "
                    f"{uid}: set ansible_become: true for it{sudo}"]
    elif need.kind == "secret":
        if not (doc.get("secret") or {}).get("nonempty"):
            return [f"{subject} of inventory host {host} did not decrypt or is empty (the BMC "
                    f"password: check the vault and ANSIBLE_VAULT_IDENTITY_LIST / --vault-id)"]
    elif need.kind == "slurm":
        out = []
        for key, what in (("sinfo", "sinfo"), ("srun", f"srun --test-only --nodelist={subject}")):
            r = doc.get(key) or {}
            if r.get("rc") != 0:
                out.append(f"{what} fails on launch host {host} (rc {r.get('rc')}): "
                           f"{r.get('output') or 'no output'}")
        return out
    return []


def judge(pre: Preflight, answers: Mapping[tuple[str, str], Answer]) -> list[Problem]:
    """Every problem: the plan's own, then each probe's, errors before notes. Pure."""
    out = list(pre.problems)
    for probe in pre.probes:
        t = probe.task
        a = answers.get((t.host, t.check))
        if a is not None and a.outcome == "unreachable":  # one sentence, in whole words
            node = t.check == PLAN_NODE and t.host in pre.nodes
            out.append(Problem(t.host, None, f"{did_not_answer(t.host, a.message)}: " + (
                "its checks will be judged error, the other nodes on their merits" if node
                else f"the plan's probe ({t.check}) could not run"),
                "unreachable" if node else "error"))
            continue
        if a is None or a.outcome != "completed" or a.rc != 0:
            why = "no answer" if a is None else \
                f"{a.outcome}, rc {a.rc}: {(a.message or a.stderr).strip()[-400:] or '?'}"
            out.append(Problem(t.host, None, f"the plan's probe ({t.check}) could not run on "
                                             f"{_where(t)} ({why})"))
            continue
        try:
            doc = load_json(a.stdout)
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            out.append(Problem(t.host, None, f"the plan's probe ({t.check}) on {_where(t)} "
                                             f"printed no JSON object ({exc})"))
            continue
        for need in probe.needs:
            out += [Problem(t.host, ", ".join(need.checks), m)
                    for m in _need_problems(t, need, doc)]
    return sorted(out, key=lambda p: ("error", "unreachable", "note").index(p.severity))


def errors(problems: Sequence[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def unreachable(problems: Sequence[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "unreachable"]


class PlanRefused(Refusal):
    """The plan found errors: nothing ran, and no run directory was made."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(f"the plan found {len(errors(problems))} error(s): nothing was run "
                         f"(--no-plan runs anyway)")


def refuse_on_errors(problems: Sequence[Problem]) -> Sequence[Problem]:
    """``problems`` when none is an error; else PlanRefused."""
    if errors(problems):
        raise PlanRefused(problems)
    return problems


# ---------------------------------------------------------------------------- running

def run(pre: Preflight, sources: Sequence[str], *, forks: int = 20,
        stop: Stop | None = None) -> dict[tuple[str, str], Answer]:
    """Run the probes through the collector into a temporary directory; their answers."""
    tasks = [p.task for p in pre.probes]
    answers: dict[tuple[str, str], Answer] = {}
    with tempfile.TemporaryDirectory(prefix="rackgate-plan-") as tmp:
        store = EvidenceStore(Path(tmp), sync=False)
        collect(tasks, sources, store, forks=forks, stop=stop)
        for t in tasks:
            try:
                ev, stdout = store.read(t.host, t.check)
            except EvidenceError as exc:
                answers[(t.host, t.check)] = Answer("not_run", None, "", str(exc))
                continue
            answers[(t.host, t.check)] = Answer(ev.outcome, ev.rc, stdout, ev.message,
                                                ev.stderr)
    return answers


def preflight(view: RunView, checks: Sequence[Check], sources: Sequence[str], *,
              forks: int = 20, stop: Stop | None = None) -> list[Problem]:
    """The plan of a run: build, run the probes, judge their answers. When every node
    under test (two or more) did not answer, for the same cause: ControlSideError."""
    pre = build(view, checks)
    answers = run(pre, sources, forks=forks, stop=stop)
    probed = {p.task.host: answers.get((p.task.host, p.task.check)) for p in pre.probes
              if p.task.check == PLAN_NODE and p.task.host in pre.nodes}
    failed = {h: a.message for h, a in probed.items() if a and a.outcome == "unreachable"}
    same = same_failure(failed) if probed and len(failed) == len(probed) else None
    if same is not None:
        raise ControlSideError(same)
    return judge(pre, answers)
