"""Shared by every role's molecule verify (testinfra). pytest loads this file for the tests
under roles/*/molecule/*/tests, because the repository's pyproject.toml makes the
repository root pytest's rootdir. A scenario's own fixture of the same name overrides it."""

import pytest


@pytest.fixture(autouse=True)
def journal_on_failure(request, host):
    """Print the instance's journal after a test that failed."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        journal = host.run("journalctl -n 50 --no-pager")
        print(f"--- journalctl -n 50 --no-pager (rc={journal.rc}) ---")
        print(journal.stdout or journal.stderr)
