"""Conformance: the fio parser and judges on real outputs published by others
(../shared/corpus/fio, read at test time; skipped when the corpus is absent).

JSON files must parse, whatever fio version and whatever precedes the JSON; text-format
files are not what rackgate collects (it runs fio with --output-format=json) and must be
refused with a clear parse error, never read as a result. Failed runs must be judged
`error`, and the floppy drive must fail any real threshold.
"""

from __future__ import annotations

import pytest

from conftest import CorpusFile, corpus_params
from rackgate.checks import REGISTRY, load_profile
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.fio import parse_fio_json
from rackgate.placement.evidence import judge_evidence


def _evidence(body: str):
    from rackgate.store.evidence import Evidence

    return Evidence(host="corpus", check="fio", argv=("fio",), outcome="completed", rc=0,
                    started=None, ended=None, duration_s=None, stderr="", message="",
                    stdout_file="corpus", stdout_sha256="", stdout_bytes=len(body))


@pytest.mark.parametrize("f", corpus_params("fio", "json-*") + corpus_params("fio", "randrw-*"))
def test_json_outputs_parse(f: CorpusFile) -> None:
    run = parse_fio_json(f.body)
    assert run.jobs
    if "FAILED" in f.header:
        assert any(j.error for j in run.jobs), "a failed run must carry its job error"
    else:
        moved = sum((d.io_bytes if d else 0) for j in run.jobs for d in (j.read, j.write))
        assert moved > 0


@pytest.mark.parametrize("f", corpus_params("fio", "text-*"))
def test_text_outputs_are_refused_clearly(f: CorpusFile) -> None:
    with pytest.raises(ParseError, match=r"no line starts with '\{'"):
        parse_fio_json(f.body)


@pytest.mark.parametrize("f", corpus_params("fio"))
def test_no_corpus_file_passes_a_check_it_cannot_answer(f: CorpusFile) -> None:
    """Judged as the demo profile's checks would: failed runs and text are errors, the
    floppy drive fails; whatever passes must have measured the direction it is judged on."""
    demo = load_profile("demo")
    for name in ("fio.seq_read", "fio.seq_write"):
        r = judge_evidence(REGISTRY[name], _evidence(f.body), f.body, demo)
        if "FAILED" in f.header or f.path.name.startswith("text-"):
            assert r.status is Status.ERROR, (name, r.message)
        if "floppy" in f.path.name and name == "fio.seq_read":
            assert r.status is Status.FAIL and r.measured is not None and r.measured < 1
        if r.status is Status.PASS:
            assert r.measured is not None and r.measured > 0
