"""Verify the nccl role on the molecule instance (Debian 12, systemd as PID 1, podman).

molecule.yml selects nccl_install_method: wheel with nccl_wheel_url empty (the default): the
controller's pip downloads nvidia-nccl-cu12==2.27.5 in hash-checking mode (nccl_wheel_sha256)
through the build machine's own pip configuration, and the wheel is unpacked in the
container. The nccl-tests archive is on GitHub, unreachable from the build machines.

What is verified in the container:
  * NCCL is really installed: libnccl.so.2 and nccl.h under /opt/nccl/2.27.5/nvidia/nccl,
    /opt/nccl/current points there, libnccl.so links to libnccl.so.2;
  * the dynamic linker finds it: /etc/ld.so.conf.d/rackgate-nccl.conf lists the lib
    directory, `ldconfig -p` lists libnccl.so.2 from it, and a Python process loads it by
    soname (ctypes.CDLL("libnccl.so.2")) and calls ncclGetVersion, which returns the
    wheel's version (22705 for 2.27.5) without needing a GPU;
  * nccl.h declares the same version (NCCL_MAJOR/NCCL_MINOR/NCCL_PATCH);
  * /etc/nccl.conf holds exactly the KEY=VALUE lines of nccl_conf, sorted;
  * /etc/ansible/facts.d/rackgate_nccl.fact records the wheel install, NCCL_HOME, and the
    nccl-tests skip with its reason (the archive URL could not be downloaded), and nothing
    was built: no /opt/nccl-tests, no MPI or compiler installed for nothing.

What cannot be verified in a container (and why):
  * the nccl-tests build and run: its source archive is on GitHub (unreachable here), the
    build needs nvcc (a CUDA toolkit, too large for this image) and a run needs GPUs;
  * the package install path (libnccl2/libnccl-dev from the CUDA repository, APT pin): the
    CUDA repository is unreachable from the build machines;
  * that NCCL honours /etc/nccl.conf: only a communicator on GPUs reads it.

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

NCCL_HOME = "/opt/nccl/2.27.5/nvidia/nccl"
FACT = "/etc/ansible/facts.d/rackgate_nccl.fact"
CONF_LINES = [
    "NCCL_DEBUG=WARN",
    "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1",
    "NCCL_IB_TIMEOUT=22",
    "NCCL_SOCKET_IFNAME=eth0",
    "NCCL_TOPO_FILE=/etc/nccl/topo.xml",
]



@pytest.fixture(scope="module")
def fact(host):
    return json.loads(host.file(FACT).content_string)


def test_wheel_unpacked(host):
    lib = host.file(f"{NCCL_HOME}/lib/libnccl.so.2")
    assert lib.is_file and lib.size > 100 * 1024 * 1024, "libnccl.so.2 missing or truncated"
    assert host.file(f"{NCCL_HOME}/include/nccl.h").is_file
    link = host.file(f"{NCCL_HOME}/lib/libnccl.so")
    assert link.is_symlink and link.linked_to == f"{NCCL_HOME}/lib/libnccl.so.2"
    current = host.file("/opt/nccl/current")
    assert current.is_symlink and current.linked_to == NCCL_HOME


def test_header_version(host):
    header = host.file(f"{NCCL_HOME}/include/nccl.h").content_string
    assert "#define NCCL_MAJOR 2" in header
    assert "#define NCCL_MINOR 27" in header
    assert "#define NCCL_PATCH 5" in header


def test_linker_path(host):
    lines = host.file("/etc/ld.so.conf.d/rackgate-nccl.conf").content_string.splitlines()
    assert f"{NCCL_HOME}/lib" in lines
    cache = host.check_output("ldconfig -p")
    assert f"libnccl.so.2 (libc6,x86-64) => {NCCL_HOME}/lib/libnccl.so.2" in cache, cache


def test_library_loads_and_reports_its_version(host):
    # ncclGetVersion needs no GPU: it proves the library loads, resolves and runs.
    script = (
        "import ctypes; lib = ctypes.CDLL('libnccl.so.2'); v = ctypes.c_int(); "
        "rc = lib.ncclGetVersion(ctypes.byref(v)); print(rc, v.value)"
    )
    result = host.run(f'python3 -c "{script}"')
    assert result.rc == 0, result.stderr
    assert result.stdout.split() == ["0", "22705"], result.stdout


def test_nccl_conf(host):
    conf = host.file("/etc/nccl.conf")
    assert conf.mode == 0o644
    lines = [
        line for line in conf.content_string.splitlines() if line and not line.startswith("#")
    ]
    assert lines == CONF_LINES


def test_fact_file(host, fact):
    assert host.file(FACT).mode == 0o644
    assert fact["role"] == "nccl"
    assert fact["install_method"] == "wheel"
    assert fact["version"] == "2.27.5"
    assert fact["nccl_home"] == NCCL_HOME
    assert fact["library"] == f"{NCCL_HOME}/lib/libnccl.so.2"
    assert fact["conf_keys"] == [line.split("=", 1)[0] for line in CONF_LINES]


def test_nccl_tests_skip_recorded(host, fact):
    skips = [entry for entry in fact["skipped"] if entry["step"] == "nccl-tests"]
    assert len(skips) == 1, fact["skipped"]
    reason = skips[0]["reason"]
    assert "https://github.com/NVIDIA/nccl-tests/archive/v2.17.6.tar.gz" in reason
    assert "could not be downloaded" in reason
    assert fact["nccl_tests"] == {
        "enabled": True,
        "version": "2.17.6",
        "built": False,
        "directory": "",
    }


def test_nothing_built_or_installed_for_nccl_tests(host):
    assert not host.file("/opt/nccl-tests").exists
    for name in ("openmpi-bin", "libopenmpi-dev", "g++", "make"):
        assert not host.package(name).is_installed, f"{name} installed although nothing is built"
