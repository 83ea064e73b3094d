"""Issue 30, items 5 to 7: every entry point works as documented, and a baseline says how
much it rests on.

5. ``.venv/bin/rackgate`` finds its own Ansible without the venv on PATH (the
   interpreter's bin directory is looked in first, and is on the PATH of the Ansible
   processes it starts), and the demo inventory brings the settings the Makefile exports.
6. The node's health check: the wrapper slurmd runs passes its arguments on as an argv,
   ``--help`` runs nothing, ``--no-slurm`` reads no SLURM, and the venv's ``rackgate
   healthcheck`` works without rich (the venv has PyYAML and rackgate only).
7. ``rackgate baseline`` refuses fewer golden nodes or runs than its minimums unless
   ``--allow-small``, pools several runs, shows each spread and warns of one wider than the
   band, says the checks it left out in one line; every report names the overrides files
   it was judged with.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml
from stored_runs import write_run
from test_baseline import report, seq_read, stored
from test_healthcheck_cli import FakeNode

import rackgate
from rackgate.baseline import baseline
from rackgate.cli.baseline import _summary
from rackgate.cli.main import main
from rackgate.collect.ansible import collect
from rackgate.commands.task import Task
from rackgate.overrides import load_profile_or_fail, profile_record
from rackgate.run import judge_run
from rackgate.store.evidence import EvidenceStore
from rackgate.store.manifest import new_run_dir

# The tree whose rackgate this process imported (PYTHONPATH may name another checkout's
# validators/): its role templates, README, Makefile and pyproject go with its code.
SRC = Path(rackgate.__file__).resolve().parents[1]
ROOT = SRC.parent if (SRC.parent / "pyproject.toml").is_file() \
    else Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv's bin: rackgate, ansible-inventory, ...
DEMO = ROOT / "inventory" / "demo"
BARE_PATH = "/usr/bin:/bin"  # a PATH without the venv
HEALTHCHECK_TEMPLATE = ROOT / "roles" / "slurm" / "templates" / "rackgate-healthcheck.sh.j2"
NODE_CONFIG = "/etc/rackgate/healthcheck.yaml"  # __slurm_healthcheck_config_path
# What a node's health-check venv lacks: rackgate's wheel installed with --no-deps, PyYAML.
NOT_IN_NODE_VENV = ("rich", "pydantic", "ansible", "ansible_runner", "jinja2", "redfish")


def bare_env(**extra: str) -> dict[str, str]:
    """This process's environment with a PATH that lacks the venv, none of the demo's
    settings, and the imported rackgate's tree on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANSIBLE_VAULT_IDENTITY_LIST", "CONTAINERS_CONF", "VIRTUAL_ENV")}
    return {**env, "PATH": BARE_PATH, "PYTHONPATH": str(SRC), **extra}


def compute_inventory(path: Path) -> Path:
    path.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": {
        "n1": {"ansible_connection": "local"}}}}}}))
    return path


# ---------------------------------------------------------------- 5: rackgate's own Ansible

def test_rackday_5_the_venvs_rackgate_finds_its_own_ansible_inventory(tmp_path: Path) -> None:
    """The README's `.venv/bin/rackgate ...` with a PATH that lacks the venv gets past the
    inventory (ansible-inventory is the venv's) to the group it was asked for."""
    script = BIN / "rackgate"
    if not script.is_file():
        pytest.skip(f"no rackgate console script in {BIN}: rackgate is not installed here")
    inv = compute_inventory(tmp_path / "hosts.yml")
    out = subprocess.run([str(script), "validate", "-i", str(inv), "--profile", "demo",
                          "--group", "nosuch", "--plan"], env=bare_env(), cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, check=False)
    said = out.stdout + out.stderr
    assert "not found" not in said, said
    assert out.returncode == 2, said
    assert "group 'nosuch'" in said, said


class _Result:
    status = "successful"

    class config:
        ident = "test"


