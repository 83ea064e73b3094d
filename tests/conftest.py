from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rackgate.demo.bmc import IPMI_SIM_FILES, BmcError, start_ipmi_sim

FIXTURES = Path(__file__).parent / "fixtures"
DEMO_PROFILE = Path(__file__).resolve().parents[1] / "validators/rackgate/profiles/demo.yaml"


def promtool(*args: str, cwd: Path | None = None, stdin: str | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run Debian's promtool (rules, their unit tests, exposition text, PromQL). A failure,
    not a skip, when it is missing: these files are tested by nothing else, and `make test`
    installs it (scripts/bootstrap.sh --test)."""
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not found: run scripts/bootstrap.sh --test "
                    "(or apt-get install prometheus)")
    return subprocess.run([found, *args], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)


def demo_profile_file(path: Path, checks: list[str], name: str = "test") -> Path:
    """The shipped demo profile with only ``checks`` (their params and thresholds kept),
    written to ``path`` under another ``name``."""
    doc = yaml.safe_load(DEMO_PROFILE.read_text())
    doc["name"] = name
    doc["checks"] = {check: doc["checks"][check] for check in checks}
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="session")
def provisioned_rack() -> subprocess.CompletedProcess[str]:
    """(e2e) The demo rack up and provisioned, once for the whole session, shared by every
    e2e module (tests/e2e/demo_rack.py: provision). tests/e2e is on sys.path whenever an
    e2e module asks for this fixture (pytest's prepend import mode)."""
    from demo_rack import provision

    return provision()


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


def free_port(kind: int) -> int:
    """A loopback port the kernel just handed out (``socket.SOCK_DGRAM`` for RMCP+, which
    is UDP, or ``socket.SOCK_STREAM``), so tests running side by side don't collide."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def ipmi_sim(work_dir: Path, files: Path = IPMI_SIM_FILES) -> Iterator[tuple[int, int]]:
    """ipmi_sim on loopback with ``files``: (LAN port, console port) while it runs. It is
    stopped on leaving (SIGTERM, at most 5 s, then SIGKILL); a start failure fails the
    test with its reason."""
    lan, console = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_STREAM)
    try:
        proc = start_ipmi_sim(work_dir, lan, console, files)
    except BmcError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield lan, console
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
