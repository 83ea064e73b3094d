"""The runner wires the pipeline: plan -> collect -> judge -> report.

``validate`` collects fresh evidence into a new run directory, then judges it;
``judge_run`` judges a stored run directory (again) without touching the cluster.
Both write ``report.json`` and ``report.html``. Nothing here prints: the CLI does.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import gc
import json
import math
import multiprocessing
import os
import socket
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from rackgate import __version__
from rackgate.checks import REGISTRY, select
from rackgate.checks.base import Check, CommandError
from rackgate.collect.ansible import (
    DEFAULT_LOCK_FILE,
    Interrupted,
    Stop,
    Task,
    collect,
    end_collection,
    release_nodes,
)
from rackgate.collect.launch import NODES_LOCK_VAR
from rackgate.inventory import Inventory, load_inventory
from rackgate.judge.drift import version_drift
from rackgate.judge.evidence import (
    absent_from_profile,
    describe,
    finite,
    judge_evidence,
    judge_launched,
    missing_evidence,
    not_applicable,
)
from rackgate.judge.peers import flag_peer_outliers
from rackgate.model import RackVerdict, Result, Status, node_verdict, rack_verdict
from rackgate.profile import (
    Profile,
    ProfileError,
    deep_merge,
    load_profile,
    profile_from_document,
)
from rackgate.reports import report_document
from rackgate.reports.html import render_html
from rackgate.reports.junit import render_junit
from rackgate.reports.markdown import render_markdown
from rackgate.store.evidence import (
    EvidenceError,
    EvidenceStore,
    atomic_write,
    json_kind,
    write_json,
)
from rackgate.store.history import HistoryError, default_history_path, open_history, record_report

MANIFEST_SCHEMA = "rackgate.manifest/1"


class RunError(RuntimeError):
    """The run could not start or its directory is unusable (CLI exit 2)."""


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    rack: RackVerdict
    report_json: Path
    report_html: Path


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    """The versions a manifest records."""
    try:
        ansible_core = metadata.version("ansible-core")
    except metadata.PackageNotFoundError:
        ansible_core = "not installed"
    return {"rackgate_version": __version__, "ansible_core_version": ansible_core}


def select_hosts(inv: Inventory, group: str, limit: str | None) -> list[str]:
    hosts = inv.hosts_in(group)
    if limit:
        patterns = [p.strip() for p in limit.split(",") if p.strip()]
        hosts = [h for h in hosts if any(fnmatch.fnmatchcase(h, p) for p in patterns)]
    if not hosts:
        raise RunError(f"no host of group {group!r} matches --limit {limit!r}")
    return hosts


def select_checks(profile: Profile, names_or_tags: Sequence[str] | None) -> list[Check]:
    try:
        wanted = select(list(names_or_tags) if names_or_tags else None)
    except KeyError as exc:
        raise RunError(str(exc.args[0])) from None
    checks = [c for c in wanted if c.name in profile.model.checks]
    if not checks:
        raise RunError(f"profile {profile.name} defines none of the selected checks "
                       f"({', '.join(c.name for c in wanted)})")
    return checks


LAUNCH_HOST_VAR = "rackgate_launch_host"
LAUNCH_GROUP = "slurm_controller"


def launch_host(inv: Inventory, hosts: Sequence[str]) -> str | None:
    """Where multi-node checks are launched from: the nodes' ``rackgate_launch_host``
    (they must agree), else the first host of group ``slurm_controller``, else None."""
    named = sorted({str(v) for h in hosts if (v := inv.hostvars[h].get(LAUNCH_HOST_VAR))})
    if len(named) > 1:
        raise RunError(f"the nodes under test disagree on {LAUNCH_HOST_VAR}: {named}")
    if named:
        if named[0] not in inv.hostvars:
            raise RunError(f"{LAUNCH_HOST_VAR} {named[0]!r} is not a host of inventory "
                           f"{', '.join(inv.sources)}")
        return named[0]
    controllers = sorted(inv.groups.get(LAUNCH_GROUP, ()))
    return controllers[0] if controllers else None


NO_LAUNCH_HOST = (f"no launch host for multi-node checks: set {LAUNCH_HOST_VAR} for the "
                  f"nodes, or put the scheduler's controller in inventory group {LAUNCH_GROUP}")

OVERRIDES_VAR = "rackgate_profile_overrides"


def host_overrides(hostvars: Mapping[str, Any]) -> dict[str, Any]:
    """A host's profile overrides: ``rackgate_profile_overrides`` and every
    ``rackgate_profile_overrides_<suffix>`` variable, deep-merged in name order, so that
    group_vars, host_vars and extra inventory files can each contribute one (Ansible would
    otherwise let one variable of the same name hide the others)."""
    merged: dict[str, Any] = {}
    for key in sorted(k for k in hostvars
                      if k == OVERRIDES_VAR or k.startswith(OVERRIDES_VAR + "_")):
        value = hostvars[key]
        if value:
            if not isinstance(value, Mapping):
                raise RunError(f"inventory variable {key} must be a mapping (a partial "
                               f"profile), got {type(value).__name__}")
            merged = deep_merge(merged, value)
    return merged


def node_profiles(profile: Profile, overrides: Mapping[str, Any]) -> dict[str, Profile]:
    """Each host's profile: the rack's, with the host's inventory overrides merged in.

    Hosts with the same overrides (usually set per group) share one Profile object.
    """
    out = {}
    seen: dict[str, Profile] = {}
    for host, over in overrides.items():
        key = json.dumps(over or {}, sort_keys=True, default=str)
        if key not in seen:
            try:
                seen[key] = profile.with_overrides(over or {}, f"rackgate_profile_overrides "
                                                               f"of inventory host {host}")
            except ProfileError as exc:
                raise RunError(str(exc)) from None
        out[host] = seen[key]
    return out


def refuse_if_nothing_applies(selected: Sequence[Check], profiles: Mapping[str, Profile]) -> None:
    """RunError when every selected check is disabled or not applicable on every node: such a
    run could only skip, and skips never accept a node."""
    why: dict[str, str] = {}
    for host, prof in profiles.items():
        for check in selected:
            skipped = not_applicable(host, check, prof)
            if skipped is None:
                return
            why.setdefault(check.name, skipped.message)
    raise RunError("nothing to run: every selected check is skipped on every node ("
                   + "; ".join(f"{name}: {msg}" for name, msg in why.items()) + ")")


def new_run_dir(runs_dir: Path, profile: str) -> Path:
    """A new run directory ``<UTC stamp>-<profile>[-<n>]`` with its ``evidence/``.

    Each candidate is made with one mkdir that fails if it exists (never exist_ok), so runs
    started in the same second, in threads or processes, each get a directory of their own.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    runs_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1, 100_000):
        run_dir = runs_dir / (f"{stamp}-{profile}" if n == 1 else f"{stamp}-{profile}-{n}")
        try:
            run_dir.mkdir()
        except FileExistsError:
            continue
        (run_dir / "evidence").mkdir()
        return run_dir
    raise RunError(f"{runs_dir}: no free run directory name for {stamp}-{profile}")