@pytest.mark.parametrize("demo", [True, False], ids=["demo-inventory", "other-inventory"])
def test_rackday_5_collection_runs_the_ansible_playbook_beside_rackgate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demo: bool) -> None:
    """Without the venv on PATH, the collector still starts the venv's ansible-playbook,
    with the venv's bin on Ansible's PATH (after the caller's entries); the demo
    inventory's settings reach Ansible (podman's configuration, the vault identity),
    another inventory's do not."""
    import ansible_runner

    monkeypatch.setenv("PATH", BARE_PATH)
    for var in ("ANSIBLE_VAULT_IDENTITY_LIST", "CONTAINERS_CONF"):
        monkeypatch.delenv(var, raising=False)
    seen: dict[str, Any] = {}

    def run(**kwargs: Any) -> _Result:
        seen.update(kwargs, launcher=Path(kwargs["binary"]).read_text())
        return _Result()

    monkeypatch.setattr(ansible_runner, "run", run)
    inv = DEMO if demo else compute_inventory(tmp_path / "hosts.yml")
    store = EvidenceStore(new_run_dir(tmp_path / "runs", "t"))
    collect([Task("n1", "bmc.query", ("true",), 30, on_control=True, lock_file=None)],
            [str(inv)], store)
    assert seen, "ansible-playbook was not started"
    assert repr(str(BIN / "ansible-playbook")) in seen["launcher"]
    env = seen["envvars"]
    assert env["PATH"].split(os.pathsep) == [*BARE_PATH.split(os.pathsep), str(BIN)]
    settings = {k: env.get(k) for k in ("CONTAINERS_CONF", "ANSIBLE_VAULT_IDENTITY_LIST")}
    if demo:
        assert settings == {
            "CONTAINERS_CONF": str(ROOT / "molecule" / "containers.conf"),
            "ANSIBLE_VAULT_IDENTITY_LIST":
                f"demo@{ROOT / 'molecule' / 'demo-bmc' / 'vault-password.txt'}"}
    else:
        assert settings == {"CONTAINERS_CONF": None, "ANSIBLE_VAULT_IDENTITY_LIST": None}


def _makefile_exports() -> dict[str, str]:
    text = (ROOT / "Makefile").read_text()
    out = {}
    for name in ("CONTAINERS_CONF", "ANSIBLE_CONFIG", "ANSIBLE_VAULT_IDENTITY_LIST"):
        m = re.search(rf"^export {name} \??:?= (\S+)$", text, re.M)
        assert m, f"the Makefile exports no {name}"
        out[name] = m[1].replace("$(CURDIR)", "$PWD")
    return out


def test_rackday_5_the_readme_shows_the_makefiles_exports_for_direct_use() -> None:
    readme = (ROOT / "README.md").read_text()
    shown = dict(re.findall(r'^export (\w+)="([^"]+)"', readme, re.M))
    assert {k: shown.get(k) for k in _makefile_exports()} == _makefile_exports()
    assert shown.get("PATH") == "$PWD/.venv/bin:$PATH"


# ---------------------------------------------------------------- 6: the node's health check

def wrapper(tmp_path: Path, venv: Path) -> Path:
    """/usr/local/sbin/rackgate-healthcheck as the slurm role writes it, for ``venv``."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["quote"] = __import__("shlex").quote  # Ansible's quote filter
    text = env.from_string(HEALTHCHECK_TEMPLATE.read_text()).render(
        slurm_healthcheck_venv_dir=str(venv), __slurm_healthcheck_config_path=NODE_CONFIG)
    path = tmp_path / "rackgate-healthcheck"
    path.write_text(text)
    path.chmod(0o755)
    return path


def node_venv(tmp_path: Path, body: str) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    program = venv / "bin" / "rackgate-healthcheck"
    program.write_text(f"#!{sys.executable}\n{body}")
    program.chmod(0o755)
    return venv


def test_rackday_6_the_wrapper_passes_its_arguments_on_as_an_argv(tmp_path: Path) -> None:
    got = tmp_path / "argv.json"
    venv = node_venv(tmp_path, f"import json, sys\nopen({str(got)!r}, 'w').write("
                               "json.dumps(sys.argv[1:]))\n")
    program = wrapper(tmp_path, venv)
    spliced = tmp_path / "spliced"
    for args in (["--no-slurm"], ["--help"], [], ["--config", f"/x y;touch {spliced}"]):
        out = subprocess.run([str(program), *args], capture_output=True, text=True,
                             timeout=30, check=False)
        assert out.returncode == 0, out.stderr
        assert json.loads(got.read_text()) == ["--config", NODE_CONFIG, *args]
    assert not spliced.exists()


def healthcheck_stub(tmp_path: Path, tools: Path) -> Path:
    """A node venv whose rackgate-healthcheck is this tree's entry point, with the fake
    node's ``tools`` first on the PATH the wrapper sets."""
    return node_venv(tmp_path, f"import os, sys\nsys.path.insert(0, {str(SRC)!r})"
                               f"\nos.environ['PATH'] = {str(tools)!r} + ':' + "
                               "os.environ['PATH']\n"
                               "from rackgate.programs.healthcheck import main\n"
                               "sys.exit(main())\n")


