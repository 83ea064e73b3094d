"""Verify the lustre_client role on the molecule instance (Debian 12 or 13, systemd, podman).

The scenario (molecule.yml) points at Whamcloud's public repository, which the build
machines cannot reach, with lustre_client_repo_required=false (unsigned, allowed
explicitly); LNet networks o2ib0(ib0) and tcp0(eth0) with the modprobe method and the
o2ib build; two mounts (one with failover MGS NIDs, one with a multi-NID MGS and an extra
option); two lctl tunables.

What is verified in the container:
  * the repository's own metadata was probed (<url>/Release, a flat APT repository) and,
    being unreachable, the repository was NOT configured: no APT source for it exists (it
    would break every later apt-get update), no Lustre package is installed;
  * the role's checks and probe with other values (tests/test_preflight.py): an EL
    repository on Debian, an unsigned repository not allowed and o2ib networks without the
    o2ib build are refused, naming what was found; a file:// repository is accepted when its
    Release file is there (flat and pool layouts) and refused when only the directory is;
  * /etc/modprobe.d/lustre.conf holds `options lnet networks="o2ib0(ib0),tcp0(eth0)"` and
    `modprobe --showconfig` parses it (kmod reads the file as the kernel's modprobe would);
    /etc/lnet.conf (the other method) is absent;
  * /etc/fstab holds both mounts with the MGS NID lists, type lustre, `_netdev,flock`
    (+ noatime on one), and `findmnt --fstab --verify` finds no error in them;
  * systemd's fstab generator turned them into lustre-*.mount units (`systemctl cat`:
    What=, Type=lustre, Options=, ordered by remote-fs.target through _netdev), and
    `systemd-analyze verify` accepts those units (generator files, --man=no: the image
    has no man pages); they are not mounted (`findmnt` finds
    nothing) and mount points exist;
  * the tunables file has the param=value lines, the oneshot unit passes
    `systemd-analyze verify`, is enabled, carries ConditionPathExists=/sys/fs/lustre and
    stays inactive (not failed) when started here;
  * /etc/ansible/facts.d/rackgate_lustre_client.fact records each skipped step with its
    reason (package-install with the probe's error, lnet-load, mount, tunables-apply).

What cannot be verified in a container (and why):
  * installing the client: Whamcloud's repository is unreachable here (only PyPI and
    Debian's mirrors answer), and Whamcloud publishes no Debian 12 client; the DKMS module
    would not build or load in a container anyway (no kernel headers of the host kernel,
    no module loading);
  * LNet: the lnet/ko2iblnd modules cannot load (no modules, no InfiniBand in this
    kernel), so `lnetctl net show` and NID reachability (`lctl ping`) are not run;
  * mounting: no client, no servers; the fstab entries are checked, not mounted;
  * the tunables: /sys/fs/lustre does not exist, so `lctl set_param` never runs.

When a test fails, the last 50 journal lines of the instance are printed with it.
"""

import json
import os

import pytest
from testinfra.utils.ansible_runner import AnsibleRunner

testinfra_hosts = [
    f"podman://{name}"
    for name in AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
]

FACT = "/etc/ansible/facts.d/rackgate_lustre_client.fact"
MODPROBE = "/etc/modprobe.d/lustre.conf"
TUNABLES = "/etc/rackgate/lustre-tunables.conf"
TUNABLES_UNIT = "rackgate-lustre-tunables.service"
MOUNTS = {
    "/lustre/scratch": ("10.10.0.1@o2ib:10.10.0.2@o2ib:/scratch", "_netdev,flock"),
    "/lustre/home": ("10.10.0.3@o2ib,192.168.0.3@tcp:/home", "_netdev,flock,noatime"),
}
UNITS = {"/lustre/scratch": "lustre-scratch.mount", "/lustre/home": "lustre-home.mount"}



def test_unreachable_repository_not_configured(host):
    assert not host.file("/etc/apt/sources.list.d/rackgate-lustre.list").exists
    for name in ("lustre-client-utils", "lustre-client-modules-dkms"):
        assert not host.package(name).is_installed
    assert not host.file("/sbin/mount.lustre").exists


