"""Issue 13: ``validate --limit`` takes Ansible's host patterns, resolved by Ansible's own
inventory code (``inventory.limit_hosts``) on a real YAML inventory written to tmp_path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rackgate.cli.main import main
from rackgate.inventory import InventoryError, limit_hosts, load_inventory
from rackgate.refusal import Refusal
from rackgate.selection import select_hosts

BIN = str(Path(sys.executable).parent)
VAULT_PASSWORD = "rg13-limit-vault"


@pytest.fixture(autouse=True)
def _ansible_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    """compute: dgx001..dgx004 (dgx003 and dgx004 through the child group rack12b);
    rack12: dgx002, dgx003 and other9, which is not in compute."""
    doc = {"all": {"children": {
        "compute": {"hosts": {"dgx001": {}, "dgx002": {}},
                    "children": {"rack12b": {"hosts": {"dgx003": {}, "dgx004": {}}}}},
        "rack12": {"hosts": {"dgx002": {}, "dgx003": {}, "other9": {}}},
    }}}
    path = tmp_path / "inventory" / "hosts.yml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc))
    return path.parent


@pytest.mark.parametrize(("limit", "hosts"), [
    ("!dgx004", ["dgx001", "dgx002", "dgx003"]),
    ("compute:!dgx004", ["dgx001", "dgx002", "dgx003"]),
    ("dgx0[01:03]", ["dgx001", "dgx002", "dgx003"]),  # an inventory range
    ("!dgx0[01:02]", ["dgx003", "dgx004"]),
    ("compute:&dgx0[03:16]", ["dgx003", "dgx004"]),
    ("compute[0:1]", ["dgx001", "dgx002"]),  # a subscript, as Ansible reads it
    ("compute:&rack12", ["dgx002", "dgx003"]),
    ("rack12", ["dgx002", "dgx003"]),
    ("dgx004,dgx001", ["dgx001", "dgx004"]),
    ("dgx001, dgx003", ["dgx001", "dgx003"]),
    ("dgx00*", ["dgx001", "dgx002", "dgx003", "dgx004"]),
    ("~dgx00[24]", ["dgx002", "dgx004"]),
])
def test_ansible_host_patterns(inv: Path, limit: str, hosts: list[str]) -> None:
    assert limit_hosts([str(inv)], "compute", limit) == hosts
    assert select_hosts(load_inventory([str(inv)]), "compute", limit) == hosts


def test_retry_file_names_one_host_per_line(inv: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    retry = tmp_path / "site.retry"
    retry.write_text("dgx004\ndgx002\n")
    assert limit_hosts([str(inv)], "compute", f"@{retry}") == ["dgx002", "dgx004"]
    monkeypatch.chdir(tmp_path)  # relative to the working directory, as for Ansible
    assert select_hosts(load_inventory([str(inv)]), "compute", "@site.retry,dgx001") == [
        "dgx001", "dgx002", "dgx004"]
    with pytest.raises(Refusal, match=r"--limit '@nope.retry': nope.retry is not a file"):
        select_hosts(load_inventory([str(inv)]), "compute", "@nope.retry")


def test_no_match_names_the_group_the_limit_and_what_it_matched_outside(inv: Path) -> None:
    loaded = load_inventory([str(inv)])
    with pytest.raises(Refusal, match=r"no host of group 'compute' matches --limit "
                                       r"'other9' \(it selects other9, outside the group\)"):
        select_hosts(loaded, "compute", "other9")
    with pytest.raises(Refusal, match=r"no host of group 'compute' matches --limit "
                                       r"'dgx9\*' \(it selects no host of inventory "):
        select_hosts(loaded, "compute", "dgx9*")
    with pytest.raises(Refusal, match=r"--limit ' , ' names no host pattern"):
        select_hosts(loaded, "compute", " , ")
    with pytest.raises(Refusal, match=r"Ansible cannot resolve --limit '~\(bad': "
                                       r"Invalid host list pattern"):
        select_hosts(loaded, "compute", "~(bad")
    with pytest.raises(InventoryError, match="no group 'gpu'"):
        select_hosts(loaded, "gpu", "dgx001")


def test_vaulted_variables_need_no_vault_password(inv: Path, tmp_path: Path) -> None:
    """A whole-file vaulted group_vars file and an inline !vault value: limit_hosts reads
    only the inventory's structure, so it resolves without any vault password."""
    pw = tmp_path / "vault-pw"
    pw.write_text(VAULT_PASSWORD)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_VAULT")}
    (inv / "group_vars").mkdir()
    vaulted = inv / "group_vars" / "compute.yml"
    vaulted.write_text("rackgate_bmc_password: not-for-limit\n")
    subprocess.run([f"{BIN}/ansible-vault", "encrypt", "--vault-password-file", str(pw),
                    str(vaulted)], check=True, capture_output=True, env=env, timeout=60)
    inline = subprocess.run([f"{BIN}/ansible-vault", "encrypt_string", "--vault-password-file",
                             str(pw), "inline-secret", "--name", "rackgate_bmc_user"],
                            check=True, capture_output=True, text=True, env=env, timeout=60)
    (inv / "host_extra.yml").write_text(  # dgx005 is only here, beside its vaulted value
        "all:\n  children:\n    compute:\n      hosts:\n        dgx005:\n"
        + "".join(f"          {line}\n" for line in inline.stdout.splitlines()))
    assert vaulted.read_text().startswith("$ANSIBLE_VAULT")
    assert limit_hosts([str(inv)], "compute", "!dgx004:!dgx0[02:03]") == ["dgx001", "dgx005"]


def test_cli_refuses_an_empty_limit_only(inv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for empty in ("", "  ", ",", " , :"):
        code = main(["validate", "-i", str(inv), "--profile", "demo", "--limit", empty])
        assert code == 2
        assert "names no host pattern" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    helped = " ".join(capsys.readouterr().out.split())
    assert "Ansible host patterns" in helped and "--keep-artifacts" in helped
