"""Verify the gpu_driver role on the molecule instance (Debian 12 or 13, as MOLECULE_DISTRO
chose: systemd as PID 1, podman).

molecule.yml sets gpu_driver_nvswitch: true (as an HGX profile does) and
gpu_driver_cuda_repo_required: false, because NVIDIA's CUDA repository is unreachable from
the build machines: the scenario exercises the "repository unreachable" path on purpose.

What is verified in the container:
  * the driver version is the release's own default (gpu_driver_version left empty):
    535.309.01-0+deb12u1 on Debian 12 (bookworm-security), 550.163.01-2 on Debian 13, read
    from the container's /etc/os-release, and the branch (535 / 550) follows from it;
  * with both mirror variables empty (the defaults), the role's deb822 source adds
    contrib/non-free/non-free-firmware for bookworm and bookworm-updates from the mirror of
    the container's own bookworm entry, and for bookworm-security from its own security entry
    (the image carries the build machine's mirrors, component main only): exactly the
    components those sources lack, as `apt-get indextargets` in the container lists them, so
    APT reads no index target twice;
  * the pinned driver version resolves from those sources (`apt-cache policy` lists a
    non-free mirror for it; Debian 12's pinned version is only in bookworm-security);
  * the APT preferences file pins the driver packages to gpu_driver_version at priority 1001,
    and `apt-cache policy` reports that pin as the installed and candidate version;
  * the userspace packages (nvidia-smi, libnvidia-ml1, libnvidia-cfg1, libcuda1) are installed
    at exactly the pinned version, and nvidia-persistenced (own version, contrib) is installed;
  * libnvidia-ml.so.1 and libcuda.so.1 are in the linker cache;
  * `nvidia-smi -L` runs and FAILS, as it must without a GPU or kernel module (its exit code
    is non-zero and it is the one recorded in the fact file); success is never asserted;
  * the nouveau blacklist file;
  * nvidia-persistenced is enabled, its drop-in carries ConditionPathExists=/dev/nvidia0,
    `systemd-analyze verify` accepts the unit with the drop-in, the unit is not failed
    (its condition skips it), and systemd has no failed units at all;
  * /etc/ansible/facts.d/rackgate_gpu_driver.fact: the skips are recorded with their reasons:
    the CUDA repository (so Fabric Manager and DCGM are not installed: checked too, with no
    repository file and no unit for them), the initramfs rebuild, the kernel module packages
    (checked not installed: no dkms, no compiler), and the start of nvidia-persistenced;
    reboot_required is false in a container;
  * the stale-module check says that no module is loaded in a container (recorded skip
    "module-version", kernel_module_version null), and the installed driver version read
    back from dpkg is the pinned one; the kernel flavour (proprietary, the default) is
    recorded; NSCQ (libnvidia-nscq-<branch>) is in the CUDA repository's skip with Fabric
    Manager and is not installed.
  * GPU power (molecule.yml sets a power limit and application clocks): the script
    /usr/local/libexec/rackgate/rackgate-gpu-power (0755), the config /etc/rackgate/gpu-power.conf
    with exactly the expected lines, rackgate-gpu-power.service (oneshot, RemainAfterExit,
    Wants= and After= nvidia-persistenced, ConditionPathExists=/dev/nvidia0) enabled and
    accepted by `systemd-analyze verify`; started by hand here, its condition skips it
    (ConditionResult=no, inactive, not failed), and the fact file records the settings and
    the skip "gpu-power".

What cannot be verified in a container (and why):
  * the kernel module: a container cannot build (DKMS) or load modules, so
    nvidia-kernel-dkms, firmware-nvidia-gsp and the kernel headers are skipped, nothing
    is loaded, and the reboot logic (gpu_driver_reboot_required, throttled reboot) does
    not run; nouveau detection reads /sys/module, which shows the host's modules;
  * `update-initramfs -u`: a container boots no initramfs (initramfs-tools is not installed);
  * nvidia-smi -pl / -ac: no GPU, so the power script never runs here; its logic is tested
    with a fake nvidia-smi in tests/roles/test_gpu_power_script.py;
  * a working nvidia-smi, persistence mode, DCGM and Fabric Manager: no GPU, no NVSwitch,
    and the CUDA repository (DCGM, Fabric Manager) is unreachable from the build machines,
    so their installation, pinning and drop-ins for those two services are untested here;
  * the container toolkit (off by default, its repository is unreachable too).

When a test fails, the last 50 journal lines of the instance are printed with it.
"""

