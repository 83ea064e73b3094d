"""Verify the kubernetes role on the molecule instance (Debian 12 or 13, systemd as PID 1,
podman).

The instance is the only control-plane host (molecule.yml sets the control-plane group to
"all"), with the snapshotter `native`, registry mirrors and a local sandbox image.

What is verified in the container:
  * containerd (Debian's package: 1.6.x on Debian 12, 1.7.x on 13) is installed, enabled
    and active, its unit passes `systemd-analyze verify`, and the daemon answers: `ctr version` reports the server,
    `ctr plugins ls` shows the cri plugin and the configured snapshotter as ok;
  * the configuration containerd really runs with: `containerd config dump` (parsed as TOML)
    has SystemdCgroup = true for runc and for the `nvidia` runtime, BinaryName
    nvidia-container-runtime, the default runtime, the sandbox image, the snapshotter, the CNI
    directory and the registry config_path; the CRI plugin's start-up line in the journal
    shows the sandbox image and snapshotter (so the restart handler ran after the change);
  * the configured snapshotter works: a snapshot is prepared, listed and removed through ctr;
  * /etc/containerd/certs.d/<registry>/hosts.toml (parsed as TOML) lists the mirrors in order;
  * /etc/modules-load.d and /etc/sysctl.d files hold overlay, br_netfilter and the bridge /
    ip_forward values; /etc/fstab has no active swap line;
  * /etc/kubernetes/kubeadm-config.yaml (mode 0600, parsed as YAML) has the Init, Cluster and
    Kubelet documents with the version, endpoint, subnets, CRI socket and cgroupDriver systemd;
  * the Helm values files parse as YAML and hold the role's values (GPU Operator driver and
    toolkit off, the scenario's extra dcgmExporter value; Network Operator NFD off and the CNI
    directory shared with containerd);
  * /etc/ansible/facts.d/rackgate_kubernetes.fact records every skipped step with its reason
    and the missing nvidia-container-runtime as a warning;
  * nothing is faked: kubeadm, kubelet and kubectl are not installed, no cluster exists, and
    the check-mode run that preceded converge (molecule's `check` step, with the repository
    taken as reachable) left no APT source or key behind.

What cannot be verified in a container (and why):
  * kubeadm init/join and the kubelet: pkgs.k8s.io is unreachable from this machine, so the
    packages cannot be installed; the role probes the repository, skips the install, init and
    join, and records it. The init/join tasks were only walked in check mode.
  * running a pod or container through containerd: the unprivileged container has no
    CAP_SYS_ADMIN, so no snapshot can be mounted (and no image registry is reachable);
    overlayfs is not used because /var/lib/containerd sits on the container's overlayfs root.
  * the NVIDIA runtime: no GPU and no nvidia-container-runtime here; the entry is configured
    and the warning recorded.
  * GPU and Network Operator deployment: no cluster answers, so helm is not run (recorded).
  * loading kernel modules, applying sysctl values and swapoff: the kernel, /proc/sys and swap
    are the host's; the files are written and the skips recorded.

When a test fails, the last 50 journal lines of the instance are printed with it.
"""

import json
import os
import tomllib

import pytest
import yaml
from testinfra.utils.ansible_runner import AnsibleRunner

# Run commands with `podman exec` on the molecule instances (much faster than molecule's
# default Ansible connection, which runs one module per command).
testinfra_hosts = [
    f"podman://{name}"
    for name in AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
]

CRI = 'io.containerd.grpc.v1.cri'
SANDBOX_IMAGE = "registry.rack.test:5000/pause:3.10"
SNAPSHOTTER = "native"
KUBEADM_CONFIG = "/etc/kubernetes/kubeadm-config.yaml"
FACT_FILE = "/etc/ansible/facts.d/rackgate_kubernetes.fact"
VALUES_DIR = "/etc/rackgate/helm"



@pytest.fixture(scope="module")
def containerd_config(host):
    """The configuration the running containerd merged (`containerd config dump`), as a dict."""
    return tomllib.loads(host.check_output("containerd config dump"))


@pytest.fixture(scope="module")
def fact(host):
    return json.loads(host.file(FACT_FILE).content_string)


