"""Verify the rdma role on the molecule instance (Debian 12 or 13, systemd as PID 1, podman).

The scenario (molecule.yml) asks for the inbox stack, IPoIB links ib0 (datagram),
ib0.8001 (P_Key child) and ib1 (connected, IPv6), opensm (priority 14, one GUID), one
RoCE netdev (ens1f0np0), GPUDirect by DMA-BUF (with gpu_driver_kernel_flavor: open),
the device naming policy kernel (checked against the RoCE ib_device and nccl_conf's
NCCL_IB_HCA) and the memlock check in warn mode.

What is verified in the container:
  * the inbox packages (rdma-core, ibverbs-providers, ibverbs-utils, perftest,
    infiniband-diags, opensm) are installed and their tools run (`ibv_devices` reports no device
    list, `ib_write_bw --help` prints its usage, `ibstat -V`); `ibstat` prints nothing
    here, which the fact file records as no HCA (hca_devices: []), never as healthy;
  * the systemd-networkd files: each parses as an INI file, holds the configured
    names, addresses, MTU, mode, P_Key and the parent's IPoIB= child reference, and every
    Section.Key used is one this systemd-networkd knows (the key names are compiled
    into /lib/systemd/systemd-networkd); systemd-networkd.service is enabled;
  * opensm: /etc/opensm/opensm.conf has the priority, /etc/default/opensm the GUID,
    opensm.service is enabled and carries the ConditionPathExists=/dev/infiniband drop-in
    (`systemctl cat`, a start attempt leaves it inactive with ConditionResult=no, not failed;
  * RoCE: the per-interface configuration, the script's dry run on it (the exact dcb
    commands and sysfs writes a real node gets: PFC on priority 3 only, DSCP trust map,
    ECN on priority 3, CNP DSCP 48 / 802.1p 6, traffic class 106), `systemd-analyze
    verify` of the instantiated unit, the unit enabled and inactive (condition unmet);
  * GPUDirect by DMA-BUF loads no module: the nvidia_peermem modules-load.d entry that
    prepare.yml left (as an earlier run with rdma_gpudirect: true would have) is removed;
  * the device naming rule /etc/udev/rules.d/60-rdma-persistent-naming.rules holds the
    one rule line with NAME_KERNEL, has the name of rdma-core's own rule (which it replaces),
    and names a program rdma-core installs (rdma_rename); where this udev has
    `udevadm verify` (systemd >= 254: Debian 13), the rule file passes it;
  * the asserts fire on bad combinations (tests/test_preflight.py);
  * no limits file is written by this role (memlock belongs to the common role);
  * /etc/ansible/facts.d/rackgate_rdma.fact records every skipped step with its reason,
    and the memlock finding.

What cannot be verified in a container (and why):
  * anything on the fabric: the build machine's kernel has no InfiniBand support and no
    modules (see PROBES.md), so there is no HCA, no /dev/infiniband, no ibstat output,
    no perftest run, no IPoIB link, no subnet manager sweep;
  * IPoIB bring-up: systemd-networkd is enabled but not started (it needs CAP_NET_ADMIN,
    which the container lacks, and there is no ib0); the files are checked, not applied;
  * RoCE QoS application: no mlx5 netdev, so neither mlnx_qos/dcb nor the sysfs ECN
    writes run; the dry run shows what would run;
  * GPUDirect RDMA itself: no GPU, no NVIDIA driver, no HCA; the nvidia_peermem path
    (rdma_stack: doca) cannot converge here at all, DOCA's repository being unreachable;
  * renaming: the container has no RDMA device, so no udev event runs rdma_rename; the
    rule is checked as a file;
  * memlock: the common role is not applied in this scenario, so the check reports the
    container's limit as a warning; the value itself depends on the host.

When a test fails, the last 50 journal lines of the instance are printed with it.
"""

import configparser
import json
import os

import pytest
from testinfra.utils.ansible_runner import AnsibleRunner

testinfra_hosts = [
    f"podman://{name}"
    for name in AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
]

PACKAGES = [
    "rdma-core",
    "ibverbs-providers",
    "ibverbs-utils",
    "perftest",
    "infiniband-diags",
    "opensm",
]
NETWORKD = "/etc/systemd/network"
FACT = "/etc/ansible/facts.d/rackgate_rdma.fact"
ROCE_CONF = "/etc/rackgate/roce/ens1f0np0.conf"
ROCE_SCRIPT = "/usr/local/sbin/rackgate-roce-qos"
ROCE_UNIT = "rackgate-roce-qos@ens1f0np0.service"



def _ini(host, path):
    """Parse a systemd-style INI file; duplicate keys (IPoIB=) are kept as lists."""
    text = host.file(path).content_string
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            assert line.endswith("]"), f"{path}: bad section line {raw!r}"
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None and "=" in line, f"{path}: line outside a section: {raw!r}"
        key, value = line.split("=", 1)
        current.setdefault(key, []).append(value)
    # configparser as a second, strict opinion on the syntax (no duplicates there).
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(text)
    return sections


