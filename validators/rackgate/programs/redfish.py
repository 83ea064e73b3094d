"""Redfish collector: walk a BMC's (or a CDU's) power or cooling resources, print them as JSON.

    python -m rackgate.programs.redfish --user USER --password-file FILE \\
        --base-url https://bmc1 [--chassis 1] [--cdu 1] power|cooling

Logs in with HTTP basic auth through DMTF's ``redfish`` library. The password is never
taken from the command line (``ps`` shows argv to every user): it is the first line of
``--password-file`` (a 0600 file; rackgate's collector makes one in a private directory
and removes it afterwards), else ``RACKGATE_BMC_PASSWORD``; the user is ``--user``, else
``RACKGATE_BMC_USER``. Prints one JSON document on stdout::

    {"collector": "rackgate.redfish", "kind": "power", "base_url": "...",
     "resources": {"<@odata.id>": <the resource exactly as the service returned it>, ...}}

``power`` reads ``/redfish/v1/Chassis/<id>`` and follows its ``PowerSubsystem`` link
(``PowerSupplies`` collection, each supply, taken from the collection when the service
expands its members, and its ``Metrics``) and its legacy ``Power`` link. ``cooling``
reads ``/redfish/v1/ThermalEquipment/CDUs/<id>`` and follows ``PrimaryCoolantConnectors``,
``SecondaryCoolantConnectors`` and ``LeakDetection`` (with its ``LeakDetectors``
collection). Collection decides nothing: parsing and judging happen
later (``rackgate.parsers.redfish``, ``rackgate.checks.cooling``,
``rackgate.checks.redundancy.psu_redfish``).

Exit status: 0 collected; 1 the service answered with an HTTP error, refused the
credentials, could not be reached or timed out (stderr names the URL and the status);
2 usage (missing credentials, an unreadable password file).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any, Protocol

COLLECTOR = "rackgate.redfish"
ROOT = "/redfish/v1"
USER_VAR, PASSWORD_VAR = "RACKGATE_BMC_USER", "RACKGATE_BMC_PASSWORD"


class CollectError(RuntimeError):
    """A resource could not be read; the message names the URL and the status."""


class Fetcher(Protocol):
    def get(self, path: str) -> dict[str, Any]:
        """The resource at ``path`` (raises CollectError on any HTTP or transport error)."""
        ...


def _link(res: dict[str, Any], key: str) -> str | None:
    value = res.get(key)
    if isinstance(value, dict) and isinstance(value.get("@odata.id"), str):
        return str(value["@odata.id"])
    return None


class Walker:
    """Reads resources once each and keeps them keyed by their @odata.id."""

    def __init__(self, fetch: Fetcher) -> None:
        self.fetch = fetch
        self.found: dict[str, dict[str, Any]] = {}

    def get(self, path: str) -> dict[str, Any]:
        if path not in self.found:
            self.found[path] = self.fetch.get(path)
        return self.found[path]

    def members(self, collection: str) -> list[dict[str, Any]]:
        """The collection's members: each read from its own URI, unless the service sent
        the collection ``$expand``-ed (a member with an ``@odata.type`` is the resource
        itself): then it is taken as given, not read a second time (a second reading
        could differ from the first, and the parser refuses copies that differ)."""
        coll = self.get(collection)
        out = []
        for m in coll.get("Members", []) or []:
            if isinstance(m, dict) and isinstance(m.get("@odata.id"), str):
                if "@odata.type" in m:
                    self.found.setdefault(m["@odata.id"], m)
                out.append(self.get(m["@odata.id"]))
        return out


def walk_power(fetch: Fetcher, chassis: str) -> dict[str, dict[str, Any]]:
    """
    >>> class Fake:
    ...     def get(self, path):
    ...         return {"/redfish/v1/Chassis/1": {"Power": {"@odata.id": "/p"}},
    ...                 "/p": {"@odata.id": "/p"}}[path]
    >>> sorted(walk_power(Fake(), "1"))
    ['/p', '/redfish/v1/Chassis/1']
    """
    w = Walker(fetch)
    path = f"{ROOT}/Chassis/{chassis}"
    ch = w.get(path)
    subsystem, legacy = _link(ch, "PowerSubsystem"), _link(ch, "Power")
    if subsystem is None and legacy is None:
        raise CollectError(f"{path} links neither PowerSubsystem nor Power: no power data")
    if subsystem is not None:
        supplies = _link(w.get(subsystem), "PowerSupplies")
        if supplies is not None:
            for psu in w.members(supplies):
                metrics = _link(psu, "Metrics")
                if metrics is not None:
                    w.get(metrics)
    if legacy is not None:
        w.get(legacy)
    return w.found


def walk_cooling(fetch: Fetcher, cdu: str) -> dict[str, dict[str, Any]]:
    w = Walker(fetch)
    unit = w.get(f"{ROOT}/ThermalEquipment/CDUs/{cdu}")
    for key in ("PrimaryCoolantConnectors", "SecondaryCoolantConnectors"):
        coll = _link(unit, key)
        if coll is not None:
            w.members(coll)
    detection = _link(unit, "LeakDetection")
    if detection is not None:
        detectors = _link(w.get(detection), "LeakDetectors")
        if detectors is not None:
            w.members(detectors)
    return w.found


class RedfishClientFetcher:
    """The real fetcher: DMTF's ``redfish`` client, basic auth, bounded timeouts."""

    def __init__(self, base_url: str, user: str, password: str, timeout_s: int) -> None:
        import redfish  # type: ignore[import-untyped,unused-ignore]
        from redfish.rest.v1 import (  # type: ignore[import-untyped,unused-ignore]
            InvalidCredentialsError,
            RetriesExhaustedError,
            ServerDownOrUnreachableError,
        )

        self.base_url = base_url.rstrip("/")
        try:
            self.client = redfish.redfish_client(
                base_url=self.base_url, username=user, password=password,
                timeout=timeout_s, max_retry=0, check_connectivity=False)
            self.client.login(auth="basic")
        except InvalidCredentialsError:
            raise CollectError(f"{self.base_url}{ROOT}: HTTP 401 Unauthorized: the BMC refused "
                               f"the credentials of user {user!r}") from None
        except RetriesExhaustedError as exc:
            raise CollectError(f"{self.base_url}{ROOT}/: no answer "
                               f"({_cause(exc)})") from None
        except ServerDownOrUnreachableError as exc:
            raise CollectError(f"{self.base_url}{ROOT}/: {exc}") from None
        self._retries_exhausted: type[Exception] = RetriesExhaustedError

    def get(self, path: str) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        try:
            resp = self.client.get(path)
        except self._retries_exhausted as exc:
            raise CollectError(f"GET {url}: no answer ({_cause(exc)})") from None
        if resp.status != 200:
            raise CollectError(f"GET {url}: HTTP {resp.status}")
        try:
            doc = json.loads(resp.read)
        except (ValueError, TypeError) as exc:
            raise CollectError(f"GET {url}: HTTP 200 but not JSON ({exc})") from None
        except RecursionError:
            raise CollectError(f"GET {url}: HTTP 200 but JSON nested too deeply") from None
        if not isinstance(doc, dict):
            raise CollectError(f"GET {url}: HTTP 200 but not a JSON object")
        return doc


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{type(cause).__name__}: {cause}" if cause else type(exc).__name__


