"""scripts/check-registry-hosts.py against throw-away git repositories.

The planted offender is a registry host the script itself finds on this machine (pip's
built-in default index host, which every machine running these tests has), never a literal:
this file, like every tracked file, must not name one.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check-registry-hosts.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_registry_hosts", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


check = _load_script()


def _git_repo(root: Path, files: dict[str, str], untracked: dict[str, str] | None = None) -> Path:
    for name, text in {**files, **(untracked or {})}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "--", *files], check=True)
    return root


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def pip_host() -> str:
    hosts = check.pip_hosts()
    assert hosts, "pip's default index host not found: is pip importable here?"
    return str(sorted(hosts)[0])


def test_registry_hosts_come_from_this_machine(pip_host: str) -> None:
    hosts = check.registry_hosts()
    assert hosts[pip_host] == "pip"
    assert all(source in {"apt", "pip", "npm"} for source in hosts.values())
    assert all(host == host.lower() and "/" not in host for host in hosts)


def test_registry_planted_offender_is_reported(tmp_path: Path, pip_host: str) -> None:
    root = _git_repo(
        tmp_path,
        {
            "README.md": "Mirrors come from the inventory.\n",
            "docs/install.md": f"# Install\n\n    pip install -i https://{pip_host}/simple x\n",
        },
        untracked={"notes.txt": f"untracked files are not checked: {pip_host}\n"},
    )
    done = _run(root)
    assert done.returncode == 1, done
    assert done.stdout.splitlines() == [f"docs/install.md:3: names {pip_host} (pip registry host)"]


def test_registry_host_matched_case_insensitively_as_a_whole_name(
    tmp_path: Path, pip_host: str
) -> None:
    root = _git_repo(
        tmp_path,
        {
            "a.txt": f"{pip_host.upper()}\n",
            "b.txt": f"https://{pip_host}.mirror.site.example/simple\nx{pip_host}\n",
        },
    )
    done = _run(root)
    assert done.returncode == 1, done
    assert done.stdout.splitlines() == [f"a.txt:1: names {pip_host} (pip registry host)"]


def test_registry_clean_repository_passes(tmp_path: Path) -> None:
    root = _git_repo(
        tmp_path,
        {
            "README.md": "Use http://mirror.site.example/debian for the Debian mirror.\n",
            "inventory/all.yml": "common_apt_mirror: http://mirror.site.example/debian\n",
        },
    )
    done = _run(root)
    assert done.returncode == 0, done
    assert done.stdout == ""
    assert "none names one" in done.stderr


def test_registry_not_a_git_work_tree_cannot_run(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 2, done
    assert "git ls-files" in done.stderr
