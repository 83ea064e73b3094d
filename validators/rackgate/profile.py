"""Hardware profiles: what a rack is expected to be, and the thresholds with their basis.

A profile is a YAML file (``validators/rackgate/profiles/<name>.yaml`` or any path).
Every threshold carries a reference value, pass ratios and the ``basis`` that explains
the number, so a report can show both the verdict and the physics behind it.
Unknown keys are refused, as are checks the registry does not know and metrics a
check does not judge: a typo must not silently disable a threshold.
Every threshold is a floor or a ceiling as its check declares (``Check.better``), its
figures finite and its ratio in the range ``rackgate.thresholds`` sets, so that no file can
remove a threshold by making it meaningless.

The ``hardware:`` blocks (GPUs, their NVLink topology and PCIe link, NICs, power supplies,
storage) are defined in ``rackgate.hardware`` and re-exported here.

Inventory variables may override parts of a profile per host or group
(``rackgate_profile_overrides``, deep-merged, then validated again), as ``--overrides``
files do (``rackgate.overrides``). An override that loosens a threshold gives its basis, and
the profile keeps every threshold its overrides changed (``Profile.changes``).

The rack-level judgements (peer comparison, version drift, duplicate identities) are
configured in the ``rack:`` section, each figure with its basis; the settings in
``profiles/common/rack.yaml`` apply wherever a profile does not say otherwise.

This module does not know the checks: every function that validates a document is given
the catalog (``rackgate.checks.CATALOG``: each check's metrics and parameters), so the
check families can import the profile's types without an import cycle.
"""

from __future__ import annotations

import copy
import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rackgate.documents import DocumentError, load_yaml, shown
from rackgate.hardware import GpuSpec as GpuSpec  # re-exported: profiles' hardware blocks
from rackgate.hardware import Hardware as Hardware
from rackgate.hardware import NicSpec as NicSpec
from rackgate.hardware import PowerCap as PowerCap
from rackgate.hardware import PsuSpec as PsuSpec
from rackgate.hardware import StorageSpec as StorageSpec
from rackgate.thresholds import (
    Direction,
    ThresholdChange,
    band_problems,
    changes,
    override_entries,
    override_problems,
)
from rackgate.thresholds import Threshold as Threshold  # re-exported: the checks' thresholds

PROFILE_DIR = Path(__file__).parent / "profiles"
COMMON_RACK = PROFILE_DIR / "common" / "rack.yaml"  # rack-level settings every profile gets


class ProfileError(ValueError):
    """A profile was refused; the message names the file, the field and why."""


