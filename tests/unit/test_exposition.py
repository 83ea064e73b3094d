"""rackgate.exposition.check_text, the gate every textfile passes before it replaces the old
one, against the real `promtool check metrics` (Debian's prometheus package, 2.42): every
text promtool refuses (a parse error, exit 1, or a lint finding, exit 3) is refused in
process as well; the texts promtool accepts that check_text refuses are listed, each with
why it is stricter."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import promtool
from rackgate.exposition import ExpositionError, check_text, escape_label, label_problem

HEAD = "# HELP m A gauge.\n# TYPE m gauge\n"

# texts promtool refuses; what the refusal says
REFUSED_BY_PROMTOOL = {
    "escape \\r": HEAD + 'm{a="x\\ry"} 1\n',
    "escape \\t": HEAD + 'm{a="x\\ty"} 1\n',
    "label twice": HEAD + 'm{a="1",a="2"} 1\n',
    "__name__ label": HEAD + 'm{__name__="x"} 1\n',
    "no help": "# TYPE m gauge\nm 1\n",
    "no help, no type": "m 1\n",
    "value CR": HEAD + "m 1\r\n",
    "value not a number": HEAD + "m one\n",
    "label name with a dash": HEAD + 'm{a-b="1"} 1\n',
    "metric name with a dash": "# HELP m-x A.\n# TYPE m-x gauge\nm-x 1\n",
    "unterminated value": HEAD + 'm{a="1} 1\n',
    "raw line feed in a value": HEAD + 'm{a="1\n"} 1\n',
    "second TYPE": HEAD + "# TYPE m gauge\nm 1\n",
    "TYPE after samples": "# HELP m A.\nm 1\n# TYPE m gauge\n",
    "unknown type": "# HELP m A.\n# TYPE m gauges\nm 1\n",
}

# texts promtool accepts and check_text refuses, and why
STRICTER = {
    # a raw CR is a line end to universal newlines and str.splitlines
    "raw CR in a value": HEAD + 'm{a="x\ry"} 1\n',
    # node_exporter's registry refuses a scrape that holds a series twice
    "series twice": HEAD + 'm{a="1"} 1\nm{a="1"} 2\n',
    # the textfile collector refuses samples with a timestamp
    "timestamp": HEAD + "m 1 1700000000000\n",
    # a trailing comma: rackgate never writes one
    "trailing comma": HEAD + 'm{a="1",} 1\n',
    # a metric's samples apart: rackgate never writes them so
    "samples apart": HEAD + 'm{a="1"} 1\n# HELP n B.\n# TYPE n gauge\nn 1\nm{a="2"} 1\n',
}

ACCEPTED = {
    "plain": HEAD + "m 1\n",
    "escapes": HEAD + 'm{a="back\\\\slash \\"q\\" line\\nfeed",b=""} -1.5e-3\n',
    "unicode": HEAD + 'm{rack="Zürich-7 ✓"} 0\n',
    "help escapes": "# HELP m a \\\\ b\\nc\n# TYPE m gauge\nm NaN\nm{a=\"1\"} +Inf\n",
    "two metrics": HEAD + 'm{a="1"} 1\nm{a="2"} 2\n# HELP n B.\n# TYPE n gauge\nn .5\n',
}


def promtool_accepts(text: str) -> bool:
    run = promtool("check", "metrics", stdin=text, timeout=60)
    return run.returncode == 0


@pytest.mark.parametrize("name", sorted(REFUSED_BY_PROMTOOL))
def test_what_promtool_refuses_is_refused(name):
    text = REFUSED_BY_PROMTOOL[name]
    assert not promtool_accepts(text), name
    with pytest.raises(ExpositionError):
        check_text(text)


@pytest.mark.parametrize("name", sorted(STRICTER))
def test_what_check_text_refuses_beyond_promtool(name):
    text = STRICTER[name]
    assert promtool_accepts(text), name  # else it belongs in REFUSED_BY_PROMTOOL
    with pytest.raises(ExpositionError):
        check_text(text)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_valid_text_passes_both(name):
    text = ACCEPTED[name]
    assert promtool_accepts(text), name
    check_text(text)


def test_a_lone_surrogate_is_refused_as_promtool_refuses_its_bytes():
    """A JSON ``\\ud800`` escape reads as a lone surrogate; written with surrogatepass it
    is the bytes ED A0 80, which promtool refuses as an invalid label value. check_text
    refuses the string before any encoding."""
    found = shutil.which("promtool")
    assert found, "promtool not found: run scripts/bootstrap.sh --test"
    run = subprocess.run([found, "check", "metrics"], capture_output=True, timeout=60,
                         input=(HEAD + 'm{a="\ud800"} 1\n').encode("utf-8", "surrogatepass"),
                         check=False)
    assert run.returncode == 1 and b"invalid label value" in run.stderr, run.stderr
    with pytest.raises(ExpositionError, match="lone surrogate"):
        check_text(HEAD + 'm{a="\ud800"} 1\n')


def test_an_error_names_the_line_and_the_rule():
    with pytest.raises(ExpositionError, match=r"^line 3: label a: invalid escape sequence"):
        check_text(HEAD + 'm{a="x\\ry"} 1\n')
    with pytest.raises(ExpositionError, match="U\\+000D"):
        check_text(HEAD + 'm{a="x\ry"} 1\n')


def test_every_escaped_printable_value_reads_back_through_promtool():
    values = ['"', "\\", "\n", '\\"\n\\n', "a=b,c}", "{x}", " "]
    text = HEAD + "".join(f'm{{v="{escape_label(v)}",i="{i}"}} {i}\n'
                          for i, v in enumerate(values))
    check_text(text)
    assert promtool_accepts(text)
    assert all(label_problem(v) is None for v in values)
    assert label_problem("\ud800") is not None and label_problem("a\x7fb") is not None
