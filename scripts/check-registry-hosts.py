#!/usr/bin/env python3
"""Fail when a tracked file names the host of a package registry.

Project rule: mirrors come from the machine's own configuration or from inventory variables,
and documents use placeholders such as http://mirror.site.example/debian. So no file under
version control may name the host of a package registry: the Debian mirror, PyPI and its file
host, npm's registry. This script holds no such name itself; it asks this machine at run time:

  * APT: the host of each index target's Site (`apt-get indextargets`, which reads
    /etc/apt/sources.list and sources.list.d/ in both formats);
  * PyPI: pip's built-in default index and file-storage hosts
    (pip._internal.models.index.PyPI: netloc, file_storage_domain), from the pip of the
    Python running this script;
  * npm: the host of `npm config get registry`, when npm is installed.

Every file `git ls-files` lists under the root is searched (case-insensitively, as a whole
host name: "x.example.org" does not match inside "x.example.org.mirror.test"), and each hit is
printed as `path:line: names <host> (<source> registry host)`.

Usage: scripts/check-registry-hosts.py [--root DIR] [--list-hosts]
  --root DIR     the git work tree to check (default: the repository holding this script)
  --list-hosts   print the host names found on this machine, one per line, and exit
Exit status: 0 no tracked file names one, 1 some do (listed on stdout), 2 could not run
(not a git work tree, or no registry host found on this machine).
"""

from __future__ import annotations

import argparse
import importlib
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
COMMAND_TIMEOUT_S = 30


class CannotRun(Exception):
    """The check cannot run here (no git work tree, no registry host known)."""


@dataclass(frozen=True)
class Finding:
    """One tracked file line that names a registry host."""

    path: str  # relative to the root, as git ls-files prints it
    line: int  # 1-based
    host: str
    source: str  # "apt", "pip" or "npm"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: names {self.host} ({self.source} registry host)"


def _hostname(url: str) -> str | None:
    """The host part of a URL, lower-cased; None for file:// and other host-less URLs.

    >>> _hostname("http://mirror.site.example/debian"), _hostname("file:///srv/mirror")
    ('mirror.site.example', None)
    """
    host = urlsplit(url.strip()).hostname
    return host.lower() if host else None


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def apt_hosts() -> set[str]:
    """Hosts of the Site of every APT index target (empty without apt-get)."""
    if shutil.which("apt-get") is None:
        return set()
    out = _run(["apt-get", "indextargets", "--no-release-info", "--format", "$(SITE)"])
    return {host for line in out.splitlines() if (host := _hostname(line))}


def pip_hosts() -> set[str]:
    """pip's built-in default index host and file-storage host (empty without pip)."""
    try:
        index = importlib.import_module("pip._internal.models.index")
    except ImportError:
        return set()
    default = index.PyPI
    return {str(name).lower() for name in (default.netloc, default.file_storage_domain) if name}


def npm_hosts() -> set[str]:
    """Host of npm's configured registry (empty without npm)."""
    npm = shutil.which("npm")
    if npm is None:
        return set()
    host = _hostname(_run([npm, "config", "get", "registry"]))
    return {host} if host else set()


def registry_hosts() -> dict[str, str]:
    """Every registry host this machine knows, mapped to where it came from."""
    hosts: dict[str, str] = {}
    for source, found in (("apt", apt_hosts()), ("pip", pip_hosts()), ("npm", npm_hosts())):
        for host in sorted(found):
            hosts.setdefault(host, source)
    return hosts


def tracked_files(root: Path) -> list[str]:
    """Paths git tracks under root, relative to it."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"],
            capture_output=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CannotRun(f"git ls-files in {root}: {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise CannotRun(f"git ls-files in {root} failed: {message}")
    return [name for name in done.stdout.decode(errors="surrogateescape").split("\0") if name]


def _host_pattern(hosts: Iterable[str]) -> re.Pattern[str]:
    names = "|".join(re.escape(h) for h in sorted(hosts, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9-])({names})(?![A-Za-z0-9-]|\.[A-Za-z0-9])", re.I)


def find_hosts(root: Path, paths: Iterable[str], hosts: dict[str, str]) -> Iterator[Finding]:
    """Each line of the given files (relative to root) that names one of the hosts."""
    pattern = _host_pattern(hosts)
    for name in paths:
        path = root / name
        if path.is_symlink():
            lines = [str(path.readlink())]
        elif path.is_file():
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
        else:  # deleted in the work tree, or a submodule
            continue
        for number, line in enumerate(lines, start=1):
            for match in pattern.finditer(line):
                host = match.group(1).lower()
                yield Finding(name, number, host, hosts[host])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=ROOT, help="git work tree to check")
    parser.add_argument("--list-hosts", action="store_true", help="print the hosts and exit")
    args = parser.parse_args(argv)

    hosts = registry_hosts()
    if args.list_hosts:
        for host, source in sorted(hosts.items()):
            print(f"{host} {source}")
        return 0
    try:
        if not hosts:
            raise CannotRun(
                "no package registry host found on this machine (no APT source, no pip, no npm)"
            )
        paths = tracked_files(args.root)
    except CannotRun as exc:
        print(f"check-registry-hosts: {exc}", file=sys.stderr)
        return 2

    findings = list(find_hosts(args.root, paths, hosts))
    for finding in findings:
        print(finding)
    counts = ", ".join(
        f"{source} {sum(1 for s in hosts.values() if s == source)}"
        for source in ("apt", "pip", "npm")
    )
    verdict = f"{len(findings)} line(s) name one" if findings else "none names one"
    print(
        f"check-registry-hosts: {len(paths)} tracked file(s), registry hosts from this machine"
        f" ({counts}): {verdict}",
        file=sys.stderr,
    )
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