# --- containerd ------------------------------------------------------------------------
def containerd_series(host):
    """The containerd series Debian packages for the container's release."""
    release = host.system_info.release.split(".")[0]
    return {"12": "1.6.", "13": "1.7."}[release]


def test_containerd_package(host):
    package = host.package("containerd")
    assert package.is_installed
    assert package.version.startswith(containerd_series(host)), package.version


def test_containerd_service(host):
    service = host.service("containerd")
    assert service.is_enabled
    assert service.is_running
    result = host.run("systemd-analyze verify containerd.service")
    assert result.rc == 0, result.stderr


def test_containerd_answers(host):
    version = host.run("ctr version")
    assert version.rc == 0, version.stderr
    assert "Server:" in version.stdout, version.stdout
    assert containerd_series(host) in version.stdout.split("Server:")[1], version.stdout


def test_cri_and_snapshotter_plugins_ok(host):
    plugins = {}
    for line in host.check_output("ctr plugins ls").splitlines()[1:]:
        fields = line.split()
        plugins[(fields[0], fields[1])] = fields[-1]
    assert plugins.get(("io.containerd.grpc.v1", "cri")) == "ok", plugins
    assert plugins.get(("io.containerd.snapshotter.v1", SNAPSHOTTER)) == "ok", plugins