@pytest.fixture(scope="module")
def networkd_keys(host):
    """Section.Key names compiled into this systemd-networkd."""
    wanted = [
        "Match.Name",
        "Link.MTUBytes",
        "Network.Address",
        "Network.IPoIB",
        "Network.LinkLocalAddressing",
        "Network.IPv6AcceptRA",
        "IPoIB.Mode",
        "IPoIB.PartitionKey",
        "NetDev.Name",
        "NetDev.Kind",
        "NetDev.MTUBytes",
    ]
    known = set()
    for key in wanted:
        if host.run("grep -c -a -F %s /lib/systemd/systemd-networkd", key).rc == 0:
            known.add(key)
    return known


@pytest.mark.parametrize("name", PACKAGES)
def test_package_installed(host, name):
    assert host.package(name).is_installed, f"package {name} is not installed"


def test_rdma_tools_run(host):
    # libibverbs runs and finds no device: this kernel has no RDMA (ENOSYS).
    devices = host.run("ibv_devices")
    assert "Failed to get IB devices list" in devices.stderr, devices.stderr
    # perftest's --help exits 1; what counts is that it runs and prints its usage.
    assert "ib_write_bw <host>" in host.run("ib_write_bw --help").stdout
    version = host.run("ibstat -V")
    assert version.rc == 0 and "ibstat" in version.stdout + version.stderr
    # No HCA in this kernel: ibstat prints nothing (PROBES.md); the role must notice.
    assert host.run("ibstat").stdout.strip() == ""


def test_ipoib_parent_network(host, networkd_keys):
    net = _ini(host, f"{NETWORKD}/60-rackgate-ib0.network")
    assert net["Match"]["Name"] == ["ib0"]
    assert net["Link"]["MTUBytes"] == ["4092"]
    assert net["Network"]["Address"] == ["10.10.0.11/16"]
    assert net["Network"]["IPoIB"] == ["ib0.8001"]
    assert net["IPoIB"]["Mode"] == ["datagram"]
    _assert_known(net, networkd_keys)


def test_ipoib_pkey_child(host, networkd_keys):
    netdev = _ini(host, f"{NETWORKD}/60-rackgate-ib0.8001.netdev")
    assert netdev["NetDev"] == {"Name": ["ib0.8001"], "Kind": ["ipoib"]}
    assert netdev["IPoIB"] == {"PartitionKey": ["0x8001"], "Mode": ["datagram"]}
    net = _ini(host, f"{NETWORKD}/60-rackgate-ib0.8001.network")
    assert net["Match"]["Name"] == ["ib0.8001"]
    assert net["Network"]["Address"] == ["10.20.0.11/16"]
    assert "IPoIB" not in net, "a child's mode is set in its .netdev"
    _assert_known(netdev, networkd_keys)
    _assert_known(net, networkd_keys)


def test_ipoib_connected_ipv6(host, networkd_keys):
    net = _ini(host, f"{NETWORKD}/60-rackgate-ib1.network")
    assert net["Link"]["MTUBytes"] == ["65520"]
    assert net["Network"]["Address"] == ["fd00:10::11/64"]
    assert net["IPoIB"]["Mode"] == ["connected"]
    _assert_known(net, networkd_keys)


def test_only_listed_ipoib_files(host):
    files = host.run("ls %s", NETWORKD).stdout.split()
    ours = sorted(f for f in files if f.startswith("60-rackgate-"))
    assert ours == [
        "60-rackgate-ib0.8001.netdev",
        "60-rackgate-ib0.8001.network",
        "60-rackgate-ib0.network",
        "60-rackgate-ib1.network",
    ]


def _assert_known(sections, known):
    for section, keys in sections.items():
        for key in keys:
            assert f"{section}.{key}" in known, f"{section}.{key} unknown to systemd-networkd"


def test_networkd_enabled(host):
    assert host.service("systemd-networkd").is_enabled


def test_opensm_config(host):
    assert "sm_priority 14" in host.file("/etc/opensm/opensm.conf").content_string.splitlines()
    ports = host.file("/etc/default/opensm").content_string.splitlines()
    assert 'PORTS="0x0002c9030002fce9"' in ports


@pytest.mark.parametrize("unit", ["opensm.service", "opensm@.service"])
def test_opensm_dropin(host, unit):
    cat = host.run("systemctl cat %s", unit)
    assert cat.rc == 0, cat.stderr
    assert "ConditionPathExists=/dev/infiniband" in cat.stdout.splitlines()


def test_opensm_enabled_and_skipped_without_hca(host):
    assert host.service("opensm").is_enabled
    # Starting it is harmless without an HCA: the conditions fail, the unit stays inactive.
    start = host.run("systemctl start opensm.service")
    assert start.rc == 0, start.stderr
    assert host.check_output("systemctl show -p ConditionResult --value opensm.service") == "no"
    assert host.run("systemctl is-failed opensm.service").stdout.strip() != "failed"


