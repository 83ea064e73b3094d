"""Profiles as the command line names them: a shipped profile or a file, with overrides
files (partial profiles in YAML, such as ``rackgate baseline`` writes) merged over it.
Every refusal is a Refusal naming the file and the field (CLI exit 2), before anything
runs: a threshold made meaningless (``rackgate.thresholds``: not finite, a floor turned into
a ceiling, a ratio out of its range), or loosened without a basis of its own.

The thresholds the files changed are kept with the profile (``Profile.changes``), and so
are the files themselves (``Profile.overrides_files``: path and sha256, even of a file that
changed no threshold); both are recorded in the run's manifest (:func:`profile_record`) and
read back with it (:func:`recorded_changes`, :func:`recorded_files`), so that every report
of the run says which files it was judged with and lists the changes, old and new.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from rackgate.checks import load_profile
from rackgate.documents import DocumentError, load_yaml
from rackgate.profile import Profile, ProfileError
from rackgate.refusal import Refusal
from rackgate.thresholds import ThresholdChange


def load_profile_or_fail(name: str, overrides_files: Sequence[Path] = ()) -> Profile:
    """A profile by name or path, with ``overrides_files`` merged over it
    (``apply_overrides``); Refusal naming the file and field."""
    try:
        profile = load_profile(name)
    except ProfileError as exc:
        raise Refusal(str(exc)) from None
    return apply_overrides(profile, overrides_files)


def apply_overrides(profile: Profile, files: Sequence[Path]) -> Profile:
    """``profile`` with each overrides file (a partial profile in YAML, such as ``rackgate
    baseline`` writes) deep-merged over it in the order given and validated again, as
    inventory overrides are; the result records every file in its source and sha256, so a
    run's manifest holds the profile it was judged with, and in ``overrides_files`` (path,
    sha256 of the text read). A file that names a check the profile does not define is
    refused: merged in, it would enable that check with default params instead of changing
    a figure."""
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
            doc = load_yaml(text)
        except OSError as exc:
            raise Refusal(f"overrides {path}: cannot read it: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise Refusal(f"overrides {path}: not valid YAML: {exc}") from None
        except DocumentError as exc:
            raise Refusal(f"overrides {path}: {exc}") from None
        if not isinstance(doc, dict) or not doc:
            raise Refusal(f"overrides {path}: must be a non-empty mapping (a partial "
                           f"profile), got {type(doc).__name__}")
        checks = doc.get("checks")
        foreign = sorted(set(checks) - set(profile.model.checks)) \
            if isinstance(checks, dict) else []
        if foreign:
            raise Refusal(f"overrides {path}: checks.{foreign[0]}: profile {profile.name} "
                           f"does not define this check (an overrides file changes a "
                           f"profile's checks; it cannot add one)")
        try:
            profile = profile.with_overrides(doc, f"overrides {path}")
        except ProfileError as exc:
            raise Refusal(str(exc)) from None
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        profile = replace(profile, overrides_files=(*profile.overrides_files,
                                                    (str(path), digest)))
    return profile


def files_doc(profile: Profile) -> list[dict[str, str]]:
    """The overrides files merged into ``profile`` as the manifest and report.json record
    them: ``[{"path", "sha256"}]``, in the order merged."""
    return [{"path": path, "sha256": digest} for path, digest in profile.overrides_files]


def profile_record(profile: Profile) -> dict[str, Any]:
    """The manifest's ``profile``: name, source, sha256, the document (overrides merged in)
    and, when overrides files were merged in, the files (``overrides``) and the thresholds
    they changed (``changes``, when any)."""
    return {"name": profile.name, "source": profile.source, "sha256": profile.sha256,
            "document": dict(profile.raw),
            **({"overrides": files_doc(profile)} if profile.overrides_files else {}),
            **({"changes": [c.to_doc() for c in profile.changes]} if profile.changes else {})}


def recorded_files(record: Mapping[str, Any], run_dir: Path) -> tuple[tuple[str, str], ...]:
    """The overrides files a manifest's ``profile`` records (none when it has none);
    Refusal naming the manifest and the field."""
    docs = record.get("overrides", [])
    if not isinstance(docs, list) or not all(
            isinstance(d, dict) and isinstance(d.get("path"), str)
            and isinstance(d.get("sha256"), str) for d in docs):
        raise Refusal(f"{run_dir / 'manifest.json'}: field profile.overrides must be a list "
                       f"of {{path, sha256}} strings, got {str(docs)[:80]}")
    return tuple((d["path"], d["sha256"]) for d in docs)


def recorded_changes(record: Mapping[str, Any], run_dir: Path) -> tuple[ThresholdChange, ...]:
    """The threshold changes a manifest's ``profile`` records (none when it has none);
    Refusal naming the manifest and the field."""
    docs = record.get("changes", [])
    try:
        if not isinstance(docs, list):
            raise ValueError(f"must be a list, got {type(docs).__name__}")
        return tuple(ThresholdChange.from_doc(d) for d in docs)
    except ValueError as exc:
        raise Refusal(f"{run_dir / 'manifest.json'}: field profile.changes: {exc}") from None
