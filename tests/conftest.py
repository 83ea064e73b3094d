from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixture_text():
    """Read a fixture file as text (fixtures start with '#' lines saying where they came from)."""

    def read(rel: str) -> str:
        return (FIXTURES / rel).read_text(encoding="utf-8")

    return read


CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


@dataclass(frozen=True)
class CorpusFile:
    """One real tool output published by others (../shared/corpus, read at test time only)."""

    path: Path
    header: str  # the '# source:' / '# note:' lines: where it came from, what it shows
    body: str  # the tool's output, after the '# ---' line

    @property
    def degraded(self) -> bool:
        return "DEGRADED" in self.header.upper()


def corpus_files(folder: str, pattern: str = "*") -> list[CorpusFile]:
    """The corpus files of one family; the conformance tests skip when ../shared/corpus is
    absent (a user's clone), never when it is present."""
    files = []
    for path in sorted((CORPUS / folder).glob(pattern)):
        text = path.read_text(encoding="utf-8", errors="replace")
        head, sep, body = text.partition("\n# ---\n")
        files.append(CorpusFile(path, head if sep else "", body if sep else text))
    return files


def corpus_params(folder: str, pattern: str = "*") -> list[object]:
    """pytest.param per corpus file (id = file name), or one skip when there is no corpus."""
    if not CORPUS.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no corpus at {CORPUS}"))]
    return [pytest.param(f, id=f.path.name) for f in corpus_files(folder, pattern)]
