"""Thresholds: the pass band of one metric as a ratio of a reference, the ranges that keep a
band meaningful, and what an override changed in it.

Every figure of a threshold is finite (infinities and NaN are refused on load), ``ref`` and
``ceiling`` are above 0. Each metric has a direction, declared by its check
(``Check.better``): where higher is better the threshold is a floor, ``min_ratio`` alone;
where lower is better it is a ceiling, ``max_ratio`` alone. No profile or overrides file can
turn a floor into a ceiling (``min_ratio: null, max_ratio: 2`` on a bandwidth) or leave a
metric with no bound in its direction. The ratio itself stays in a range that still tells
a healthy device from a broken one (:data:`FLOOR_RATIOS`, :data:`CEILING_RATIOS`):

- ``ref`` is the figure expected of a healthy device (a physical limit, a nominal rate, a
  site's median) and the ratio how far from it a pass may go. A floor is at most the
  reference (above it, ``ref`` is not what is expected) and at least a tenth of it: below,
  it passes a device an order of magnitude short of its reference, such as a 16-lane link
  trained at one lane (1/16 of its rate) or a disk at 10 MB/s against 100 MB/s; a floor at
  1e-300 of its reference is no floor. A ceiling is at least the reference and at most ten
  times it: above, it passes a latency or an error rate an order of magnitude past what is
  expected. A site that expects another figure changes ``ref``, with its basis.

An override (an overrides file, an inventory's ``rackgate_profile_overrides``) may tighten
a threshold freely. One that loosens it (a lower floor, a higher ceiling, a higher or no
physical ceiling) must give the new figure's ``basis`` in the same entry, other than the
basis it replaces; none may change a threshold's unit (the check measures in one unit).
:func:`changes` lists what an override changed, old and new, for the reports.

>>> t = Threshold(unit="GB/s", ref=50, min_ratio=0.9, limit=True,
...               basis="NDR 400 Gb/s = 50 GB/s per port")
>>> t.lower_bound, band(t)
(45.0, '>= 45 GB/s (0.9 x 50 GB/s)')
>>> [field for field, _ in band_problems(t.model_copy(update={"min_ratio": 1e-300}), "higher")]
['min_ratio']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rackgate.figures import figure, with_unit

Direction = Literal["higher", "lower"]  # which way a metric improves (Check.better)

FLOOR_RATIOS = (0.1, 1.0)  # a floor's min_ratio: at least a tenth of ref, at most ref
CEILING_RATIOS = (1.0, 10.0)  # a ceiling's max_ratio: at least ref, at most ten times it

_KIND = {"higher": ("floor", "min_ratio", "max_ratio", FLOOR_RATIOS),
         "lower": ("ceiling", "max_ratio", "min_ratio", CEILING_RATIOS)}
_TOO_FAR = "it would pass a figure an order of magnitude from its reference"
_PAST_REF = "ref is the figure expected, and the bound would sit on the other side of it"


class Threshold(BaseModel):
    """Pass band for one metric, as ratios of a reference value. Every figure is finite.

    >>> Threshold(unit="ms", ref=50, max_ratio=1.0, basis="p99 under 50 ms").upper_bound
    50.0
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    unit: str = Field(min_length=1)
    ref: float = Field(gt=0, description="reference value: a physical limit or a nominal figure")
    min_ratio: float | None = Field(default=None, gt=0, description="pass at >= ref * min_ratio")
    max_ratio: float | None = Field(default=None, gt=0, description="pass at <= ref * max_ratio")
    limit: bool = Field(default=False, description="ref is a physical limit: report % of it")
    ceiling: float | None = Field(
        default=None, gt=0,
        description="the highest value a real measurement can have, when it is not ref "
                    "itself (with limit: true, ref is the ceiling); a figure above it "
                    "(x1.05) is implausible evidence, an error. Its derivation goes in basis")
    basis: str = Field(min_length=10, description="where the number comes from")

    @model_validator(mode="after")
    def _one_bound(self) -> Threshold:
        if self.min_ratio is None and self.max_ratio is None:
            raise ValueError("a threshold needs min_ratio, max_ratio or both")
        if self.min_ratio is not None and self.max_ratio is not None \
                and self.min_ratio > self.max_ratio:
            raise ValueError(f"min_ratio {self.min_ratio} is above max_ratio {self.max_ratio}")
        if self.ceiling is not None and self.ceiling < self.ref:
            raise ValueError(f"ceiling {self.ceiling} is below ref {self.ref}: no measurement "
                             f"could reach the reference")
        return self

    @property
    def plausible_max(self) -> float | None:
        """The physical ceiling of the metric: ``ceiling``, else ``ref`` when it is a limit."""
        if self.ceiling is not None:
            return self.ceiling
        return self.ref if self.limit else None

    @property
    def lower_bound(self) -> float | None:
        return None if self.min_ratio is None else self.ref * self.min_ratio

    @property
    def upper_bound(self) -> float | None:
        return None if self.max_ratio is None else self.ref * self.max_ratio