import json
import os
import re

import pytest
from testinfra.utils.ansible_runner import AnsibleRunner

testinfra_hosts = [
    f"podman://{name}"
    for name in AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
]

# The driver each release installs when gpu_driver_version is empty (vars/Debian_<major>.yml).
RELEASE_VERSIONS = {"bookworm": "535.309.01-0+deb12u1", "trixie": "550.163.01-2"}
PINNED_PACKAGES = ["nvidia-smi", "libnvidia-ml1", "libnvidia-cfg1", "libcuda1"]
NONFREE_SOURCES = "/etc/apt/sources.list.d/rackgate-debian-nonfree.sources"
NONFREE_COMPONENTS = ["contrib", "non-free", "non-free-firmware"]
PIN_FILE = "/etc/apt/preferences.d/rackgate-nvidia-driver.pref"
BLACKLIST = "/etc/modprobe.d/rackgate-blacklist-nouveau.conf"
DROPIN = "/etc/systemd/system/nvidia-persistenced.service.d/50-rackgate-skip-without-device.conf"
FACT = "/etc/ansible/facts.d/rackgate_gpu_driver.fact"
POWER_UNIT = "rackgate-gpu-power.service"
POWER_SCRIPT = "/usr/local/libexec/rackgate/rackgate-gpu-power"
POWER_CONF = "/etc/rackgate/gpu-power.conf"
# What molecule.yml's gpu_driver_power_limits and gpu_driver_application_clocks write.
POWER_SETTINGS = [
    "power_limit_w[NVIDIA A100-SXM4-80GB]=300",
    "power_limit_w[NVIDIA H100 80GB HBM3]=550",
    "application_clocks_mhz[NVIDIA H100 80GB HBM3]=2619,1980",
]



@pytest.fixture(scope="module")
def suite(host):
    """The container's Debian codename (bookworm, trixie)."""
    for line in host.file("/etc/os-release").content_string.splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    raise AssertionError("no VERSION_CODENAME in /etc/os-release")


@pytest.fixture(scope="module")
def version(suite):
    assert suite in RELEASE_VERSIONS, f"no expected driver version for {suite}"
    return RELEASE_VERSIONS[suite]


@pytest.fixture(scope="module")
def branch(version):
    return version.split(".", 1)[0]


@pytest.fixture(scope="module")
def fact(host):
    return json.loads(host.file(FACT).content_string)


def _skip(fact, step):
    matches = [entry for entry in fact["skipped"] if entry["step"] == step]
    assert len(matches) == 1, f"step {step!r} not recorded once in {fact['skipped']}"
    return matches[0]["reason"]


def _index_targets(host):
    """(sources entry file, uri, suite, component) for every index target APT reads."""
    out = host.check_output(
        "apt-get indextargets --no-release-info "
        "--format '$(SOURCESENTRY) $(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages'"
    )
    targets = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 4:
            entry, uri, suite, component = fields
            targets.add((entry.rsplit(":", 1)[0], uri.rstrip("/"), suite, component))
    return targets


@pytest.fixture(scope="module")
def node_sources(host):
    """{(uri, suite): components} of the container's own APT sources, the role's file aside."""
    found = {}
    for path, uri, suite, component in _index_targets(host):
        if path != NONFREE_SOURCES:
            found.setdefault((uri, suite), set()).add(component)
    return found


def _mirror_for(node_sources, suite):
    uris = sorted({uri for uri, s in node_sources if s == suite})
    return uris[0] if uris else ""


def _deb822_stanzas(text):
    stanzas = []
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if line and not line.startswith("#")
        )
        if fields:
            stanzas.append(fields)
    return stanzas


def test_nonfree_sources_add_only_what_the_node_lacks(host, node_sources, suite):
    # The defaults (both mirrors empty) take the mirrors of the container's own sources.
    archive = _mirror_for(node_sources, suite)
    security = _mirror_for(node_sources, f"{suite}-security")
    assert archive, f"the container's sources have no {suite} entry: {node_sources}"
    wanted = [(archive, suite), (archive, f"{suite}-updates")]
    if security:
        wanted.append((security, f"{suite}-security"))
    expected = []
    for uri, suite in wanted:
        missing = [c for c in NONFREE_COMPONENTS if c not in node_sources.get((uri, suite), set())]
        if missing:
            expected.append((uri, suite, " ".join(missing)))
    file = host.file(NONFREE_SOURCES)
    if not expected:
        assert not file.exists, "the node's sources carry every component, yet the file exists"
        return
    stanzas = _deb822_stanzas(file.content_string)
    assert [(s["URIs"], s["Suites"], s["Components"]) for s in stanzas] == expected, stanzas
    for stanza in stanzas:
        assert stanza["Types"] == "deb"
        assert stanza["Signed-By"] == "/usr/share/keyrings/debian-archive-keyring.gpg"


