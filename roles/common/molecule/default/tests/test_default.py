"""Verify the common role on the molecule instance (Debian 12 or 13, systemd as PID 1, podman).

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
  * the scratch directory exists, owned by root, mode 1777;
  * on Debian 13 the mirror is in deb822 form in /etc/apt/sources.list.d/debian.sources and
    the image's one-line /etc/apt/sources.list is emptied (no suite listed twice);
  * rackgate-cpu-governor.service and rackgate-pcie-acs-disable.service are installed,
    enabled and pass `systemd-analyze verify`, with the validated governor and addresses as
    their scripts' arguments; the scripts refuse bad arguments, and the governor script,
    run here, finds no cpufreq and changes nothing;
  * /etc/default/grub.d/90-rackgate.cfg appends the configured items to
    GRUB_CMDLINE_LINUX_DEFAULT, and sourcing it as update-grub does gives the items;
  * APT's periodic settings are 0 (apt-config dump) and apt-daily(-upgrade).timer are masked;
  * /etc/ansible/facts.d/rackgate_common.fact records the container and every skipped step
    (cpu_governor, pcie_acs, kernel_cmdline, kernel_hold) with its reason, and
    reboot_required false.

What cannot be verified in a container (the role skips it there on purpose):
  * clock discipline: chronyd has no CAP_SYS_TIME, its unit (ConditionCapability=CAP_SYS_TIME)
    stays inactive, so no NTP source is ever reached and the clock is not steered;
  * memlock (and nofile) above the host's hard limits: the kernel caps a container at the
    host's hard limits (memlock 8192 KiB, nofile 16384 with molecule/containers.conf), so
    systemd accepts "infinity" but its services get 8192 KiB, and pam_limits, which reads
    the limits.d file (runuser in the fio test logs its attempt), is refused
    ("Could not set limit ... Operation not permitted"); session limits are not asserted;
  * sysctl application: /proc/sys is read-only, so the values are written, not applied,
    and the live kernel values are not checked;
  * the CPU governor, PCIe ACS, update-grub and a reboot: the CPUs, PCI devices and kernel
    are the host's (this VM has no cpufreq and no GPU/NIC switch); the units carry
    ConditionVirtualization=!container and the role records each skip;
  * the kernel hold: a container has no linux-image package; the hold is recorded as skipped.

When a test fails, the last 50 journal lines of the instance are printed with it.
"""

import json
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


def _mirrors(host):
    """The mirrors molecule.yml gave the role (the build machine's own), from the inventory."""
    variables = RUNNER.get_variables(host.backend.get_hostname())
    mirror = variables["common_apt_mirror"]
    assert mirror.startswith(("http://", "https://", "file://")), mirror
    return mirror, variables["common_apt_security_mirror"]


def _codename(host):
    return host.system_info.codename


def _deb822_stanzas(text):
    """deb822 paragraphs as dicts (field -> value), comments left out."""
    stanzas = []
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1)
            for line in block.splitlines()
            if line.strip() and not line.startswith("#")
        )
        if fields:
            stanzas.append(fields)
    return stanzas


def test_apt_sources_point_at_mirror(host):
    codename = _codename(host)
    if codename != "bookworm":
        pytest.skip(f"{codename} has deb822 sources: test_apt_deb822_sources_point_at_mirror")
    mirror, security = _mirrors(host)
    lines = host.file("/etc/apt/sources.list").content_string.splitlines()
    assert f"deb {mirror} bookworm main contrib non-free non-free-firmware" in lines, lines
    assert any(line.startswith(f"deb {mirror} bookworm-updates ") for line in lines), lines
    security_lines = [line for line in lines if " bookworm-security " in line]
    if security:
        assert [line.split()[1] for line in security_lines] == [security], lines
    else:
        assert security_lines == [], lines