def test_lnet_modprobe_options(host):
    lines = host.file(MODPROBE).content_string.splitlines()
    assert 'options lnet networks="o2ib0(ib0),tcp0(eth0)"' in lines
    shown = host.run("modprobe --showconfig")
    assert shown.rc == 0, shown.stderr
    assert 'options lnet networks="o2ib0(ib0),tcp0(eth0)"' in shown.stdout.splitlines()
    assert not host.file("/etc/lnet.conf").exists


def _fstab(host):
    entries = {}
    for line in host.file("/etc/fstab").content_string.splitlines():
        fields = line.split()
        if len(fields) >= 4 and not fields[0].startswith("#"):
            entries[fields[1]] = fields
    return entries


@pytest.mark.parametrize("path", sorted(MOUNTS))
def test_fstab_entry(host, path):
    src, opts = MOUNTS[path]
    assert _fstab(host)[path] == [src, path, "lustre", opts, "0", "0"]


def test_findmnt_verifies_fstab(host):
    result = host.run("findmnt --fstab --verify --verbose")
    # Warnings are expected here: the MGS NIDs are no local source, and this kernel
    # has no lustre file system type. Parse errors and errors are not.
    text = result.stdout + result.stderr
    assert result.rc == 0, text
    for path in MOUNTS:
        assert path in text, text
    assert "[E]" not in text, text
    assert "0 parse errors, 0 errors" in text, text


@pytest.mark.parametrize("path", sorted(MOUNTS))
def test_generated_mount_unit(host, path):
    src, opts = MOUNTS[path]
    unit = UNITS[path]
    cat = host.run("systemctl cat %s", unit)
    assert cat.rc == 0, cat.stderr
    lines = cat.stdout.splitlines()
    assert "SourcePath=/etc/fstab" in lines
    assert f"What={src}" in lines
    assert f"Where={path}" in lines
    assert "Type=lustre" in lines
    assert f"Options={opts}" in lines
    assert "Before=remote-fs.target" in lines, "_netdev must make it a remote mount"
    # The generator writes the unit to /run/systemd/generator; no man pages in the image.
    verify = host.run("systemd-analyze verify --man=no /run/systemd/generator/%s", unit)
    assert verify.rc == 0, verify.stderr
    assert host.file(path).is_directory
    assert host.run("findmnt --mountpoint %s", path).rc != 0, "must not be mounted here"


def test_tunables_file(host):
    lines = host.file(TUNABLES).content_string.splitlines()
    assert "llite.*.max_read_ahead_mb=1024" in lines
    assert "osc.*.max_rpcs_in_flight=64" in lines


def test_tunables_unit(host):
    verify = host.run("systemd-analyze verify %s", TUNABLES_UNIT)
    assert verify.rc == 0, verify.stderr
    assert host.service(TUNABLES_UNIT).is_enabled
    cat = host.check_output("systemctl cat %s", TUNABLES_UNIT).splitlines()
    assert "ConditionPathExists=/sys/fs/lustre" in cat
    assert "After=remote-fs.target" in cat
    start = host.run("systemctl start %s", TUNABLES_UNIT)
    assert start.rc == 0, start.stderr
    assert host.check_output("systemctl show -p ConditionResult --value %s", TUNABLES_UNIT) == "no"
    assert host.run("systemctl is-failed %s", TUNABLES_UNIT).stdout.strip() != "failed"


def test_fact_records_skips(host):
    fact = json.loads(host.file(FACT).content_string)
    assert fact["role"] == "lustre_client"
    assert fact["repository_reachable"] is False
    assert fact["repository_metadata"] == (
        "https://downloads.whamcloud.com/public/lustre/lustre-2.15.6/ubuntu2204/client/Release")
    assert fact["lnet_build"] == "o2ib"
    assert fact["rdma_stack"] == "inbox"
    assert fact["lnet_networks"] == ["o2ib0", "tcp0"]
    assert fact["mounts"] == ["/lustre/scratch", "/lustre/home"]
    skipped = {entry["step"]: entry["reason"] for entry in fact["skipped"]}
    assert set(skipped) == {"package-install", "lnet-load", "mount", "tunables-apply"}, skipped
    assert "downloads.whamcloud.com" in skipped["package-install"]
    assert "unreachable: its metadata https://" in skipped["package-install"]
    assert "/client/Release" in skipped["package-install"]
    assert "container" in skipped["mount"]
    assert "/sys/fs/lustre" in skipped["tunables-apply"]
