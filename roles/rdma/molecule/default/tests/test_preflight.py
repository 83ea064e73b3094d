"""The rdma role's asserts fire on bad combinations, on the molecule instance.

Each test runs ../preflight.yml (the role's set_vars.yml and preflight.yml only: nothing
is installed or written) against the instance with the scenario's variables overridden by
one bad combination, and expects the play to fail at the named assert, with a message that
names the values it found. One good combination passes, so the failures come from the
values and not from the harness.
"""

import os
import subprocess
from pathlib import Path

import pytest
from testinfra.utils.ansible_runner import AnsibleRunner

# The instance, for the journal printed when a test fails (roles/conftest.py).
testinfra_hosts = [
    f"podman://{name}"
    for name in AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts("all")
]
SCENARIO = Path(__file__).resolve().parents[1]
ROLES = SCENARIO.parents[2]


def _preflight(*extra_vars: str) -> subprocess.CompletedProcess[str]:
    argv = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"],
            str(SCENARIO / "preflight.yml")]
    for value in extra_vars:
        argv += ["-e", value]
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(ROLES), "ANSIBLE_NOCOLOR": "1",
           # one line per result, whatever molecule's ansible.cfg chose (its yaml format
           # folds long messages)
           "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_the_scenarios_own_variables_pass(host):
    result = _preflight()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "rdma_gpudirect=dmabuf: gpu_driver_kernel_flavor=open" in result.stdout
    assert "rdma_device_naming=kernel: rdma_roce_interfaces ib_device" in result.stdout


@pytest.mark.parametrize(
    ("extra_vars", "expected"),
    [
        pytest.param(
            ['{"rdma_gpudirect": "peermem", "rdma_stack": "inbox"}'],
            ["rdma_gpudirect=peermem needs rdma_stack=doca; found rdma_stack=inbox"],
            id="peermem-on-the-inbox-stack",
        ),
        pytest.param(
            ['{"rdma_gpudirect": "dmabuf", "gpu_driver_kernel_flavor": "proprietary"}'],
            ["rdma_gpudirect=dmabuf needs the NVIDIA open kernel modules",
             "found gpu_driver_kernel_flavor=proprietary"
             " (from inventory (gpu_driver_kernel_flavor))"],
            id="dmabuf-with-proprietary-modules",
        ),
        pytest.param(
            ['{"rdma_gpudirect": true}'],
            ["rdma_gpudirect must be none, peermem or dmabuf; received true"],
            id="the-former-boolean",
        ),
        pytest.param(
            ['{"rdma_device_naming": "pci"}'],
            ['rdma_device_naming="pci" (NAME_PCI) names devices like ibp24s0',
             '["mlx5_0"] in rdma_roce_interfaces (ib_device)',
             '["mlx5_0", "mlx5_3"] in nccl_conf.NCCL_IB_HCA="=mlx5_0:1,mlx5_3:1" (exact names)'],
            id="mlx5-names-with-pci-naming",
        ),
        pytest.param(
            ['{"rdma_device_naming": "kernel", "rdma_roce_interfaces": [], '
             '"nccl_conf": {"NCCL_IB_HCA": "ibp24s0,ibp64s0"}}'],
            ['rdma_device_naming="kernel" (NAME_KERNEL) names devices like mlx5_0',
             '["ibp24s0", "ibp64s0"] in nccl_conf.NCCL_IB_HCA="ibp24s0,ibp64s0" (name prefixes)'],
            id="pci-names-with-kernel-naming",
        ),
    ],
)
def test_assert_fires(host, extra_vars, expected):
    result = _preflight(*extra_vars)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out[-3000:]
    for text in expected:
        assert text in out, f"{text!r} not in the output:\n{out[-3000:]}"