class Figure(BaseModel):
    """A number a rack-level judgement works with, and where it comes from.

    >>> Figure(value=3.5, basis="Iglewicz and Hoaglin (1993): modified z beyond 3.5").value
    3.5
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    value: float
    basis: str = Field(min_length=10, description="where the number comes from")


class CheckProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    params: dict[str, Any] = Field(default_factory=dict)
    thresholds: dict[str, Threshold] = Field(default_factory=dict)


class CheckSpec(Protocol):
    """What a profile needs to know of a check to validate its section."""

    @property
    def metrics(self) -> frozenset[str]: ...
    @property
    def optional_metrics(self) -> frozenset[str]: ...
    @property
    def params_model(self) -> type[BaseModel]: ...
    @property
    def better(self) -> Mapping[str, Direction]: ...  # each metric: its threshold's direction
    @property
    def collected(self) -> bool: ...  # a command runs for it (False: a rack-level judgement)


Catalog = Mapping[str, CheckSpec]


class ProfileModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1]
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    description: str = Field(min_length=1)
    hardware: Hardware
    checks: dict[str, CheckProfile]
    # rack-level judgements over every node's results: profiles/common/rack.yaml, then this
    rack: dict[str, CheckProfile] = Field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    """A validated profile, where it came from, every threshold its overrides changed
    (in the order they were merged in: the manifest and the reports list them) and the
    overrides files merged into it, (path as given, sha256 of the file), in that order."""

    model: ProfileModel
    source: str
    sha256: str
    raw: Mapping[str, Any]
    catalog: Catalog = field(default_factory=dict, compare=False, repr=False)
    changes: tuple[ThresholdChange, ...] = ()
    overrides_files: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        return self.model.name

    def check(self, name: str) -> CheckProfile | None:
        return self.model.checks.get(name)

    def rack_check(self, name: str) -> CheckProfile | None:
        return self.model.rack.get(name)

    def with_overrides(self, overrides: Mapping[str, Any], origin: str) -> Profile:
        """This profile with ``overrides`` deep-merged in, validated again; the thresholds
        it changes are added to ``changes``. ProfileError for an override that loosens a
        threshold without a basis of its own, or changes its unit
        (``rackgate.thresholds.override_problems``)."""
        if not overrides:
            return self
        if not isinstance(overrides, Mapping):
            raise ProfileError(f"{origin}: rackgate_profile_overrides must be a mapping, "
                               f"got {type(overrides).__name__}")
        merged = deep_merge(dict(self.raw), overrides)
        out = profile_from_document(merged, f"{self.source} + {origin}", self.catalog)
        made = changes(_thresholds(self.model), _thresholds(out.model), origin)
        if problems := override_problems(made, override_entries(overrides)):
            raise ProfileError("\n".join([f"profile {out.source} is invalid:", *problems]))
        return replace(out, changes=(*self.changes, *made),
                       overrides_files=self.overrides_files)


def _thresholds(model: ProfileModel) -> dict[str, dict[str, Threshold]]:
    return {name: dict(cp.thresholds) for name, cp in model.checks.items()}


def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _format_errors(source: str, exc: ValidationError) -> str:
    lines = [f"profile {source} is invalid:"]
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        got = f" (got {shown(err['input'])})" if err["type"] != "missing" else ""
        lines.append(f"  {field}: {err['msg']}{got}")
    return "\n".join(lines)


@functools.cache
def _common_rack() -> dict[str, Any]:
    """The rack-level settings every profile starts from (profiles/common/rack.yaml), read
    once; callers deep-merge over it (``deep_merge`` copies it) and never change it."""
    try:
        doc = load_yaml(COMMON_RACK.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, DocumentError) as exc:
        raise ProfileError(f"{COMMON_RACK}: cannot read the common rack settings: "
                           f"{exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rack"), dict):
        raise ProfileError(f"{COMMON_RACK}: must be a mapping with a rack: section")
    rack: dict[str, Any] = doc["rack"]
    return rack


def _section_problems(where: str, name: str, cp: CheckProfile, spec: CheckSpec | None,
                      known_names: Catalog) -> list[str]:
    if spec is None:
        return [f"  {where}.{name}: unknown check (known: {', '.join(sorted(known_names))})"]
    problems = []
    known = spec.metrics | spec.optional_metrics
    for metric, threshold in cp.thresholds.items():
        if metric not in known:
            problems.append(f"  {where}.{name}.thresholds.{metric}: the check judges "
                            f"no such metric (it judges: {', '.join(sorted(known))})")
            continue
        problems += [f"  {where}.{name}.thresholds.{metric}.{key}: {why}"
                     for key, why in band_problems(threshold, spec.better[metric])]
    for metric in sorted(spec.metrics - set(cp.thresholds)):
        if cp.enabled:
            problems.append(f"  {where}.{name}.thresholds.{metric}: missing; an "
                            "enabled check needs every threshold it judges")
    try:
        spec.params_model.model_validate(cp.params)
    except ValidationError as exc:
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            problems.append(f"  {where}.{name}.params.{loc}: {err['msg']} "
                            f"(got {shown(err['input'])})")
    return problems


def profile_from_document(raw: Mapping[str, Any], source: str, catalog: Catalog) -> Profile:
    """Validate a profile document against ``catalog`` (the checks a profile may name)."""
    merged: Any = raw  # not a mapping, or a rack: that is not one: refused below, named
    rack = (raw.get("rack") or {}) if isinstance(raw, Mapping) else None
    if isinstance(rack, Mapping):
        merged = {**raw, "rack": deep_merge(_common_rack(), rack)}
    try:
        model = ProfileModel.model_validate(merged)
    except ValidationError as exc:
        raise ProfileError(_format_errors(source, exc)) from None
    node_checks = {n: s for n, s in catalog.items() if s.collected}
    rack_checks = {n: s for n, s in catalog.items() if not s.collected}
    problems = []
    for name, cp in model.checks.items():
        problems += _section_problems("checks", name, cp, node_checks.get(name), node_checks)
    for name, cp in model.rack.items():
        problems += _section_problems("rack", name, cp, rack_checks.get(name), rack_checks)
    if not any(cp.enabled for cp in model.checks.values()):
        problems.append("  checks: no check is enabled, so nothing would be run and no node "
                        "could be accepted" + (f" (all disabled: {', '.join(model.checks)})"
                                                if model.checks else ""))
    if problems:
        raise ProfileError("\n".join([f"profile {source} is invalid:", *problems]))
    digest = hashlib.sha256(yaml.safe_dump(dict(raw), sort_keys=True).encode()).hexdigest()
    return Profile(model=model, source=source, sha256=digest, raw=copy.deepcopy(dict(raw)),
                   catalog=catalog)


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name_or_path: str, catalog: Catalog) -> Profile:
    """Load a shipped profile by name, or a profile file by path."""
    path = Path(name_or_path)
    if not path.is_file():
        path = PROFILE_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            raise ProfileError(f"profile {name_or_path!r}: no such file and no shipped profile "
                               f"of that name (shipped: {', '.join(available_profiles())})")
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ProfileError(f"profile {path}: not valid YAML: {exc}") from None
    except DocumentError as exc:
        raise ProfileError(f"profile {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise ProfileError(f"profile {path}: the top level must be a mapping")
    return profile_from_document(raw, str(path), catalog)
