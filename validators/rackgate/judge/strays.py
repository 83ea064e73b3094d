"""Evidence on disk that the run's manifest does not account for. Pure: the run's hosts and
checks and the (host, check) pairs with evidence in, ``error`` results out.

Judging reads the evidence of what the manifest lists; evidence of anything else would be
ignored, so a manifest edited to drop a failing check (or a node) would be judged ACCEPT
with that check's evidence still on disk. Every such (host, check) is an ``error``
(check :data:`STRAY_CHECK`) naming the evidence and the manifest's list: on the node it
was collected on, or on every node when its host is not a node under test.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from rackgate.model import Result, Status
from rackgate.placement import JudgeJob

STRAY_CHECK = "run.evidence"  # the result that reports evidence the manifest does not list
_NAMED = 5  # strays named per result; the others are counted


@dataclass(frozen=True, order=True)
class _Stray:
    host: str
    check: str

    def text(self, job: JudgeJob) -> str:
        if not self.check:
            return f"evidence/{self.host} is not a directory"
        where = f"evidence/{self.host}/{self.check}.json"
        if self.check not in job.checks:
            return (f"{where} (manifest.json does not list check {self.check}; its checks: "
                    f"{_listed(job.checks)})")
        return (f"{where} (manifest.json lists no host {self.host}: its hosts are "
                f"{_listed(job.hosts)}, launch host {job.launch_host or 'none'}, fabric host "
                f"{job.fabric_host or 'none'})")


def _listed(names: Collection[str]) -> str:
    shown = list(names)[:8]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def stray_evidence(job: JudgeJob, stored: Collection[tuple[str, str]]) -> list[Result]:
    """An ``error`` per node for the evidence in ``stored`` whose check the manifest does
    not list, or whose host is neither a node under test, the launch host nor the fabric
    host; none when every stored (host, check) is the run's.

    >>> from rackgate.checks import load_profile
    >>> p = load_profile("demo")
    >>> job = JudgeJob(("n1", "n2"), ("fio.seq_read",), {"n1": p, "n2": p}, {"n1": p, "n2": p})
    >>> stray_evidence(job, {("n1", "fio.seq_read"), ("n2", "fio.seq_read")})
    []
    >>> [r.node for r in stray_evidence(job, {("n2", "fio.rand_read")})]
    ['n2']
    """
    hosts, checks = set(job.hosts), set(job.checks)
    known = hosts | {h for h in (job.launch_host, job.fabric_host) if h}
    strays = sorted(_Stray(h, c) for h, c in stored
                    if not c or c not in checks or h not in known)
    if not strays:
        return []
    per_node: dict[str, list[_Stray]] = {h: [] for h in job.hosts}
    for s in strays:
        for node in ([s.host] if s.host in hosts and s.check else job.hosts):
            per_node[node].append(s)
    out = []
    for node, own in per_node.items():
        if own:
            named = "; ".join(s.text(job) for s in own[:_NAMED])
            more = f"; and {len(own) - _NAMED} more" if len(own) > _NAMED else ""
            out.append(Result(node, STRAY_CHECK, Status.ERROR,
                              f"evidence on disk that the run's manifest does not account "
                              f"for: {named}{more}: the run was collected as another "
                              f"manifest says and cannot be judged from this one"))
    return out
