"""rackgate healthcheck's parsers and items over fixtures written from the tools' published
formats (tests/fixtures/healthcheck/, each with its source in a header), and its strict
configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from rackgate.health import Health
from rackgate.health import gpu as g
from rackgate.health import node as n
from rackgate.health.config import EXAMPLE, UNLIMITED, ConfigError, Mount, load_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "healthcheck"


def fixture(name: str) -> str:
    """A fixture without its header (the leading "# " lines that say where it came from)."""
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines(keepends=True)
    while lines and lines[0].startswith("# "):
        lines.pop(0)
    return "".join(lines)


# --- gpu_count, gpu_ecc -------------------------------------------------------------------

def test_eight_healthy_gpus_pass_count_and_ecc():
    gpus = g.parse_gpus(fixture("nvidia-smi_8gpus_ok.csv"))
    assert [x.index for x in gpus] == list(range(8))
    assert g.judge_count(gpus, 8).health is Health.PASS
    assert g.judge_ecc(gpus).health is Health.PASS


def test_a_gpu_fallen_off_fails_the_count():
    r = g.judge_count(g.parse_gpus(fixture("nvidia-smi_gpu_missing.csv")), 8)
    assert (r.health, r.why) == (Health.FAIL, "7 GPUs found, 8 expected")


def test_no_gpu_listed_fails_the_count_and_is_an_ecc_error():
    assert g.judge_count([], 8).health is Health.FAIL
    assert g.judge_ecc([]).health is Health.ERROR


def test_uncorrectable_ecc_fails_naming_the_gpu():
    r = g.judge_ecc(g.parse_gpus(fixture("nvidia-smi_ecc_uncorrected.csv")))
    assert r.health is Health.FAIL
    assert r.why == "GPU 5 (00000000:AB:00.0): 3 uncorrectable ECC errors since the driver loaded"


def test_ecc_not_reported_is_an_error_not_a_pass():
    r = g.judge_ecc(g.parse_gpus(fixture("nvidia-smi_ecc_disabled.csv")))
    assert r.health is Health.ERROR and "GPU 0, 1" in r.why


@pytest.mark.parametrize("line", ["0, 00000000:18:00.0", "x, 00000000:18:00.0, 0",
                                  "0, 00000000:18:00.0, lots", "No devices were found"])
def test_gpu_lines_of_another_shape_are_refused(line):
    with pytest.raises(g.GpuParseError, match="nvidia-smi line"):
        g.parse_gpus(line)


# --- gpu_xid ------------------------------------------------------------------------------

def test_xid_79_fails_naming_the_device():
    xids = g.parse_xids(fixture("kernel_xid79_fallen_off_bus.log"))
    assert dict(xids) == {(79, "PCI:0000:5d:00"): 1}
    r = g.judge_xids(xids, frozenset({13, 31, 43, 45}))
    assert r.health is Health.FAIL and "Xid 79 on PCI:0000:5d:00 (x1)" in r.why


def test_application_xids_on_the_list_pass_and_off_it_fail():
    xids = g.parse_xids(fixture("kernel_xid13_app_fault.log"))
    assert sum(xids.values()) == 3
    assert g.judge_xids(xids, frozenset({13, 31})).health is Health.PASS
    r = g.judge_xids(xids, frozenset({13}))
    assert r.health is Health.FAIL and "Xid 31" in r.why and "Xid 13" not in r.why


def test_no_xid_passes():
    assert g.judge_xids(g.parse_xids("usb 1-1: new device\n"), frozenset()).health is Health.PASS


# --- ib_ports (sysfs: Documentation/ABI/stable/sysfs-class-infiniband) ------------------

def test_active_port_at_its_rate_passes():
    assert n.judge_ib_port("mlx5_0", 1, 400.0, "4: ACTIVE\n", "400 Gb/sec (4X NDR)\n") \
        == "mlx5_0/1: 4: ACTIVE at 400 Gb/s"


@pytest.mark.parametrize(("state", "rate", "evidence", "says"), [
    ("1: DOWN\n", "400 Gb/sec (4X NDR)\n", False, "state '1: DOWN'"),
    ("2: INIT\n", "400 Gb/sec (4X NDR)\n", False, "state '2: INIT'"),
    ("4: ACTIVE\n", "200 Gb/sec (2X NDR)\n", False, "rate 200 Gb/s, expected 400"),
    ("4: ACTIVE\n", "fast\n", True, "rate 'fast'"),
    (None, None, True, "no sysfs port"),
])
def test_port_problems(state, rate, evidence, says):
    with pytest.raises(n.PortProblem, match="mlx5_0/1: ") as exc:
        n.judge_ib_port("mlx5_0", 1, 400.0, state, rate)
    assert says in str(exc.value) and exc.value.evidence is evidence


def test_ports_missing_are_an_error_and_a_down_port_a_failure():
    missing = n.PortProblem("a", evidence=True)
    assert n.judge_ib_ports([missing], 1).health is Health.ERROR
    assert n.judge_ib_ports([missing, n.PortProblem("b")], 2).health is Health.FAIL
    assert n.judge_ib_ports([], 2).health is Health.PASS


# --- mounts -------------------------------------------------------------------------------

def test_mountinfo_is_parsed_with_its_escapes():
    mounts = n.parse_mountinfo(fixture("mountinfo_ok.txt"))
    assert [m.mount_point for m in mounts][-3:] == ["/home", "/lustre", "/local scratch"]
    assert mounts[-2].fstype == "lustre" and mounts[-2].source == "10.0.0.5@o2ib:/scratch"


def test_required_mounts_present_pass():
    mounts = n.parse_mountinfo(fixture("mountinfo_ok.txt"))
    required = [Mount("/home", "nfs4"), Mount("/lustre", "lustre"), Mount("/local scratch", "xfs")]
    assert n.judge_mounts(mounts, required).health is Health.PASS


def test_missing_mount_and_wrong_fstype_both_named():
    r = n.judge_mounts(n.parse_mountinfo(fixture("mountinfo_lustre_missing.txt")),
                       [Mount("/home", "nfs4"), Mount("/lustre", "lustre")])
    assert r.health is Health.FAIL
    assert r.why == ("/home: fstype nfs (from nas01:/export/home), expected nfs4; "
                     "/lustre: not mounted (expected lustre)")


def test_the_last_mount_on_a_path_is_the_one_seen():
    text = ("61 22 0:51 / /scratch rw - lustre fs:/s rw\n"
            "70 61 0:60 / /scratch rw - tmpfs tmpfs rw\n")
    assert n.judge_mounts(n.parse_mountinfo(text), [Mount("/scratch", "lustre")]).health \
        is Health.FAIL


def test_mountinfo_line_without_separator_is_refused():
    with pytest.raises(ValueError, match="mountinfo line"):
        n.parse_mountinfo("22 1 259:2 / / rw,relatime ext4 /dev/sda rw")


# --- memlock ------------------------------------------------------------------------------

def test_unlimited_memlock_passes_unlimited():
    soft, hard = n.parse_memlock(fixture("limits_memlock_unlimited.txt"))
    assert (soft, hard) == (UNLIMITED, UNLIMITED)
    assert n.judge_memlock(soft, hard, UNLIMITED, "slurmd").health is Health.PASS


def test_eight_mib_fails_unlimited_and_passes_a_lower_floor():
    soft, hard = n.parse_memlock(fixture("limits_memlock_8m.txt"))
    assert (soft, hard) == (8388608, 8388608)
    r = n.judge_memlock(soft, hard, UNLIMITED, "slurmd (pid 7)")
    assert r.health is Health.FAIL and "at least unlimited needed" in r.why
    assert n.judge_memlock(soft, hard, 65536, "slurmd").health is Health.PASS
    assert n.judge_memlock(65536, UNLIMITED, 1 << 20, "slurmd").health is Health.FAIL


def test_limits_without_memlock_row_are_refused():
    with pytest.raises(ValueError, match="Max locked memory"):
        n.parse_memlock("Limit Soft Limit Hard Limit Units\n")
    with pytest.raises(ValueError, match="neither a number nor unlimited"):
        n.parse_memlock("Max locked memory         lots                 8                    bytes")


# --- systemd_units ------------------------------------------------------------------------

UNITS = ["munge.service", "nvidia-persistenced.service"]


def test_units_active_and_no_failed_unit_pass():
    assert n.judge_units(UNITS, "active\nactive\n", "", frozenset()).health is Health.PASS


def test_inactive_unit_and_failed_units_fail():
    r = n.judge_units(UNITS, "active\nfailed\n", fixture("systemctl_failed_two.txt"), frozenset())
    assert r.health is Health.FAIL
    assert r.why == ("nvidia-persistenced.service: failed (expected active); failed units: "
                     "nvidia-persistenced.service, lustre.mount")


def test_failed_units_on_the_allow_list_pass():
    allowed = frozenset({"nvidia-persistenced.service", "lustre.mount"})
    assert n.judge_units([], "", fixture("systemctl_failed_two.txt"), allowed).health \
        is Health.PASS


def test_activating_is_not_active_and_a_short_answer_is_an_error():
    assert n.judge_units(UNITS[:1], "activating\n", "", frozenset()).health is Health.FAIL
    assert n.judge_units(UNITS, "active\n", "", frozenset()).health is Health.ERROR


def test_failed_list_with_a_bullet_names_the_unit():
    r = n.judge_units([], "", "\u25cf x.service loaded failed failed X\n", frozenset())
    assert r.why == "failed units: x.service"


# --- configuration ------------------------------------------------------------------------

def test_the_example_configuration_loads():
    c = load_config(EXAMPLE, "ex")
    assert (c.gpus, c.gpu_ecc, c.memlock_min, c.units) == (8, True, UNLIMITED, ("munge.service",))
    assert c.mounts == (Mount("/scratch", "lustre"),) and c.xid_allowed == {13, 31, 43, 45}


@pytest.mark.parametrize(("old", "new", "says"), [
    ("gpus: 8", "gpus: 8\ngpu: 8", "unknown keys ['gpu']"),
    ("gpu_ecc: true\n", "", "missing keys ['gpu_ecc']"),
    ("node_name: gpu001", "node_name: 'gpu001; reboot'", "node_name"),
    ("node_name: gpu001", "node_name: -gpu001", "node_name"),
    ("gpu_xid: true", "gpu_xid: 'yes'", "gpu_xid: expected true or false"),
    ("port: 1", "port: '1'", "ib_ports[0].port"),
    ("rate_gbps: 400", "rate_gbps: fast", "ib_ports[0].rate_gbps"),
    ("{device: mlx5_0, port: 1, rate_gbps: 400}", "{device: mlx5_0, port: 1}",
     "each entry needs exactly the keys"),
    ("path: /scratch", "path: scratch", "mounts[0].path"),
    ("path: /scratch", "path: /a/../etc", "mounts[0].path"),
    ("fstype: lustre", "fstype: 'nfs 4'", "mounts[0].fstype"),
    ("memlock_min: unlimited", "memlock_min: lots", "memlock_min"),
    ("units: [munge.service]", "units: [munge]", "units"),
    ("units: [munge.service]", "units: [munge.service, munge.service]", "listed twice"),
    ("xid_allowed: [13, 31, 43, 45]", "xid_allowed: [13, x]", "xid_allowed"),
    ("textfile_dir: /var/lib/prometheus/node-exporter", "textfile_dir: relative", "textfile_dir"),
])
def test_configuration_is_refused_naming_the_key(old, new, says):
    assert old in EXAMPLE
    with pytest.raises(ConfigError, match=r"^cfg: ") as exc:
        load_config(EXAMPLE.replace(old, new), "cfg")
    assert says in str(exc.value)


def test_configuration_that_is_not_a_mapping_is_refused():
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config("- a\n", "cfg")
    with pytest.raises(ConfigError, match="not YAML"):
        load_config("a: [", "cfg")


def test_memlock_null_skips_and_bytes_are_taken():
    assert load_config(EXAMPLE.replace("memlock_min: unlimited", "memlock_min: null"),
                       "c").memlock_min is None
    assert load_config(EXAMPLE.replace("memlock_min: unlimited", "memlock_min: 65536"),
                       "c").memlock_min == 65536
