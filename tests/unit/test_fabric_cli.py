"""`rackgate fabric plan | netfile | topology | check`, through rackgate.cli.main.main: what
each prints or writes, and the one-line refusals (exit 2) naming the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rackgate.cli.main import main
from rackgate.fabric.design import design
from rackgate.fabric.netfile import netfile
from rackgate.fabric.plan import load_plan, plan_document
from rackgate.fabric.slurm_topology import topology_conf, topology_vars

ROOT = Path(__file__).resolve().parents[2]
PLAN_32 = ["fabric", "plan", "--nodes", "32", "--rails", "8", "--leaf-ports", "64",
           "--sm-host", "gpu001", "--sm-priority", "14"]


@pytest.fixture
def plan_file(tmp_path: Path) -> Path:
    path = tmp_path / "fabric.yml"
    assert main([*PLAN_32, "-o", str(path)]) == 0
    return path


def test_plan_writes_the_designed_plan_with_the_command_that_made_it(tmp_path, capsys):
    plan_file = tmp_path / "fabric.yml"
    assert main([*PLAN_32, "-o", str(plan_file)]) == 0
    assert capsys.readouterr() == ("", f"wrote {plan_file}\n")
    text = plan_file.read_text()
    assert text.startswith(
        "# Fabric plan 'fabric' (schema rackgate.fabric/1): a rail-optimised fat tree written "
        "by\n#   rackgate fabric plan --nodes 32 --rails 8 --leaf-ports 64 --speed HDR --width "
        "4X \\\n#     --host-format 'gpu{:03d}' --hca-format 'mlx5_{}' --name fabric "
        "--sm-priority 14 \\\n#     --sm-host gpu001\n")
    assert plan_document(load_plan(plan_file).plan) == plan_document(
        design(32, 8, 64, sm_hosts=["gpu001"], sm_priority=14))
    lines = text.splitlines()
    assert "  - {host: gpu001, hca: mlx5_0, port: 1, rail: 0, switch: su1-leaf-r0, " \
           "switch_port: 1, cable: su1-leaf-r0/1}" in lines
    # header (its command wrapped over 3 lines), scalars, subnet_manager, then one line per
    # switch, node port and link
    assert len(lines) == 5 + 4 + 4 + (1 + 12) + (1 + 256) + (1 + 256)


def test_the_header_says_how_to_plan_it_again(tmp_path, capsys):
    first, again = tmp_path / "a.yml", tmp_path / "b.yml"
    assert main(["fabric", "plan", "--nodes", "6", "--rails", "2", "--leaf-ports", "4",
                 "--hcas", "mlx5_0,mlx5_3", "--host-format", "dgx{:02d}", "--speed", "EDR",
                 "--rack", "r13", "-o", str(first)]) == 0
    lines = first.read_text().splitlines()[1:]
    wrapped = lines[:next(i for i, line in enumerate(lines) if not line.endswith("\\")) + 1]
    command = " ".join(line.removeprefix("#").strip().removesuffix("\\").strip()
                       for line in wrapped).removeprefix("rackgate ")
    assert "--hca-format" not in command and "--sm-priority" not in command
    assert main([*command.replace("'", "").split(), "-o", str(again)]) == 0
    assert again.read_text() == first.read_text()
    assert "# No subnet manager is planned" in first.read_text()


def test_plan_refuses_to_overwrite_without_force(plan_file, capsys):
    capsys.readouterr()
    before = plan_file.read_text()
    assert main(["fabric", "plan", "--nodes", "2", "--rails", "1", "--leaf-ports", "4",
                 "-o", str(plan_file)]) == 2
    assert capsys.readouterr().err == (f"rackgate fabric plan: {plan_file} exists: give "
                                       "--force to overwrite it\n")
    assert plan_file.read_text() == before
    assert main(["fabric", "plan", "--nodes", "2", "--rails", "1", "--leaf-ports", "4",
                 "-o", str(plan_file), "--force"]) == 0
    assert len(load_plan(plan_file).plan.nodes) == 2


def test_plan_prints_to_stdout_and_refuses_an_impossible_design(capsys):
    assert main(["fabric", "plan", "--nodes", "2", "--rails", "1", "--leaf-ports", "4"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["schema"] == "rackgate.fabric/1"
    assert main(["fabric", "plan", "--nodes", "9000", "--rails", "8", "--leaf-ports", "64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rackgate fabric plan: 9000 nodes are too many for three levels")
    assert err.count("\n") == 1


def test_check_summarises_a_valid_plan(plan_file, capsys):
    capsys.readouterr()
    assert main(["fabric", "check", "--plan", str(plan_file)]) == 0
    sha = load_plan(plan_file).sha256[:12]
    assert capsys.readouterr().out.splitlines() == [
        f"fabric plan {plan_file}: 'fabric', valid (sha256 {sha})",
        "switches: 8 leaf, 4 spine, 0 core",
        "node ports: 256 on 32 hosts",
        "rails: 0-7, 32 ports each",
        "links: 512 (256 node, 256 inter-switch), at 4X HDR",
        "subnet manager: gpu001 (priority 14)"]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda t: t.replace("switch_port: 2,", "switch_port: 99,", 1),
     "node port 'gpu002 mlx5_0': switch 'su1-leaf-r0' has 64 ports, not port 99"),
    (lambda t: t.replace("speed: HDR", "speed: HDR200"), "speed: Input should be"),
    (lambda t: t.replace("cable: su1-leaf-r0/2}", "cable: su1-leaf-r0/1}", 1),
     "cable label 'su1-leaf-r0/1' is already on node port 'gpu001 mlx5_0'"),
    (lambda t: t + "extra: 1\n", "extra: Extra inputs are not permitted"),
    (lambda t: t.replace("schema: rackgate.fabric/1", "schema: [oops"), "not YAML"),
])
def test_a_damaged_plan_is_one_line_naming_the_file_and_field(plan_file, capsys, edit,
                                                             message):
    plan_file.write_text(edit(plan_file.read_text()))
    capsys.readouterr()
    for command in (["check"], ["netfile"], ["topology"]):
        assert main(["fabric", *command, "--plan", str(plan_file)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"rackgate fabric {command[0]}: fabric plan {plan_file}: "), err
        assert message in err and err.count("\n") == 1, err


def test_a_missing_plan_is_named(tmp_path, capsys):
    assert main(["fabric", "check", "--plan", str(tmp_path / "nope.yml")]) == 2
    assert capsys.readouterr().err == (f"rackgate fabric check: fabric plan "
                                       f"{tmp_path / 'nope.yml'}: No such file or directory\n")


def test_netfile_and_topology_print_what_the_modules_make(plan_file, tmp_path, capsys):
    plan = load_plan(plan_file).plan
    capsys.readouterr()
    assert main(["fabric", "netfile", "--plan", str(plan_file)]) == 0
    assert capsys.readouterr().out == netfile(plan)
    assert main(["fabric", "netfile", "--plan", str(plan_file), "--first", "spine-02",
                 "-o", str(tmp_path / "net")]) == 0
    assert (tmp_path / "net").read_text() == netfile(plan, "spine-02")
    for plugin in ("tree", "block"):
        assert main(["fabric", "topology", "--plan", str(plan_file), "--plugin", plugin]) == 0
        assert capsys.readouterr().out == topology_conf(plan, plugin)
    assert main(["fabric", "topology", "--plan", str(plan_file), "--vars"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# The slurm role's topology variables from fabric plan ")
    assert yaml.safe_load(out) == topology_vars(plan)


def test_netfile_refuses_a_speed_ibsim_cannot_simulate(capsys):
    example = ROOT / "inventory/example-dgx-h100/fabric.yml"
    assert main(["fabric", "netfile", "--plan", str(example)]) == 2
    assert "is planned at NDR, which ibsim 0.10 cannot simulate" in capsys.readouterr().err


def test_the_example_inventorys_plan_is_the_generated_one():
    """inventory/example-dgx-h100/fabric.yml: its four DGX H100 (host_vars) on the eight
    compute rails, HCAs as the dgx-h100 profile names them (fabric.ports compute_cas)."""
    loaded = load_plan(ROOT / "inventory/example-dgx-h100/fabric.yml")
    hosts = sorted(p.stem for p in (ROOT / "inventory/example-dgx-h100/host_vars").glob("dgx*"))
    profile = yaml.safe_load((ROOT / "validators/rackgate/profiles/dgx-h100.yaml").read_text())
    cas = profile["checks"]["fabric.ports"]["params"]["compute_cas"]
    assert list(loaded.plan.hosts) == hosts
    assert plan_document(loaded.plan) == plan_document(design(
        len(hosts), len(cas), 64, speed="NDR", host_format="dgx{:03d}", hcas=cas,
        name="example-dgx-h100"))
