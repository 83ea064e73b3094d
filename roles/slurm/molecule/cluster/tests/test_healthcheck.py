"""Verify the health check on the `cluster` scenario (HealthCheckInterval=5 s, molecule.yml):
slurmd runs /usr/local/sbin/rackgate-healthcheck, which drains a node whose required unit
is down and resumes it once the unit is back, and never touches an operator's drain.

What is verified:
  * slurm.conf names the program, its interval and IDLE; each compute node has the wrapper,
    the venv's rackgate and /etc/rackgate/healthcheck.yaml, which the program accepts;
  * run by hand, the check passes on both nodes (units active, /tmp a tmpfs, slurmd's memlock
    limit at least the scenario's floor, the GPU items skipped: gpus 0) and writes its
    metrics on rg-slurm-c1 (which has node_exporter's textfile directory), and says it
    wrote none on rg-slurm-c2 (which has not);
  * the node's entry points agree (issue 30): the wrapper passes its arguments on as an
    argv (a --config holding a space and a ';' arrives as one argument and runs nothing),
    `--help` prints the options and exit codes and checks nothing, `--no-slurm` checks
    without reading SLURM; the venv's `rackgate healthcheck` (a venv without rich) is the
    same program, and its other subcommands say in one line what the venv lacks;
  * stopping the required unit rackgate-hc-dummy.service on rg-slurm-c2 drains it with a
    reason starting "rackgate/healthcheck: systemd_units" within WAIT_S, the reason recorded
    in /var/lib/rackgate-healthcheck/drain-reason; starting it again resumes the node (idle)
    within WAIT_S and removes the record;
  * rg-slurm-c1 drained by an operator ("operator: test") stays drained with that reason for
    three intervals while the check fails there, and after the unit is back as well.

What a container cannot show: GPUs (nvidia-smi, ECC, XID), InfiniBand ports (no
/sys/class/infiniband) and unmounting a required mount (no CAP_SYS_ADMIN): the unit tests
(tests/unit/test_healthcheck*.py) cover those items over fixtures.
Every wait is bounded (WAIT_S) and fails with the states it last saw.
"""

import os
import time

import pytest
import testinfra
from testinfra.utils.ansible_runner import AnsibleRunner

INVENTORY = AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
CTL = INVENTORY.get_hosts("slurm_controller")[0]
COMPUTES = INVENTORY.get_hosts("slurm_compute")
testinfra_hosts = [f"podman://{CTL}"]

INTERVAL_S = 5  # slurm_healthcheck_interval in molecule.yml
# slurmctld triggers the checks once per interval; the check itself takes about a second,
# and slurmctld's background loop may start it a few seconds late.
WAIT_S = 3 * INTERVAL_S + 20
PREFIX = "rackgate/healthcheck: "  # the marker of the health check's drain reasons
SAYS = "rackgate healthcheck: "  # how the program starts its lines on stdout
RECORD = "/var/lib/rackgate-healthcheck/drain-reason"
UNIT = "rackgate-hc-dummy.service"
PROGRAM = "/usr/local/sbin/rackgate-healthcheck"
VENV = "/opt/rackgate-healthcheck"  # slurm_healthcheck_venv_dir
TEXTFILE = "/var/lib/prometheus/node-exporter/rackgate-healthcheck.prom"


def on(name):
    return testinfra.get_host(f"podman://{name}")


def state_of(node):
    """(state, reason) of ``node`` as sinfo prints them (one line per partition: the same)."""
    out = on(CTL).run("sinfo --noheader --Node --nodes=%s --format='%%T|%%E'", node)
    assert out.rc == 0, f"sinfo on {CTL}: rc={out.rc} {out.stderr}"
    line = out.stdout.splitlines()[0] if out.stdout.strip() else "|"
    state, _, reason = line.partition("|")
    return state, reason


def wait_for(node, wanted, what):
    """Poll sinfo every second, at most WAIT_S, until wanted(state, reason); the last seen."""
    deadline = time.monotonic() + WAIT_S
    while True:
        seen = state_of(node)
        if wanted(*seen):
            return seen
        if time.monotonic() > deadline:
            log = on(node).run("journalctl -u slurmd -n 20 --no-pager")
            pytest.fail(f"{node}: waited {WAIT_S} s for {what}; sinfo last showed {seen}\n"
                        f"--- journalctl -u slurmd on {node} ---\n{log.stdout}", pytrace=False)
        time.sleep(1)


def test_slurm_conf_names_the_health_check():
    conf = on(CTL).file("/etc/slurm/slurm.conf").content_string.splitlines()
    assert f"HealthCheckProgram={PROGRAM}" in conf
    assert f"HealthCheckInterval={INTERVAL_S}" in conf
    assert "HealthCheckNodeState=IDLE" in conf