def test_effective_runtimes_use_systemd_cgroups(containerd_config):
    cri = containerd_config["plugins"][CRI]
    runtimes = cri["containerd"]["runtimes"]
    assert cri["containerd"]["default_runtime_name"] == "runc"
    assert runtimes["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_effective_cri_settings(containerd_config):
    cri = containerd_config["plugins"][CRI]
    assert cri["sandbox_image"] == SANDBOX_IMAGE
    assert cri["containerd"]["snapshotter"] == SNAPSHOTTER
    assert cri["cni"]["bin_dir"] == "/opt/cni/bin"
    assert cri["registry"]["config_path"] == "/etc/containerd/certs.d"


def test_running_cri_plugin_took_the_configuration(host):
    # The CRI plugin logs its whole configuration when it starts: the running daemon
    # (restarted by the handler after the role wrote config.toml) uses the role's values.
    log = host.check_output("journalctl -u containerd --no-pager -o cat | grep 'Start cri plugin' | tail -n 1")
    assert f"SandboxImage:{SANDBOX_IMAGE}" in log, log
    assert f"Snapshotter:{SNAPSHOTTER}" in log, log
    assert "DefaultRuntimeName:runc" in log, log
    assert "nvidia:{Type:io.containerd.runc.v2" in log, log
    assert "SystemdCgroup:true" in log, log


def test_snapshotter_prepares_snapshots(host):
    ctr = f"ctr --namespace rackgate-verify snapshots --snapshotter {SNAPSHOTTER}"
    host.run(f"{ctr} rm molecule-verify")
    try:
        prepared = host.run(f"{ctr} prepare molecule-verify")
        assert prepared.rc == 0, prepared.stderr
        listed = host.check_output(f"{ctr} ls")
        assert "molecule-verify" in listed and "Active" in listed, listed
    finally:
        host.run(f"{ctr} rm molecule-verify")


@pytest.mark.parametrize(
    ("registry", "server", "mirrors"),
    [
        ("registry.k8s.io", "https://registry.k8s.io", ["https://registry.rack.test:5000"]),
        (
            "docker.io",
            "https://registry-1.docker.io",
            ["https://registry.rack.test:5000", "https://mirror2.rack.test"],
        ),
    ],
)
def test_registry_mirrors(host, registry, server, mirrors):
    hosts_toml = tomllib.loads(host.file(f"/etc/containerd/certs.d/{registry}/hosts.toml").content_string)
    assert hosts_toml["server"] == server
    assert list(hosts_toml["host"]) == mirrors
    for mirror in mirrors:
        assert hosts_toml["host"][mirror]["capabilities"] == ["pull", "resolve"]


# --- Kernel prerequisites ------------------------------------------------------------------
def _lines(host, path):
    return [
        line.strip()
        for line in host.file(path).content_string.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def test_modules_load_file(host):
    assert _lines(host, "/etc/modules-load.d/90-rackgate-kubernetes.conf") == ["overlay", "br_netfilter"]


def test_sysctl_file(host):
    lines = _lines(host, "/etc/sysctl.d/90-rackgate-kubernetes.conf")
    for expected in (
        "net.bridge.bridge-nf-call-iptables = 1",
        "net.bridge.bridge-nf-call-ip6tables = 1",
        "net.ipv4.ip_forward = 1",
    ):
        assert expected in lines, lines


def test_no_active_swap_in_fstab(host):
    for line in _lines(host, "/etc/fstab"):
        assert line.split()[2:3] != ["swap"], line


# --- kubeadm -------------------------------------------------------------------------------
def test_kubeadm_config(host):
    config = host.file(KUBEADM_CONFIG)
    assert config.mode == 0o600
    docs = {doc["kind"]: doc for doc in yaml.safe_load_all(config.content_string)}
    assert set(docs) == {"InitConfiguration", "ClusterConfiguration", "KubeletConfiguration"}
    assert docs["InitConfiguration"]["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert docs["InitConfiguration"]["nodeRegistration"]["criSocket"] == "unix:///run/containerd/containerd.sock"
    cluster = docs["ClusterConfiguration"]
    assert cluster["kubernetesVersion"] == "v1.31.4"
    assert cluster["controlPlaneEndpoint"] == "k8s-api.rack.test:6443"
    assert cluster["imageRepository"] == "registry.k8s.io"
    assert cluster["networking"] == {
        "podSubnet": "10.244.0.0/16",
        "serviceSubnet": "10.96.0.0/12",
        "dnsDomain": "cluster.local",
    }
    assert docs["KubeletConfiguration"]["cgroupDriver"] == "systemd"


def test_nothing_faked_kubernetes_not_installed(host):
    for binary in ("kubeadm", "kubelet", "kubectl"):
        assert not host.exists(binary), f"{binary} is installed, but pkgs.k8s.io is unreachable here"
    assert not host.file("/etc/kubernetes/admin.conf").exists
    assert not host.file("/etc/kubernetes/kubelet.conf").exists


def test_check_mode_run_left_no_trace(host):
    # molecule's `check` step ran the role with --check and the repository taken as
    # reachable: it walked these tasks and must not have written their files.
    assert not host.file("/etc/apt/sources.list.d/rackgate-kubernetes.list").exists
    assert not host.file("/etc/apt/keyrings/rackgate-kubernetes.asc").exists


# --- Helm values ---------------------------------------------------------------------------
def test_gpu_operator_values(host):
    values = yaml.safe_load(host.file(f"{VALUES_DIR}/gpu-operator-values.yaml").content_string)
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"] == {"enabled": False}
    assert values["operator"]["defaultRuntime"] == "containerd"
    assert values["dcgmExporter"] == {"enabled": True}  # kubernetes_gpu_operator_values


def test_network_operator_values(host):
    values = yaml.safe_load(host.file(f"{VALUES_DIR}/network-operator-values.yaml").content_string)
    assert values["nfd"] == {"enabled": False}  # the GPU Operator deploys NFD
    assert values["operator"]["cniBinDirectory"] == "/opt/cni/bin"


# --- What was skipped, and why -------------------------------------------------------------
def test_fact_file_records_the_skips(fact):
    assert fact["role"] == "kubernetes"
    assert fact["in_container"] is True
    assert fact["package_repository_reachable"] is False
    assert fact["node_role"] == "control-plane (init)"
    reasons = {entry["step"]: entry["reason"] for entry in fact["skipped"]}
    expected = {
        "load kernel modules": "container",
        "apply sysctl": "container",
        "swapoff": "container",
        "install kubelet, kubeadm, kubectl": "does not answer",
        "kubeadm init": "not installed",
        "helm install gpu-operator, network-operator": "no cluster answers",
    }
    assert set(reasons) == set(expected), reasons
    for step, words in expected.items():
        assert words in reasons[step], (step, reasons[step])


def test_fact_file_records_the_missing_nvidia_runtime(fact):
    assert any("nvidia-container-runtime is missing" in warning for warning in fact["warnings"]), fact[
        "warnings"
    ]
    assert fact["containerd"]["snapshotter"] == SNAPSHOTTER
    assert fact["helm_values"] == [
        f"{VALUES_DIR}/gpu-operator-values.yaml",
        f"{VALUES_DIR}/network-operator-values.yaml",
    ]
