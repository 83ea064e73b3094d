"""Prometheus exporter for a node's (or a rack CDU's) Redfish power and cooling readings.

    RACKGATE_BMC_USER=... RACKGATE_BMC_PASSWORD=... rackgate-cooling-exporter \\
        --base-url https://bmc1 --chassis 1 --cdu 1 --listen 0.0.0.0 --port 9731 --interval 30

A poller thread walks the BMC every ``--interval`` seconds with the collector's walks
(``rackgate.programs.redfish.walk_cooling`` / ``walk_power``) over a small stdlib HTTP client with
basic auth, parses what it read with ``rackgate.parsers.redfish`` (the same parser the
acceptance checks use: no second parser), turns the records into samples with the pure
function :func:`samples`, and keeps the latest set; ``/metrics`` (prometheus_client) serves
it. Credentials come from the environment only (systemd ``EnvironmentFile=``, mode 0600).

An unreachable or failing BMC is visible, never a silent gap: each resource kind
(``cooling``, ``power``) always has ``rackgate_bmc_up`` (0 or 1), the poll's duration and
timestamp, an error counter and, while failing, ``rackgate_bmc_last_error_info{error=...}``;
its readings are dropped (stale readings would hide the outage from the alerts).

State encodings (gauges, so alert rules can compare them): health and leak detector state
are ``0`` OK, ``1`` Warning, ``2`` Critical, ``3`` not reported or unknown.

This module imports only the standard library and rackgate's stdlib-only modules at import
time; prometheus_client is imported when serving, so the unit tests and the node's venv
(``--system-site-packages`` with Debian's python3-prometheus-client) need nothing else.

>>> s = Sample("rackgate_bmc_up", (("resource", "cooling"),), 1.0)
>>> render([s]).splitlines()[-1]
'rackgate_bmc_up{resource="cooling"} 1.0'
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from rackgate.parsers import ParseError
from rackgate.parsers.redfish import (
    CoolingRecord,
    PowerRecord,
    parse_redfish_cooling,
    parse_redfish_power,
)
from rackgate.programs.redfish import (
    COLLECTOR,
    PASSWORD_VAR,
    USER_VAR,
    CollectError,
    Fetcher,
    walk_cooling,
    walk_power,
)

Labels = tuple[tuple[str, str], ...]

STATE_CODES = {"OK": 0, "Warning": 1, "Critical": 2}
UNKNOWN_STATE = 3
MAX_ERROR_LEN = 200  # a label value: bounded, one line

# name -> (type, help); the order is the exposition order
METRICS: dict[str, tuple[str, str]] = {
    "rackgate_bmc_up": ("gauge", "1 if the last poll of this resource kind succeeded, else 0"),
    "rackgate_bmc_poll_duration_seconds": ("gauge", "Duration of the last poll"),
    "rackgate_bmc_last_poll_timestamp_seconds": ("gauge", "Unix time the last poll ended"),
    "rackgate_bmc_poll_errors_total": ("counter", "Polls that failed since the exporter started"),
    "rackgate_bmc_last_error_info": ("gauge", "The last poll's error (present only while failing)"),
    "rackgate_cooling_unit_health": ("gauge", "CDU Status.Health: 0 OK, 1 Warning, 2 Critical, "
                                              "3 not reported"),
    "rackgate_coolant_supply_temperature_celsius": ("gauge", "Coolant supply temperature"),
    "rackgate_coolant_return_temperature_celsius": ("gauge", "Coolant return temperature"),
    "rackgate_coolant_flow_liters_per_minute": ("gauge", "Coolant flow"),
    "rackgate_coolant_supply_pressure_kilopascals": ("gauge", "Coolant supply pressure"),
    "rackgate_coolant_return_pressure_kilopascals": ("gauge", "Coolant return pressure"),
    "rackgate_leak_detector_state": ("gauge", "Leak detector DetectorState: 0 OK, 1 Warning, "
                                              "2 Critical, 3 not reported"),
    "rackgate_psu_present": ("gauge", "1 unless the supply's Status.State is Absent"),
    "rackgate_psu_health": ("gauge", "Power supply Status.Health: 0 OK, 1 Warning, "
                                     "2 Critical, 3 not reported"),
    "rackgate_psu_input_power_watts": ("gauge", "Power supply input power"),
    "rackgate_psu_output_power_watts": ("gauge", "Power supply output power"),
    "rackgate_psu_capacity_watts": ("gauge", "Power supply rated capacity"),
    "rackgate_psu_redundancy_ok": ("gauge", "1 if the redundancy group is Enabled and healthy "
                                            "(or reports neither), else 0"),
    "rackgate_psu_redundancy_min_needed": ("gauge", "Supplies the redundancy group needs"),
}


@dataclass(frozen=True)
class Sample:
    """One metric sample: a name from METRICS, sorted labels, a value."""

    name: str
    labels: Labels
    value: float


def state_code(state: str | None) -> int:
    """
    >>> [state_code(s) for s in ("OK", "Warning", "Critical", None, "Unknown")]
    [0, 1, 2, 3, 3]
    """
    return STATE_CODES.get(state or "", UNKNOWN_STATE)


def _s(metric: str, value: float | None, /, **labels: str) -> list[Sample]:
    if value is None:
        return []
    return [Sample(metric, tuple(sorted(labels.items())), float(value))]


def cooling_samples(rec: CoolingRecord, cdu: str) -> list[Sample]:
    """Samples for one CDU's cooling record (readings a connector lacks are left out)."""
    out: list[Sample] = []
    for u in rec.cdus:
        out += _s("rackgate_cooling_unit_health", state_code(u.health), cdu=u.id, name=u.name)
    for c in rec.connectors:
        lab = {"cdu": cdu, "connector": c.id, "name": c.name, "loop": c.loop}
        out += _s("rackgate_coolant_supply_temperature_celsius", c.supply_temp_c, **lab)
        out += _s("rackgate_coolant_return_temperature_celsius", c.return_temp_c, **lab)
        out += _s("rackgate_coolant_flow_liters_per_minute", c.flow_lpm, **lab)
        out += _s("rackgate_coolant_supply_pressure_kilopascals", c.supply_pressure_kpa, **lab)
        out += _s("rackgate_coolant_return_pressure_kilopascals", c.return_pressure_kpa, **lab)
    for d in rec.leak_detectors:
        out += _s("rackgate_leak_detector_state", state_code(d.state), cdu=cdu, detector=d.id,
                  name=d.name)
    return out


