"""What the redundancy families' tests share: their fixtures (tests/fixtures/redundancy) and
the hardware those describe (two PSUs, N+1; two paths per LUN)."""

from __future__ import annotations

from pathlib import Path

from rackgate.profile import Hardware, PsuSpec, StorageSpec

FIXTURES = Path(__file__).parents[3] / "fixtures" / "redundancy"
SRC = "a profile written for the unit tests"
HW = Hardware(psu=PsuSpec(count=2, redundancy="N+1", source=SRC),
              storage=StorageSpec(multipath_paths_per_lun=2, source=SRC))


def read(name: str) -> str:
    """The tool output of a fixture, without its '#' header (read here, not through the
    fixture_text fixture: hypothesis tests may not take function-scoped fixtures)."""
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))
