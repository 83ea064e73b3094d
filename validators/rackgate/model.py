"""Results and verdicts: the vocabulary every layer shares.

>>> Status.worst([Status.PASS, Status.WARN, Status.ERROR])
<Status.ERROR: 4>
>>> Status.FAIL.blocks_accept, Status.WARN.blocks_accept
(True, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Literal

Better = Literal["higher", "lower"] | None


class Status(IntEnum):
    """Outcome of one check on one node, ordered so that the worst wins in roll-ups."""

    PASS = 0
    SKIP = 1
    WARN = 2
    FAIL = 3
    ERROR = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def blocks_accept(self) -> bool:
        """A failed check or one without usable evidence keeps a node out of production."""
        return self >= Status.FAIL

    @classmethod
    def worst(cls, statuses: Iterable[Status]) -> Status:
        return max(statuses, default=cls.PASS)

    @classmethod
    def from_label(cls, label: str) -> Status:
        return cls[label.upper()]


class Verdict(StrEnum):
    ACCEPT = "ACCEPT"
    REJECT = "REJECT"


@dataclass(frozen=True)
class Metric:
    """One metric of a check that judges several (``cooling.cdu``: supply and return
    temperature and flow), as its judge judged it: its own figure, unit, pass band and
    status, so that a report shows the figure that failed with its own bound, never the
    check's headline figure beside another metric's verdict.

    >>> m = Metric("flow_lpm", Status.FAIL, 40.0, "L/min", ">= 96 L/min", lower=96.0)
    >>> m.to_doc()["status"], m.to_doc()["lower"], m.to_doc()["upper"]
    ('fail', 96.0, None)
    """

    metric: str  # the profile's threshold name, e.g. flow_lpm
    status: Status
    measured: float | None
    unit: str
    expected: str  # the pass band as text, as a result's ``expected``
    lower: float | None = None  # the pass bounds (a floor, a ceiling), for the charts
    upper: float | None = None

    def to_doc(self) -> dict[str, float | str | None]:
        return {"metric": self.metric, "status": self.status.label,
                "measured": self.measured, "unit": self.unit, "expected": self.expected,
                "lower": self.lower, "upper": self.upper}


# The order a result's metrics are shown in: the failing figure first, then the ones that
# could not be measured, the warnings, and what passed (the reports' row order too).
SHOWN_FIRST = (Status.FAIL, Status.ERROR, Status.WARN, Status.SKIP, Status.PASS)


def shown_metrics(metrics: Iterable[Metric]) -> list[Metric]:
    """``metrics`` in the order reports show them (``SHOWN_FIRST``; else as judged).

    >>> [m.metric for m in shown_metrics([Metric("t", Status.PASS, 32.0, "C", "<= 45 C"),
    ...                                   Metric("f", Status.FAIL, 40.0, "L/min", ">= 96")])]
    ['f', 't']
    """
    return sorted(metrics, key=lambda m: SHOWN_FIRST.index(m.status))


@dataclass(frozen=True)
class Judgement:
    """What a check's judge decides from a parsed record (no node, no evidence path yet)."""

    status: Status
    message: str
    measured: float | None = None
    unit: str = ""
    expected: str = ""
    percent_of_limit: float | None = None
    details: dict[str, float | str] = field(default_factory=dict)
    better: Better = None  # which way the measured figure improves, for peer comparison
    # Each metric judged, when the judge judged several: the headline above (``measured``,
    # ``unit``, ``expected``) stays the check's own figure of record (diff, history,
    # baselines and the peer comparison compare it run to run, node to node)
    metrics: tuple[Metric, ...] = ()


@dataclass(frozen=True)
class Result:
    """One check on one node: the unit every report row and JUnit test case is made of."""

    node: str
    check: str
    status: Status
    message: str
    measured: float | None = None
    unit: str = ""
    expected: str = ""
    percent_of_limit: float | None = None
    evidence: str | None = None  # path relative to the run directory
    details: dict[str, float | str] = field(default_factory=dict)
    better: Better = None
    metrics: tuple[Metric, ...] = ()  # as Judgement.metrics

    @classmethod
    def from_judgement(cls, node: str, check: str, j: Judgement, evidence: str | None) -> Result:
        return cls(node, check, j.status, j.message, j.measured, j.unit, j.expected,
                   j.percent_of_limit, evidence, dict(j.details), j.better, j.metrics)


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    verdict: Verdict
    status: Status
    reasons: tuple[str, ...]
    results: tuple[Result, ...]
    location: str = ""  # physical location from the inventory, for replacement tickets


@dataclass(frozen=True)
class RackVerdict:
    verdict: Verdict
    reasons: tuple[str, ...]
    nodes: tuple[NodeVerdict, ...]


NOTHING_RAN = "nothing was run: every check was skipped (not applicable or disabled)"


def node_verdict(node: str, results: Iterable[Result], location: str = "") -> NodeVerdict:
    """ACCEPT only when at least one check that applies to the node ran and passed (pass
    or warn), and none failed or lacked evidence. Skips prove nothing: a node whose every
    result is a skip is rejected.

    >>> skip = Result("n1", "gpu.health", Status.SKIP, "not applicable")
    >>> nv = node_verdict("n1", [skip])
    >>> nv.verdict.value, nv.reasons == (NOTHING_RAN,)
    ('REJECT', True)
    """
    rs = tuple(results)
    if not rs:
        return NodeVerdict(node, Verdict.REJECT, Status.ERROR, ("no check was judged",), rs,
                           location)
    reasons = tuple(f"{r.check}: {r.status.label}: {r.message}"
                    for r in rs if r.status.blocks_accept)
    if not reasons and not any(r.status in (Status.PASS, Status.WARN) for r in rs):
        return NodeVerdict(node, Verdict.REJECT, Status.ERROR, (NOTHING_RAN,), rs, location)
    verdict = Verdict.REJECT if reasons else Verdict.ACCEPT
    return NodeVerdict(node, verdict, Status.worst(r.status for r in rs), reasons, rs, location)


def rack_verdict(nodes: Iterable[NodeVerdict]) -> RackVerdict:
    """The rack is accepted only when it has nodes and every one of them is accepted."""
    ns = tuple(nodes)
    if not ns:
        return RackVerdict(Verdict.REJECT, ("no node was judged",), ns)
    reasons = tuple(f"{n.node}{f' ({n.location})' if n.location else ''}: {reason}"
                    for n in ns if n.verdict is Verdict.REJECT for reason in n.reasons)
    return RackVerdict(Verdict.REJECT if reasons else Verdict.ACCEPT, reasons, ns)


def describe(exc: BaseException) -> str:
    """An exception as a result message names it: its type and the end of its text.

    >>> describe(OverflowError("cannot convert float NaN to integer"))
    'OverflowError: cannot convert float NaN to integer'
    """
    return f"{type(exc).__name__}: {last_words(str(exc), 200) or 'no message'}"


def last_words(text: str, n: int = 300) -> str:
    """The end of ``text``, whitespace collapsed, at most ``n`` characters."""
    text = " ".join(text.strip().split())
    return text if len(text) <= n else "..." + text[-n:]