def test_roce_conf(host):
    lines = host.file(ROCE_CONF).content_string.splitlines()
    for expected in (
        'IFACE="ens1f0np0"',
        'TRUST="dscp"',
        'PFC="0,0,0,1,0,0,0,0"',
        'ECN_PRIOS="3"',
        'CNP_DSCP="48"',
        'CNP_802P_PRIO="6"',
        'RDMA_DEVICE="mlx5_0"',
        'TRAFFIC_CLASS="106"',
    ):
        assert expected in lines, f"{expected!r} missing from {ROCE_CONF}"


def test_roce_script_dry_run(host):
    # mlnx_qos is absent here (inbox stack), so the script uses iproute2's dcb.
    result = host.run("%s %s --dry-run", ROCE_SCRIPT, ROCE_CONF)
    assert result.rc == 0, result.stderr
    out = result.stdout.splitlines()
    assert (
        "run: dcb pfc set dev ens1f0np0 prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off"
        in out
    )
    dscp = [line for line in out if line.startswith("run: dcb app replace dev ens1f0np0 dscp-prio")]
    assert len(dscp) == 1 and " 26:3 " in dscp[0] and " 48:6 " in dscp[0], dscp
    ecn = "/sys/class/net/ens1f0np0/ecn"
    assert f"write: 1 > {ecn}/roce_np/enable/3" in out
    assert f"write: 1 > {ecn}/roce_rp/enable/3" in out
    assert f"write: 0 > {ecn}/roce_np/enable/0" in out
    assert f"write: 48 > {ecn}/roce_np/cnp_dscp" in out
    assert f"write: 6 > {ecn}/roce_np/cnp_802p_prio" in out
    assert "write: 106 > /sys/class/infiniband/mlx5_0/tc/1/traffic_class" in out
    assert host.run("sh -n %s", ROCE_SCRIPT).rc == 0


def test_roce_unit(host):
    verify = host.run("systemd-analyze verify %s", ROCE_UNIT)
    assert verify.rc == 0, verify.stderr
    assert host.service(ROCE_UNIT).is_enabled
    assert not host.service(ROCE_UNIT).is_running
    assert host.run("systemctl is-failed %s", ROCE_UNIT).stdout.strip() != "failed"


def test_peermem_entry_removed(host):
    # prepare.yml wrote it; rdma_gpudirect: dmabuf has nothing to load at boot.
    assert not host.file("/etc/modules-load.d/nvidia-peermem.conf").exists


NAMING_RULE = "/etc/udev/rules.d/60-rdma-persistent-naming.rules"


def test_naming_rule_sets_the_kernel_policy(host):
    rules = [line for line in host.file(NAMING_RULE).content_string.splitlines()
             if line.strip() and not line.startswith("#")]
    assert rules == [
        'ACTION=="add", SUBSYSTEM=="infiniband", PROGRAM="rdma_rename %k NAME_KERNEL"'
    ], rules


def test_naming_rule_replaces_the_packages_rule(host):
    # udev reads /etc/udev/rules.d/<name> instead of the package's file of that name.
    package_rule = host.run(
        "dpkg -L rdma-core | grep -E '/rules.d/60-rdma-persistent-naming.rules$'")
    assert package_rule.rc == 0, "rdma-core no longer ships 60-rdma-persistent-naming.rules"
    assert "NAME_FALLBACK" in host.file(package_rule.stdout.split()[0]).content_string
    # PROGRAM= without a path runs from udev's directory: rdma-core puts rdma_rename there.
    assert host.run("dpkg -L rdma-core | grep -E '/udev/rdma_rename$'").rc == 0


def test_naming_rule_passes_udevadm_verify(host):
    if host.run("udevadm verify --help").rc != 0:
        pytest.skip("this udev has no `udevadm verify` (systemd < 254, Debian 12)")
    result = host.run("udevadm verify %s", NAMING_RULE)
    assert result.rc == 0, result.stdout + result.stderr


def test_no_second_limits_file(host):
    found = host.run("grep -rl memlock /etc/security/limits.d /etc/systemd/system.conf.d")
    assert "rdma" not in found.stdout


def test_fact_records_skips(host):
    fact = json.loads(host.file(FACT).content_string)
    assert fact["role"] == "rdma"
    assert fact["stack"] == "inbox"
    assert fact["hca_devices"] == []
    skipped = {entry["step"]: entry["reason"] for entry in fact["skipped"]}
    assert set(skipped) == {"ipoib-bring-up", "opensm-start", "roce-qos-apply"}, skipped
    assert "container" in skipped["ipoib-bring-up"]
    assert "ens1f0np0" in skipped["roce-qos-apply"]
    assert fact["gpudirect"] == "dmabuf"
    checked = fact["gpudirect_checked"]
    assert checked["gpu_driver_kernel_flavor"] == "open", checked
    assert checked["flavor_from"] == "inventory (gpu_driver_kernel_flavor)", checked
    assert checked["min_kernel"] == "5.12" and checked["kernel"], checked
    assert fact["device_naming"] == {
        "policy": "kernel",
        "udev_policy": "NAME_KERNEL",
        "rule": NAMING_RULE,
        "renamed_at_next_boot": [],
    }
    assert fact["memlock"]["ok"] is False
    assert fact["memlock"]["systemd_default"] not in ("", "unknown")