def test_nonfree_sources_repeat_nothing(host):
    # APT reads no index target twice ("configured multiple times"): the role's file adds
    # only what the node's own sources lack.
    targets = _index_targets(host)
    ours = {t[1:] for t in targets if t[0] == NONFREE_SOURCES}
    theirs = {t[1:] for t in targets if t[0] != NONFREE_SOURCES}
    assert not ours & theirs, ours & theirs


def test_pinned_version_resolves_from_the_sources(host, version):
    # The pinned version comes from a configured mirror, not only from dpkg's status file:
    # in `apt-cache policy`'s version table (" *** <version> <priority>", then one indented
    # line per origin), its entry lists a non-free source.
    policy = host.check_output("apt-cache policy nvidia-smi").splitlines()
    entry = re.compile(rf"^ (\*\*\*| {{3}}) {re.escape(version)} -?[0-9]+$")
    start = next((i for i, line in enumerate(policy) if entry.match(line)), None)
    assert start is not None, policy
    origins = []
    for line in policy[start + 1 :]:
        if not line.startswith("        "):
            break
        origins.append(line.strip())
    assert any("/non-free " in origin for origin in origins), policy


def test_pin_file(host, version):
    pin = host.file(PIN_FILE)
    assert pin.mode == 0o644
    lines = pin.content_string.splitlines()
    assert f"Pin: version {version}" in lines
    assert "Pin-Priority: 1001" in lines
    package_line = next(line for line in lines if line.startswith("Package:"))
    assert "nvidia-*" in package_line.split() and "libcuda1" in package_line.split()


@pytest.mark.parametrize("name", PINNED_PACKAGES)
def test_pinned_package_installed_at_version(host, name, version):
    package = host.package(name)
    assert package.is_installed, f"{name} is not installed"
    assert package.version == version


@pytest.mark.parametrize("name", PINNED_PACKAGES)
def test_apt_policy_applies_the_pin(host, name, version):
    policy = host.check_output(f"apt-cache policy {name}")
    assert f"Installed: {version}" in policy
    assert f"Candidate: {version}" in policy
    assert f"{version} 1001" in policy, policy


def test_persistenced_installed(host):
    assert host.package("nvidia-persistenced").is_installed


@pytest.mark.parametrize("library", ["libnvidia-ml.so.1", "libcuda.so.1"])
def test_driver_libraries_in_linker_cache(host, library):
    assert library in host.check_output("ldconfig -p")


def test_nvidia_smi_fails_honestly_without_gpu(host, fact):
    assert host.file("/usr/bin/nvidia-smi").is_file
    result = host.run("nvidia-smi -L")
    # No GPU, no kernel module: it must fail, and the role must have recorded that.
    assert result.rc != 0, f"nvidia-smi succeeded in a container?\n{result.stdout}"
    assert fact["nvidia_smi_rc"] == result.rc


def test_kernel_module_packages_not_installed(host, fact):
    for name in ("nvidia-kernel-dkms", "firmware-nvidia-gsp", "dkms", "gcc"):
        assert not host.package(name).is_installed, f"{name} installed in a container"
    assert "container (podman)" in _skip(fact, "kernel-module")
    assert "nvidia-kernel-dkms" in _skip(fact, "kernel-module")


def test_nouveau_blacklist(host):
    lines = host.file(BLACKLIST).content_string.splitlines()
    assert "blacklist nouveau" in lines
    assert "options nouveau modeset=0" in lines


def test_initramfs_skip_recorded(host, fact):
    assert not host.exists("update-initramfs")
    assert "boots no initramfs" in _skip(fact, "initramfs")


def test_persistenced_enabled_with_dropin(host):
    assert host.service("nvidia-persistenced").is_enabled
    lines = host.file(DROPIN).content_string.splitlines()
    assert "[Unit]" in lines
    assert "ConditionPathExists=/dev/nvidia0" in lines
    shown = host.check_output("systemctl show -p DropInPaths --value nvidia-persistenced")
    assert DROPIN in shown.split()


def test_persistenced_unit_verifies(host):
    result = host.run("systemd-analyze verify nvidia-persistenced.service")
    assert result.rc == 0, result.stderr