def test_apt_deb822_sources_point_at_mirror(host):
    codename = _codename(host)
    if codename == "bookworm":
        pytest.skip("bookworm has one-line sources: test_apt_sources_point_at_mirror")
    mirror, security = _mirrors(host)
    sources = host.file("/etc/apt/sources.list.d/debian.sources")
    assert sources.mode == 0o644
    stanzas = _deb822_stanzas(sources.content_string)
    expected = [
        {
            "Types": "deb",
            "URIs": mirror,
            "Suites": f"{codename} {codename}-updates",
            "Components": "main contrib non-free non-free-firmware",
            "Signed-By": "/usr/share/keyrings/debian-archive-keyring.pgp",
        }
    ]
    if security:
        expected.append(dict(expected[0], URIs=security, Suites=f"{codename}-security"))
    assert stanzas == expected, sources.content_string
    assert host.file(expected[0]["Signed-By"]).exists
    # The image's one-line sources.list is emptied: only comments remain.
    legacy = host.file("/etc/apt/sources.list").content_string.splitlines()
    assert [line for line in legacy if line.strip() and not line.startswith("#")] == [], legacy


def test_apt_lists_each_suite_once(host):
    # apt warns "Target ... is configured multiple times" when a suite is listed twice;
    # indextargets reads the sources without touching the network.
    result = host.run("apt-get indextargets")
    assert result.rc == 0, result.stderr
    assert "configured multiple times" not in result.stderr, result.stderr


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


GOVERNOR_UNIT = "/etc/systemd/system/rackgate-cpu-governor.service"
ACS_UNIT = "/etc/systemd/system/rackgate-pcie-acs-disable.service"
GOVERNOR_SCRIPT = "/usr/local/libexec/rackgate/rackgate-cpu-governor"
ACS_SCRIPT = "/usr/local/libexec/rackgate/rackgate-pcie-acs-disable"
GRUB_DROPIN = "/etc/default/grub.d/90-rackgate.cfg"
FACT_FILE = "/etc/ansible/facts.d/rackgate_common.fact"
BRIDGES = ["0000:3a:00.0", "0000:3b:01.0"]  # common_pcie_acs_disable_bridges in molecule.yml
CMDLINE = ["iommu=pt", "pcie_aspm=off"]  # common_kernel_cmdline in molecule.yml


def _unit_lines(host, path):
    return host.file(path).content_string.splitlines()


@pytest.mark.parametrize(
    "unit", ["rackgate-cpu-governor.service", "rackgate-pcie-acs-disable.service"]
)
def test_baseline_unit_enabled_and_valid(host, unit):
    assert host.service(unit).is_enabled, f"{unit} is not enabled"
    result = host.run("systemd-analyze verify /etc/systemd/system/%s", unit)
    assert result.rc == 0, f"systemd-analyze verify {unit}: {result.stderr}"
    lines = _unit_lines(host, f"/etc/systemd/system/{unit}")
    assert "Type=oneshot" in lines and "RemainAfterExit=yes" in lines, lines
    assert "ConditionVirtualization=!container" in lines, lines


def test_governor_unit_passes_the_governor_as_an_argument(host):
    lines = _unit_lines(host, GOVERNOR_UNIT)
    assert f"ExecStart={GOVERNOR_SCRIPT} performance" in lines, lines
    assert "ConditionPathExists=/sys/devices/system/cpu/cpu0/cpufreq" in lines, lines


def test_acs_unit_passes_the_bridges_as_arguments(host):
    lines = _unit_lines(host, ACS_UNIT)
    assert f"ExecStart={ACS_SCRIPT} {' '.join(BRIDGES)}" in lines, lines


def test_governor_unit_does_not_run_in_a_container(host):
    # The condition keeps the unit from touching the host's CPUs: it is enabled, not active.
    state = host.run("systemctl show -p ActiveState rackgate-cpu-governor.service")
    assert "ActiveState=active" not in state.stdout, state.stdout


@pytest.mark.parametrize(
    "args",
    [["turbo"], ["performance; reboot"], [], ["performance", "powersave"]],
    ids=["unknown-governor", "shell-text", "no-argument", "two-arguments"],
)
def test_governor_script_refuses_bad_arguments(host, args):
    result = host.run(" ".join([GOVERNOR_SCRIPT] + [f"'{a}'" for a in args]))
    assert result.rc == 2, f"rc={result.rc} stdout={result.stdout} stderr={result.stderr}"


def test_governor_script_finds_no_cpufreq_here(host):
    # No cpufreq in this VM: the script changes nothing, says why, and succeeds.
    assert not host.file("/sys/devices/system/cpu/cpu0/cpufreq").exists
    result = host.run(f"{GOVERNOR_SCRIPT} --check performance")
    assert result.rc == 0, result.stderr
    assert result.stdout == ""
    assert "no cpufreq" in result.stderr


