"""The runner wires the pipeline: plan -> collect -> judge -> report.

``validate`` collects fresh evidence into a new run directory, then judges it;
``resume`` collects what a run directory lacks, then judges it; ``judge_run`` judges a
stored run directory (again) without touching the cluster. Each writes the reports
(``reports.write``) and then records the judgement in the run history. Nothing here
prints: the CLI does.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rackgate.checks import RACK_REGISTRY, REGISTRY, load_profile, profile_from_document, select
from rackgate.checks.base import Check
from rackgate.collect.ansible import collect, release_nodes
from rackgate.collect.plan import Plan, plan
from rackgate.collect.processes import end_collection
from rackgate.collect.task import Interrupted, Stop
from rackgate.inventory import Inventory, load_inventory
from rackgate.judge.evidence import not_applicable
from rackgate.judge.run import judge_stored
from rackgate.model import RackVerdict, node_verdict, rack_verdict
from rackgate.placement import (
    ACROSS_NODES,
    LAUNCH_GROUP,
    LAUNCH_HOST_VAR,
    JudgeJob,
    RunView,
    placement_of,
)
from rackgate.profile import Profile, ProfileError, deep_merge
from rackgate.reports import report_document
from rackgate.reports.write import Reports, write_reports
from rackgate.store.evidence import EvidenceStore, write_json
from rackgate.store.history import HistoryError, default_history_path, open_history, record_report
from rackgate.store.manifest import (
    MANIFEST_SCHEMA,
    RunError,
    new_run_dir,
    now,
    read_manifest,
    run_dir_lock,
    versions,
)


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    rack: RackVerdict
    reports: Reports
    # why the run history was not updated (the reports stand), or None
    history_error: str | None = None

    @property
    def report_json(self) -> Path:
        return self.reports.json

    @property
    def report_html(self) -> Path:
        return self.reports.html


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
    profiles = node_profiles(profile, overrides)
    # refuse bad overrides, and a run in which nothing would run, before anything runs
    refuse_if_nothing_applies(selected, profiles)

    run_dir = new_run_dir(runs_dir, profile.name)
    manifest: dict[str, Any] = {
        "schema": MANIFEST_SCHEMA,
        "run_id": run_dir.name,
        "started": now(),
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
                        if any(placement_of(c) is ACROSS_NODES for c in selected) else None),
        **versions(),
    }
    # the run is judged with the profile as its manifest records it (the same document)
    recorded = replace(profile, source=_recorded_source(manifest, run_dir))
    profiles = {h: recorded if p is profile else p for h, p in profiles.items()}
    with run_dir_lock(run_dir):
        write_json(run_dir / "manifest.json", manifest)
        stop.check(run_dir)
        return _collect_and_judge(run_dir, manifest, inv, recorded, profiles, forks, on_plan,
                                  progress, stop)


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
        manifest.setdefault("resumed", []).append(now())
        if ended:
            manifest.setdefault("orphans_ended", []).extend(ended)
        stop.check(run_dir)
        recorded = recorded_profile(manifest, run_dir)
        profiles = node_profiles(recorded, _recorded_overrides(manifest))
        return _collect_and_judge(run_dir, manifest, inv, recorded, profiles, forks, on_plan,
                                  progress, stop)


def _recorded_source(manifest: Mapping[str, Any], run_dir: Path) -> str:
    return f"{manifest['profile']['source']} (as recorded in {run_dir})"


def _recorded_overrides(manifest: Mapping[str, Any]) -> dict[str, Any]:
    return {h["name"]: h.get("profile_overrides") for h in manifest["hosts"]}


def recorded_profile(manifest: Mapping[str, Any], run_dir: Path) -> Profile:
    """The profile a run's manifest records, validated again."""
    try:
        return profile_from_document(manifest["profile"]["document"],
                                     _recorded_source(manifest, run_dir))
    except ProfileError as exc:
        raise RunError(str(exc)) from None