@pytest.mark.parametrize("node", COMPUTES)
def test_program_installed_and_passes_by_hand(node):
    host = on(node)
    wrapper = host.file(PROGRAM)
    assert wrapper.mode == 0o755 and wrapper.user == "root"
    assert "exec /opt/rackgate-healthcheck/bin/rackgate-healthcheck --config " \
           "/etc/rackgate/healthcheck.yaml" in wrapper.content_string
    config = host.file("/etc/rackgate/healthcheck.yaml").content_string
    assert f"node_name: {node}" in config
    result = host.run(f"timeout 30 {PROGRAM}")
    assert result.rc == 0, f"{PROGRAM} on {node}: rc={result.rc}\n{result.stdout}{result.stderr}"
    assert f"{SAYS}{node}: healthy (7 items, 4 skipped)" in result.stdout, result.stdout
    if host.file("/var/lib/prometheus/node-exporter").is_directory:
        metrics = host.file(TEXTFILE).content_string.splitlines()
        assert "rackgate_healthcheck_ok 1" in metrics, metrics
        for item in ("mounts", "memlock", "systemd_units"):
            assert f'rackgate_healthcheck_item_ok{{item="{item}"}} 1' in metrics, metrics
        assert "rackgate_healthcheck_drained 0" in metrics, metrics
    else:
        assert "textfile directory /var/lib/prometheus/node-exporter is absent" \
            in result.stdout, result.stdout


@pytest.mark.parametrize("node", COMPUTES)
def test_every_entry_point_takes_its_arguments(node):
    host = on(node)
    helps = (PROGRAM, f"{VENV}/bin/rackgate-healthcheck", f"{VENV}/bin/rackgate healthcheck")
    for program in helps:
        result = host.run(f"timeout 30 {program} --help")
        assert result.rc == 0, f"{program} --help on {node}: rc={result.rc}\n{result.stderr}"
        said = result.stdout
        assert "--no-slurm" in said and "exit codes:" in said.lower(), said
        assert f"{SAYS}{node}" not in result.stdout, f"{program} --help ran the check"
    for program in (PROGRAM, f"{VENV}/bin/rackgate healthcheck"):
        result = host.run(f"timeout 30 {program} --no-slurm")
        assert result.rc == 0, f"{program} --no-slurm on {node}: rc={result.rc}\n" \
                               f"{result.stdout}{result.stderr}"
        assert f"{SAYS}{node}: healthy (7 items, 4 skipped)" in result.stdout, result.stdout
        assert "SLURM" not in result.stdout, f"{program} --no-slurm read SLURM"
    spliced = "/tmp/rackgate-hc-spliced"
    result = host.run(f"timeout 30 {PROGRAM} --no-slurm --config '/nonexistent/a b;touch "
                      f"{spliced}'")
    assert result.rc == 2, result.stdout + result.stderr
    assert f"cannot read /nonexistent/a b;touch {spliced}" in result.stdout, result.stdout
    assert not host.file(spliced).exists
    assert host.run(f"{VENV}/bin/python -c 'import rich'").rc != 0  # what the venv lacks
    result = host.run(f"timeout 30 {VENV}/bin/rackgate list checks")
    assert result.rc == 2 and "Traceback" not in result.stderr, result.stderr
    assert "rackgate healthcheck" in result.stderr, result.stderr


def test_stopped_unit_drains_the_node_and_its_return_resumes_it():
    node = COMPUTES[-1]
    host = on(node)
    assert state_of(node)[0] == "idle", state_of(node)
    try:
        host.run_expect([0], f"systemctl stop {UNIT}")
        _state, reason = wait_for(
            node, lambda s, r: s.startswith("drain") and r.startswith(PREFIX),
            f"a drain with a reason starting {PREFIX!r} after stopping {UNIT}")
        assert reason.startswith(f"{PREFIX}systemd_units: {UNIT}: inactive"), reason
        assert host.file(RECORD).content_string.rstrip("\n") == reason
    finally:
        host.run_expect([0], f"systemctl start {UNIT}")
    wait_for(node, lambda s, r: s == "idle", f"idle (resumed by the health check) after "
             f"starting {UNIT} again")
    assert not host.file(RECORD).exists


def test_operator_drain_is_never_resumed():
    node = COMPUTES[0]
    host, ctl = on(node), on(CTL)
    ctl.run_expect([0], f"scontrol update nodename={node} state=drain reason='operator: test'")
    try:
        host.run_expect([0], f"systemctl stop {UNIT}")
        time.sleep(3 * INTERVAL_S + 5)  # three checks fail on a node an operator drained
        assert state_of(node) == ("drained", "operator: test")
        host.run_expect([0], f"systemctl start {UNIT}")
        time.sleep(3 * INTERVAL_S + 5)  # three checks pass: the operator's drain stays
        assert state_of(node) == ("drained", "operator: test")
    finally:
        host.run(f"systemctl start {UNIT}")
        ctl.run(f"scontrol update nodename={node} state=resume")
    wait_for(node, lambda s, r: s == "idle", "idle after the operator's resume")
