"""The lustre_client role's checks and repository probe, on the molecule instance.

Each test runs ../preflight.yml (set_vars.yml, preflight.yml and repo-probe.yml only:
nothing is installed or written) against the instance with the scenario's variables
overridden, and expects the play to pass, or to fail with a message naming what it found.
The file:// repositories are directories the test makes in the instance (and removes).
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
from testinfra.utils.ansible_runner import AnsibleRunner

# The instance (its journal is printed when a test fails, roles/conftest.py).
testinfra_hosts = [
    f"podman://{name}"
    for name in AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
]
SCENARIO = Path(__file__).resolve().parents[1]
ROLES = SCENARIO.parents[2]
REPOS = "/srv/rackgate-test-lustre"


def _preflight(**extra_vars: object) -> tuple[int, str]:
    argv = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
            str(SCENARIO / "preflight.yml"), "-e", json.dumps(extra_vars)]
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROLES), "ANSIBLE_NOCOLOR": "1",
           # one line per result, whatever molecule's ansible.cfg chose (its yaml format
           # folds long messages)
           "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def repos(host):
    """A flat repository with its Release file, a pool with dists/trixie/Release, and a
    directory with packages but no Release file."""
    made = host.run(
        "mkdir -p %s/flat %s/pool/dists/trixie %s/bare && touch %s/flat/Release "
        "%s/pool/dists/trixie/Release %s/bare/Packages",
        *[REPOS] * 6)
    assert made.rc == 0, made.stderr
    yield f"file://{REPOS}"
    host.run("rm -rf %s", REPOS)


def test_a_flat_repository_with_its_release_file_passes(host, repos):
    rc, out = _preflight(lustre_client_repo_url=f"{repos}/flat/",
                         lustre_client_repo_required=True)
    assert rc == 0, out[-3000:]
    assert f"metadata probed at {repos}/flat/Release" in out


def test_a_pool_is_probed_under_dists(host, repos):
    rc, out = _preflight(lustre_client_repo_url=f"{repos}/pool",
                         lustre_client_apt_dist="trixie main", lustre_client_repo_required=True)
    assert rc == 0, out[-3000:]
    assert f"metadata probed at {repos}/pool/dists/trixie/Release" in out


def test_a_directory_without_release_file_is_no_repository(host, repos):
    rc, out = _preflight(lustre_client_repo_url=f"{repos}/bare/",
                         lustre_client_repo_required=True)
    assert rc != 0, out[-3000:]
    assert f"its metadata {repos}/bare/Release is no file" in out, out[-3000:]


@pytest.mark.parametrize(("extra_vars", "expected"), [
    pytest.param({"lustre_client_repo_url": "http://mirror.site.example/lustre/client/el9/"},
                 ['lustre_client_repo_url="http://mirror.site.example/lustre/client/el9/"',
                  "names an EL release in its path"],
                 id="el-repository-on-debian"),
    pytest.param({"lustre_client_repo_url": "http://mirror.site.example/lustre/debian/",
                  "lustre_client_repo_allow_unsigned": False},
                 ["has no signing key (lustre_client_repo_key_url is empty)",
                  "APT [trusted=yes]"],
                 id="unsigned-not-allowed"),
    pytest.param({"lustre_client_lnet_build": "tcp"},
                 ['o2ib network(s) ["o2ib0"] but lustre_client_lnet_build=tcp',
                  "rdma_stack=inbox"],
                 id="o2ib-network-with-the-tcp-build"),
])
def test_assert_fires(host, extra_vars, expected):
    rc, out = _preflight(**extra_vars)
    assert rc != 0, out[-3000:]
    for text in expected:
        assert text in out, f"{text!r} not in the output:\n{out[-3000:]}"
