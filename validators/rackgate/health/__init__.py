"""``rackgate healthcheck``: a node's health between jobs, run by slurmd as SLURM's
HealthCheckProgram (slurm.conf(5)), which drains the node when an item fails and resumes
it once every item passes again.

The pieces, each small and pure except :mod:`.probe`:

- :mod:`.config` reads ``/etc/rackgate/healthcheck.yaml`` (written by the slurm role) and
  refuses anything it does not know;
- :mod:`.gpu` and :mod:`.node` turn the text read on the node (nvidia-smi's CSV, the
  kernel log, sysfs, /proc, systemctl) into item results;
- :mod:`.decide` chooses drain / resume / nothing from the node's SLURM state and reason
  and the health check's own record of the reason it wrote, and renders the
  node_exporter textfile;
- :mod:`.probe` reads the node (commands with timeouts, files under a root prefix) and
  runs the items within one time budget.

Healthy states are allow-lists: an item passes only on evidence that is on its list;
missing or unparseable evidence is ``error``, which fails the check like ``fail``.
This package needs nothing but the standard library and PyYAML, so it runs from a small
venv on the compute nodes (roles/slurm installs it there).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

# What every line the health check prints starts with.
REASON_PREFIX = "rackgate healthcheck: "
# Every drain reason the health check writes starts with this marker, and the reason is
# also kept in RECORD (under --root) on the node: it resumes only a drain whose reason
# carries the marker and is the one recorded (a person who types the marker has not
# written the record). Older health checks drained with "rackgate healthcheck: ...", which
# a person may type: such drains are someone else's now.
DRAIN_MARK = "rackgate/healthcheck: "
RECORD = "/var/lib/rackgate-healthcheck/drain-reason"
# The items, in the order they run and report (the textfile's item label).
ITEMS = ("gpu_count", "gpu_ecc", "gpu_xid", "ib_ports", "mounts", "memlock", "systemd_units")


class Health(IntEnum):
    """An item's outcome, ordered so that the worst wins a roll-up."""

    PASS = 0
    SKIP = 1
    FAIL = 2
    ERROR = 3

    @property
    def ok(self) -> bool:
        return self in (Health.PASS, Health.SKIP)


@dataclass(frozen=True)
class ItemResult:
    """One item: its outcome and why (the measured value against the expected one, or
    what evidence was missing). ``why`` is one line.

    >>> ItemResult("mounts", Health.FAIL, "/scratch: not mounted").line("n1")
    'rackgate healthcheck: n1: mounts: FAIL: /scratch: not mounted'
    """

    item: str
    health: Health
    why: str

    def line(self, node: str) -> str:
        return f"{REASON_PREFIX}{node}: {self.item}: {self.health.name}: {self.why}"


def passed(item: str, why: str) -> ItemResult:
    return ItemResult(item, Health.PASS, why)


def failed(item: str, why: str) -> ItemResult:
    return ItemResult(item, Health.FAIL, why)


def error(item: str, why: str) -> ItemResult:
    return ItemResult(item, Health.ERROR, why)


def skipped(item: str, why: str) -> ItemResult:
    return ItemResult(item, Health.SKIP, why)
