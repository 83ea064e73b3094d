"""A stored run judged from its manifest and evidence into a report document: what every
judgement of a run starts from (the profile, inventory overrides and fabric plan the
manifest records; the judge job) and the document it makes. ``run`` writes that document
(``judge``, and ``validate``/``--resume``/``--retest`` after collecting);
``rejudged_report`` makes it without writing anything, for ``rackgate verify``
(``rackgate.verify``), so a report and its re-judgement come from the same code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rackgate.checks import RACK_REGISTRY, REGISTRY, profile_from_document
from rackgate.fabric.plan import FabricPlan, PlanError, plan_from_document
from rackgate.inventory import place_from_text, place_of
from rackgate.judge.stored import judge_stored
from rackgate.model import RackVerdict, node_verdict, rack_verdict
from rackgate.overrides import apply_overrides, recorded_changes, recorded_files
from rackgate.placement import JudgeJob
from rackgate.profile import Profile, ProfileError
from rackgate.refusal import Refusal
from rackgate.reports import report_document
from rackgate.selection import node_profiles
from rackgate.store.evidence import EvidenceStore
from rackgate.store.manifest import Manifest, read_manifest


def recorded_source(manifest: Manifest, run_dir: Path) -> str:
    return f"{manifest.profile.source} (as recorded in {run_dir})"


def recorded_overrides(manifest: Manifest) -> dict[str, Any]:
    """Each host's inventory overrides (``rackgate_profile_overrides``), as recorded."""
    return {h.name: h.profile_overrides for h in manifest.hosts}


def recorded_profile(manifest: Manifest, run_dir: Path) -> Profile:
    """The profile a run's manifest records, validated again, with its overrides files and
    the threshold changes they made (``overrides.recorded_files``, ``recorded_changes``)."""
    try:
        profile = profile_from_document(manifest.profile.document,
                                        recorded_source(manifest, run_dir))
    except ProfileError as exc:
        raise Refusal(str(exc)) from None
    record = manifest.profile.to_doc()
    return replace(profile, changes=recorded_changes(record, run_dir),
                   overrides_files=recorded_files(record, run_dir))


def recorded_fabric(manifest: Manifest, run_dir: Path) -> FabricPlan | None:
    """The fabric plan a run's manifest records, validated again (None: it has none)."""
    fabric = manifest.fabric
    if fabric is None:
        return None
    try:
        return plan_from_document(fabric.document, f"{fabric.source} (as recorded in "
                                                   f"{run_dir})")
    except PlanError as exc:
        raise Refusal(str(exc)) from None


def judge_job(manifest: Manifest, profiles: Mapping[str, Profile],
              collected_with: Mapping[str, Profile], fabric: FabricPlan | None) -> JudgeJob:
    return JudgeJob(manifest.host_names(), tuple(manifest.checks), profiles, collected_with,
                    manifest.launch_host, dict(manifest.launched), manifest.no_launch_reason,
                    fabric, manifest.fabric_host)


def judging(run_dir: Path, manifest: Manifest, profile: Profile | None = None,
            overrides_files: Sequence[Path] = ()) -> tuple[Profile, Mapping[str, Profile],
                                                           Mapping[str, Profile]]:
    """What a stored run is judged with: the profile (the recorded one unless ``profile``
    is given, with ``overrides_files`` merged over it: ``apply_overrides``), each node's
    (with its recorded inventory overrides), and each node's as its evidence was collected
    (the recorded one's)."""
    recorded = recorded_profile(manifest, run_dir)
    judged = apply_overrides(profile or recorded, overrides_files)
    overrides = recorded_overrides(manifest)
    profiles = node_profiles(judged, overrides)
    return judged, profiles, (profiles if judged is recorded
                              else node_profiles(recorded, overrides))


def judged_document(run_dir: Path, manifest: Manifest, profile: Profile,
                    profiles: Mapping[str, Profile], collected_with: Mapping[str, Profile],
                    fabric: FabricPlan | None) -> tuple[RackVerdict, dict[str, Any]]:
    """Judge the run's stored evidence: the rack's verdict and the report document."""
    hosts = manifest.hosts
    job = judge_job(manifest, profiles, collected_with, fabric)
    per_node, judged = judge_stored(job, EvidenceStore(run_dir), REGISTRY, RACK_REGISTRY)
    locations = {h.name: h.location for h in hosts}
    places = {h.name: place_of(h.place) if h.place is not None
              else place_from_text(h.location) for h in hosts}
    rack = rack_verdict(node_verdict(node, rs, locations[node]) for node, rs in per_node.items())
    return rack, report_document(rack, manifest.to_doc(), profile, locations, judged.digests,
                                 profiles, pairwise=judged.sections, places=places,
                                 durations=judged.durations)


def rejudged_report(run_dir: Path, profile: Profile | None = None,
                    overrides_files: Sequence[Path] = ()) -> dict[str, Any]:
    """The report ``rackgate judge RUN_DIR`` (with the same ``--profile`` and
    ``--overrides``) would write now, written nowhere and recorded nowhere."""
    manifest = read_manifest(run_dir)
    return judged_document(run_dir, manifest, *judging(run_dir, manifest, profile,
                                                       overrides_files),
                           recorded_fabric(manifest, run_dir))[1]