def read_password(path: str) -> str:
    """The password in ``path``: its first line, without the line ending."""
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.readline().rstrip("\r\n")


def main(argv: list[str] | None = None,
         fetcher: Callable[[str, str, str, int], Fetcher] = RedfishClientFetcher) -> int:
    ap = argparse.ArgumentParser(prog="python -m rackgate.programs.redfish",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--base-url", required=True, help="the service, e.g. https://bmc1")
    ap.add_argument("--chassis", default="1", help="Chassis Id for 'power' (default 1)")
    ap.add_argument("--cdu", default="1", help="ThermalEquipment/CDUs Id for 'cooling'")
    ap.add_argument("--timeout", type=int, default=10, help="seconds per request (default 10)")
    ap.add_argument("--user", help=f"the BMC user (default: ${USER_VAR})")
    ap.add_argument("--password-file", metavar="FILE",
                    help=f"read the password from FILE's first line (default: ${PASSWORD_VAR})")
    ap.add_argument("kind", choices=["power", "cooling"])
    args = ap.parse_args(argv)
    user = args.user or os.environ.get(USER_VAR)
    try:
        password = read_password(args.password_file) if args.password_file else \
            os.environ.get(PASSWORD_VAR)
    except OSError as exc:
        print(f"rackgate.programs.redfish: cannot read the password file {args.password_file}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    if not user or password is None:
        print(f"rackgate.programs.redfish: give --user (or {USER_VAR}) and --password-file (or "
              f"{PASSWORD_VAR}): the password is never taken from the command line",
              file=sys.stderr)
        return 2
    try:
        fetch = fetcher(args.base_url, user, password, args.timeout)
        walk = walk_power if args.kind == "power" else walk_cooling
        found = walk(fetch, args.chassis if args.kind == "power" else args.cdu)
    except CollectError as exc:
        print(f"rackgate.programs.redfish: {exc}", file=sys.stderr)
        return 1
    doc = {"collector": COLLECTOR, "kind": args.kind, "base_url": args.base_url.rstrip("/"),
           "resources": found}
    json.dump(doc, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
