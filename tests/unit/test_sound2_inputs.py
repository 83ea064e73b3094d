"""Issue 28, findings 8 and 9: every input is bounded. One test per finding's case, named
test_sound2_<finding>_<what>; each failed on the code before the fix (a traceback, a hang
cut by the subprocess's timeout, a wrong exit code) and passes now.

The commands run as the real command line (``rackgate.cli.main.main`` in a subprocess that
imports the same rackgate as this test), each bounded by a timeout, against a stored run
written the way the collector writes it (``stored_runs.write_run``, the project's fio
fixture) and judged once per module.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import yaml
from stored_runs import write_run

import rackgate
from rackgate.checks import load_profile
from rackgate.parsers import ParseError
from rackgate.parsers.bonding import parse_bonding
from rackgate.parsers.ipmi import parse_ipmi_sdr
from rackgate.parsers.launch_failure import expand_hostlist
from rackgate.parsers.multipath import parse_multipath_ll
from rackgate.parsers.nvidia_smi import parse_nvidia_smi, parse_nvidia_smi_text
from rackgate.parsers.nvlink import parse_nvlink_status
from rackgate.parsers.perftest import parse_ib_write_bw

T = TypeVar("T")

FIO = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "seq-read-healthy.json"
PACKAGE_ROOT = str(Path(rackgate.__file__).resolve().parents[1])
DEEP = 100_000  # levels: far beyond any recursion limit
CLI_TIMEOUT_S = 20.0  # a refused document takes about a second; the hangs never end


def rackgate_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``rackgate ARGS`` in a subprocess importing this test's rackgate; a hang fails the
    test when CLI_TIMEOUT_S has passed (pytest reports the TimeoutExpired)."""
    code = "import sys; from rackgate.cli.main import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)


def deep_json() -> str:
    return "[" * DEEP + "]" * DEEP


def deep_yaml() -> str:
    return "checks: " + "[" * DEEP + "]" * DEEP + "\n"


