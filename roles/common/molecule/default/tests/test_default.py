"""Verify the common role on the molecule instance (Debian 12, systemd as PID 1, podman).

What is verified in the container:
  * every package in common_packages + common_extra_packages is installed, `fio --version`
    runs, and an unprivileged user can run a 1 MiB fio job in the scratch directory;
  * the APT sources file points at the configured mirrors (molecule.yml sets them from the
    build machine's own; the expected URLs are read from the molecule inventory);
  * /etc/chrony/chrony.conf lists the configured servers and pool, `chronyd -p` parses it,
    and chrony.service is enabled;
  * /etc/security/limits.d/90-rackgate.conf and the systemd manager drop-in hold the
    configured memlock/nofile values; after the role's daemon-reexec the manager reports
    them (`systemctl show -p DefaultLimitNOFILE/DefaultLimitMEMLOCK`), and a service it
    starts gets min(configured, container hard limit);
  * /etc/sysctl.d/90-rackgate.conf holds the configured values;
  * the scratch directory exists, owned by root, mode 1777.

What cannot be verified in a container (the role skips it there on purpose):
  * clock discipline: chronyd has no CAP_SYS_TIME, its unit (ConditionCapability=CAP_SYS_TIME)
    stays inactive, so no NTP source is ever reached and the clock is not steered;
  * memlock (and nofile) above the host's hard limits: the kernel caps a container at the
    host's hard limits (memlock 8192 KiB, nofile 16384 with molecule/containers.conf), so
    systemd accepts "infinity" but its services get 8192 KiB, and pam_limits, which reads
    the limits.d file (runuser in the fio test logs its attempt), is refused
    ("Could not set limit ... Operation not permitted"); session limits are not asserted;
  * sysctl application: /proc/sys is read-only, so the values are written, not applied,
    and the live kernel values are not checked.

When a test fails, the last 50 journal lines of the instance are printed with it.
"""

import os

import pytest
from testinfra.utils.ansible_runner import AnsibleRunner

# Run commands with `podman exec` on the molecule instances. molecule's default
# (--connection ansible) would run one Ansible module per command, about ten times slower.
RUNNER = AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
testinfra_hosts = [f"podman://{name}" for name in RUNNER.get_hosts("all")]

PACKAGES = [
    "chrony",
    "fio",
    "numactl",
    "pciutils",
    "ethtool",
    "iproute2",
    "procps",
    "kmod",
    "rsync",
    "ca-certificates",
    "lsof",  # common_extra_packages in molecule.yml
]
CHRONY_CONF = "/etc/chrony/chrony.conf"
LIMITS_CONF = "/etc/security/limits.d/90-rackgate.conf"
SYSTEMD_DROPIN = "/etc/systemd/system.conf.d/90-rackgate-limits.conf"
SYSCTL_CONF = "/etc/sysctl.d/90-rackgate.conf"
SCRATCH = "/var/tmp/rackgate"
NOFILE = 1048576



@pytest.mark.parametrize("name", PACKAGES)
def test_package_installed(host, name):
    assert host.package(name).is_installed, f"package {name} is not installed"


def test_fio_runs(host):
    result = host.run("fio --version")
    assert result.rc == 0, result.stderr
    assert result.stdout.startswith("fio-"), result.stdout


def test_fio_writes_to_scratch_as_unprivileged_user(host):
    result = host.run(
        "runuser -u nobody -- fio --name=molecule-smoke --directory=%s --rw=write "
        "--bs=4k --size=1M --ioengine=psync --unlink=1 --output-format=terse",
        SCRATCH,
    )
    assert result.rc == 0, f"rc={result.rc}\nstdout={result.stdout}\nstderr={result.stderr}"


def test_apt_sources_point_at_mirror(host):
    # The mirrors molecule.yml gave the role (the build machine's own), as the inventory has them.
    variables = RUNNER.get_variables(host.backend.get_hostname())
    mirror = variables["common_apt_mirror"]
    security = variables["common_apt_security_mirror"]
    assert mirror.startswith(("http://", "https://", "file://")), mirror
    lines = host.file("/etc/apt/sources.list").content_string.splitlines()
    assert f"deb {mirror} bookworm main contrib non-free non-free-firmware" in lines, lines
    assert any(line.startswith(f"deb {mirror} bookworm-updates ") for line in lines), lines
    security_lines = [line for line in lines if " bookworm-security " in line]
    if security:
        assert [line.split()[1] for line in security_lines] == [security], lines
    else:
        assert security_lines == [], lines