RUN_LOCK = ".lock"


@contextlib.contextmanager
def run_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock (flock on RUN_DIR/.lock) while collecting into it and
    judging it: a second ``validate --resume`` of the run refuses, naming the holder. The
    kernel drops the lock when this process ends, however it ends."""
    path = run_dir / RUN_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            raise RunError(f"run directory {run_dir} is in use by {holder or 'another rackgate'}"
                           f": wait for it to finish, or stop it, then resume") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"rackgate pid {os.getpid()} on {socket.gethostname()} since "
                      f"{_now()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


PlanFn = Callable[[Sequence[Check], Mapping[str, int]], None]  # checks, pending per check
ProgressFn = Callable[[str, str, str], None]  # host, check, outcome


def validate(inventory: Sequence[str], profile: Profile, *, group: str = "compute",
             limit: str | None = None, checks: Sequence[str] | None = None,
             runs_dir: Path = Path("runs"), forks: int = 20,
             on_plan: PlanFn = lambda c, p: None,
             progress: ProgressFn = lambda h, c, o: None,
             stop: Stop | None = None) -> RunOutcome:
    """Collect fresh evidence into a new run directory, then judge it. A ``stop`` request
    (SIGTERM/SIGINT in the CLI) ends collection and raises Interrupted."""
    stop = stop or Stop()
    inv = load_inventory(inventory)
    hosts = select_hosts(inv, group, limit)
    selected = select_checks(profile, checks)
    overrides = {h: host_overrides(inv.hostvars[h]) for h in hosts}
    # refuse bad overrides, and a run in which nothing would run, before anything runs
    refuse_if_nothing_applies(selected, node_profiles(profile, overrides))

    run_dir = new_run_dir(runs_dir, profile.name)
    manifest: dict[str, Any] = {
        "schema": MANIFEST_SCHEMA,
        "run_id": run_dir.name,
        "started": _now(),
        "finished": None,
        "resumed": [],
        "inventory": [str(Path(i).resolve()) for i in inventory],
        "group": group,
        "limit": limit,
        "checks": [c.name for c in selected],
        "profile": {"name": profile.name, "source": profile.source, "sha256": profile.sha256,
                    "document": dict(profile.raw)},
        "run_dir": str(run_dir.resolve()),
        "hosts": [{"name": h, "location": inv.location(h),
                   "profile_overrides": overrides[h]} for h in hosts],
        "launch_host": (launch_host(inv, hosts)
                        if any(c.runs_on == "launcher" for c in selected) else None),
        **versions(),
    }
    with run_dir_lock(run_dir):
        write_json(run_dir / "manifest.json", manifest)
        stop.check(run_dir)
        return _collect_and_judge(run_dir, manifest, inv, forks, on_plan, progress, stop)


def resume(run_dir: Path, *, forks: int = 20, on_plan: PlanFn = lambda c, p: None,
           progress: ProgressFn = lambda h, c, o: None,
           stop: Stop | None = None) -> RunOutcome:
    """Collect what a run directory lacks (missing, damaged, failed or timed-out evidence)
    with the run's own inventory, profile, hosts and checks, then judge the whole run.

    First, whatever an earlier, killed attempt left running on this host (recorded in the
    run directory) is ended; on the nodes, the node lock ends that attempt's commands
    before this one runs its own."""
    stop = stop or Stop()
    if not run_dir.is_dir():
        read_manifest(run_dir)  # names what is wrong with it
    with run_dir_lock(run_dir):
        manifest = read_manifest(run_dir)
        ended = end_collection(run_dir)
        inv = load_inventory(manifest["inventory"])
        manifest.setdefault("resumed", []).append(_now())
        if ended:
            manifest.setdefault("orphans_ended", []).extend(ended)
        stop.check(run_dir)
        return _collect_and_judge(run_dir, manifest, inv, forks, on_plan, progress, stop)


def _command_vars(host: str, hostvars: Mapping[str, Any], profile: Profile) -> dict[str, Any]:
    """What a check's command builder sees: the host's inventory variables, plus its name
    and the parallel file system mount from the profile unless the inventory sets one."""
    out = {**hostvars, "inventory_hostname": host}
    storage = profile.model.hardware.storage
    if storage is not None and storage.parallel_fs_mount:
        out.setdefault("rackgate_parallel_fs_mount", storage.parallel_fs_mount)
    return out


def _recorded_profile(manifest: Mapping[str, Any], run_dir: Path) -> Profile:
    try:
        return profile_from_document(manifest["profile"]["document"],
                                     f"{manifest['profile']['source']} (as recorded in "
                                     f"{run_dir})")
    except ProfileError as exc:
        raise RunError(str(exc)) from None


def _lock_file(host: str, hostvars: Mapping[str, Any]) -> str:
    """The node lock of ``host``: ``rackgate_node_lock_file``, else /var/lock/rackgate.lock."""
    path = hostvars.get("rackgate_node_lock_file", DEFAULT_LOCK_FILE)
    if not isinstance(path, str) or not path.startswith("/") or any(
            not c.isprintable() for c in path):
        raise CommandError(f"rackgate_node_lock_file must be an absolute path, got {path!r}")
    return path


def _nodes_lock_file(nodes: Sequence[str], inv: Inventory) -> str:
    """The one lock file every node under test uses (a launched job's tasks take it)."""
    paths = {_lock_file(n, inv.hostvars.get(n, {})) for n in nodes}
    if len(paths) != 1:
        raise CommandError(f"the nodes under test disagree on rackgate_node_lock_file "
                           f"({', '.join(sorted(paths))}): a job across them needs one path")
    return paths.pop()


def _collect_and_judge(run_dir: Path, manifest: dict[str, Any], inv: Inventory, forks: int,
                       on_plan: PlanFn, progress: ProgressFn, stop: Stop) -> RunOutcome:
    profiles = node_profiles(_recorded_profile(manifest, run_dir),
                             {h["name"]: h.get("profile_overrides") for h in manifest["hosts"]})
    selected = [REGISTRY[c] for c in manifest["checks"] if c in REGISTRY]
    store = EvidenceStore(run_dir)
    launcher = manifest.get("launch_host")
    nodes = [h["name"] for h in manifest["hosts"]]
    pending = [(h, c) for h in nodes for c in selected
               if c.runs_on != "launcher" and not store.has_usable(h, c.name)]
    # A multi-node check runs once, on the launch host, across every node under test.
    pending += [(launcher, c) for c in selected if c.runs_on == "launcher" and launcher
                and len(nodes) > 1 and not store.has_usable(launcher, c.name)]
    on_plan(selected, {c.name: sum(1 for _, pc in pending if pc is c) for c in selected})

    tasks = []
    for host, check in pending:
        def not_run(why: str, host: str = host, check: Check = check) -> None:
            store.write(host, check.name, "", argv=(), outcome="not_run", rc=None,
                        started=None, ended=None, duration_s=None, stderr="", message=why)
            progress(host, check.name, "not_run")

        if host not in inv.hostvars:
            not_run(f"inventory host {host} is no longer in {', '.join(inv.sources)}")
            continue
        # A launched check is configured by the rack's profile (the first node's).
        profile = profiles[nodes[0]] if check.runs_on == "launcher" else profiles[host]
        cp = profile.check(check.name)
        if cp is None:
            not_run(f"the profile of inventory host {host} has no {check.name}")
            continue
        if not_applicable(host, check, profile) is not None:
            progress(host, check.name, "skipped")  # judged as skip: nothing to collect
            continue
        params = check.params_model.model_validate(cp.params)
        cmd_vars = _command_vars(host, inv.hostvars[host], profile)
        try:
            if check.runs_on == "launcher":
                cmd_vars["rackgate_nodes"] = nodes
                cmd_vars[NODES_LOCK_VAR] = _nodes_lock_file(nodes, inv)
            argv = check.command(params, cmd_vars)
            # A launched job's tasks take each node's lock themselves (shared, on the
            # node). On the launch host the launch takes its lock too, so two runs' jobs
            # start one after the other, unless the launch host is a node under test,
            # whose shared lock the exclusive one would block.
            lock = None if check.runs_on == "control" or (
                check.runs_on == "launcher" and host in nodes) else \
                _lock_file(host, inv.hostvars[host])
        except CommandError as exc:
            not_run(f"inventory host {host}: {exc}")
            continue
        if check.secret_var and check.secret_var not in inv.hostvars[host]:
            not_run(f"inventory host {host} has no {check.secret_var} (the BMC password; "
                    f"vault it)")
            continue
        if check.runs_on == "control" and argv[:3] == ["python3", "-m", argv[2]] \
                and argv[2].startswith("rackgate."):
            argv = [sys.executable, *argv[1:]]  # rackgate's own interpreter on this host
        tasks.append(Task(host, check.name, tuple(argv), check.timeout_s(params),
                          on_control=check.runs_on == "control",
                          secret_var=check.secret_var, lock_file=lock))
    # Multi-node jobs run after every node's own benchmarks have finished, never beside
    # them: a job across the nodes would load the very nodes fio is measuring.
    launched = {c.name for c in selected if c.runs_on == "launcher"}
    phases = [[t for t in tasks if t.check not in launched],
              [t for t in tasks if t.check in launched]]
    statuses = []
    for phase in [p for p in phases if p]:
        if stop():
            break  # launch nothing once a stop was asked for
        statuses.append(collect(phase, inv.sources, store, forks=forks, progress=progress,
                                stop=stop))
        if stop():
            # this run's commands still running on the nodes (fio, srun) end too
            release_nodes(phase, inv.sources, run_dir, forks=forks, stop=stop)
    if stop():
        manifest.setdefault("interrupted", []).append({"at": _now(), "by": stop.signame})
        manifest["ansible_runner_status"] = "canceled"
        write_json(run_dir / "manifest.json", manifest)
        raise Interrupted(stop.signame, run_dir)
    manifest["finished"] = _now()
    manifest["ansible_runner_status"] = next(
        (s for s in statuses if s != "successful"), "successful")
    write_json(run_dir / "manifest.json", manifest)
    return judge_run(run_dir)


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest.json, checked field by field: a tampered or damaged one is a
    RunError (exit 2) naming the file and the field, never a traceback."""
    path = run_dir / "manifest.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunError(f"{run_dir} is not a rackgate run directory (no manifest.json)") from None
    except OSError as exc:
        raise RunError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RunError(f"{path} is not valid JSON: {exc}") from None
    problem = manifest_problem(doc)
    if problem or not isinstance(doc, dict):
        raise RunError(f"{path}: {problem}")
    return doc


def manifest_problem(doc: Any) -> str | None:
    """What is wrong with a manifest document, naming the field, or None.

    >>> manifest_problem([])
    'the manifest must be a JSON object, got list'
    >>> manifest_problem({"schema": MANIFEST_SCHEMA, "run_id": "r", "inventory": [],
    ...     "group": "compute", "checks": ["fio.seq_read"], "hosts": [],
    ...     "profile": {"name": "demo", "source": "demo.yaml", "document": {}}})
    'field hosts: lists no host'
    """
    if not isinstance(doc, dict):
        return f"the manifest must be a JSON object, got {json_kind(doc)}"
    if doc.get("schema") != MANIFEST_SCHEMA:
        return f"unknown manifest schema {doc.get('schema')!r} (expected {MANIFEST_SCHEMA})"
    expect: list[tuple[str, Any, tuple[type, ...]]] = [
        ("run_id", doc.get("run_id"), (str,)), ("group", doc.get("group"), (str,)),
        ("inventory", doc.get("inventory"), (list,)), ("checks", doc.get("checks"), (list,)),
        ("hosts", doc.get("hosts"), (list,)), ("profile", doc.get("profile"), (dict,))]
    for name, value, types in expect:
        if not isinstance(value, types):
            return f"field {name} must be a {types[0].__name__}, got {json_kind(value)}"
    if not all(isinstance(i, str) for i in doc["inventory"]):
        return "field inventory: every source must be a string"
    checks = doc["checks"]
    if not checks or not all(isinstance(c, str) and c for c in checks):
        return "field checks: must list at least one check name (strings)"
    if len(set(checks)) != len(checks):
        return f"field checks: a check is listed twice in {checks}"
    profile = doc["profile"]
    for key, types in (("name", (str,)), ("source", (str,)), ("document", (dict,))):
        if not isinstance(profile.get(key), types):
            return (f"field profile.{key} must be a {types[0].__name__}, "
                    f"got {json_kind(profile.get(key))}")
    if not doc["hosts"]:
        return "field hosts: lists no host"
    names = []
    for i, h in enumerate(doc["hosts"]):
        if not isinstance(h, dict):
            return f"field hosts[{i}] must be an object, got {json_kind(h)}"
        if not isinstance(h.get("name"), str) or not h["name"]:
            return f"field hosts[{i}].name must be a host name, got {h.get('name')!r}"
        if not isinstance(h.get("location"), str):
            return f"field hosts[{i}].location must be a string, got {json_kind(h.get('location'))}"
        if h.get("profile_overrides") is not None and not isinstance(h["profile_overrides"],
                                                                     dict):
            return (f"field hosts[{i}].profile_overrides must be an object or null, got "
                    f"{json_kind(h['profile_overrides'])}")
        names.append(h["name"])
    if len(set(names)) != len(names):
        return f"field hosts: a host is listed twice in {names}"
    launch = doc.get("launch_host")
    if launch is not None and (not isinstance(launch, str) or not launch):
        return f"field launch_host must be a host name or null, got {launch!r}"
    if not isinstance(doc.get("resumed", []), list):
        return f"field resumed must be a list, got {json_kind(doc.get('resumed'))}"
    return None


@dataclass(frozen=True)
class _JudgeJob:
    run_dir: Path
    hosts: list[str]
    checks: list[str]
    profiles: Mapping[str, Profile]  # what each host is judged with
    collected_with: Mapping[str, Profile]  # what each host's evidence was collected with
    launch_host: str | None = None  # where launched checks ran (their evidence is there)


Judged = tuple[list[Result], dict[tuple[str, str], str]]  # results, evidence sha256


def _judge_hosts(job: _JudgeJob, hosts: Sequence[str]) -> Judged:
    """Read, parse and judge every (host, check) of ``hosts``; the per-result hot loop."""
    store = EvidenceStore(job.run_dir)
    judged: list[Result] = []
    digests: dict[tuple[str, str], str] = {}
    mismatches: dict[tuple[str, str, str], str] = {}
    gc_was_on = gc.isenabled()
    gc.disable()  # only acyclic objects are made here; collections would cost ~8 %
    try:
        for host in hosts:
            for name in job.checks:
                try:
                    judged.append(_judge_one(job, store, host, name, digests, mismatches))
                except Exception as exc:  # one (node, check) never stops the others
                    judged.append(missing_evidence(host, name,
                                                   f"judging failed: {describe(exc)}"))
    finally:
        if gc_was_on:
            gc.enable()
    return judged, digests


def _judge_one(job: _JudgeJob, store: EvidenceStore, host: str, name: str,
               digests: dict[tuple[str, str], str],
               mismatches: dict[tuple[str, str, str], str]) -> Result:
    """One (host, check): its result, recording the evidence digest in ``digests``."""
    check = REGISTRY.get(name)
    if check is None:
        return missing_evidence(host, name, f"check {name} is not known to this rackgate "
                                            f"version")
    now = job.profiles[host]
    absent = absent_from_profile(host, name, now)
    if absent is not None:
        return absent
    skipped = not_applicable(host, check, now)
    if skipped is not None:
        return skipped
    try:
        ev, stdout = store.read(host, name)
    except EvidenceError as exc:
        return missing_evidence(host, name, str(exc))
    digests[(host, name)] = ev.stdout_sha256
    then = job.collected_with[host]
    key = (name, then.sha256, now.sha256)
    if then is not now and key not in mismatches:
        mismatches[key] = _params_mismatch(check, then, now)
    if then is not now and mismatches[key]:
        return missing_evidence(host, name, mismatches[key])
    return judge_evidence(check, ev, stdout, now)


PARALLEL_MIN_RESULTS = 5000  # below this, forking costs more than it saves
_FORKED_JOB: _JudgeJob | None = None  # handed to forked workers without pickling


def _judge_slice(bounds: tuple[int, int]) -> Judged:
    assert _FORKED_JOB is not None
    return _judge_hosts(_FORKED_JOB, _FORKED_JOB.hosts[bounds[0]:bounds[1]])


def _judge_all(job: _JudgeJob) -> Judged:
    """Judge every host, on every core for a large run (fork: workers inherit ``job``)."""
    global _FORKED_JOB
    workers = min(os.cpu_count() or 1, 8)
    if (len(job.hosts) * len(job.checks) < PARALLEL_MIN_RESULTS or workers < 2
            or "fork" not in multiprocessing.get_all_start_methods()):
        return _judge_hosts(job, job.hosts)
    step = max(1, len(job.hosts) // (workers * 4))
    slices = [(i, min(i + step, len(job.hosts))) for i in range(0, len(job.hosts), step)]
    _FORKED_JOB = job
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_judge_slice, slices)
    finally:
        _FORKED_JOB = None
    judged: list[Result] = []
    digests: dict[tuple[str, str], str] = {}
    for results, part_digests in parts:
        judged.extend(results)
        digests.update(part_digests)
    return judged, digests


def _params_mismatch(check: Check, collected: Profile, judging: Profile) -> str:
    """Why evidence collected under ``collected`` cannot answer ``judging``'s question
    (different benchmark parameters), or "" when it can."""
    cp_then, cp_now = collected.check(check.name), judging.check(check.name)
    if cp_then is None or cp_now is None:
        return ""
    then = check.params_model.model_validate(cp_then.params).model_dump()
    now = check.params_model.model_validate(cp_now.params).model_dump()
    diff = [f"{k} {then[k]!r} (wanted {now[k]!r})" for k in now if then.get(k) != now[k]]
    if not diff:
        return ""
    return (f"evidence was collected with other {check.name} parameters than profile "
            f"{judging.name} prescribes: {', '.join(diff)}; collect again with this profile")


def _judge_across_nodes(job: _JudgeJob, check: Check
                        ) -> tuple[list[Result], dict[tuple[str, str], str],
                                   Mapping[str, Any] | None]:
    """A launched check (one job across the nodes, one evidence file on the launch host):
    every node's result, the evidence digests, and the check's report section (a pair
    matrix) when it judges each node on its own (``judge_nodes``)."""
    hosts, name = job.hosts, check.name
    profile = job.profiles[hosts[0]]  # launched checks follow the rack's profile

    def every(why: str, status: Status = Status.ERROR) -> list[Result]:
        return [Result(h, name, status, why) for h in hosts]

    absent = absent_from_profile(hosts[0], name, profile)
    if absent is not None:
        return every(absent.message), {}, None
    if len(hosts) < 2:
        return every("a multi-node check, and this run has one node under test (--limit "
                     "or --group)", Status.SKIP), {}, None
    skipped = not_applicable(hosts[0], check, profile)
    if skipped is not None:
        return [replace(skipped, node=h) for h in hosts], {}, None
    if job.launch_host is None:
        return every(NO_LAUNCH_HOST), {}, None
    try:
        ev, stdout = EvidenceStore(job.run_dir).read(job.launch_host, name)
    except EvidenceError as exc:
        return every(str(exc)), {}, None
    mismatch = _params_mismatch(check, job.collected_with[hosts[0]], profile)
    if mismatch:
        return every(mismatch), {}, None
    results, section = judge_launched(check, ev, stdout, profile, hosts)
    return results, {(h, name): ev.stdout_sha256 for h in hosts}, section


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None, so that the report is
    JSON that any parser accepts (judging already turns such figures into errors; this is
    the last guard for text fields and details).

    >>> json_safe({"a": [1.0, float("nan")], "b": float("-inf")})
    {'a': [1.0, None], 'b': None}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _rack_judged(name: str, judge: Callable[[list[Result]], list[Result]],
                 judged: list[Result], hosts: Sequence[str],
                 kept: Sequence[Result] = ()) -> list[Result]:
    """A rack-wide judge (peer comparison, version drift) over every result; if it fails,
    ``kept`` (what the judge would have returned unchanged) plus an ``error`` naming it
    for every node, as its judgement is then missing."""
    try:
        return [finite(r) for r in judge(judged)]
    except Exception as exc:  # a bug here must not stop the report
        why = f"{name} failed: {describe(exc)}"
        return [*kept, *(Result(h, name, Status.ERROR, why) for h in hosts)]


def judge_run(run_dir: Path, profile: Profile | None = None,
              out_dir: Path | None = None) -> RunOutcome:
    """Judge the evidence stored in ``run_dir`` (with its own profile unless one is given)
    and write the reports into ``out_dir`` (default: the run directory)."""
    manifest = read_manifest(run_dir)
    recorded = _recorded_profile(manifest, run_dir)
    hosts = manifest["hosts"]
    overrides = {h["name"]: h.get("profile_overrides") for h in hosts}
    profiles = node_profiles(profile or recorded, overrides)
    collected_with = profiles if profile is None else node_profiles(recorded, overrides)
    profile = profile or recorded
    names = list(manifest["checks"])
    across = [REGISTRY[n] for n in names if n in REGISTRY and REGISTRY[n].runs_on == "launcher"]
    job = _JudgeJob(run_dir, [h["name"] for h in hosts],
                    [n for n in names if all(n != c.name for c in across)], profiles,
                    collected_with, manifest.get("launch_host"))
    judged, digests = _judge_all(job)
    sections = []
    for check in across:
        try:
            results, check_digests, section = _judge_across_nodes(job, check)
        except Exception as exc:  # one check never stops the report
            results, check_digests, section = [
                Result(h, check.name, Status.ERROR, f"judging failed: {describe(exc)}")
                for h in job.hosts], {}, None
        judged += results
        digests.update(check_digests)
        if section:
            sections.append(section)
    per_node: dict[str, list[Result]] = {h["name"]: [] for h in hosts}
    # peer comparison returns every result (outliers flagged), drift only its own
    for r in _rack_judged("rack.peer_comparison", flag_peer_outliers, judged, job.hosts,
                          kept=judged):
        per_node[r.node].append(r)
    for r in _rack_judged("rack.version_drift", version_drift, judged, job.hosts):
        per_node[r.node].append(r)
    locations = {h["name"]: h["location"] for h in hosts}
    rack = rack_verdict(node_verdict(node, rs, locations[node]) for node, rs in per_node.items())
    doc = report_document(rack, manifest, profile, locations, digests, profiles,
                          pairwise=sections)
    out = out_dir or run_dir
    try:
        out.mkdir(parents=True, exist_ok=True)
        try:  # compact: the C encoder, 4x faster
            write_json(out / "report.json", doc, indent=None, allow_nan=False)
        except ValueError:  # a NaN or infinity got this far: the report carries null instead
            doc = json_safe(doc)
            write_json(out / "report.json", doc, indent=None, allow_nan=False)
    except OSError as exc:
        raise RunError(f"cannot write {out / 'report.json'}: {exc.strerror or exc}") from None
    failed = []
    for name, render in (("report.html", render_html), ("report.xml", render_junit),
                         ("summary.md", render_markdown)):
        try:
            atomic_write(out / name, render(doc).encode())
        except Exception as exc:  # the other reports are still written
            failed.append(f"{name}: {describe(exc)}")
    if failed:
        raise RunError(f"{out / 'report.json'} written, but not " + "; ".join(failed))
    try:
        conn = open_history(default_history_path(run_dir.resolve().parent))
        try:
            record_report(conn, doc, run_dir.resolve())
        finally:
            conn.close()
    except HistoryError as exc:
        raise RunError(f"reports written to {out}, but the run history was not updated: "
                       f"{exc}") from None
    return RunOutcome(run_dir, rack, out / "report.json", out / "report.html")


def load_profile_or_fail(name: str) -> Profile:
    try:
        return load_profile(name)
    except ProfileError as exc:
        raise RunError(str(exc)) from None


def verify_report(report_json: Path) -> tuple[int, list[str]]:
    """Check a report against the evidence beside it: (files checked, problems found).

    Every result's evidence file must exist under the run directory and hash to the
    sha256 the report recorded, so a report can be trusted (or not) long after the run.
    """
    import hashlib

    try:
        doc = json.loads(report_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{report_json}: cannot read the report: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise RunError(f"{report_json}: not a rackgate report (no nodes list)")
    run_dir = evidence_dir(report_json, doc)
    checked, problems = 0, []
    for node in doc["nodes"]:
        results = node.get("results") if isinstance(node, dict) else None
        if not isinstance(results, list):
            raise RunError(f"{report_json}: a node entry has no results list: {node!r:.80}")
        for r in results:
            if not isinstance(r, dict) or not r.get("evidence") or not r.get("evidence_sha256"):
                continue
            checked += 1
            where = f"{node.get('name')} {r.get('check')}"
            path = run_dir / str(r["evidence"])
            if not path.resolve().is_relative_to(run_dir.resolve()):
                problems.append(f"{where}: evidence path {r['evidence']!r} leaves {run_dir}")
                continue
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as exc:
                problems.append(f"{where}: {path}: {exc.strerror}")
                continue
            if digest != r["evidence_sha256"]:
                problems.append(f"{where}: {path} has sha256 {digest[:16]}, the report "
                                f"recorded {str(r['evidence_sha256'])[:16]}")
    return checked, problems


def evidence_dir(report_json: Path, doc: Mapping[str, Any]) -> Path:
    """Where a report's evidence is: the report's own directory when it holds the run
    (a copy or an archive is verified against its own files), else the run directory the
    report names (``rackgate judge --out`` writes reports away from the evidence).

    The recorded path is only a hint: it is used only when the report's directory has no
    ``evidence/`` of its own.
    """
    here = report_json.resolve().parent
    if (here / "evidence").is_dir():
        return here
    run = doc.get("run")
    hint = run.get("run_dir") if isinstance(run, dict) else None
    return Path(hint) if isinstance(hint, str) and hint else here