def band(t: Threshold) -> str:
    """The pass band as a judgement's ``expected`` says it: ``>= 45 GB/s (0.9 x 50 GB/s)``,
    ``<= ...`` for a ceiling, both joined by "and"."""
    ref = with_unit(t.ref, t.unit)
    parts = []
    if t.lower_bound is not None and t.min_ratio is not None:
        parts.append(f">= {with_unit(t.lower_bound, t.unit)} ({figure(t.min_ratio)} x {ref})")
    if t.upper_bound is not None and t.max_ratio is not None:
        parts.append(f"<= {with_unit(t.upper_bound, t.unit)} ({figure(t.max_ratio)} x {ref})")
    return " and ".join(parts)


def band_problems(t: Threshold, better: Direction) -> list[tuple[str, str]]:
    """(field, why) for each way ``t`` is not a meaningful threshold of a metric whose
    ``better`` direction is higher (a floor) or lower (a ceiling)."""
    kind, own, other, (lo, hi) = _KIND[better]
    out = []
    if getattr(t, other) is not None:
        out.append((other, f"{getattr(t, other):g} given, but {better} is better for this "
                           f"metric: its threshold is a {kind} ({own} only), and a {other} "
                           f"would judge it the other way"))
    value = getattr(t, own)
    if value is None:
        out.append((own, f"missing: {better} is better for this metric, so its threshold is a "
                         f"{kind}, at ref x {own}"))
    elif not lo <= value <= hi:
        low = value < lo
        why = _TOO_FAR if low == (better == "higher") else _PAST_REF
        out.append((own, f"{value:g} is {'below' if low else 'above'} {lo if low else hi:g}, "
                         f"the {'least' if low else 'most'} a {kind}'s {own} may be: {why} "
                         f"(to expect another figure, change ref and give its basis)"))
    return out


