"""Issue 29, item t4: disk health from ``smartctl -j`` and ``nvme smart-log -o json`` for the
scratch and OS disks a profile names (``disk.health``). Today a failing NVMe scratch disk
passes if its fio figures hold: no check reads what the disk says of itself.

Fixtures: tests/fixtures/disk (SOURCES.md there: written from smartmontools' and
nvme-cli's published formats). Each is wrapped in the check's script sections here, as
the script prints them (:func:`evidence`); one test runs the script itself with stand-in
tools that print the fixtures.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from pydantic import ValidationError

from rackgate.checks import REGISTRY, load_profile
from rackgate.checks.shared.base import NodeCheck
from rackgate.model import Status
from rackgate.parsers import ParseError

FIX = Path(__file__).parents[3] / "fixtures" / "disk"
NAME = "disk.health"
MARK = "### rackgate-disk-health "
SPEC_BASIS = "a site's acceptance document for refurbished drives, section 4"


def fixture(name: str) -> str:
    return (FIX / name).read_text(encoding="utf-8")


def check() -> Any:
    assert NAME in REGISTRY, f"{NAME} is not a registered check"
    return REGISTRY[NAME]


def section(tool: str, device: str, rc: int, out: str, err: str = "") -> str:
    body = out if out.endswith("\n") or not out else out + "\n"
    errs = err if err.endswith("\n") or not err else err + "\n"
    return (f"{MARK}{tool} {device}\n{body}{MARK}rc={rc}\n"
            f"{MARK}stderr {tool} {device}\n{errs}{MARK}rc=0\n")


def evidence(*sections: str) -> str:
    return "".join(sections) + f"{MARK}done\n"


def smartctl(name: str, device: str | None = None, **changes: Any) -> tuple[str, int]:
    """A smartctl fixture as the run on ``device`` prints it (device name and argv set to
    it), with ``changes`` to the top level or smartctl object; (text, exit status)."""
    doc = json.loads(fixture(name))
    if device is not None:
        doc["smartctl"]["argv"][-1] = device
        if "device" in doc:
            doc["device"]["name"] = doc["device"]["info_name"] = device
    for key, value in changes.items():
        if key in ("argv", "exit_status"):
            doc["smartctl"][key] = value
        else:
            doc[key] = value
    return json.dumps(doc, indent=2) + "\n", doc["smartctl"]["exit_status"]


def smartctl_section(name: str, device: str, **changes: Any) -> str:
    text, rc = smartctl(name, device, **changes)
    return section("smartctl", device, rc, text)


def params(*disks: dict[str, str], **more: Any) -> Any:
    return check().params_model.model_validate({"disks": list(disks), **more})


def judged(text: str, p: Any) -> Any:
    c = check()
    return c.judge(c.parse(text), p, {}, None)


NVME0 = {"device": "/dev/nvme0", "role": "scratch"}
SDA = {"device": "/dev/sda", "role": "os"}
HEALTHY_NVME = smartctl_section("smartctl-nvme-healthy.json", "/dev/nvme0")
HEALTHY_SSD = smartctl_section("smartctl-sata-ssd-healthy.json", "/dev/sda")
NVME_CLI_V2 = section("nvme", "/dev/nvme1n1", 0, fixture("nvme-cli-2.8-smart-log-healthy.json"))
# the healthy evidence of a node with an NVMe scratch disk, a SATA OS disk and a second
# scratch disk read by nvme-cli (the fuzz harness damages it: fuzz_subjects)
HEALTHY = evidence(HEALTHY_NVME, HEALTHY_SSD, NVME_CLI_V2)
HEALTHY_PARAMS = (NVME0, SDA, {"device": "/dev/nvme1n1", "role": "scratch", "tool": "nvme"})


def test_truth3_t4_registered_and_a_profile_can_name_the_disks():
    c = check()
    assert isinstance(c, NodeCheck) and c.parse.__module__.endswith("disk_health")
    profile = load_profile("dgx-h100").with_overrides(
        {"checks": {NAME: {"enabled": True, "params": {"disks": [
            {"device": "/dev/nvme0n1", "role": "os"},
            {"device": "/dev/disk/by-id/nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0T400123",
             "role": "scratch", "tool": "nvme"}]}}}}, "inventory group dgx")
    cp = profile.check(NAME)
    assert cp is not None and cp.enabled and len(cp.params["disks"]) == 2


def test_truth3_t4_shipped_profiles_keep_it_off_until_disks_are_named():
    """The shipped GPU profiles list the check disabled (disk names vary by build): their
    strictness is unchanged, and enabling it without disks cannot run (no disk named)."""
    for name in ("dgx-h100", "dgx-a100", "hgx-h200"):
        cp = load_profile(name).check(NAME)
        assert cp is not None and not cp.enabled and cp.params.get("disks", []) == []
    from rackgate.checks.shared.base import CommandError
    with pytest.raises(CommandError, match="names no disk"):
        check().command(params(), {})


def test_truth3_t4_healthy_nvme_sata_and_nvme_cli_disks_pass():
    j = judged(HEALTHY, params(*HEALTHY_PARAMS))
    assert j.status is Status.PASS, j.message
    assert "3 disk(s) healthy" in j.message
    assert j.details["/dev/nvme0.percentage_used"] == 2.0
    assert j.details["/dev/nvme0.exit_status"] == 0.0
    assert j.details["/dev/sda.serial"] == "S664NE0T700321"
    assert j.details["/dev/nvme1n1.tool"] == "nvme"


@pytest.mark.parametrize("name", ["nvme-cli-1.16-smart-log-healthy.json",
                                  "nvme-cli-2.8-smart-log-healthy.json"])
def test_truth3_t4_nvme_cli_layouts_of_each_version_pass(name):
    text = evidence(section("nvme", "/dev/nvme0", 0, fixture(name)))
    j = judged(text, params({"device": "/dev/nvme0", "role": "scratch", "tool": "nvme"}))
    assert j.status is Status.PASS, j.message
    assert j.details["/dev/nvme0.temperature_c"] == 36.0  # 309 K


def test_truth3_t4_nvme_critical_warning_spare_and_media_errors_fail():
    text = evidence(smartctl_section(
        "smartctl-nvme-spare-low-reliability-degraded-media-errors.json", "/dev/nvme0"))
    j = judged(text, params(NVME0))
    assert j.status is Status.FAIL
    for said in ("critical warning bit 0", "available spare capacity has fallen below",
                 "critical warning bit 2", "reliability has been degraded",
                 "37 media and data integrity errors", "available spare 4 % is below its "
                 "threshold 10 %", "SMART overall-health self-assessment: FAILED",
                 "exit status 8 bit 3"):
        assert said in j.message, said
    assert j.message.startswith("scratch disk /dev/nvme0")


def test_truth3_t4_nvme_cli_read_only_and_reliability_bits_fail():
    text = evidence(section("nvme", "/dev/nvme0", 0, fixture(
        "nvme-cli-2.11-smart-log-read-only-reliability-degraded.json")))
    j = judged(text, params({"device": "/dev/nvme0", "role": "scratch", "tool": "nvme"}))
    assert j.status is Status.FAIL
    assert "bit 3 (0x0c): all of the media has been placed in read-only mode" in j.message
    assert "bit 2" in j.message and "3 media and data integrity errors" in j.message


def test_truth3_t4_every_critical_warning_bit_is_named_and_fails():
    for bit in range(8):
        doc = json.loads(fixture("smartctl-nvme-healthy.json"))
        doc["nvme_smart_health_information_log"]["critical_warning"] = 1 << bit
        doc["smart_status"] = {"passed": False, "nvme": {"value": 1 << bit}}
        doc["smartctl"]["exit_status"] = 8
        text = evidence(section("smartctl", "/dev/nvme0", 8, json.dumps(doc)))
        j = judged(text, params(NVME0))
        assert j.status is Status.FAIL and f"critical warning bit {bit} " in j.message
        assert ("reserved" in j.message) is (bit > 5)


def test_truth3_t4_endurance_used_fails_at_100_unless_the_profile_sets_its_limit():
    text = evidence(smartctl_section("smartctl-nvme-endurance-used-100.json", "/dev/nvme0"))
    j = judged(text, params(NVME0))
    assert j.status is Status.FAIL
    assert "percentage used 100 % reaches the 100 % limit" in j.message
    site = params(NVME0, percentage_used_limit={"value": 150, "basis": SPEC_BASIS})
    assert judged(text, site).status is Status.PASS
    stricter = params(NVME0, percentage_used_limit={"value": 80, "basis": SPEC_BASIS})
    assert judged(evidence(HEALTHY_NVME), stricter).status is Status.PASS  # 2 % used
    with pytest.raises(ValidationError):
        params(NVME0, percentage_used_limit={"value": 150})  # a limit needs its basis
    with pytest.raises(ValidationError, match="outside 1 to 255"):
        params(NVME0, percentage_used_limit={"value": 256, "basis": SPEC_BASIS})


def test_truth3_t4_sata_pending_and_offline_uncorrectable_fail_though_health_passed():
    text = evidence(smartctl_section("smartctl-sata-hdd-pending-offline-uncorrectable.json",
                                     "/dev/sdb"))
    j = judged(text, params({"device": "/dev/sdb", "role": "os"}))
    assert j.status is Status.FAIL
    for said in ("attribute 197 Current_Pending_Sector: 16 current pending sectors",
                 "attribute 198 Offline_Uncorrectable: 16 offline uncorrectable sectors",
                 "bit 7: the device self-test log contains records of errors",
                 "bit 6: the device error log contains records of errors"):
        assert said in j.message, said


def test_truth3_t4_sata_failing_attribute_now_fails():
    text = evidence(smartctl_section("smartctl-sata-hdd-failing-reallocated-now.json",
                                     "/dev/sdb"))
    j = judged(text, params({"device": "/dev/sdb", "role": "os"}))
    assert j.status is Status.FAIL
    assert "attribute 5 Reallocated_Sector_Ct value 3 is at or below its threshold 10 now" \
        in j.message
    assert "3,912 reallocated sectors, more than the 0 allowed" in j.message


def _ssd_with(attribute: int, raw: int, string: str | None = None) -> str:
    doc = json.loads(fixture("smartctl-sata-ssd-healthy.json"))
    for a in doc["ata_smart_attributes"]["table"]:
        if a["id"] == attribute:
            a["raw"] = {"value": raw, "string": string if string is not None else str(raw)}
    return evidence(section("smartctl", "/dev/sda", 0, json.dumps(doc, indent=2)))


def test_truth3_t4_reallocated_sectors_a_site_accepts_need_their_basis():
    text = _ssd_with(5, 8)
    assert judged(text, params(SDA)).status is Status.FAIL
    accepting = params(SDA, reallocated_sectors_allowed={"value": 16, "basis": SPEC_BASIS})
    assert judged(text, accepting).status is Status.PASS
    assert judged(_ssd_with(5, 17), accepting).status is Status.FAIL
    with pytest.raises(ValidationError):
        params(SDA, reallocated_sectors_allowed={"value": 16, "basis": ""})


def test_truth3_t4_packed_raw_values_are_judged_on_their_count():
    """raw16(raw16): the count is the low word, other words follow in parentheses; a raw
    value with vendor words packed in is no reallocated sector (atacmds.cpp)."""
    assert judged(_ssd_with(5, 2 << 32, "0 (2 0)"), params(SDA)).status is Status.PASS
    assert judged(_ssd_with(5, (2 << 32) + 4, "4 (2 0)"), params(SDA)).status is Status.FAIL
    j = judged(_ssd_with(197, 0x0101, "1 1"), params(SDA))  # raw8/raw16: no count
    assert j.status is Status.ERROR and "no count of current pending sectors" in j.message


@pytest.mark.parametrize(("status", "verdict", "said"), [
    (1 << 2, Status.ERROR, "a SMART or other command to the disk failed"),
    (1 << 5, Status.WARN, "were at or below their thresholds in the past"),
    (1 << 6, Status.WARN, "the device error log contains records of errors"),
    (1 << 7, Status.FAIL, "the device self-test log contains records of errors"),
])
def test_truth3_t4_smartctl_exit_status_bits(status, verdict, said):
    text, _ = smartctl("smartctl-sata-ssd-healthy.json", "/dev/sda", exit_status=status)
    j = judged(evidence(section("smartctl", "/dev/sda", status, text)), params(SDA))
    assert j.status is verdict and said in j.message
    assert j.details["/dev/sda.exit_status"] == float(status)


def test_truth3_t4_open_failure_is_an_error_quoting_smartctl():
    text = evidence(smartctl_section("smartctl-open-failed-no-such-device.json", "/dev/sdc"))
    j = judged(text, params({"device": "/dev/sdc", "role": "os"}))
    assert j.status is Status.ERROR
    assert "bit 1: the device could not be opened" in j.message
    assert "Smartctl open device: /dev/sdc failed: No such device" in j.message


def test_truth3_t4_missing_repeated_and_foreign_disks_are_errors():
    missing = judged(evidence(HEALTHY_NVME), params(NVME0, SDA))
    assert missing.status is Status.ERROR and "os disk /dev/sda: no smartctl run" in \
        missing.message
    twice = judged(evidence(HEALTHY_NVME, HEALTHY_NVME), params(NVME0))
    assert twice.status is Status.ERROR and "read 2 times" in twice.message
    foreign = judged(evidence(HEALTHY_NVME, HEALTHY_SSD), params(NVME0))
    assert foreign.status is Status.ERROR and "/dev/sda: read, but the profile names no " \
        "such disk" in foreign.message
    with pytest.raises(ValidationError, match="more than once"):
        params(NVME0, {"device": "/dev/nvme0", "role": "os"})


def test_truth3_t4_evidence_that_is_not_the_command_asked_for_is_an_error():
    # smartctl says it read another device than the section's
    text, rc = smartctl("smartctl-nvme-healthy.json", "/dev/nvme0")
    other = json.loads(text)
    other["device"]["name"] = "/dev/nvme1"
    j = judged(evidence(section("smartctl", "/dev/nvme0", rc, json.dumps(other))),
               params(NVME0))
    assert j.status is Status.ERROR and "reports device '/dev/nvme1'" in j.message
    # another command line (-a given, -i -H -A asked for)
    j = judged(evidence(HEALTHY_NVME), params(NVME0, smartctl_reads="health"))
    assert j.status is Status.ERROR and "is not the command 'smartctl -i -H -A -j" in j.message
    # an exit status that is not the one the script saw
    j = judged(evidence(section("smartctl", "/dev/nvme0", 4, text)), params(NVME0))
    assert j.status is Status.ERROR and "exits with 0 but exited with 4" in j.message
    # read with nvme-cli where the profile asks for smartctl
    j = judged(evidence(section("nvme", "/dev/nvme0", 0,
                                fixture("nvme-cli-2.8-smart-log-healthy.json"))),
               params(NVME0))
    assert j.status is Status.ERROR and "read with nvme, but the profile asks for smartctl" \
        in j.message


def test_truth3_t4_one_disk_named_twice_by_two_names_is_an_error():
    by_id = "/dev/disk/by-id/nvme-SAMSUNG_MZQL23T8HCLS-00A07_S64HNE0T400123"
    text = evidence(HEALTHY_NVME, smartctl_section("smartctl-nvme-healthy.json", by_id))
    j = judged(text, params(NVME0, {"device": by_id, "role": "scratch"}))
    assert j.status is Status.ERROR and "report one serial number, S64HNE0T400123" in j.message


def test_truth3_t4_sas_disks_are_not_judged_healthy():
    text, rc = smartctl("smartctl-sata-ssd-healthy.json", "/dev/sda")
    doc = json.loads(text)
    doc["device"]["protocol"] = "SCSI"
    del doc["ata_smart_attributes"]
    j = judged(evidence(section("smartctl", "/dev/sda", rc, json.dumps(doc))), params(SDA))
    assert j.status is Status.ERROR and "ATA and NVMe disks only" in j.message


def test_truth3_t4_nvme_cli_failure_and_missing_tool_are_errors():
    failed = section("nvme", "/dev/nvme0", 1, "", "open: No such file or directory")
    j = judged(evidence(failed), params({"device": "/dev/nvme0", "role": "scratch",
                                         "tool": "nvme"}))
    assert j.status is Status.ERROR and "No such file or directory" in j.message
    absent = section("smartctl", "/dev/nvme0", 127, "", "sh: 1: smartctl: not found")
    j = judged(evidence(absent), params(NVME0))
    assert j.status is Status.ERROR and "rc 127" in j.message and "not found" in j.message


@pytest.mark.parametrize("device", [
    "/dev/sda; reboot", "/dev/../etc/passwd", "-a", "/dev/disk/by-id/../sda", "sda",
    "/dev/nvme0n1p1", "/dev/disk/by-id/", "/dev/sda\n", "/dev/disk/by-path/pci-0000:01"])
def test_truth3_t4_disk_names_are_checked_against_a_strict_pattern(device):
    with pytest.raises(ValidationError):
        params({"device": device, "role": "os"})


def test_truth3_t4_nvme_cli_reads_nvme_disks_only():
    with pytest.raises(ValidationError, match="NVMe devices only"):
        params({"device": "/dev/sda", "role": "os", "tool": "nvme"})
    params({"device": "/dev/disk/by-id/nvme-eui.0025388b91234567", "role": "os",
            "tool": "nvme"})


@pytest.mark.parametrize("damage", [
    lambda t: t.replace('"media_errors": 0,', '"media_errors": 0,\n      "media_errors": 0,'),
    lambda t: t.replace('"percentage_used": 2,', '"percentage_used": 2.0,'),
    lambda t: t[: len(t) // 2],
    lambda t: t.replace('"critical_warning": 0,', '"critical_warning": true,'),
    lambda t: "\ufeff" + t,
])
def test_truth3_t4_damaged_output_is_a_parse_error(damage):
    text, rc = smartctl("smartctl-nvme-healthy.json", "/dev/nvme0")
    with pytest.raises(ParseError):
        check().parse(evidence(section("smartctl", "/dev/nvme0", rc, damage(text))))


# the figures the judge reads: health fields, exit statuses, attribute IDs (not the PCI
# vendor's or a namespace's "id", which it does not read)
JUDGED = (r'(?:"(?:critical_warning|available_spare(?:_threshold)?|avail_spare|spare_thresh|'
          r'percentage_used|percent_used|media_errors|exit_status)" ?: ?"?|rc=|'
          r'"id": (?=[0-9]+,\n\s+"name"))([0-9]+)')


@settings(max_examples=150, deadline=None)
@given(degraded(HEALTHY, numbers=JUDGED, lines=r"^### |" + JUDGED, end=len(HEALTHY.rstrip())))
def test_truth3_t4_degraded_disk_evidence_never_passes(text):
    """Issue 11's damage (a judged figure non-finite, a judged line twice, the output cut)
    on the healthy three-disk evidence: never a pass."""
    p = params(*HEALTHY_PARAMS)
    assert outcome(check().parse, lambda r: check().judge(r, p, {}, None), text) in BAD


def test_truth3_t4_cut_script_output_is_a_parse_error():
    with pytest.raises(ParseError, match="done"):
        check().parse(HEALTHY[: HEALTHY.rindex(MARK)])
    with pytest.raises(ParseError, match="stderr"):
        check().parse(HEALTHY_NVME.split(f"{MARK}stderr")[0] + f"{MARK}done\n")


STUB = """#!/bin/sh
for dev; do :; done
f="$STUB_DIR/$(basename "$0")$(printf %s "$dev" | tr / _)"
[ -f "$f.err" ] && cat "$f.err" >&2
printf %s "$(cat "$f.out")"
exit "$(cat "$f.rc")"
"""

def test_truth3_t4_the_script_frames_each_tool_run(tmp_path):
    """The check's real command, run by sh with stand-in tools that print the fixtures (no
    trailing newline; nvme-cli 3's deprecation warning on standard error): parsed and
    judged healthy; a tool that is not installed is an error for its disk."""
    for tool in ("smartctl", "nvme"):
        (tmp_path / tool).write_text(STUB)
        (tmp_path / tool).chmod(0o755)
    stub = {"smartctl_dev_nvme0": smartctl("smartctl-nvme-healthy.json", "/dev/nvme0"),
            "smartctl_dev_sda": smartctl("smartctl-sata-ssd-healthy.json", "/dev/sda"),
            "nvme_dev_nvme1n1": (fixture("nvme-cli-2.8-smart-log-healthy.json"), 0)}
    for name, (out, rc) in stub.items():
        (tmp_path / f"{name}.out").write_text(out)
        (tmp_path / f"{name}.rc").write_text(str(rc))
    (tmp_path / "nvme_dev_nvme1n1.err").write_text(
        "WARNING: 'smart-log' is deprecated and will be removed in the next major version, "
        "use 'nvme log smart' instead\n")
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "STUB_DIR": str(tmp_path)}
    p = params(*HEALTHY_PARAMS)
    argv = check().command(p, {})
    assert argv[:2] == ["sh", "-c"] and all(d["device"] in argv for d in HEALTHY_PARAMS)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    runs = check().parse(done.stdout)
    assert [r.stderr for r in runs][2][0].startswith("WARNING: 'smart-log' is deprecated")
    assert check().judge(runs, p, {}, None).status is Status.PASS
    (tmp_path / "nvme").unlink()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    j = check().judge(check().parse(done.stdout), p, {}, None)
    assert j.status is Status.ERROR and "/dev/nvme1n1: nvme exited with rc 127" in j.message
