"""Issue 28, fuzz property tests: every parser that feeds a judge, over its family's healthy
and faulty tool outputs damaged by the new mutators (duplicate lines, odd numeric
notations, byte-order marks, carriage returns, 100,000-character lines; degrade_helpers),
raises nothing but ParseError, and no mutant of a faulty output, nor one that changed what
the judge reads of a healthy output, is judged ``pass`` (the subjects and the oracle:
fuzz_subjects).

Bounded for CI: ``RACKGATE_FUZZ_EXAMPLES`` examples per parser (default 60, a few seconds in
all). The large run, hundreds of thousands of mutants with counts: bench/fuzz_parsers.py
(docs/performance.md has its figures).
"""

from __future__ import annotations

import os
import random

import pytest
from degrade_helpers import LONG, MUTATORS, mutants, mutate, notations
from fuzz_subjects import SUBJECTS, Subject, judged, problem, sources
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rackgate.model import Status

EXAMPLES = int(os.environ.get("RACKGATE_FUZZ_EXAMPLES", "60"))


def test_the_sources_are_judged_as_their_families_say():
    """The control: every healthy source passes (or, unjudged, parses) and every faulty one
    does not; else the property below could hold by failing everything."""
    for subject, source in sources():
        status, record = judged(subject, source.text)
        if subject.judge is None:
            assert record is not None, (subject.name, source.name)
        else:
            assert (status is Status.PASS) is source.healthy, (subject.name, source.name,
                                                               status)


def test_every_parser_with_a_judge_is_fuzzed():
    """One subject per check parser of the registry (a new check joins the fuzz)."""
    from rackgate.checks import REGISTRY
    fuzzed = {s.parse for s in SUBJECTS}
    missing = {f"{c.parse.__module__}.{c.parse.__name__}" for c in REGISTRY.values()
               if c.parse not in fuzzed}
    assert not missing


def test_each_mutator_damages_the_line_or_number_it_draws():
    text = "key=12\nother=3\n"
    for seed in range(20):
        got = {k: mutate(k, text, "^key", (r"key=([0-9]+)",), random.Random(seed))
               for k in MUTATORS}
        assert got["duplicate"] == "key=12\nkey=12\nother=3\n"
        assert got["notation"].startswith("key=") and got["notation"][4:-9] in notations("12")
        assert "\ufeff" in got["bom"] and got["bom"].replace("\ufeff", "") == text
        assert "\r" in got["cr"] and got["cr"].replace("\r", "") == text
        assert len(got["long"]) == len(text) + LONG and got["long"].endswith("other=3\n")


@pytest.mark.parametrize("subject", [s for s in SUBJECTS if s.sources], ids=lambda s: s.name)
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_mutants_raise_only_parse_error_and_never_pass_degraded(subject: Subject,
                                                                data: st.DataObject) -> None:
    source = data.draw(st.sampled_from(subject.sources), label="source")
    text = data.draw(mutants(source.text, source.lines, source.numbers, subject.long),
                     label="mutant")
    assert problem(subject, source, text) is None
