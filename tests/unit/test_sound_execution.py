"""Issue 11 (sound verdicts), execution safety: secrets, templating, interrupts and locks.
One test per finding, named test_sound_<finding>_<what>; each failed on the code before
the fix (the closing note of issue 11 lists how) and passes now.

Everything here is real: ansible-runner and ansible-playbook collecting from inventory
hosts with ``ansible_connection: local`` (a tmp inventory), Debian's ipmi_sim queried by the
real ipmitool, the real Redfish collector against the project's mockup tree
(tests/fixtures/redfish/healthy) served over loopback HTTP, the real CLI in a subprocess
receiving real signals. Nothing is mocked; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import demo_profile_file, ipmi_sim
from rackgate.checks import load_profile
from rackgate.collect.ansible import collect
from rackgate.commands.task import Task
from rackgate.demo.bmc import redfish_handler
from rackgate.refusal import Refusal
from rackgate.run import resume, validate
from rackgate.store.evidence import EvidenceStore
from rackgate.store.manifest import new_run_dir

ROOT = Path(__file__).resolve().parents[2]
MOCKUP = ROOT / "tests" / "fixtures" / "redfish" / "healthy"
IPMI_FILES = ROOT / "molecule" / "demo-bmc" / "ipmi_sim"
BIN = str(Path(sys.executable).parent)
USER = "admin"
# Unique, so that any occurrence anywhere is this test's password (ipmi_sim: <= 20 chars).
PASSWORD = "Rg11-h3-zQ7v-pw8K"


@pytest.fixture(autouse=True)
def _ansible_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """ansible-playbook and ansible-inventory from this interpreter's environment."""
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(ROOT / "ansible.cfg"))


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "COLUMNS": "200",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "validators"),
                                                        os.environ.get("PYTHONPATH")]))}


def inventory(path: Path, hosts: dict[str, dict[str, Any]]) -> Path:
    """An inventory of local hosts in group compute (the collector runs their commands on
    this machine), each with its node lock under ``path``'s directory."""
    for vars_ in hosts.values():
        if "rackgate_bmc_url" in vars_:  # the Redfish mockup's chassis has six supplies
            vars_.setdefault("rackgate_profile_overrides_mockup",
                             {"hardware": {"psu": {"count": 6}}})
        vars_.setdefault("ansible_connection", "local")
        vars_.setdefault("ansible_python_interpreter", sys.executable)
        vars_.setdefault("rackgate_node_lock_file", str(path.parent / "node.lock"))
    path.write_text(yaml.safe_dump({"all": {"children": {"compute": {"hosts": hosts}}}}))
    return path


def profile_file(path: Path, checks: list[str]) -> Path:
    return demo_profile_file(path, checks, "h3-test")


class Redfish:
    """The Redfish mockup over loopback HTTP; ``hang`` makes every GET wait until
    ``release`` (at most 20 s): a BMC that stopped answering."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.hang = threading.Event()
        self.release = threading.Event()
        base = redfish_handler(MOCKUP, USER, PASSWORD)
        outer = self

        class Handler(base):  # type: ignore[misc,valid-type]
            def do_GET(self) -> None:
                if outer.hang.is_set():
                    outer.release.wait(20)
                super().do_GET()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

        def stop() -> None:
            self.release.set()
            self.server.shutdown()
            self.server.server_close()
            thread.join(timeout=5)

        request.addfinalizer(stop)


@pytest.fixture
def redfish(request: pytest.FixtureRequest) -> Redfish:
    return Redfish(request)


@pytest.fixture
def ipmi_port(tmp_path: Path) -> Iterator[int]:
    """ipmi_sim on loopback with the project's files, its admin password set to PASSWORD."""
    for tool in ("ipmi_sim", "sdrcomp", "ipmitool"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: apt-get install -y openipmi ipmitool",
                        pytrace=False)
    files = tmp_path / "ipmi_files"
    shutil.copytree(IPMI_FILES, files)
    conf = (files / "lan.conf").read_text()
    assert '"admin" "password"' in conf
    (files / "lan.conf").write_text(conf.replace('"admin" "password"', f'"admin" "{PASSWORD}"'))
    with ipmi_sim(tmp_path / "ipmi", files) as (lan, _console):
        yield lan