def power_samples(rec: PowerRecord, chassis: str) -> list[Sample]:
    """Samples for one chassis' power record."""
    out: list[Sample] = []
    for p in rec.supplies:
        lab = {"chassis": chassis, "psu": p.id, "name": p.name}
        out += _s("rackgate_psu_present", 0.0 if p.state == "Absent" else 1.0, **lab)
        out += _s("rackgate_psu_health", state_code(p.health), **lab)
        out += _s("rackgate_psu_input_power_watts", p.input_watts, **lab)
        out += _s("rackgate_psu_output_power_watts", p.output_watts, **lab)
        out += _s("rackgate_psu_capacity_watts", p.capacity_watts, **lab)
    for g in rec.redundancy:
        lab = {"chassis": chassis, "group": g.name, "mode": g.mode or ""}
        ok = g.state in (None, "Enabled") and g.health in (None, "OK")
        out += _s("rackgate_psu_redundancy_ok", 1.0 if ok else 0.0, **lab)
        out += _s("rackgate_psu_redundancy_min_needed", g.min_needed, **lab)
    return out


@dataclass(frozen=True)
class PollResult:
    """The outcome of polling one resource kind once."""

    resource: str  # "cooling" or "power"
    samples: tuple[Sample, ...]  # the readings; empty when the poll failed
    error: str | None  # None on success
    duration_s: float
    finished_at: float  # Unix time