def test_chrony_config_rendered(host):
    conf = host.file(CHRONY_CONF)
    assert conf.is_file
    assert conf.mode == 0o644
    lines = conf.content_string.splitlines()
    for expected in (
        "server ntp1.rack.test iburst",
        "server 10.0.0.1 iburst",
        "pool 2.debian.pool.ntp.org iburst",
        "confdir /etc/chrony/conf.d",
        "driftfile /var/lib/chrony/chrony.drift",
    ):
        assert expected in lines, f"{expected!r} missing from {CHRONY_CONF}:\n{conf.content_string}"


def test_chrony_config_parses(host):
    result = host.run("chronyd -p -f %s", CHRONY_CONF)
    assert result.rc == 0, result.stderr
    assert "server ntp1.rack.test iburst" in result.stdout


def test_chrony_enabled(host):
    assert host.service("chrony").is_enabled


def test_limits_file(host):
    conf = host.file(LIMITS_CONF)
    assert conf.mode == 0o644
    entries = {
        tuple(line.split())
        for line in conf.content_string.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    }
    for domain in ("*", "root"):
        for kind in ("soft", "hard"):
            assert (domain, kind, "memlock", "unlimited") in entries, entries
            assert (domain, kind, "nofile", str(NOFILE)) in entries, entries


def test_systemd_dropin_content(host):
    conf = host.file(SYSTEMD_DROPIN)
    lines = conf.content_string.splitlines()
    assert "[Manager]" in lines
    assert "DefaultLimitMEMLOCK=infinity" in lines
    assert f"DefaultLimitNOFILE={NOFILE}" in lines


def test_systemd_manager_took_the_defaults(host):
    nofile = host.check_output("systemctl show -p DefaultLimitNOFILE --value")
    memlock = host.check_output("systemctl show -p DefaultLimitMEMLOCK --value")
    assert nofile == str(NOFILE)
    assert memlock == "infinity"


def _hard_limit(host, pid, name):
    """Hard limit `name` ("Max open files") of `pid` from /proc/<pid>/limits, None if unlimited."""
    for line in host.file(f"/proc/{pid}/limits").content_string.splitlines():
        if line.startswith(name):
            value = line[len(name) :].split()[1]
            return None if value == "unlimited" else int(value)
    raise AssertionError(f"{name!r} not in /proc/{pid}/limits")


def test_services_get_the_defaults_up_to_the_container_limit(host):
    # A service started now gets DefaultLimit*, capped by the manager's own hard limit.
    result = host.run("systemd-run --wait --pipe --quiet sh -c 'ulimit -Hn; ulimit -Hl'")
    assert result.rc == 0, result.stderr
    nofile, memlock_kib = result.stdout.split()
    pid1_nofile = _hard_limit(host, 1, "Max open files")
    pid1_memlock = _hard_limit(host, 1, "Max locked memory")
    expected_nofile = NOFILE if pid1_nofile is None else min(NOFILE, pid1_nofile)
    assert int(nofile) == expected_nofile
    if pid1_memlock is None:
        assert memlock_kib == "unlimited"
    else:
        assert int(memlock_kib) == pid1_memlock // 1024


def test_sysctl_file(host):
    conf = host.file(SYSCTL_CONF)
    assert conf.mode == 0o644
    lines = conf.content_string.splitlines()
    for expected in (
        "kernel.numa_balancing = 0",
        "vm.zone_reclaim_mode = 0",
        "vm.max_map_count = 1048576",
        "net.core.rmem_max = 268435456",
        "net.core.wmem_max = 268435456",
    ):
        assert expected in lines, f"{expected!r} missing from {SYSCTL_CONF}:\n{conf.content_string}"


def test_scratch_directory(host):
    scratch = host.file(SCRATCH)
    assert scratch.is_directory
    assert scratch.user == "root"
    assert scratch.group == "root"
    assert scratch.mode == 0o1777
