"""Node-pair tests: the round-robin schedule, and the judge of an N x N bandwidth matrix.

Schedule (``round_robin``): the circle method of a round-robin tournament. Node 0 stays
put, the others rotate one place per round; round r pairs position i with position
N-1-i. Even N gives N-1 rounds of N/2 pairs; odd N adds a "bye" slot, so N rounds in each
of which one node rests. Every unordered pair meets exactly once, no node is in two pairs
of one round, so the pairs of a round can run in parallel (each node runs one perftest
server or client at a time). The order is deterministic: the same node list gives the
same rounds, and the first node of each pair is the one that runs the server.

Judge (``judge_pairwise``): every pair's measured ``ib_write_bw`` average (Gb/s) against
a ``Threshold`` whose ``ref`` is the per-port line rate of the profile's compute NICs
(``hardware.nics``, ``rate_gbps``: 400 for NDR 4x) and whose ``min_ratio`` is the pass
ratio (``DEFAULT_MIN_RATIO``, basis in ``DEFAULT_BASIS``). A pair below the bound fails
and is a *weak link*, named with measured, expected and % of line rate; a figure that
cannot be a measurement (not finite, negative, or above the threshold's physical limit by
more than ``checks.LIMIT_TOLERANCE``: a wrong unit, or a loopback that never left the HCA)
is ``error`` (implausible evidence), and so is a pair without a measurement, never
``pass``. Above ``OVER_LINE_RATE`` x ref of a threshold that is no limit only warns. The
node in most weak pairs is the *likely culprit* when it stands out: a bad cable or HCA
shows as one row of the matrix being low, a bad switch as low cells spread over many rows.

>>> [len(r) for r in round_robin(["a", "b", "c", "d"])]
[2, 2, 2]
>>> round_robin(["a", "b", "c"])
[[('b', 'c')], [('a', 'c')], [('a', 'b')]]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rackgate.figures import figure
from rackgate.model import Result, Status
from rackgate.profile import Hardware, Threshold

DEFAULT_MIN_RATIO = 0.90
OVER_LINE_RATE = 1.05
DEFAULT_BASIS = (
    "ib_write_bw between two nodes over one healthy 4x port reaches about 0.96 of the port's "
    "line rate (an EDR 100 Gb/s link tops out at 96.6 Gb/s with --report_gbits, NVIDIA "
    "developer forum 'Theoretical Bandwidth and Latency of NIC'; IB 64b/66b or FEC framing "
    "and packet headers take the rest): NDR 400 Gb/s gives ~385 Gb/s. A pass at 0.90 of "
    "line rate keeps run-to-run noise out and catches a link trained at a lower speed "
    "(HDR: 0.5) or width (one of 4 lanes down: 0.75)")


def round_robin(nodes: Sequence[str]) -> list[list[tuple[str, str]]]:
    """The rounds of a round-robin tournament over ``nodes`` (circle method, module doc).

    Raises ValueError for duplicate names; fewer than two nodes give no round.
    """
    names: list[str | None] = list(nodes)
    dupes = sorted(n for n, c in Counter(nodes).items() if c > 1)
    if dupes:
        raise ValueError(f"round_robin: node(s) listed twice: {', '.join(dupes)}")
    if len(names) < 2:
        return []
    if len(names) % 2:
        names.append(None)  # the bye
    n = len(names)
    fixed, rest = names[0], names[1:]
    rounds = []
    for _ in range(n - 1):
        circle = [fixed, *rest]
        pairs = [(a, b) for a, b in ((circle[i], circle[n - 1 - i]) for i in range(n // 2))
                 if a is not None and b is not None]
        rounds.append(pairs)
        rest = rest[-1:] + rest[:-1]
    return rounds


def line_rate_threshold(hardware: Hardware, min_ratio: float = DEFAULT_MIN_RATIO,
                        basis: str = DEFAULT_BASIS) -> Threshold:
    """The pass band from the profile's compute NICs (``hardware.nics``, role compute).

    >>> from rackgate.profile import NicSpec
    >>> hw = Hardware(nics=[NicSpec(role="compute", count=8, rate_gbps=400,
    ...     link_layer="InfiniBand", source="DGX H100 user guide, Table 1")])
    >>> line_rate_threshold(hw).lower_bound
    360.0
    """
    rates = sorted({n.rate_gbps for n in hardware.nics if n.role == "compute"})
    if len(rates) != 1:
        raise ValueError("pairwise bandwidth needs exactly one compute NIC rate in the "
                         f"profile's hardware.nics, found {rates or 'none'}")
    return Threshold(unit="Gb/s", ref=rates[0], min_ratio=min_ratio, limit=True, basis=basis)


@dataclass(frozen=True)
class PairResult:
    """One unordered pair: ``a`` ran the server, ``b`` the client."""

    a: str
    b: str
    status: Status
    message: str
    measured_gbps: float | None
    expected_gbps: float  # the pass bound: line rate x min_ratio
    percent_of_line_rate: float | None
    evidence: str | None = None
    missing: bool = False  # no figure at all (the pair did not run, or gave no output)

    @property
    def name(self) -> str:
        return f"{self.a} <-> {self.b}"


@dataclass(frozen=True)
class PairwiseMatrix:
    """The judged N x N matrix; ``weak`` are the failed pairs, worst first."""

    check: str
    nodes: tuple[str, ...]
    threshold: Threshold
    pairs: tuple[PairResult, ...]
    weak: tuple[PairResult, ...]
    weak_counts: tuple[tuple[str, int], ...]  # nodes in weak pairs, most first
    culprit: str | None  # the node that stands out in the weak pairs, if one does
    status: Status
    message: str
    # the node that stands out in the pairs without a figure (down or unreachable: its
    # pairs are missing), if one does
    absent: str | None = None

    def cell(self, a: str, b: str) -> PairResult | None:
        return next((p for p in self.pairs if {p.a, p.b} == {a, b}), None)

    def to_doc(self) -> dict[str, Any]:
        """The ``pairwise[]`` entry of report.json (docs/report-schema.md)."""
        def pair(p: PairResult) -> dict[str, Any]:
            return {"a": p.a, "b": p.b, "status": p.status.label, "message": p.message,
                    "measured_gbps": p.measured_gbps, "expected_gbps": p.expected_gbps,
                    "percent_of_line_rate": p.percent_of_line_rate, "evidence": p.evidence}
        return {
            "check": self.check, "unit": "Gb/s", "nodes": list(self.nodes),
            "line_rate_gbps": self.threshold.ref, "min_ratio": self.threshold.min_ratio,
            "basis": self.threshold.basis, "status": self.status.label,
            "message": self.message, "pairs": [pair(p) for p in self.pairs],
            "weak": [pair(p) for p in self.weak],
            "weak_counts": dict(self.weak_counts), "culprit": self.culprit,
            "absent": self.absent,
        }


def _weak(p: PairResult, gbps: bool = False) -> str:
    """A weak pair for a message: its name, bandwidth (with ``gbps``) and share of the line
    rate; a weak pair has both figures (it was measured below its bound).

    >>> _weak(PairResult("n1", "n3", Status.FAIL, "", 180.04, 360.0, 45.0), gbps=True)
    'n1 <-> n3 180 Gb/s (45%)'
    """
    assert p.measured_gbps is not None and p.percent_of_line_rate is not None, p.name
    share = f"{figure(p.percent_of_line_rate)}%"
    return f"{p.name} {figure(p.measured_gbps)} Gb/s ({share})" if gbps else f"{p.name} {share}"


def _lookup(measured: Mapping[tuple[str, str], float | None], a: str, b: str
            ) -> tuple[float | None, bool]:
    """(figure, present): both directions accepted; when both were measured, the lower."""
    figures = [measured[k] for k in ((a, b), (b, a)) if k in measured]
    values = [v for v in figures if v is not None]
    return (min(values) if values else None), bool(figures)


def judge_pairwise(nodes: Sequence[str], measured: Mapping[tuple[str, str], float | None],
                   threshold: Threshold, check: str = "fabric.pairwise_bw",
                   errors: Mapping[tuple[str, str], str] | None = None,
                   evidence: Mapping[tuple[str, str], str] | None = None) -> PairwiseMatrix:
    """Judge the matrix: every unordered pair of ``nodes``, in round-robin order.

    ``measured`` maps (server, client) to the bandwidth in Gb/s (None: no figure);
    ``errors`` carries why a pair has no figure (a ParseError's text, a timeout).

    >>> from rackgate.profile import Threshold
    >>> t = Threshold(unit="Gb/s", ref=400, min_ratio=0.9, limit=True, basis=DEFAULT_BASIS)
    >>> m = judge_pairwise(["n1", "n2", "n3"], {("n1", "n2"): 390.0, ("n1", "n3"): 180.0,
    ...                                          ("n2", "n3"): 185.0}, t)
    >>> [p.name for p in m.weak], m.culprit, m.status.label
    (['n1 <-> n3', 'n2 <-> n3'], 'n3', 'fail')
    """
    from rackgate.checks.shared.base import implausible

    errors, evidence = errors or {}, evidence or {}
    known = set(nodes)
    strays = sorted({n for k in [*measured, *errors] for n in k} - known)
    if strays:
        raise ValueError(f"judge_pairwise: measurements name node(s) not in the list: "
                         f"{', '.join(strays)}")
    if threshold.min_ratio is None:  # with no floor every pair would pass
        raise ValueError(f"judge_pairwise: the {check} threshold has no min_ratio (a pair "
                         f"passes at >= ref x min_ratio)")
    rate = threshold.ref
    bound = rate * threshold.min_ratio
    line = figure(rate)
    results = []
    for a, b in (p for rnd in round_robin(nodes) for p in rnd):
        value, present = _lookup(measured, a, b)
        why = errors.get((a, b)) or errors.get((b, a))
        ev = evidence.get((a, b)) or evidence.get((b, a))
        if value is None:
            msg = f"{a} <-> {b}: no bandwidth measured" + (f": {why}" if why else
                                                            "" if present else
                                                            " (pair missing from the run)")
            results.append(PairResult(a, b, Status.ERROR, msg, None, bound, None, ev, True))
            continue
        why = implausible(value, threshold, f"{a} <-> {b}:")
        if why is not None:
            results.append(PairResult(a, b, Status.ERROR, why, None, bound, None, ev))
            continue
        pct = round(100.0 * value / rate, 1)
        gbps, share = figure(value), f"{figure(pct)}%"
        if value < bound:
            status, msg = Status.FAIL, (f"{a} <-> {b}: {gbps} Gb/s, {share} of the {line} Gb/s "
                                        f"line rate, below the pass bound {figure(bound)} Gb/s")
        elif value > rate * OVER_LINE_RATE:
            status, msg = Status.WARN, (f"{a} <-> {b}: {gbps} Gb/s is {share} of the {line} "
                                        "Gb/s line rate: wrong unit, or a path that did not "
                                        "cross the link")
        else:
            status, msg = Status.PASS, f"{a} <-> {b}: {gbps} Gb/s ({share} of line rate)"
        results.append(PairResult(a, b, status, msg, value, bound, pct, ev))
    weak = sorted((p for p in results if p.status is Status.FAIL),
                  key=lambda p: (p.measured_gbps or 0.0, p.a, p.b))
    counts = Counter(n for p in weak for n in (p.a, p.b))
    ranked = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], nodes.index(kv[0]))))
    culprit = _stands_out(counts, nodes)
    status = Status.worst(p.status for p in results) if results else Status.ERROR
    missing = sum(1 for p in results if p.status is Status.ERROR)  # or implausible
    parts = [f"{len(results) - missing - len(weak)} of {len(results)} pairs at >= "
             f"{figure(bound)} Gb/s ({figure(threshold.min_ratio)} x {line} Gb/s line rate)"]
    if not results:
        parts = [f"fewer than two nodes ({len(nodes)}): no pair to measure"]
    if weak:
        parts.append(f"{len(weak)} weak link(s): " + ", ".join(
            _weak(p) for p in weak[:8])
            + (" ..." if len(weak) > 8 else ""))
    if culprit:
        parts.append(f"likely culprit {culprit} (in {ranked[0][1]} weak pairs: check its "
                     "HCA, cable and switch port)")
    if missing:
        parts.append(f"{missing} pair(s) without a measurement (or with an impossible one)")
    absent = _stands_out(Counter(n for p in results if p.missing for n in (p.a, p.b)), nodes)
    if absent:
        parts.append(f"{absent} stands out in the pairs without a figure: it did not take "
                     f"part (down or unreachable?); its partners are not blamed")
    return PairwiseMatrix(check, tuple(nodes), threshold, tuple(results), tuple(weak),
                          ranked, culprit, status, "; ".join(parts), absent)


def _stands_out(counts: Counter[str], nodes: Sequence[str]) -> str | None:
    """The one node in at least two of the counted pairs and in more than any other."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], nodes.index(kv[0])))
    if ranked and ranked[0][1] >= 2 and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
        return ranked[0][0]
    return None


def node_results(matrix: PairwiseMatrix) -> list[Result]:
    """One Result per node: the worst of its pairs, measured = its lowest pair figure.

    A weak pair whose other node is the matrix's likely culprit only warns: the culprit
    fails, its healthy partners are not rejected for its fault. So does a pair that has no
    figure because the other node did not take part (it is in every pair without one:
    down, unreachable): that node is the ``error``, its partners ``warn`` ("partner ...
    not measured").
    """
    out = []
    for node in matrix.nodes:
        mine = [p for p in matrix.pairs if node in (p.a, p.b)]
        if not mine:
            out.append(Result(node, matrix.check, Status.ERROR, "no pair to measure"))
            continue

        def blamed(p: PairResult, node: str = node) -> Status:
            if (p.status is Status.FAIL and matrix.culprit not in (None, node)
                    and matrix.culprit in (p.a, p.b)):
                return Status.WARN
            if p.missing and matrix.absent not in (None, node) and matrix.absent in (p.a, p.b):
                return Status.WARN
            return p.status

        status = Status.worst(blamed(p) for p in mine)
        figures = [p for p in mine if p.measured_gbps is not None]
        low = min(figures, key=lambda p: p.measured_gbps or 0.0) if figures else None
        weak = [p for p in mine if p.status is Status.FAIL]
        missing = [p for p in mine if p.status is Status.ERROR and blamed(p) is Status.ERROR]
        partner_absent = len(missing) < sum(p.status is Status.ERROR for p in mine)
        parts = []
        if weak:
            parts.append(f"{len(weak)} of {len(mine)} pairs weak: " + ", ".join(
                _weak(p, gbps=True) for p in weak[:3]) + (" ..." if len(weak) > 3 else ""))
        if missing:
            parts.append(f"{len(missing)} pair(s) not measured: "
                         + ", ".join(p.name for p in missing[:3]))
        if partner_absent:
            parts.append(f"partner {matrix.absent} not measured with this node: it did not "
                         f"take part in the pairs")
        if matrix.absent == node:
            parts.append("it stands out in the pairs without a figure: is it up and reachable?")
        if matrix.culprit == node:
            parts.append("likely culprit: check its HCA, cable and switch port")
        elif weak and status is Status.WARN:
            parts.append(f"weak only with {matrix.culprit}, the likely culprit")
        over = [p for p in mine if p.status is Status.WARN]
        if over:
            parts.append("; ".join(p.message for p in over[:2]))
        msg = "; ".join(parts) or f"all {len(mine)} pairs at the profiled rate"
        out.append(Result(
            node, matrix.check, status, msg,
            low.measured_gbps if low else None, "Gb/s",
            f">= {figure(matrix.threshold.lower_bound or 0.0)} Gb/s per pair",
            low.percent_of_line_rate if low else None, low.evidence if low else None,
            {"weak_pairs": float(len(weak)), "pairs": float(len(mine))}, "higher"))
    return out


__all__ = ["DEFAULT_BASIS", "DEFAULT_MIN_RATIO", "PairResult", "PairwiseMatrix",
           "judge_pairwise", "line_rate_threshold", "node_results", "round_robin"]
