"""Issue 28, findings 8 and 9: every input is bounded. One test per finding's case, named
test_sound2_<finding>_<what>; each failed on the code before the fix (a traceback, a hang
cut by the subprocess's timeout, a wrong exit code) and passes now.

The commands run as the real command line (``rackgate.cli.main`` in a subprocess that
imports the same rackgate as this test), each bounded by a timeout, against a stored run
written the way the collector writes it (``stored_runs.write_run``, the project's fio
fixture) and judged once per module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from stored_runs import write_run

import rackgate
from rackgate.checks import load_profile

FIO = Path(__file__).resolve().parents[1] / "fixtures" / "fio" / "seq-read-healthy.json"
PACKAGE_ROOT = str(Path(rackgate.__file__).resolve().parents[1])
DEEP = 100_000  # levels: far beyond any recursion limit
CLI_TIMEOUT_S = 20.0  # a refused document takes about a second; the hangs never end


def rackgate_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``rackgate ARGS`` in a subprocess importing this test's rackgate; a hang fails the
    test when CLI_TIMEOUT_S has passed (pytest reports the TimeoutExpired)."""
    code = "import sys; from rackgate.cli import main; sys.exit(main(sys.argv[1:]))"
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
