"""The runner wires the pipeline: plan -> collect -> judge -> report.

``validate`` collects fresh evidence into a new run directory, then judges it (what the
run covers is resolved first: ``selection.prepare``); ``resume`` collects what a run
directory lacks, then judges it; ``retest`` collects every failure of a run again, as its
next revision, then judges it; ``judge_run`` judges a
stored run directory (again) without touching the cluster. Each writes the reports
(``reports.write``) and then records the judgement in the run history (the report
document itself is ``rejudge.judged_document``'s). Nothing here prints: the CLI does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rackgate.checks import RACK_REGISTRY, REGISTRY
from rackgate.checks.shared.base import Check
from rackgate.collect.ansible import default_forks
from rackgate.collect.phases import Collection, Via, record_not_run
from rackgate.collect.preflight import preflight, refuse_on_errors
from rackgate.collect.preflight_records import Problem
from rackgate.collect.processes import end_collection
from rackgate.collect.schedule import plan
from rackgate.collect.schedule_summary import PlanSummary, summarise
from rackgate.collect.stop import Interrupted, Stop
from rackgate.commands.failure import ControlSideError
from rackgate.fabric.plan import FabricPlan
from rackgate.inventory import Inventory, load_inventory
from rackgate.judge.stored import judge_stored
from rackgate.model import RackVerdict, Result, Status
from rackgate.overrides import profile_record
from rackgate.placement import (
    ACROSS_NODES,
    NO_LAUNCH_HOST,
    ON_FABRIC,
    RunView,
    Usable,
    placement_of,
)
from rackgate.profile import Profile
from rackgate.refusal import Refusal
from rackgate.rejudge import (
    judge_job,
    judged_document,
    judging,
    recorded_fabric,
    recorded_overrides,
    recorded_profile,
    recorded_source,
)
from rackgate.reports.diff import Compared, first_report, with_diff
from rackgate.reports.write import Reports, keep_earlier, keep_revision, write_reports
from rackgate.scheduler.retest import RetestDrains
from rackgate.selection import no_launch_reason, node_profiles, prepare, select_hosts
from rackgate.store.evidence import EvidenceStore
from rackgate.store.history import HistoryError, default_history_path, open_history, record_report
from rackgate.store.manifest import (
    MANIFEST_SCHEMA,
    ControlFailure,
    Interruption,
    Manifest,
    new_run_dir,
    now,
    read_manifest,
    run_dir_lock,
    versions,
    write_manifest,
)


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    rack: RackVerdict
    reports: Reports
    # why the run history was not updated (the reports stand), or None
    history_error: str | None = None
    revision: int = 1  # the run's revision (each --resume or --retest adds one)

    @property
    def report_json(self) -> Path:
        return self.reports.json

    @property
    def report_html(self) -> Path:
        return self.reports.html


PlanFn = Callable[[Sequence[Check], PlanSummary], None]  # checks, what the plan will do
ProgressFn = Callable[[str, str, str], None]  # host, check, outcome
SayFn = Callable[[str], None]  # one line for the operator (the retest's SLURM actions)


def validate(inventory: Sequence[str], profile: Profile, *, group: str = "compute",
             limit: str | None = None, checks: Sequence[str] | None = None,
             runs_dir: Path = Path("runs"), forks: int | None = None,
             on_plan: PlanFn = lambda c, p: None,
             progress: ProgressFn = lambda h, c, o: None,
             stop: Stop | None = None, plan_first: bool = False,
             on_problems: Callable[[Sequence[Problem]], None] = lambda p: None,
             keep_artifacts: bool = False, fabric_plan: Path | None = None,
             compare: Compared | None = None, via: Via = "ansible") -> RunOutcome:
    """Collect fresh evidence into a new run directory, then judge it. A ``stop`` request
    (SIGTERM/SIGINT in the CLI) ends collection and raises Interrupted. With
    ``plan_first`` (the CLI's default) the plan runs first: its problems go to
    ``on_problems``, and an error raises PlanRefused before any run directory exists.
    ``via`` says how every node's own checks are collected (``collect.bundle``); ``forks``
    defaults to what the host count and this host's memory allow (``default_forks``)."""
    stop = stop or Stop()
    prep = prepare(inventory, profile, group=group, limit=limit, checks=checks,
                   fabric_plan_file=fabric_plan, need_launch_host=via == "slurm")
    if via == "slurm" and prep.launch_host is None:
        raise Refusal(f"--via slurm needs the SLURM controller to launch from: "
                       f"{no_launch_reason(prep.inv, prep.hosts) or NO_LAUNCH_HOST}")
    forks = forks or default_forks(len(prep.hosts) + 1)
    if plan_first:
        on_problems(refuse_on_errors(preflight(prep.view, prep.selected, prep.inv.sources,
                                               forks=forks, stop=stop)))
        stop.check()
    inv, hosts, selected, overrides = prep.inv, prep.hosts, prep.selected, prep.overrides
    profiles, launcher = prep.profiles, prep.launch_host
    run_dir = new_run_dir(runs_dir, profile.name)
    started = now()
    manifest = Manifest.model_validate({
        "schema": MANIFEST_SCHEMA,
        "run_id": run_dir.name,
        "started": started,
        "inventory": [str(Path(i).resolve()) for i in inventory],
        "group": group,
        "limit": limit,
        "checks": [c.name for c in selected],
        "profile": profile_record(profile),
        "run_dir": str(run_dir.resolve()),
        "hosts": [{"name": h, "location": inv.location(h), "place": inv.place(h),
                   "profile_overrides": overrides[h]} for h in hosts],
        "launch_host": launcher,
        "no_launch_reason": no_launch_reason(inv, hosts) if launcher is None else None,
        # the fabric plan the fabric checks are judged against, as it was, and where they
        # ran: only when there is one (a run without a fabric records what it always did)
        "fabric": None if prep.fabric is None else {
            "source": prep.fabric.source, "sha256": prep.fabric.sha256,
            "document": dict(prep.fabric.document)},
        "fabric_host": prep.fabric_host,
        "revisions": [{"revision": 1, "kind": "validate", "at": started, "via": via}],
        **versions(),
    })
    # the run is judged with the profile as its manifest records it (the same document)
    recorded = replace(profile, source=recorded_source(manifest, run_dir))
    profiles = {h: recorded if p is profile else p for h, p in profiles.items()}
    with run_dir_lock(run_dir):
        write_manifest(run_dir, manifest)
        stop.check(run_dir)
        return _collect_and_judge(run_dir, manifest, inv, recorded, profiles,
                                  prep.fabric.plan if prep.fabric else None, forks, on_plan,
                                  progress, stop, keep_artifacts=keep_artifacts,
                                  compare=compare, via=via)


@dataclass(frozen=True)
class Reopened:
    """A stored run, locked, to collect into again: what its manifest records."""

    manifest: Manifest
    inv: Inventory
    recorded: Profile
    profiles: Mapping[str, Profile]
    fabric: FabricPlan | None  # the fabric plan it records


@contextlib.contextmanager
def reopened(run_dir: Path, stop: Stop) -> Iterator[Reopened]:
    """Lock ``run_dir`` and read it back; first, whatever an earlier, killed attempt left
    running on this host (recorded in the run directory) is ended."""
    if not run_dir.is_dir():
        read_manifest(run_dir)  # names what is wrong with it
    with run_dir_lock(run_dir):
        manifest = read_manifest(run_dir)
        ended = end_collection(run_dir)
        inv = load_inventory(manifest.inventory)
        if ended:
            manifest.orphans_ended = [*(manifest.orphans_ended or []), *ended]
        stop.check(run_dir)
        recorded = recorded_profile(manifest, run_dir)
        yield Reopened(manifest, inv, recorded,
                       node_profiles(recorded, recorded_overrides(manifest)),
                       recorded_fabric(manifest, run_dir))


def resume(run_dir: Path, *, forks: int | None = None, on_plan: PlanFn = lambda c, p: None,
           progress: ProgressFn = lambda h, c, o: None,
           stop: Stop | None = None, keep_artifacts: bool = False,
           via: Via = "ansible") -> RunOutcome:
    """Collect what a run directory lacks (missing, damaged, failed or timed-out evidence)
    with the run's own inventory, profile, hosts and checks, then judge the whole run.

    On the nodes, the node lock ends an earlier, killed attempt's commands before this one
    runs its own."""
    stop = stop or Stop()
    with reopened(run_dir, stop) as run:
        run.manifest.add_revision("resume", via=via)
        run.manifest.resumed.append(now())
        return _collect_and_judge(run_dir, run.manifest, run.inv, run.recorded, run.profiles,
                                  run.fabric, forks, on_plan, progress, stop,
                                  keep_artifacts=keep_artifacts, via=via)


def retest(run_dir: Path, *, limit: str | None = None, forks: int | None = None,
           on_plan: PlanFn = lambda c, p: None, progress: ProgressFn = lambda h, c, o: None,
           stop: Stop | None = None, keep_artifacts: bool = False,
           compare: Compared | None = None, via: Via = "ansible",
           say: SayFn = lambda line: None) -> RunOutcome:
    """Collect again, in the same run directory, every (node, check) that ended ``fail`` or
    ``error`` (of the nodes ``limit`` selects), and every check across the nodes when one
    of those nodes is retested (it runs across the whole set under test, so a repaired
    node's pairs are measured again); then judge the whole run as its next revision.
    Earlier evidence stays, as numbered attempts. The new report is compared with
    ``compare``, else with the run's first revision (its ``diff``: the story since).

    Before its first job through SLURM, the retested nodes that this run drained are
    resumed for it, and after judging those still REJECTed are drained again
    (``scheduler.retest``; each line of it goes to ``say``)."""
    stop = stop or Stop()
    with reopened(run_dir, stop) as run:
        compare = compare or first_report(run_dir)
        manifest = run.manifest
        nodes = list(manifest.host_names())
        chosen = set(nodes if not limit else
                     [h for h in select_hosts(run.inv, manifest.group, limit) if h in nodes])
        if not chosen:
            raise Refusal(f"--limit {limit!r} selects no host of run {run_dir.name} "
                           f"({', '.join(nodes)})")
        store = EvidenceStore(run_dir)
        per_node, _ = judge_stored(judge_job(manifest, run.profiles, run.profiles, run.fabric),
                                   store, REGISTRY, RACK_REGISTRY)
        redo = retest_selection(per_node, chosen)
        if not redo:
            raise Refusal(f"nothing to retest in {run_dir.name}: no check of "
                           f"{', '.join(sorted(chosen))} ended fail or error")
        # a job across the nodes is launched again when any node is retested (it measures
        # the whole set); a fabric query when a retested node failed it
        across = {c for c in manifest.checks
                  if c in REGISTRY and placement_of(REGISTRY[c]) is ACROSS_NODES}
        across |= {c for _, c in redo
                   if c in REGISTRY and placement_of(REGISTRY[c]) is ON_FABRIC}

        def usable(host: str, check: str) -> bool:
            return check not in across and (host, check) not in redo \
                and store.has_usable(host, check)

        retested = sorted({n for n, _ in redo})
        manifest.add_revision("retest", nodes=retested,
                     checks=sorted({c for _, c in redo} | across), via=via)
        launch = manifest.launch_host
        drains = RetestDrains(run_dir, manifest, retested, launch, run.inv.sources,
                              say) if launch else None
        try:
            return _collect_and_judge(run_dir, manifest, run.inv, run.recorded, run.profiles,
                                      run.fabric, forks, on_plan, progress, stop, usable,
                                      keep_artifacts=keep_artifacts, compare=compare, via=via,
                                      before_slurm=drains.lift if drains else None)
        finally:
            if drains:
                drains.settle()


def retest_selection(per_node: Mapping[str, Sequence[Result]],
                     chosen: set[str]) -> set[tuple[str, str]]:
    """The (node, check) pairs of ``chosen`` nodes that ended ``fail`` or ``error`` and are
    collected (rack-level judgements are judged again from what is collected)."""
    return {(node, r.check) for node, results in per_node.items() if node in chosen
            for r in results
            if r.status in (Status.FAIL, Status.ERROR) and r.check in REGISTRY}


def _collect_and_judge(run_dir: Path, manifest: Manifest, inv: Inventory,
                       recorded: Profile, profiles: Mapping[str, Profile],
                       fabric: FabricPlan | None, forks: int | None,
                       on_plan: PlanFn, progress: ProgressFn, stop: Stop,
                       usable: Usable | None = None, keep_artifacts: bool = False,
                       compare: Compared | None = None, via: Via = "ansible",
                       before_slurm: Callable[[], None] | None = None) -> RunOutcome:
    selected = [REGISTRY[c] for c in manifest.checks if c in REGISTRY]
    store = EvidenceStore(run_dir)
    nodes = manifest.host_names()
    if via == "slurm" and not manifest.launch_host:
        raise Refusal(f"--via slurm: run {run_dir.name} records no launch host (it had "
                       f"no check across the nodes to launch): collect it --via ansible")
    forks = forks or default_forks(len(nodes) + 1)
    view = RunView(nodes, inv.hostvars, tuple(inv.sources), profiles,
                   manifest.launch_host, fabric=fabric, fabric_host=manifest.fabric_host)
    the_plan = plan(view, selected, usable or store.has_usable)
    on_plan(selected, summarise(the_plan, selected, view, manifest.no_launch_reason))
    for nr in the_plan.not_run:
        record_not_run(store, nr, progress)
    for sk in the_plan.skipped:
        progress(sk.host, sk.check, "skipped")  # judged as skip: nothing to collect
    collection = Collection(the_plan, view, selected, inv, store, forks, progress, stop,
                            keep_artifacts=keep_artifacts, via=via, before_slurm=before_slurm)
    try:
        statuses = collection.run()
    except ControlSideError as exc:  # no verdict: no report, no history row, no drain
        if manifest.revisions[-1].kind == "validate":  # a new run: say it is unjudged
            manifest.control_failure = ControlFailure(at=now(), message=str(exc))
            write_manifest(run_dir, manifest)
        raise ControlSideError(f"{exc}\nRun {run_dir} has no report: fix this, then run "
                               f"again (or `rackgate validate --resume {run_dir}`)") from None
    manifest.control_failure = None
    manifest.launched.update(collection.launched)
    if stop():
        manifest.interrupted = [*(manifest.interrupted or []),
                                Interruption(at=now(), by=stop.signame)]
        manifest.ansible_runner_status = "canceled"
        write_manifest(run_dir, manifest)
        raise Interrupted(stop.signame, run_dir)
    manifest.finished = now()
    manifest.ansible_runner_status = next(
        (s for s in statuses if s != "successful"), "successful")
    write_manifest(run_dir, manifest)
    return _judge(run_dir, manifest, recorded, profiles, profiles, fabric, run_dir, compare)


def judge_run(run_dir: Path, profile: Profile | None = None,
              out_dir: Path | None = None, overrides_files: Sequence[Path] = (),
              compare: Compared | None = None) -> RunOutcome:
    """Judge the evidence stored in ``run_dir`` (with its own profile unless one is given,
    with ``overrides_files`` merged over it: ``apply_overrides``) and write the reports into
    ``out_dir`` (default: the run directory), compared with ``compare`` when given."""
    manifest = read_manifest(run_dir)
    if manifest.control_failure:
        raise Refusal(f"run {run_dir} was never collected (it failed on the control host's "
                       f"side: {manifest.control_failure.message}); "
                       f"`rackgate validate --resume {run_dir}` collects it")
    return _judge(run_dir, manifest, *judging(run_dir, manifest, profile, overrides_files),
                  recorded_fabric(manifest, run_dir), out_dir or run_dir, compare)


def _judge(run_dir: Path, manifest: Manifest, profile: Profile,
           profiles: Mapping[str, Profile], collected_with: Mapping[str, Profile],
           fabric: FabricPlan | None, out: Path, compare: Compared | None = None) -> RunOutcome:
    """Judge, write the reports into ``out`` (with the ``diff`` from ``compare``; in the run
    directory, each revision's reports are kept too: ``report.rev<N>.*``), then record the
    judgement in the history (whose failure is reported in the outcome, never loses the
    reports)."""
    rack, doc = judged_document(run_dir, manifest, profile, profiles, collected_with, fabric)
    if compare is not None:
        doc = with_diff(doc, compare)
    own = out.resolve() == run_dir.resolve()
    if own:
        keep_earlier(out)
    reports = write_reports(doc, out, run_dir)
    if own:
        keep_revision(out, doc["revision"])
    try:
        conn = open_history(default_history_path(run_dir.resolve().parent))
        try:
            record_report(conn, doc, run_dir.resolve())
        finally:
            conn.close()
    except HistoryError as exc:
        return RunOutcome(run_dir, rack, reports, f"the run history was not updated: {exc}",
                          doc["revision"])
    return RunOutcome(run_dir, rack, reports, revision=doc["revision"])
