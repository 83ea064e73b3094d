"""Findings of a judge and the status they give (shared by the check families).

A judge collects every finding first, then decides (CONTRIBUTING.md, "Evidence and
verdicts"). A definite fault (``fail``) is the verdict even when other evidence is missing
(``error``): the message still lists both, and both keep the node out of production.

>>> verdict([(Status.ERROR, "no reading"), (Status.FAIL, "PSU2 failed")])
<Status.FAIL: 3>
>>> verdict([(Status.WARN, "idle"), (Status.ERROR, "no reading")]), verdict([])
(<Status.ERROR: 4>, <Status.PASS: 0>)
"""

from __future__ import annotations

from rackgate.model import Status

Finding = tuple[Status, str]


def verdict(findings: list[Finding]) -> Status:
    statuses = [st for st, _ in findings]
    return Status.FAIL if Status.FAIL in statuses else Status.worst(statuses)


def message(findings: list[Finding]) -> str:
    """The findings above pass, worst first (fail before error, as in ``verdict``)."""
    order = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2}
    return "; ".join(m for st, m in sorted(findings, key=lambda f: order.get(f[0], 3))
                     if st > Status.PASS)