def alias_bomb(levels: int = 7) -> str:
    """A YAML alias bomb under ``checks:``: level i is ten aliases of level i - 1, so a
    few hundred bytes stand for 10^levels strings once expanded."""
    lines = ["x0: &x0 [a, a, a, a, a, a, a, a, a, a]"]
    lines += [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join([*lines, f"checks: *x{levels - 1}"]) + "\n"


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A judged run (two nodes, fio.seq_read, ACCEPT): manifest, evidence and report.json."""
    run = write_run(tmp_path_factory.mktemp("judged") / "run", load_profile("demo"),
                    ["fio.seq_read"], ["n1", "n2"],
                    evidence={(h, "fio.seq_read"): FIO.read_text(encoding="utf-8")
                              for h in ("n1", "n2")}, argv=("fio",))
    out = rackgate_cli("judge", run, cwd=run.parent)
    assert out.returncode == 0 and (run / "report.json").is_file(), out.stderr
    return run


def with_file(judged: Path, tmp_path: Path, name: str, text: str) -> Path:
    """A copy of the judged run with ``name`` (manifest.json, report.json) replaced."""
    run = tmp_path / "run"
    shutil.copytree(judged, run)
    (run / name).write_text(text, encoding="utf-8")
    return run


def refused(out: subprocess.CompletedProcess[str], path: Path, why: str) -> None:
    """Exit 2, an error line naming the file and the bound (on stderr; the health check
    writes its own to stdout, which SLURM logs), no traceback."""
    said = out.stderr + out.stdout
    assert "Traceback" not in said, said[-2000:]
    assert out.returncode == 2, (out.returncode, said[-2000:])
    assert str(path) in said and why in said, said[-2000:]


# 9. Deeply nested JSON or YAML: an error naming the file, never a RecursionError ------------

def test_sound2_9_judge_of_a_deeply_nested_manifest_is_an_error(judged, tmp_path):
    run = with_file(judged, tmp_path, "manifest.json", deep_json())
    refused(rackgate_cli("judge", run, cwd=tmp_path), run / "manifest.json", "nested")


def test_sound2_9_resume_of_a_deeply_nested_manifest_is_an_error(judged, tmp_path):
    run = with_file(judged, tmp_path, "manifest.json", deep_json())
    refused(rackgate_cli("validate", "--resume", run, cwd=tmp_path),
            run / "manifest.json", "nested")


@pytest.mark.parametrize("command", [
    ("drain", "--dry-run", "{run}"),
    ("diff", "{report}", "{other}"),
    ("verify", "{report}"),
    ("export-metrics", "{run}", "-o", "-"),
    ("baseline", "{run}"),
    ("judge", "{other_run}", "--compare", "{report}", "--out", "{out}"),
], ids=["drain", "diff", "verify", "export-metrics", "baseline", "judge-compare"])
def test_sound2_9_a_deeply_nested_report_is_an_error(judged, tmp_path, command):
    run = with_file(judged, tmp_path, "report.json", deep_json())
    report = run / "report.json"
    names = {"run": run, "report": report, "other": judged / "report.json",
             "other_run": judged, "out": tmp_path / "out"}
    out = rackgate_cli(*(a.format(**names) for a in command), cwd=tmp_path)
    refused(out, report, "nested")


@pytest.mark.parametrize("option", ["--profile", "--overrides"])
def test_sound2_9_a_deeply_nested_profile_or_overrides_file_is_an_error(judged, tmp_path,
                                                                        option):
    doc = tmp_path / "deep.yaml"
    doc.write_text(deep_yaml(), encoding="utf-8")
    out = rackgate_cli("judge", judged, option, doc, "--out", tmp_path / "out", cwd=tmp_path)
    refused(out, doc, "nested")


def test_sound2_9_a_deeply_nested_healthcheck_config_is_an_error(tmp_path):
    doc = tmp_path / "healthcheck.yaml"
    doc.write_text(deep_yaml(), encoding="utf-8")
    refused(rackgate_cli("healthcheck", "--config", doc, "--no-slurm", cwd=tmp_path),
            doc, "nested")


def test_sound2_9_a_deeply_nested_fabric_plan_is_an_error(tmp_path):
    doc = tmp_path / "fabric.yml"
    doc.write_text(deep_yaml(), encoding="utf-8")
    refused(rackgate_cli("fabric", "check", "--plan", doc, cwd=tmp_path), doc, "nested")


# 8. A YAML alias bomb is refused at once, never expanded ------------------------------------

@pytest.mark.parametrize("option", ["--profile", "--overrides"])
def test_sound2_8_an_alias_bomb_in_a_profile_or_overrides_file_is_refused(judged, tmp_path,
                                                                          option):
    doc = tmp_path / "bomb.yaml"
    doc.write_text(alias_bomb(), encoding="utf-8")
    out = rackgate_cli("judge", judged, option, doc, "--out", tmp_path / "out", cwd=tmp_path)
    refused(out, doc, "alias")
    assert len(out.stderr) < 2000  # the error names the bound, not the expanded document


def test_a_profile_with_anchors_and_aliases_still_loads(judged, tmp_path):
    """The control: settings shared through an anchor and an alias (PyYAML writes them for
    an object given twice) are a document's ordinary use, far below the bound."""
    doc = dict(load_profile("demo").raw)
    checks = doc["checks"] = {k: dict(v or {}) for k, v in doc["checks"].items()}
    checks["fio.seq_write"]["params"] = checks["fio.seq_read"]["params"]
    profile = tmp_path / "shared.yaml"
    profile.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert "&id001" in profile.read_text(encoding="utf-8")
    out = rackgate_cli("judge", judged, "--profile", profile, "--out", tmp_path / "out",
                       cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]


# 9. A format string is validated before it is used -----------------------------------------

@pytest.mark.parametrize("option, fmt", [
    ("--host-format", "{:>999999999999}"),  # a width no memory holds: MemoryError
    ("--host-format", "gpu{:0999999}"),  # a plan of 1 MB host names, written (exit 0)
])
def test_sound2_9_fabric_plan_validates_a_format_string_before_using_it(tmp_path, option, fmt):
    out = rackgate_cli("fabric", "plan", "--nodes", "4", "--rails", "2", "--leaf-ports", "8",
                       option, fmt, cwd=tmp_path)
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert f"{option} cannot number" in out.stderr and fmt in out.stderr, out.stderr


def test_fabric_plan_numbers_names_with_an_ordinary_format(tmp_path):
    """The control: a zero-padded width and a hex number are what --host-format is for."""
    out = rackgate_cli("fabric", "plan", "--nodes", "4", "--rails", "2", "--leaf-ports", "8",
                       "--host-format", "dgx{:03d}", "--hca-format", "mlx5_{:x}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "host: dgx004" in out.stdout and "hca: mlx5_1" in out.stdout


# 8. A judgement that runs away is an error for its (node, check) alone ---------------------

# Registers two checks whose judge does not return on the evidence "spin" for 180 s (three
# times the test's patience, so the test cannot pass by a judge that happens to be fast):
# test.spin_node per node (a copy of fio.seq_read; on other evidence it judges as
# fio.seq_read does) and test.spin_across launched across the nodes (a copy of
# mpi.allreduce). Sets the bound of one judgement to 1 s (the code before the bound has
# none to set: it hangs) and judges a run of n1 (healthy) and n2 (spinning), printing
# every result.
SPIN_SCRIPT = """
import dataclasses, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import rackgate.judge.stored
from rackgate.checks import REGISTRY, load_profile, profile_from_document
from stored_runs import write_run
from rackgate.run import judge_run
try:
    from rackgate.judge import bound
    bound.JUDGE_LIMIT_S = 1.0
except ImportError:
    pass
if sys.argv[3] == "forked":
    rackgate.judge.stored.PARALLEL_MIN_RESULTS = 1
fio, mpi = REGISTRY["fio.seq_read"], REGISTRY["mpi.allreduce"]
def spin(record, params, thresholds, hardware):
    until = time.monotonic() + 180  # far past the test's patience: an orphan ends too
    while record == "spin":
        if time.monotonic() > until:
            raise RuntimeError("spun 180 s and nothing stopped it")
    return fio.judge(fio.parse(record), params, thresholds, hardware)
REGISTRY["test.spin_node"] = dataclasses.replace(fio, name="test.spin_node",
                                                 parse=str.strip, judge=spin)
REGISTRY["test.spin_across"] = dataclasses.replace(mpi, name="test.spin_across",
                                                   parse=str.strip, judge=spin,
                                                   judge_nodes=None)
doc = dict(load_profile("demo").raw)
doc["checks"] = {**doc["checks"], "test.spin_node": doc["checks"]["fio.seq_read"],
                 "test.spin_across": doc["checks"]["mpi.allreduce"]}
healthy = Path(sys.argv[4]).read_text()
run = write_run(Path(sys.argv[2]), profile_from_document(doc, "spin"),
                ["fio.seq_read", "test.spin_node", "test.spin_across"], ["n1", "n2"],
                launch_host="head", argv=("fio",), evidence={
                    ("n1", "fio.seq_read"): healthy, ("n2", "fio.seq_read"): healthy,
                    ("n1", "test.spin_node"): healthy, ("n2", "test.spin_node"): "spin",
                    ("head", "test.spin_across"): "spin"})
outcome = judge_run(run)
print(json.dumps({f"{n.node} {r.check}": [r.status.label, r.message]
                  for n in outcome.rack.nodes for r in n.results}))
"""


@pytest.mark.parametrize("loop", ["serial", "forked"])
def test_sound2_8_a_runaway_judgement_is_an_error_for_its_node_and_check_alone(tmp_path,
                                                                               loop):
    """Serial: the judge's own process; forked: judge.stored's worker processes."""
    env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT}
    proc = subprocess.Popen([sys.executable, "-c", SPIN_SCRIPT, str(Path(__file__).parent),
                             str(tmp_path / "run"), loop, str(FIO)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the judge and its forked workers
        proc.communicate()
        pytest.fail("the judgement that does not return was not stopped within 60 s")
    assert proc.returncode == 0, stderr[-3000:]
    results = json.loads(stdout.splitlines()[-1])
    bounded = "judging took longer than its bound of 1 s"
    assert results["n1 fio.seq_read"][0] == results["n2 fio.seq_read"][0] == "pass", results
    assert results["n1 test.spin_node"][0] == "pass", results  # the same check, other node
    assert results["n2 test.spin_node"][0] == "error", results
    assert bounded in results["n2 test.spin_node"][1], results
    for node in ("n1", "n2"):  # judged once for both: each node's share of it ran out
        assert results[f"{node} test.spin_across"][0] == "error", results
        assert "longer than its bound of 2 s" in results[f"{node} test.spin_across"][1]


# 8. Parsers are linear in the length of a line ---------------------------------------------

class _Overrun(BaseException):  # not an Exception: the judge turns those into errors
    pass


def _overrun(signum: int, frame: object) -> None:
    raise _Overrun


def within(seconds: float, what: str, run: Callable[[], T]) -> T:
    """``run()``, failing the test when it takes longer than ``seconds`` (SIGALRM, again
    every second until it returns: Python code and the regex engine stop at a signal)."""
    old = signal.signal(signal.SIGALRM, _overrun)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1)
    try:
        return run()
    except _Overrun:
        pytest.fail(f"{what} took over {seconds} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("pairs", [("x" * 200_000), ("ab " * 66_667)],
                         ids=["one-word", "words"])
def test_sound2_8_a_200k_character_line_in_a_pair_is_judged_in_seconds(pairs):
    """A line of 200,000 characters in one pair's client report (quadratic before: about 25
    minutes for one such pair). Bounded at 30 s, which a linear judge (well under a second
    here) never meets; the judge still gives every node its result."""
    from test_sound_pairwise import FIRST, HEALTHY, by_node, launched, run_output

    text = run_output({FIRST: HEALTHY + pairs + "\n"})
    status = within(30, "judging a pairwise run with one 200,000-character line",
                    lambda: by_node(launched(text)))
    assert set(status) == {"gpu01", "gpu02", "gpu03", "gpu04"}
    assert set(status.values()) <= {"pass", "warn", "fail", "error"}


N = 400_000  # characters in the long line: quadratic parsers took minutes to hours
LONG_LINES: dict[str, Callable[[], object]] = {
    "bonding": lambda: parse_bonding("==> /proc/net/bonding/bond0 <==\nMII Status"
                                     + " " * N + "up\n"),
    "ipmi-verbose-field": lambda: parse_ipmi_sdr("Sensor ID : PSU1 Status (0x4a)\n Entity ID"
                                                 + " " * N + "x\n"),
    "ipmi-verbose-id": lambda: parse_ipmi_sdr("Sensor ID : PSU1" + " " * N + "x\n"),
    "nvidia-smi-field": lambda: parse_nvidia_smi_text(
        "==============NVSMI LOG==============\n\nTimestamp" + " " * N + "x\n"),
    "nvidia-smi-empty-lines": lambda: parse_nvidia_smi("\n" * N + "x"),
    "perftest-words": lambda: parse_ib_write_bw(" argument" * (N // 9) + "\n"),
    "slurm-hostlist": lambda: expand_hostlist("[" * N),
    "multipath-map": lambda: parse_multipath_ll("mpatha" + " (a" * (N // 3) + "\n"),
    "nvlink-gpu": lambda: parse_nvlink_status("GPU 0: H100" + " (UUID: x" * (N // 9) + "\n"),
}


@pytest.mark.parametrize("name", sorted(LONG_LINES))
def test_sound2_8_a_long_line_is_parsed_in_linear_time(name):
    """400,000 characters of what a pattern of the parser scanned again from every position
    (blanks after a lazy field, empty lines, words it looks for twice): each took between a
    minute and hours, and now well under a second. A ParseError is a fine answer here."""
    def parse() -> None:
        with contextlib.suppress(ParseError):
            LONG_LINES[name]()

    within(20, f"parsing a {N:,}-character line ({name})", parse)