def _collect_and_judge(run_dir: Path, manifest: dict[str, Any], inv: Inventory,
                       recorded: Profile, profiles: Mapping[str, Profile], forks: int,
                       on_plan: PlanFn, progress: ProgressFn, stop: Stop) -> RunOutcome:
    selected = [REGISTRY[c] for c in manifest["checks"] if c in REGISTRY]
    store = EvidenceStore(run_dir)
    nodes = tuple(h["name"] for h in manifest["hosts"])
    view = RunView(nodes, inv.hostvars, tuple(inv.sources), profiles,
                   manifest.get("launch_host"))
    the_plan = plan(view, selected, store.has_usable)
    on_plan(selected, the_plan.pending(selected))
    for nr in the_plan.not_run:
        store.write(nr.host, nr.check, "", argv=(), outcome="not_run", rc=None,
                    started=None, ended=None, duration_s=None, stderr="", message=nr.why)
        progress(nr.host, nr.check, "not_run")
    for sk in the_plan.skipped:
        progress(sk.host, sk.check, "skipped")  # judged as skip: nothing to collect
    statuses = _collect(the_plan, inv, run_dir, store, forks, progress, stop)
    if stop():
        manifest.setdefault("interrupted", []).append({"at": now(), "by": stop.signame})
        manifest["ansible_runner_status"] = "canceled"
        write_json(run_dir / "manifest.json", manifest)
        raise Interrupted(stop.signame, run_dir)
    manifest["finished"] = now()
    manifest["ansible_runner_status"] = next(
        (s for s in statuses if s != "successful"), "successful")
    write_json(run_dir / "manifest.json", manifest)
    return _judge(run_dir, manifest, recorded, profiles, profiles, run_dir)


def _collect(the_plan: Plan, inv: Inventory, run_dir: Path, store: EvidenceStore, forks: int,
             progress: ProgressFn, stop: Stop) -> list[str]:
    """Run the plan's phases one after the other; ansible-runner's status of each."""
    statuses = []
    for phase in the_plan.phases:
        if stop():
            break  # launch nothing once a stop was asked for
        statuses.append(collect(phase, inv.sources, store, forks=forks, progress=progress,
                                stop=stop))
        if stop():
            # this run's commands still running on the nodes (fio, srun) end too
            release_nodes(phase, inv.sources, run_dir, forks=forks, stop=stop)
    return statuses


def judge_run(run_dir: Path, profile: Profile | None = None,
              out_dir: Path | None = None) -> RunOutcome:
    """Judge the evidence stored in ``run_dir`` (with its own profile unless one is given)
    and write the reports into ``out_dir`` (default: the run directory)."""
    manifest = read_manifest(run_dir)
    recorded = recorded_profile(manifest, run_dir)
    overrides = _recorded_overrides(manifest)
    profiles = node_profiles(profile or recorded, overrides)
    collected_with = profiles if profile is None else node_profiles(recorded, overrides)
    return _judge(run_dir, manifest, profile or recorded, profiles, collected_with,
                  out_dir or run_dir)


def _judge(run_dir: Path, manifest: Mapping[str, Any], profile: Profile,
           profiles: Mapping[str, Profile], collected_with: Mapping[str, Profile],
           out: Path) -> RunOutcome:
    """Judge, write the reports into ``out``, then record the judgement in the history
    (whose failure is reported in the outcome, never loses the reports)."""
    hosts = manifest["hosts"]
    job = JudgeJob(tuple(h["name"] for h in hosts), tuple(manifest["checks"]), profiles,
                   collected_with, manifest.get("launch_host"))
    per_node, judged = judge_stored(job, EvidenceStore(run_dir), REGISTRY, RACK_REGISTRY)
    locations = {h["name"]: h["location"] for h in hosts}
    rack = rack_verdict(node_verdict(node, rs, locations[node]) for node, rs in per_node.items())
    doc = report_document(rack, manifest, profile, locations, judged.digests, profiles,
                          pairwise=judged.sections)
    reports = write_reports(doc, out)
    try:
        conn = open_history(default_history_path(run_dir.resolve().parent))
        try:
            record_report(conn, doc, run_dir.resolve())
        finally:
            conn.close()
    except HistoryError as exc:
        return RunOutcome(run_dir, rack, reports, f"the run history was not updated: {exc}")
    return RunOutcome(run_dir, rack, reports)


def load_profile_or_fail(name: str) -> Profile:
    try:
        return load_profile(name)
    except ProfileError as exc:
        raise RunError(str(exc)) from None