def test_rackday_6_the_wrapper_with_no_slurm_or_help_reads_no_slurm(tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    program = wrapper(tmp_path, healthcheck_stub(tmp_path, node.bin))
    env = dict(os.environ)
    checked = subprocess.run([str(program), "--no-slurm", "--config", str(node.config),
                              "--root", str(node.root)], env=env, capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "rackgate healthcheck: gpu001: healthy" in checked.stdout, checked.stdout
    assert "SLURM" not in checked.stdout
    helped = subprocess.run([str(program), "--help"], env=env, capture_output=True, text=True,
                            timeout=60, check=False)
    assert helped.returncode == 0, helped.stderr
    assert "--no-slurm" in helped.stdout and "gpu001" not in helped.stdout
    assert node.calls("sinfo") == [] and node.calls("scontrol") == []


def _console_script(name: str) -> str:
    """``module:function`` of console script ``name`` as pyproject.toml declares it."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return str(scripts[name])


def node_venv_run(name: str, args: list[str], env: dict[str, str]
                  ) -> subprocess.CompletedProcess[str]:
    """Console script ``name`` with ``args``, as in a node's health-check venv: the
    modules that venv lacks cannot be imported."""
    module, function = _console_script(name).split(":")
    code = ("import importlib.abc, sys\n"
            "class Lacking(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] in {NOT_IN_NODE_VENV!r}:\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Lacking())\n"
            f"sys.argv = [{name!r}, *sys.argv[1:]]\n"
            f"from {module} import {function} as main\n"
            "sys.exit(main())\n")
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_rackday_6_the_venvs_rackgate_healthcheck_needs_nothing_the_venv_lacks(
        tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    env = {**os.environ, "PATH": f"{node.bin}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(SRC)}
    helped = node_venv_run("rackgate", ["healthcheck", "--help"], env)
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert helped.stdout.startswith("usage: rackgate healthcheck"), helped.stdout
    checked = node_venv_run("rackgate", ["healthcheck", "--no-slurm", "--config",
                                         str(node.config), "--root", str(node.root)], env)
    assert checked.returncode == 0, checked.stdout + checked.stderr[-2000:]
    assert "rackgate healthcheck: gpu001: healthy" in checked.stdout, checked.stdout
    assert node.calls("sinfo") == []
    other = node_venv_run("rackgate", ["list", "checks"], env)
    assert other.returncode == 2 and "Traceback" not in other.stderr, other.stderr[-2000:]
    assert len(other.stderr.splitlines()) == 1 and "rackgate healthcheck" in other.stderr


def test_rackday_6_help_names_the_options_and_exit_codes_and_checks_nothing(
        tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    env = {**os.environ, "PATH": f"{node.bin}{os.pathsep}{os.environ['PATH']}"}
    for name, args in (("rackgate-healthcheck", ["--help"]),
                       ("rackgate", ["healthcheck", "--help"])):
        out = node_venv_run(name, args, {**env, "PYTHONPATH": str(SRC)})
        assert out.returncode == 0, out.stderr[-2000:]
        assert ":func:" not in out.stdout and "``" not in out.stdout, out.stdout
        assert "--no-slurm" in out.stdout and "exit codes:" in out.stdout.lower(), out.stdout
        assert "0  healthy" in out.stdout and "2  could not run" in out.stdout
    assert node.calls("sinfo") == [] and node.calls("nvidia-smi") == []


def test_rackday_6_control_no_slurm_and_help_never_read_slurm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The entry point's own argument handling (a control: it held on main too)."""
    from rackgate.programs import healthcheck as cli_healthcheck

    def no(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("SLURM was read")

    monkeypatch.setattr(cli_healthcheck, "slurm_state", no)
    node = FakeNode(tmp_path)
    monkeypatch.setenv("PATH", f"{node.bin}{os.pathsep}{os.environ['PATH']}")
    code = cli_healthcheck.main(["--no-slurm", "--config", str(node.config), "--root",
                                 str(node.root)])
    assert code == 0 and "gpu001: healthy" in capsys.readouterr().out
    monkeypatch.setattr(cli_healthcheck, "run_items", no)
    with pytest.raises(SystemExit) as exc:
        cli_healthcheck.main(["--help"])
    assert exc.value.code == 0 and "--no-slurm" in capsys.readouterr().out


# ---------------------------------------------------------------- 7: baselines, overrides

RUN2 = "20261202T041500Z-demo"


def two_runs(tmp_path: Path, fixture_text: Any, factors: dict[str, float],
             second: dict[str, float] | None = None) -> tuple[Path, Path]:
    """Two judged runs of fio.seq_read on the nodes of ``factors`` (the second with
    ``second``'s factors, default the same)."""
    first = stored(tmp_path, fixture_text, factors)
    again = stored(tmp_path / "b", fixture_text, second or factors)
    moved = again.with_name(RUN2)
    again.rename(moved)
    manifest = json.loads((moved / "manifest.json").read_text())
    manifest |= {"run_id": RUN2, "run_dir": str(moved.resolve())}
    (moved / "manifest.json").write_text(json.dumps(manifest))
    judge_run(moved)
    return first, moved


def test_rackday_7_a_baseline_below_the_minimums_is_refused_unless_allowed(
        tmp_path: Path, fixture_text: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Two nodes, one run: refused, naming what it lacks; --allow-small writes it with a
    warning, and every threshold's basis says so."""
    run = stored(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.6})
    out = tmp_path / "overrides.yaml"
    assert main(["baseline", str(run), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert not out.exists()
    assert err.startswith("rackgate baseline: a baseline of 2 golden nodes (the minimum is "
                          "3) and 1 run (the minimum is 2) rests on too little"), err
    assert "--allow-small" in err and len(err.splitlines()) == 1
    assert main(["baseline", str(run), "-o", str(out), "--allow-small"]) == 0
    err = capsys.readouterr().err
    assert "rackgate baseline: warning: Made with --allow-small from 2 golden nodes" in err
    basis = yaml.safe_load(out.read_text())["checks"]["fio.seq_read"]["thresholds"][
        "read_bw"]["basis"]
    assert " ".join(basis.split()).endswith(
        "Made with --allow-small from 2 golden nodes (the minimum is 3) and 1 run (the "
        "minimum is 2): a reference that rests on little; weigh a failure against it with "
        "that in mind")


def test_rackday_7_runs_are_pooled_and_each_spread_is_shown(
        tmp_path: Path, fixture_text: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Three nodes in two runs meet the minimums: the reference is the median of the six
    figures, the basis names both runs, the summary gives the spread, no warning."""
    first, second = two_runs(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.98, "n3": 0.97},
                             {"n1": 0.99, "n2": 0.97, "n3": 0.96})
    out = tmp_path / "overrides.yaml"
    assert main(["baseline", str(first), str(second), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err, err
    read_bw = yaml.safe_load(out.read_text())["checks"]["fio.seq_read"]["thresholds"][
        "read_bw"]
    assert read_bw["ref"] == pytest.approx(1209 * 0.975, abs=0.1)
    basis = " ".join(read_bw["basis"].split())
    assert basis.startswith("site baseline from runs 20261202T031500Z-demo (nodes n1, n2, "
                            f"n3; collected t1) and {RUN2} (nodes n1, n2, n3; collected t1): "
                            "median of 6 figures of 3 nodes in 2 runs"), basis
    assert re.search(r"fio\.seq_read read_bw: ref [\d,.]+ MB/s, the median of 6 figures "
                     r"\(3 nodes, 2 runs\); pass at >= [\d,.]+ MB/s; spread 4\.\d+%\n", err), err


def test_rackday_7_a_spread_wider_than_the_band_is_warned(
        tmp_path: Path, fixture_text: Any, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = two_runs(tmp_path, fixture_text, {"n1": 1.0, "n2": 0.7, "n3": 0.95})
    out = tmp_path / "overrides.yaml"
    assert main(["baseline", str(first), str(second), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    warning = ("rackgate baseline: warning: fio.seq_read read_bw: the golden figures spread "
               "31.58% of their median (846.3 to 1,209 MB/s), more than the 10% band")
    assert warning in err, err
    assert err.rstrip("\n").splitlines()[-1].startswith(warning), err  # last, where it is seen
    header = " ".join(line[2:] for line in out.read_text().splitlines()
                      if line.startswith("# "))
    assert "Note: fio.seq_read read_bw: the golden figures spread 31.58%" in " ".join(
        header.split()), out.read_text()


def test_rackday_7_the_checks_left_out_are_one_line(tmp_path: Path, fixture_text: Any) -> None:
    doc = report(stored(tmp_path, fixture_text, {"n1": 1.0}))
    doc["nodes"][0]["results"] += [
        {"check": "cooling.cdu", "status": "pass", "measured": 32.0, "unit": "C"},
        {"check": "rack.peer_comparison", "status": "pass", "measured": None, "unit": ""},
        {"check": "nccl.all_reduce", "status": "skip", "measured": None, "unit": "",
         "message": "the profile expects no GPU"}]
    said = _summary(baseline(doc)).splitlines()
    left = [line for line in said if "not baselined" in line]
    assert left == ["  not baselined (3 check(s), the profile's thresholds stay; why: the "
                    "file's header): cooling.cdu, rack.peer_comparison, nccl.all_reduce"], said


def overrides_file(tmp_path: Path) -> tuple[Path, str]:
    """An overrides file that changes no threshold (the demo's own fio timeout)."""
    path = tmp_path / "site-overrides.yaml"
    path.write_text("checks:\n  fio.seq_read:\n    params:\n      timeout_s: 120\n")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def assert_named(out_dir: Path, path: Path, sha: str) -> None:
    """Every report in ``out_dir`` names overrides file ``path`` with its sha256."""
    doc = json.loads((out_dir / "report.json").read_text())
    assert doc["profile"]["overrides"] == [{"path": str(path), "sha256": sha}]
    named = f"judged with overrides {path} (sha256 {sha[:12]})"
    assert named in (out_dir / "summary.md").read_text()
    html = (out_dir / "report.html").read_text()
    assert re.search(rf'id="overrides-used">{re.escape(named)}<', html), html[:3000]
    props = {p.get("name"): p.get("value")
             for p in ET.parse(out_dir / "report.xml").getroot().iter("property")}
    assert props.get("overrides_file") == f"{path} (sha256 {sha[:12]})"


def test_rackday_7_every_report_names_the_overrides_files_it_was_judged_with(
        tmp_path: Path, fixture_text: Any) -> None:
    """judge --overrides, and a run validate recorded with --overrides judged again: the
    JSON, summary.md, HTML and JUnit reports name the file, even one that changed no
    threshold; the report still verifies."""
    path, sha = overrides_file(tmp_path)
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    assert report(run)["profile"]["overrides"] == []  # judged with the profile alone
    assert "none: the profile alone" in (run / "report.html").read_text()
    judge_run(run, out_dir=tmp_path / "judged", overrides_files=[path])
    assert_named(tmp_path / "judged", path, sha)

    profile = load_profile_or_fail("demo", [path])  # what validate --overrides runs with
    recorded = write_run(tmp_path / "recorded" / "r1", profile, ["fio.seq_read"], ["n1"],
                         evidence={("n1", "fio.seq_read"): seq_read(fixture_text, 1.0)},
                         argv=("fio",))
    manifest = json.loads((recorded / "manifest.json").read_text())
    manifest["profile"] = profile_record(profile)  # as validate records it
    (recorded / "manifest.json").write_text(json.dumps(manifest))
    judge_run(recorded)
    assert_named(recorded, path, sha)
    assert main(["verify", str(recorded / "report.json")]) == 0


def test_rackday_7_control_a_report_without_overrides_names_none(tmp_path: Path,
                                                        fixture_text: Any) -> None:
    """The control: a report judged with the profile alone names no file, and verifies."""
    run = stored(tmp_path, fixture_text, {"n1": 1.0})
    assert "judged with overrides" not in (run / "summary.md").read_text()
    assert "overrides_file" not in (run / "report.xml").read_text()
    assert main(["verify", str(run / "report.json")]) == 0