def test_persistenced_skipped_not_failed(host, fact):
    state = host.run("systemctl is-failed nvidia-persistenced").stdout.strip()
    assert state == "inactive", state
    assert "/dev/nvidia0 does not exist" in _skip(fact, "start-nvidia-persistenced")


def test_no_failed_units(host):
    failed = host.check_output("systemctl list-units --failed --plain --no-legend")
    assert failed == "", failed


def test_cuda_repository_skip_recorded(host, fact, branch):
    reason = _skip(fact, "cuda-repository")
    assert "developer.download.nvidia.com" in reason
    assert "did not answer" in reason
    # NSCQ comes with Fabric Manager on an NVSwitch node, from the same repository.
    for name in (f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}",
                 "datacenter-gpu-manager"):
        assert name in reason, reason
    assert fact["repositories"] == {"cuda": False}
    assert not host.file("/etc/apt/sources.list.d/rackgate-cuda.sources").exists
    for name in (f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}",
                 "datacenter-gpu-manager"):
        assert not host.package(name).is_installed
    assert fact["services"] == ["nvidia-persistenced"]


def test_fact_file_summary(host, fact, version, branch):
    assert host.file(FACT).mode == 0o644
    assert fact["role"] == "gpu_driver"
    assert fact["driver_version"] == version
    assert fact["driver_upstream_version"] == version.split("-", 1)[0]
    assert fact["driver_branch"] == branch
    assert fact["kernel_flavor"] == "proprietary"
    assert fact["in_container"] is True
    assert fact["nvswitch"] is True
    assert fact["reboot_required"] is False
    assert fact["reboot_reasons"] == []


def test_installed_driver_version_read_back(host, fact, version):
    # The stale-module check compares the loaded module with what dpkg says is installed.
    assert fact["installed_driver_version"] == version
    assert fact["installed_driver_version"] == host.package("libnvidia-ml1").version


def test_no_module_version_compared_in_a_container(host, fact):
    # The container shares the host's kernel, which has no nvidia module: nothing to compare,
    # and the role says so instead of claiming the module matches.
    assert not host.file("/sys/module/nvidia").exists
    assert fact["kernel_module_version"] is None
    assert fact["kernel_module_loaded"] is False
    assert "stale-module check" in _skip(fact, "module-version")
    assert fact["kernel_packages_changed_boot_id"] is None


def test_gpu_power_script_and_config(host):
    script = host.file(POWER_SCRIPT)
    assert script.is_file and script.mode == 0o755 and script.user == "root"
    conf = host.file(POWER_CONF)
    assert conf.mode == 0o644 and conf.user == "root"
    settings = [line for line in conf.content_string.splitlines()
                if line and not line.startswith("#")]
    assert settings == POWER_SETTINGS


def test_gpu_power_unit_installed_and_enabled(host):
    unit = host.file(f"/etc/systemd/system/{POWER_UNIT}").content_string.splitlines()
    for line in ("Type=oneshot", "RemainAfterExit=yes", "Wants=nvidia-persistenced.service",
                 "After=nvidia-persistenced.service", "ConditionPathExists=/dev/nvidia0",
                 f"ExecStart={POWER_SCRIPT} {POWER_CONF}", "WantedBy=multi-user.target"):
        assert line in unit, (line, unit)
    assert host.service(POWER_UNIT).is_enabled
    result = host.run(f"systemd-analyze verify {POWER_UNIT}")
    assert result.rc == 0, result.stderr


def test_gpu_power_unit_skipped_without_a_gpu(host, fact):
    assert not host.file("/dev/nvidia0").exists
    started = host.run(f"systemctl start {POWER_UNIT}")
    assert started.rc == 0, started.stderr
    shown = host.check_output(f"systemctl show -p ConditionResult -p ActiveState -p Result {POWER_UNIT}")
    assert sorted(shown.splitlines()) == ["ActiveState=inactive", "ConditionResult=no",
                                          "Result=success"], shown
    reason = _skip(fact, "gpu-power")
    assert "/dev/nvidia0 does not exist" in reason and "\n" not in reason, reason
    assert fact["gpu_power"] == {
        "unit": POWER_UNIT,
        "power_limits_w": {"NVIDIA H100 80GB HBM3": 550, "NVIDIA A100-SXM4-80GB": 300},
        "application_clocks_mhz": {"NVIDIA H100 80GB HBM3": {"memory_mhz": 2619,
                                                             "graphics_mhz": 1980}},
        "started": False,
    }