@pytest.mark.parametrize(
    "address",
    ["0000:3A:00.0", "3a:00.0", "0000:3a:00.8", "0000:3a:00.0;reboot"],
    ids=["uppercase", "no-domain", "function-8", "shell-text"],
)
def test_acs_script_refuses_malformed_addresses(host, address):
    result = host.run(f"{ACS_SCRIPT} --check '{address}'")
    assert result.rc == 2, f"rc={result.rc} stdout={result.stdout} stderr={result.stderr}"


def test_acs_script_reports_an_absent_bridge(host):
    result = host.run(f"{ACS_SCRIPT} --check 0000:ff:1f.7")
    assert result.rc == 1, f"rc={result.rc} stderr={result.stderr}"
    assert "no such PCI device" in result.stderr


def test_grub_dropin_appends_the_items(host):
    conf = host.file(GRUB_DROPIN)
    assert conf.mode == 0o644
    items = " ".join(CMDLINE)
    line = f'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT {items}"'
    assert line in conf.content_string.splitlines(), conf.content_string
    # update-grub sources /etc/default/grub, then grub.d/*.cfg, as shell.
    script = (
        f'GRUB_CMDLINE_LINUX_DEFAULT=quiet; . {GRUB_DROPIN}; echo "$GRUB_CMDLINE_LINUX_DEFAULT"'
    )
    result = host.run("sh -c %s", script)
    assert result.rc == 0, result.stderr
    assert result.stdout.strip() == f"quiet {items}"


def test_apt_periodic_settings_are_off(host):
    dump = host.check_output("apt-config dump APT::Periodic").splitlines()
    for key in (
        "Enable",
        "Update-Package-Lists",
        "Unattended-Upgrade",
        "Download-Upgradeable-Packages",
    ):
        assert f'APT::Periodic::{key} "0";' in dump, dump


@pytest.mark.parametrize("timer", ["apt-daily.timer", "apt-daily-upgrade.timer"])
def test_apt_timers_masked(host, timer):
    state = host.run("systemctl is-enabled %s", timer).stdout.strip()
    assert state == "masked", f"{timer} is {state}"
    assert not host.service(timer).is_running
    # stopped before masked: a timer masked while it ran would be left "failed", which
    # `systemctl --failed` (and so the SLURM health check) reports on every node
    active = host.run("systemctl is-failed %s", timer).stdout.strip()
    assert active == "inactive", f"{timer} is {active}"


def _fact(host):
    return json.loads(host.file(FACT_FILE).content_string)


def test_fact_file_records_the_baseline(host):
    fact = _fact(host)
    assert fact["role"] == "common"
    assert fact["in_container"] is True
    assert fact["cpu_governor"] == "performance"
    assert fact["cpu_governor_applied"] is False
    assert fact["pcie_acs_disable_bridges"] == BRIDGES
    assert fact["pcie_acs_applied"] == []
    assert fact["kernel_cmdline"] == CMDLINE
    assert fact["unattended_upgrades"] is False
    # Never a reboot from a container, whatever the host's /proc/cmdline lacks.
    assert fact["reboot_required"] is False
    assert fact["reboot_reasons"] == []


@pytest.mark.parametrize(
    ("step", "says"),
    [
        ("cpu_governor", "the CPUs are the host's"),
        ("pcie_acs", "the PCI devices are the host's"),
        ("kernel_cmdline", "the boot configuration is not updated"),
        ("kernel_hold", "no linux-image package is installed"),
    ],
)
def test_fact_file_records_the_skip_with_its_reason(host, step, says):
    skipped = {entry["step"]: entry["reason"] for entry in _fact(host)["skipped"]}
    assert step in skipped, f"{step} not recorded as skipped: {skipped}"
    assert "this is a container" in skipped[step], skipped[step]
    assert says in skipped[step], skipped[step]


def test_no_kernel_package_held_in_a_container(host):
    # Nothing to hold: no linux-image package, so no hold either.
    held = host.check_output("dpkg --get-selections | awk '$2 == \"hold\" {print $1}'").split()
    assert held == [], held
    assert _fact(host)["kernel_held"] == []