def processes() -> dict[int, tuple[str, bytes]]:
    """pid -> (command line joined by spaces, environment) of every readable process."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmd = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        try:
            env = Path(entry.path, "environ").read_bytes()
        except OSError:
            env = b""
        out[int(entry.name)] = (cmd, env)
    return out


def marked(marker: str) -> dict[int, str]:
    """pid -> command line of every live process whose command line names ``marker``."""
    return {pid: cmd for pid, (cmd, _) in processes().items()
            if marker in cmd and pid != os.getpid()}


def kill_marked(marker: str) -> None:
    """Test clean-up only (so a failing run leaves nothing behind)."""
    for pid in marked(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def wait_for(what: Callable[[], Any], timeout_s: float, step_s: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(step_s)
    return what()


# ---------------------------------------------------------------- 7: secrets


class Sampler(threading.Thread):
    """Samples every process' command line and environment (and the files ansible-runner
    writes under its private directories) while the run goes on; records each sighting of
    the password, and which BMC tools it saw running (so the sampling is known to have
    covered the queries)."""

    def __init__(self, secret: str, tools: tuple[str, ...]) -> None:
        super().__init__(daemon=True)
        self.secret = secret.encode()
        self.tools = tools
        self.seen: set[str] = set()
        self.leaks: list[str] = []
        self.samples = 0
        self.done = threading.Event()

    def run(self) -> None:
        tmp = Path(os.environ.get("TMPDIR", "/tmp"))
        while not self.done.is_set():
            for pid, (cmd, env) in processes().items():
                if pid == os.getpid():
                    continue
                if self.secret.decode() in cmd:
                    self.leaks.append(f"argv of pid {pid}: {cmd[:300]}")
                if self.secret in env:
                    self.leaks.append(f"environment of pid {pid}: {cmd[:200]}")
                self.seen |= {t for t in self.tools if t in cmd}
            if self.samples % 20 == 0:  # ansible-runner's artifacts (not the secret files)
                for f in tmp.glob("rackgate-runner-*/artifacts/**/*"):
                    with contextlib.suppress(OSError):
                        if f.is_file() and self.secret in f.read_bytes():
                            self.leaks.append(f"file {f}")
            self.samples += 1


def test_sound_7_bmc_password_never_in_ps_environment_evidence_or_reports(
        tmp_path: Path, ipmi_port: int, redfish: Redfish) -> None:
    """A validate of the BMC checks against the real ipmi_sim and Redfish services on
    loopback: the password reaches both tools (their checks pass), yet no sample of any
    process' argv or environment, no ansible-runner artifact, no evidence, report, manifest
    or history holds it, and its private file is gone afterwards."""
    inv = inventory(tmp_path / "inv.yml", {
        "bmc-ipmi": {"rackgate_bmc_host": "127.0.0.1", "rackgate_bmc_port": ipmi_port,
                     "rackgate_bmc_user": USER, "rackgate_bmc_password": PASSWORD,
                     "rackgate_cdu_url": redfish.url,
                     "rackgate_profile_overrides": {"checks": {
                         "redundancy.psu_redfish": {"enabled": False}}}},
        "bmc-redfish": {"rackgate_bmc_url": redfish.url, "rackgate_cdu_url": redfish.url,
                        "rackgate_bmc_user": USER, "rackgate_bmc_password": PASSWORD,
                        "rackgate_profile_overrides": {"checks": {
                            "redundancy.psu_ipmi": {"enabled": False}}}},
    })
    prof = load_profile(str(profile_file(tmp_path / "bmc.yaml", [
        "redundancy.psu_ipmi", "redundancy.psu_redfish", "cooling.cdu"])))
    sampler = Sampler(PASSWORD, ("ipmitool", "rackgate.programs.redfish"))
    sampler.start()
    try:
        outcome = validate([str(inv)], prof, runs_dir=tmp_path / "runs")
    finally:
        sampler.done.set()
        sampler.join(timeout=30)
    statuses = {(r.node, r.check): r.status.label for n in outcome.rack.nodes
                for r in n.results}
    assert statuses[("bmc-ipmi", "redundancy.psu_ipmi")] == "pass", statuses
    assert statuses[("bmc-redfish", "redundancy.psu_redfish")] == "pass", statuses
    assert statuses[("bmc-ipmi", "cooling.cdu")] == "pass", statuses
    assert sampler.seen == {"ipmitool", "rackgate.programs.redfish"}, sampler.seen
    assert sampler.samples > 20
    assert not sampler.leaks, f"{len(sampler.leaks)} sightings:\n" + "\n".join(
        sorted(set(sampler.leaks))[:10])
    for f in (tmp_path / "runs").rglob("*"):
        assert not f.is_file() or PASSWORD.encode() not in f.read_bytes(), f
    ipmi = json.loads((outcome.run_dir / "evidence/bmc-ipmi/redundancy.psu_ipmi.json")
                      .read_text())
    assert "-E" not in ipmi["argv"]
    secret_file = Path(ipmi["argv"][ipmi["argv"].index("-f") + 1])
    assert not secret_file.exists() and not secret_file.parent.exists(), secret_file


def test_sound_7_credential_files_of_a_killed_collection_are_removed_by_the_next(
        tmp_path: Path) -> None:
    """A collection killed before its clean-up leaves its private directory, credential
    file included (0600, in a 0700 directory); the next collection on this host removes
    it, and never one whose rackgate still runs."""
    import tempfile

    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = Path(tempfile.mkdtemp(prefix="rackgate-runner-"))
    (stale / "secrets").mkdir(mode=0o700)
    (stale / "secrets" / "0.secret").write_text(PASSWORD)
    (stale / "owner.json").write_text(json.dumps({"pid": gone.pid, "start": 1,
                                                   "boot_id": "?"}))
    alive = Path(tempfile.mkdtemp(prefix="rackgate-runner-"))
    mine = Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(") ", 1)[1].split()[19]
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    (alive / "owner.json").write_text(json.dumps({"pid": os.getpid(), "start": int(mine),
                                                  "boot_id": boot}))
    try:
        inv = inventory(tmp_path / "inv.yml", {"n1": {}})
        store = EvidenceStore(new_run_dir(tmp_path / "runs", "t"))
        collect([Task("n1", "x.true", ("true",), 30)], [str(inv)], store)
        assert not stale.exists(), "a killed collection's credential file outlived it"
        assert alive.exists(), "removed the private directory of a running rackgate"
    finally:
        shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(alive, ignore_errors=True)


# ---------------------------------------------------------------- 8: data never executes


def test_sound_8_argv_is_never_templated_and_evidence_records_what_ran(tmp_path: Path) -> None:
    """A check argv holding Jinja (a lookup that would create a file, a {% %} block) goes
    through a real ansible-runner collection: nothing is created, echo prints the braces
    literally, and the evidence argv ends with exactly that argv."""
    pwned = tmp_path / "pwned"
    argv = ("echo", f"{{{{ lookup('pipe', 'touch {pwned}') }}}}",
            "{% for x in [1, 2] %}{{ x }}{% endfor %}", "{{ inventory_hostname }}")
    inv = inventory(tmp_path / "inv.yml", {"n1": {}})
    run_dir = new_run_dir(tmp_path / "runs", "t")
    store = EvidenceStore(run_dir)
    status = collect([Task("n1", "x.echo", argv, 30)], [str(inv)], store)
    ev, stdout = store.read("n1", "x.echo")
    assert not pwned.exists(), "the profile value ran on the control host"
    assert (status, ev.outcome, ev.rc) == ("successful", "completed", 0), ev.message
    assert stdout == " ".join(argv[1:])
    assert ev.argv[-len(argv):] == argv


# ---------------------------------------------------------------- 11: interrupts


def _cli(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "rackgate.cli.main", *args], cwd=ROOT,
                            env=_env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


def test_sound_11_sigterm_stops_launching_ends_children_and_exits_2(
        tmp_path: Path, redfish: Redfish) -> None:
    """SIGTERM while a BMC query hangs: rackgate ends its ansible-playbook and the query,
    launches nothing more (the multi-node job never starts), keeps what it has, exits 2
    with a plain message naming the run to resume; no process of the run is left."""
    redfish.hang.set()
    inv = inventory(tmp_path / "inv-sigterm.yml", {
        name: {"rackgate_bmc_url": redfish.url, "rackgate_bmc_user": USER,
               "rackgate_bmc_password": PASSWORD, "rackgate_launch_host": "n1"}
        for name in ("n1", "n2")})
    prof = profile_file(tmp_path / "p.yaml", ["redundancy.psu_redfish", "mpi.allreduce"])
    runs = tmp_path / "runs"
    # --no-plan: the plan would refuse first (no srun on this machine for mpi.allreduce)
    proc = _cli("validate", "-i", str(inv), "--profile", str(prof), "--runs-dir", str(runs),
                "--no-plan")
    try:
        queries = wait_for(lambda: {p for p, c in marked(redfish.url).items()
                                    if "rackgate.programs.redfish" in c}, 60)
        assert queries, "the BMC queries never started"
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - started
        left = wait_for(lambda: not marked(str(inv)) and not marked(redfish.url), 5)
        survivors = {**marked(str(inv)), **marked(redfish.url)}
    finally:
        if proc.poll() is None:
            proc.kill()
        kill_marked(str(inv))
        kill_marked(redfish.url)
    assert proc.returncode == 2, (proc.returncode, out[-2000:], err[-2000:])
    assert "interrupted by SIGTERM" in err and "--resume" in err, err
    assert "\x1b" not in out + err, "raw terminal escapes in the messages"
    assert took < 45, took
    assert left, f"left running after rackgate exited: {survivors}"
    (run_dir,) = runs.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["finished"] is None and manifest["interrupted"][0]["by"] == "SIGTERM"
    assert not (run_dir / "report.json").exists()
    assert not list(run_dir.glob("evidence/*/mpi.allreduce.json")), "launched after SIGTERM"


def test_sound_11_resume_ends_what_a_killed_run_left_before_collecting(
        tmp_path: Path, redfish: Redfish) -> None:
    """SIGKILL of rackgate (its whole process group) while a BMC query hangs leaves
    ansible-playbook's processes behind (their own sessions). --resume ends them before it
    collects: no process of the killed attempt is alive once the new query runs, and none
    is left at the end; the resumed run accepts."""
    redfish.hang.set()
    inv = inventory(tmp_path / "inv-killed.yml", {
        "n1": {"rackgate_bmc_url": redfish.url, "rackgate_bmc_user": USER,
               "rackgate_bmc_password": PASSWORD}})
    prof = profile_file(tmp_path / "p.yaml", ["redundancy.psu_redfish"])
    runs = tmp_path / "runs"
    proc = _cli("validate", "-i", str(inv), "--profile", str(prof), "--runs-dir", str(runs),
                start_new_session=True)
    try:
        assert wait_for(lambda: any("rackgate.programs.redfish" in c
                                    for c in marked(redfish.url).values()), 60), \
            "the BMC query never started"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        time.sleep(0.5)
        orphans = {**marked(str(inv)), **marked(redfish.url)}
        assert orphans, "nothing outlived the SIGKILL: this test would prove nothing"
        files = [Path(m.group(1)) for c in orphans.values()
                 if (m := re.search(r"--password-file (\S+)", c))]
        redfish.hang.clear()  # the BMC answers again; the orphan's request still hangs
        (run_dir,) = runs.iterdir()
        overlap: list[str] = []
        done = threading.Event()

        def watch() -> None:  # an orphan still alive while the new query runs?
            while not done.is_set():
                now = {**marked(str(inv)), **marked(redfish.url)}
                fresh = [p for p, c in now.items() if p not in orphans and
                         "rackgate.programs.redfish" in c]
                if fresh and set(now) & set(orphans):
                    overlap.append(f"orphans {sorted(set(now) & set(orphans))} beside the "
                                   f"new query {fresh}")
                time.sleep(0.02)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        resumed = _cli("validate", "--resume", str(run_dir))
        out, err = resumed.communicate(timeout=120)
        done.set()
        watcher.join(timeout=10)
        left = {**marked(str(inv)), **marked(redfish.url)}
    finally:
        redfish.release.set()
        kill_marked(str(inv))
        kill_marked(redfish.url)
    assert resumed.returncode == 0, out[-3000:] + err[-2000:]
    assert not overlap, overlap[:3]
    assert not left, f"still running after the resume: {left}"
    assert files and not [f for f in files if f.exists()], \
        f"the killed attempt's password file is left: {files}"


def test_sound_11_node_lock_ends_a_holder_of_the_same_run_only(tmp_path: Path) -> None:
    """On a node, a command left running by a killed attempt of this run holds the node
    lock; the next command of the same run (same token) ends it and runs, while a command
    of another run waits (bounded) and gives up naming the holder."""
    from rackgate.commands.task import LOCK_BUSY_RC, wrapped

    lock = str(tmp_path / "node.lock")
    left = Task("n1", "x.sleep", ("sleep", "60"), 120, lock_file=lock)
    holder = subprocess.Popen(wrapped(left, "tok-a", "rackgate run A"), start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: "token tok-a" in Path(lock).read_text(errors="replace")
                        if Path(lock).exists() else False, 10)
        other = subprocess.run(wrapped(Task("n1", "y", ("true",), 10, lock_file=lock,
                                            lock_wait_s=1), "tok-b", "rackgate run B"),
                               capture_output=True, text=True, timeout=30)
        assert other.returncode == LOCK_BUSY_RC, other
        assert "held by" in other.stderr and "rackgate run A" in other.stderr, other.stderr
        assert holder.poll() is None, "another run's command was ended"
        same = subprocess.run(wrapped(Task("n1", "z", ("echo", "ran"), 10, lock_file=lock,
                                           lock_wait_s=20), "tok-a", "rackgate run A"),
                              capture_output=True, text=True, timeout=60)
        assert same.returncode == 0 and same.stdout == "ran\n", same
        assert "earlier attempt of this run" in same.stderr, same.stderr
        assert holder.wait(timeout=10) is not None
    finally:
        with contextlib.suppress(OSError):
            os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)


# ---------------------------------------------------------------- 12: locks


def test_sound_12_simultaneous_run_directories_are_distinct(tmp_path: Path) -> None:
    """16 runs started at once (threads released together), 20 times: every one gets its
    own, new run directory."""

    def trial(runs: Path) -> tuple[list[Path], list[BaseException]]:
        barrier = threading.Barrier(16)
        made: list[Path] = []
        errors: list[BaseException] = []

        def start() -> None:
            barrier.wait()
            try:
                made.append(new_run_dir(runs, "demo"))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=start) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        return made, errors

    for n in range(20):
        made, errors = trial(tmp_path / f"runs{n}")
        assert not errors, f"trial {n}: {errors[:3]}"
        assert len(set(made)) == 16 and all((d / "evidence").is_dir() for d in made)


STAMP = ("sh", "-c", 'echo "$1 start $(date +%s.%N)" >>"$2"; sleep 1; '
                     'echo "$1 end $(date +%s.%N)" >>"$2"', "stamp")


def test_sound_12_two_collections_on_one_node_never_overlap(tmp_path: Path) -> None:
    """Two runs collect on the same node at the same time, through ansible-runner: their
    commands (each records its start and end) run one after the other, never together."""
    log = tmp_path / "stamps.log"
    inv = inventory(tmp_path / "inv.yml", {"n1": {}})
    outcomes: dict[str, str] = {}

    # The collector locks every node command by default; here on a lock of this test's own
    # (the code before the fix had no lock at all, nor this field).
    own_lock = {"lock_file": str(tmp_path / "node.lock")} \
        if "lock_file" in Task.__dataclass_fields__ else {}

    def run(name: str) -> None:
        store = EvidenceStore(new_run_dir(tmp_path / "runs", name))
        tasks = [Task("n1", f"x.{i}", (*STAMP, f"{name}{i}", str(log)), 60, **own_lock)
                 for i in (1, 2)]
        outcomes[name] = collect(tasks, [str(inv)], store)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert outcomes == {"a": "successful", "b": "successful"}, outcomes
    spans: dict[str, list[float]] = {}
    for line in log.read_text().splitlines():
        who, _, at = line.split()
        spans.setdefault(who, []).append(float(at))
    assert len(spans) == 4 and all(len(s) == 2 for s in spans.values()), spans
    ordered = sorted(spans.values())
    for (_, end), (start, _) in itertools.pairwise(ordered):
        assert start >= end, f"commands of two runs overlapped on n1: {spans}"


def test_sound_12_busy_node_is_refused_naming_the_holder(tmp_path: Path) -> None:
    """A node whose lock another run holds past the wait: the command is not run, and
    the evidence says who holds the node."""
    from rackgate.commands.task import wrapped

    lock = str(tmp_path / "node.lock")
    holder = subprocess.Popen(wrapped(Task("n1", "x", ("sleep", "30"), 60, lock_file=lock),
                                      "tok-other", "rackgate run OTHER-RUN"),
                              start_new_session=True)
    try:
        assert wait_for(lambda: Path(lock).exists() and "OTHER-RUN" in Path(lock).read_text(),
                        10)
        inv = inventory(tmp_path / "inv.yml", {"n1": {}})
        store = EvidenceStore(new_run_dir(tmp_path / "runs", "t"))
        collect([Task("n1", "x.fio", ("echo", "measured"), 30, lock_file=lock,
                      lock_wait_s=1)], [str(inv)], store)
        ev, stdout = store.read("n1", "x.fio")
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    assert ev.outcome == "not_run" and stdout == "", ev
    assert re.search(r"node lock .* is held by .*rackgate run OTHER-RUN", ev.message), ev.message


def test_sound_12_run_directory_in_use_is_refused(tmp_path: Path, redfish: Redfish) -> None:
    """While another process holds a run directory's lock (RUN_DIR/.lock, as a collecting
    rackgate does), ``--resume`` of it refuses, saying the directory is in use, and
    collects nothing."""
    inv = inventory(tmp_path / "inv.yml", {
        "n1": {"rackgate_bmc_url": redfish.url, "rackgate_bmc_user": USER,
               "rackgate_bmc_password": PASSWORD}})
    prof = load_profile(str(profile_file(tmp_path / "p.yaml", ["redundancy.psu_redfish"])))
    run_dir = new_run_dir(tmp_path / "runs", prof.name)
    (run_dir / "manifest.json").write_text(json.dumps({
        "schema": "rackgate.manifest/1", "run_id": run_dir.name, "started": "t0",
        "finished": None, "resumed": [], "inventory": [str(inv)], "group": "compute",
        "limit": None, "checks": ["redundancy.psu_redfish"],
        "profile": {"name": prof.name, "source": prof.source, "sha256": prof.sha256,
                    "document": dict(prof.raw)},
        "run_dir": str(run_dir), "hosts": [{"name": "n1", "location": "",
                                            "profile_overrides": None}],
        "launch_host": None, "rackgate_version": "0.1.0", "ansible_core_version": "2.19"}))
    holder = subprocess.Popen(["flock", str(run_dir / ".lock"), "sleep", "30"],
                              start_new_session=True)
    try:
        assert wait_for(lambda: "flock" in " ".join(marked(str(run_dir)).values()), 10)
        time.sleep(0.2)
        with pytest.raises(Refusal, match="in use"):
            resume(run_dir)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
    assert not list(run_dir.glob("evidence/*/*")), "collected into a run directory in use"