def status_samples(result: PollResult, errors_total: int) -> list[Sample]:
    """The samples that always exist for a resource kind, whether its poll worked or not.

    >>> r = PollResult("power", (), "GET http://bmc/redfish/v1: HTTP 503", 0.5, 1700000000.0)
    >>> [(s.name, s.value) for s in status_samples(r, 2)][:2]
    [('rackgate_bmc_up', 0.0), ('rackgate_bmc_poll_duration_seconds', 0.5)]
    """
    res = {"resource": result.resource}
    out = _s("rackgate_bmc_up", 0.0 if result.error else 1.0, **res)
    out += _s("rackgate_bmc_poll_duration_seconds", result.duration_s, **res)
    out += _s("rackgate_bmc_last_poll_timestamp_seconds", result.finished_at, **res)
    out += _s("rackgate_bmc_poll_errors_total", errors_total, **res)
    if result.error:
        err = " ".join(result.error.split())[:MAX_ERROR_LEN]
        out += _s("rackgate_bmc_last_error_info", 1.0, error=err, **res)
    return out


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(samples: Iterable[Sample]) -> str:
    """Prometheus text exposition (format 0.0.4) of ``samples``, grouped by metric, for
    logs and tests; the service itself serves through prometheus_client."""
    by_name: dict[str, list[Sample]] = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s)
    lines: list[str] = []
    for name in sorted(by_name, key=lambda n: list(METRICS).index(n)):
        kind, help_text = METRICS[name]
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for s in by_name[name]:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels)
            lines.append(f"{name}{{{labels}}} {s.value!r}" if labels else f"{name} {s.value!r}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- I/O: HTTP and polling


class UrllibFetcher:
    """A Fetcher over urllib: basic auth, bounded timeout, optional CA file or no TLS check.

    The exporter does not use DMTF's ``redfish`` client (the collector's fetcher) so that a
    node needs nothing but the standard library and prometheus_client.
    """

    def __init__(self, base_url: str, user: str, password: str, timeout_s: float,
                 ca_file: str | None = None, verify_tls: bool = True) -> None:
        self.base_url = base_url.rstrip("/")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.headers = {"Authorization": f"Basic {token}", "Accept": "application/json"}
        self.timeout_s = timeout_s
        self.context: ssl.SSLContext | None = None
        if self.base_url.startswith("https://"):
            self.context = ssl.create_default_context(cafile=ca_file)
            if not verify_tls:
                self.context.check_hostname = False
                self.context.verify_mode = ssl.CERT_NONE

    def get(self, path: str) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        req = urllib.request.Request(url, headers=self.headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s,
                                        context=self.context) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            raise CollectError(f"GET {url}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise CollectError(f"GET {url}: no answer ({reason})") from None
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise CollectError(f"GET {url}: HTTP 200 but not JSON ({exc})") from None
        except RecursionError:
            raise CollectError(f"GET {url}: HTTP 200 but JSON nested too deeply") from None
        if not isinstance(doc, dict):
            raise CollectError(f"GET {url}: HTTP 200 but not a JSON object")
        return doc


def poll(fetch: Fetcher, resource: str, ident: str,
         clock: Callable[[], float] = time.time) -> PollResult:
    """Walk and parse one resource kind; every failure becomes the result's error."""
    start = time.monotonic()
    out: list[Sample] = []
    error: str | None = None
    try:
        walk = walk_cooling if resource == "cooling" else walk_power
        doc = json.dumps({"collector": COLLECTOR, "kind": resource,
                          "resources": walk(fetch, ident)})
        if resource == "cooling":
            out = cooling_samples(parse_redfish_cooling(doc), ident)
        else:
            out = power_samples(parse_redfish_power(doc), ident)
    except (CollectError, ParseError) as exc:
        error = str(exc)
    return PollResult(resource, tuple(out), error, time.monotonic() - start, clock())


class State:
    """The latest poll result per resource kind and the error counters; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._results: dict[str, PollResult] = {}
        self._errors: dict[str, int] = {}

    def update(self, result: PollResult) -> None:
        with self._lock:
            self._results[result.resource] = result
            self._errors.setdefault(result.resource, 0)
            if result.error:
                self._errors[result.resource] += 1

    def samples(self) -> list[Sample]:
        with self._lock:
            out: list[Sample] = []
            for name, result in sorted(self._results.items()):
                out += status_samples(result, self._errors[name])
                out += result.samples
            return out


def families(samples: Iterable[Sample]) -> Iterator[Any]:
    """prometheus_client metric families for ``samples`` (imported here, not at load)."""
    from prometheus_client.core import (  # type: ignore[import-not-found,unused-ignore]
        CounterMetricFamily,
        GaugeMetricFamily,
    )

    by_name: dict[str, list[Sample]] = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s)
    for name, group in by_name.items():
        kind, help_text = METRICS[name]
        keys = [k for k, _ in group[0].labels]
        if kind == "counter":
            fam: Any = CounterMetricFamily(name.removesuffix("_total"), help_text, labels=keys)
        else:
            fam = GaugeMetricFamily(name, help_text, labels=keys)
        for s in group:
            fam.add_metric([v for _, v in s.labels], s.value)
        yield fam


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rackgate-cooling-exporter",
                                 description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--base-url", required=True, help="the BMC, e.g. https://bmc1")
    ap.add_argument("--chassis", default="1", help="Chassis Id to read power from; '' skips")
    ap.add_argument("--cdu", default="1", help="ThermalEquipment/CDUs Id; '' skips cooling")
    ap.add_argument("--listen", default="0.0.0.0", help="address to serve /metrics on")
    ap.add_argument("--port", type=int, default=9731)
    ap.add_argument("--interval", type=float, default=30.0, help="seconds between polls")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    ap.add_argument("--ca-file", default=None, help="CA bundle for an https BMC")
    ap.add_argument("--insecure", action="store_true", help="do not verify the BMC's TLS cert")
    ap.add_argument("--once", action="store_true", help="poll once, print the metrics, exit")
    args = ap.parse_args(argv)
    user, password = os.environ.get(USER_VAR), os.environ.get(PASSWORD_VAR)
    if not user or password is None:
        print(f"rackgate-cooling-exporter: set {USER_VAR} and {PASSWORD_VAR} (credentials are "
              "never taken from the command line)", file=sys.stderr)
        return 2
    kinds = [(k, i) for k, i in (("cooling", args.cdu), ("power", args.chassis)) if i]
    if not kinds:
        ap.error("--cdu and --chassis are both empty: nothing to poll")
    fetch = UrllibFetcher(args.base_url, user, password, args.timeout, args.ca_file,
                          not args.insecure)
    state = State()

    def poll_all() -> None:
        for kind, ident in kinds:
            state.update(poll(fetch, kind, ident))

    if args.once:
        poll_all()
        sys.stdout.write(render(state.samples()))
        return 0 if all(s.value == 1.0 for s in state.samples()
                        if s.name == "rackgate_bmc_up") else 1

    from prometheus_client import (  # type: ignore[import-not-found,unused-ignore]
        start_http_server,
    )
    from prometheus_client.core import REGISTRY  # type: ignore[import-not-found,unused-ignore]

    class Collector:
        def collect(self) -> Iterator[Any]:
            return families(state.samples())

    poll_all()  # the first scrape already has data
    REGISTRY.register(Collector())
    start_http_server(args.port, addr=args.listen)
    print(f"rackgate-cooling-exporter: polling {args.base_url} ({', '.join(k for k, _ in kinds)})"
          f" every {args.interval:g} s, serving http://{args.listen}:{args.port}/metrics",
          file=sys.stderr, flush=True)
    while True:
        time.sleep(args.interval)
        poll_all()


if __name__ == "__main__":
    sys.exit(main())
