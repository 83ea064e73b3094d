from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture_text():
    """Read a fixture file as text (fixtures start with '#' lines saying where they came from)."""

    def read(rel: str) -> str:
        return (FIXTURES / rel).read_text(encoding="utf-8")

    return read