@dataclass(frozen=True)
class ThresholdChange:
    """One threshold an override changed: where the override came from (``overrides FILE``,
    or an inventory host's ``rackgate_profile_overrides``), the check and metric, the
    threshold before and after (None: there was none), and how the change loosens it (empty:
    it does not)."""

    origin: str
    check: str
    metric: str
    old: Threshold | None
    new: Threshold | None
    loosens: tuple[str, ...]

    def to_doc(self) -> dict[str, Any]:
        """The change as the manifest and report.json record it (docs/report-schema.md)."""
        return {"origin": self.origin, "check": self.check, "metric": self.metric,
                "old": None if self.old is None else self.old.model_dump(),
                "new": None if self.new is None else self.new.model_dump(),
                "old_band": "" if self.old is None else band(self.old),
                "new_band": "" if self.new is None else band(self.new),
                "loosens": list(self.loosens)}

    @classmethod
    def from_doc(cls, doc: Any) -> ThresholdChange:
        """A change as :meth:`to_doc` wrote it; ValueError naming what is wrong."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"a threshold change must be an object, got {type(doc).__name__}")
        for key in ("origin", "check", "metric"):
            if not isinstance(doc.get(key), str):
                raise ValueError(f"field {key} must be a string, got {doc.get(key)!r:.80}")
        loosens = doc.get("loosens")
        if not isinstance(loosens, list) or not all(isinstance(x, str) for x in loosens):
            raise ValueError("field loosens must be a list of strings")
        try:
            old, new = (None if doc.get(k) is None else Threshold.model_validate(doc[k])
                        for k in ("old", "new"))
        except ValidationError as exc:
            raise ValueError(f"{doc['check']} {doc['metric']}: {exc.errors()[0]['msg']}") \
                from None
        return cls(doc["origin"], doc["check"], doc["metric"], old, new, tuple(loosens))


def loosening(old: Threshold | None, new: Threshold | None) -> tuple[str, ...]:
    """How ``new`` loosens ``old``: a lower floor, a higher ceiling, a higher physical
    ceiling, or any of them gone (empty: it does not)."""
    if old is None:
        return ()
    if new is None:
        return (f"the threshold {band(old)} is removed",)
    unit, out = old.unit, []

    def said(value: float | None) -> str:
        return "none" if value is None else with_unit(value, unit)
    if old.lower_bound is not None and (new.lower_bound is None
                                        or new.lower_bound < old.lower_bound):
        out.append(f"floor {said(old.lower_bound)} -> {said(new.lower_bound)}")
    if old.upper_bound is not None and (new.upper_bound is None
                                        or new.upper_bound > old.upper_bound):
        out.append(f"ceiling {said(old.upper_bound)} -> {said(new.upper_bound)}")
    if old.plausible_max is not None and (new.plausible_max is None
                                          or new.plausible_max > old.plausible_max):
        out.append(f"physical limit {said(old.plausible_max)} -> {said(new.plausible_max)}")
    return tuple(out)


Sections = Mapping[str, Mapping[str, Threshold]]  # check -> metric -> threshold


def changes(old: Sections, new: Sections, origin: str) -> list[ThresholdChange]:
    """Every threshold that differs between ``old`` and ``new``, in ``new``'s order."""
    out = []
    for check in dict.fromkeys([*new, *old]):
        before, after = old.get(check, {}), new.get(check, {})
        for metric in dict.fromkeys([*after, *before]):
            o, n = before.get(metric), after.get(metric)
            if o != n:
                out.append(ThresholdChange(origin, check, metric, o, n, loosening(o, n)))
    return out


def override_problems(made: Sequence[ThresholdChange],
                      entries: Mapping[tuple[str, str], Any]) -> list[str]:
    """What an override may not do, one line per threshold (the profile's error format):
    change a unit, or loosen a threshold without the basis of its new figure in its own
    entry (``entries``: (check, metric) -> the override's mapping for that threshold)."""
    out = []
    for c in made:
        where = f"  checks.{c.check}.thresholds.{c.metric}"
        if c.old is not None and c.new is not None and c.old.unit != c.new.unit:
            out.append(f"{where}.unit: an override cannot change a threshold's unit "
                       f"({c.old.unit!r} -> {c.new.unit!r}): the check measures in "
                       f"{c.old.unit!r}")
        if not c.loosens:
            continue
        entry = entries.get((c.check, c.metric))
        basis = entry.get("basis") if isinstance(entry, Mapping) else None
        if basis is None or (c.old is not None and basis == c.old.basis):
            old = "none" if c.old is None else band(c.old)
            new = "none" if c.new is None else band(c.new)
            out.append(f"{where}: {old} -> {new} loosens it ({'; '.join(c.loosens)}) "
                       f"without a basis of its own: an override that lowers a floor or raises "
                       f"a ceiling or a physical limit must give its new figure's basis in the "
                       f"same entry (the profile's basis explains the old figure)")
    return out


def override_entries(overrides: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    """(check, metric) -> the override's entry for it, from ``checks.<c>.thresholds.<m>``."""
    checks = overrides.get("checks")
    out: dict[tuple[str, str], Any] = {}
    for check, section in (checks.items() if isinstance(checks, Mapping) else ()):
        thresholds = section.get("thresholds") if isinstance(section, Mapping) else None
        for metric, entry in (thresholds.items() if isinstance(thresholds, Mapping) else ()):
            out[str(check), str(metric)] = entry
    return out
