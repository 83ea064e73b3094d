"""Run directories as ``rackgate validate`` writes them (manifest.json and evidence), so
tests judge stored runs offline: one writer, so a manifest field changes in one place.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rackgate.profile import Profile
from rackgate.store.evidence import EvidenceStore, write_json
from rackgate.store.manifest import MANIFEST_SCHEMA

# a host name, or (name, location, profile_overrides)
Host = str | tuple[str, str, Mapping[str, Any] | None]


def write_run(run_dir: Path, profile: Profile, checks: Sequence[str], hosts: Sequence[Host],
              *, launch_host: str | None = None,
              evidence: Mapping[tuple[str, str], str] | None = None,
              argv: tuple[str, ...] = ("timeout",), duration_s: float = 1.0) -> Path:
    """``run_dir`` with a manifest of ``hosts`` x ``checks`` collected with ``profile``, and
    one completed (rc 0) evidence record per ``(host, check) -> stdout`` of ``evidence``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for h in hosts:
        name, location, overrides = (h, "", {}) if isinstance(h, str) else h
        entries.append({"name": name, "location": location, "profile_overrides": overrides})
    write_json(run_dir / "manifest.json", {
        "schema": MANIFEST_SCHEMA, "run_id": run_dir.name, "started": "t0", "finished": "t1",
        "inventory": ["inv"], "group": "compute", "limit": None, "checks": list(checks),
        "profile": {"name": profile.name, "source": profile.source, "sha256": profile.sha256,
                    "document": dict(profile.raw)},
        "hosts": entries, "launch_host": launch_host, "run_dir": str(run_dir.resolve()),
        "rackgate_version": "0", "ansible_core_version": "0"})
    store = EvidenceStore(run_dir)
    for (host, check), stdout in (evidence or {}).items():
        store.write(host, check, stdout, argv=argv, outcome="completed", rc=0, started=None,
                    ended=None, duration_s=duration_s, stderr="", message="")
    return run_dir


def strict_json(text: str) -> Any:
    """JSON.parse's view: NaN and Infinity are not JSON (RFC 8259 section 6)."""
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)
