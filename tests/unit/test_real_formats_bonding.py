"""Issue 14, bonding: /proc/net/bonding as real machines print it, read twice by the check.

The fault found on a real machine: an active-backup bond with MII monitoring off
(``MII Polling Interval (ms): 0``) and ARP monitoring on, both slaves ``MII Status: up``
with Link Failure Counts of 92028 and 71524, was judged "all members up". Fixtures
(tests/fixtures/redundancy/bonding-arp-*.txt, bonding-two-reads-*.txt,
bonding-no-link-monitoring.txt) are written by hand from the kernel's bond_procfs.c,
bond_sysfs.c and bond_sysfs_slave.c, in the sections redundancy.bonding's command prints;
each header says so, and its values are invented.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from degrade_helpers import BAD, degraded, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import CATALOG, load_profile, profile_from_document
from rackgate.checks.redundancy import BondingParams, bonding_command, judge_bonding
from rackgate.model import Status
from rackgate.parsers import ParseError
from rackgate.parsers.bonding import parse_bonding
from rackgate.profile import Hardware, ProfileError, Threshold

FIX = Path(__file__).parents[1] / "fixtures" / "redundancy"
HW = Hardware()
LIMIT = {"link_failures": Threshold(unit="failures", ref=1, max_ratio=1.0,
                                    basis="at most 1 link failure: a figure for the unit tests")}
AB = BondingParams(bonds=[{"name": "bond1", "mode": "active-backup", "members": ["eno1", "eno2"]}])
BOTH = BondingParams(bonds=[
    {"name": "bond0", "mode": "802.3ad", "members": ["ens1f0", "ens1f1"]},
    {"name": "bond1", "mode": "active-backup", "members": ["eno1", "eno2"]},
])


def body(name: str) -> str:
    """A fixture's output: what follows its '# ---' line (the output has '###' lines)."""
    return (FIX / name).read_text(encoding="utf-8").partition("\n# ---\n")[2]


def old(name: str) -> str:
    """A pre-issue-14 fixture (header lines start with '#', no '###' marker in it)."""
    text = (FIX / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


def judge(text: str, params: BondingParams = AB, thresholds=None):
    return judge_bonding(parse_bonding(text), params, LIMIT if thresholds is None else thresholds,
                         HW)


# --- the fault of the issue -----------------------------------------------------------------

def test_bonding_proc_arp_monitor_flapping_one_read_fails_on_the_counts():
    j = judge(body("bonding-arp-monitor-flapping-one-read.txt"))
    assert j.status is Status.FAIL, j.message
    for words in ("bond1: member eno1 link failure count 92028", "eno2 link failure count 71524",
                  "limit 1"):
        assert words in j.message, j.message


def test_bonding_proc_arp_monitor_one_read_without_arp_validate_cannot_tell():
    """Without a count limit, MII status from an ARP-monitored bond proves nothing unless the
    evidence shows ARP validation: /proc/net/bonding never prints arp_validate."""
    j = judge(body("bonding-arp-monitor-flapping-one-read.txt"), thresholds={})
    assert j.status is Status.ERROR, j.message
    assert "bond1" in j.message and "MII Polling Interval 0" in j.message
    assert "/sys/class/net/bond1/bonding/arp_validate" in j.message, j.message


def test_bonding_two_reads_arp_monitor_count_rose_fails_naming_both_counts():
    j = judge(body("bonding-arp-monitor-flapping-count-rose.txt"))
    assert j.status is Status.FAIL, j.message
    assert "bond1: member eno1 link failure count rose from 92028 to 92029" in j.message
    assert "5.0 s apart" in j.message, j.message


def test_bonding_two_reads_lacp_count_rose_within_the_limit_still_fails():
    j = judge(body("bonding-two-reads-lacp-count-rose.txt"), BOTH)
    assert j.status is Status.FAIL, j.message
    assert "bond0: member ens1f1 link failure count rose from 0 to 1" in j.message
    assert "5.0 s apart" in j.message and "eno" not in j.message, j.message


def test_bonding_two_reads_healthy_passes_and_says_what_it_compared():
    j = judge(body("bonding-two-reads-healthy.txt"), BOTH)
    assert j.status is Status.PASS, j.message
    assert "unchanged over 5.0 s" in j.message, j.message


def test_bonding_arp_monitor_validating_every_slave_passes():
    j = judge(body("bonding-arp-monitor-validate-all-healthy.txt"))
    assert j.status is Status.PASS, j.message


def test_bonding_arp_monitor_without_validation_is_an_error_naming_the_setting():
    j = judge(body("bonding-arp-monitor-validate-none.txt"))
    assert j.status is Status.ERROR, j.message
    assert "bond1" in j.message and "arp_validate none" in j.message, j.message


def test_bonding_arp_monitor_validating_only_the_active_slave_cannot_vouch_for_the_backup():
    text = body("bonding-arp-monitor-validate-all-healthy.txt").replace("all 3", "active 1")
    j = judge(text)
    assert j.status is Status.ERROR, j.message
    assert "eno2 (backup)" in j.message and "eno1" not in j.message, j.message


def test_bonding_without_any_link_monitoring_fails():
    j = judge(body("bonding-no-link-monitoring.txt"))
    assert j.status is Status.FAIL, j.message
    assert "bond1: no link monitoring" in j.message, j.message


def test_bonding_two_reads_second_read_missing_is_an_error():
    with pytest.raises(ParseError, match="read 2"):
        parse_bonding(body("bonding-two-reads-second-missing.txt"))


def test_bonding_two_reads_without_the_done_line_is_an_error():
    text = body("bonding-two-reads-healthy.txt").replace("### rackgate-bonding done\n", "")
    with pytest.raises(ParseError, match="done"):
        parse_bonding(text)


def test_bonding_two_reads_of_a_node_without_bonds():
    j = judge(body("bonding-two-reads-none.txt"), BondingParams())
    assert j.status is Status.PASS and j.message == "no bonds expected, none found", j.message
    j = judge(body("bonding-two-reads-none.txt"))
    assert j.status is Status.FAIL and "bond1: no such bond" in j.message, j.message


def test_bonding_a_member_missing_from_one_read_fails():
    text = body("bonding-two-reads-healthy.txt")
    first, _, second = text.partition("### rackgate-bonding read=2")
    first = first.replace("\nSlave Interface: eno2\n", "\nSlave Interface: eno3\n")
    j = judge(first + "### rackgate-bonding read=2" + second, BOTH)
    assert j.status is Status.FAIL and "eno2" in j.message and "first read" in j.message, \
        j.message


def test_bonding_a_member_down_in_the_first_read_fails():
    text = body("bonding-two-reads-healthy.txt")
    first, _, second = text.partition("### rackgate-bonding read=2")
    i = first.index("Slave Interface: eno2")
    first = first[:i] + first[i:].replace("MII Status: up", "MII Status: down", 1)
    j = judge(first + "### rackgate-bonding read=2" + second, BOTH)
    assert j.status is Status.FAIL and "eno2" in j.message and "first read" in j.message, \
        j.message


def test_bonding_a_count_that_fell_between_reads_is_not_a_pass():
    first, second = _reads(body("bonding-arp-monitor-validate-all-healthy.txt"))
    first = first.replace("Link Failure Count: 0", "Link Failure Count: 5", 1)
    j = judge(first + second, thresholds={})
    assert j.status is Status.ERROR and "fell from 5 to 0" in j.message, j.message


def test_bonding_reads_too_close_together_cannot_show_a_rise():
    text = body("bonding-two-reads-healthy.txt").replace("uptime_s=86417.34", "uptime_s=86412.40")
    j = judge(text, BOTH)
    assert j.status is Status.ERROR and "0.1 s apart" in j.message, j.message


def test_bonding_uptime_going_backwards_is_a_parse_error():
    text = body("bonding-two-reads-healthy.txt").replace("uptime_s=86417.34", "uptime_s=86000.00")
    with pytest.raises(ParseError, match="uptime"):
        parse_bonding(text)


def test_bonding_sysfs_file_with_unknown_arp_validate_is_a_parse_error():
    text = body("bonding-arp-monitor-validate-all-healthy.txt").replace("all 3", "all 5")
    with pytest.raises(ParseError, match="arp_validate"):
        parse_bonding(text)


def test_bonding_unknown_slave_state_is_not_a_pass():
    text = body("bonding-arp-monitor-validate-all-healthy.txt").replace("\nbackup\n",
                                                                       "\nUNKONWN\n")
    j = judge(text)
    assert j.status is Status.ERROR and "UNKONWN" in j.message.upper(), j.message


def test_bonding_count_above_the_kernel_u32_is_a_parse_error():
    text = body("bonding-two-reads-healthy.txt").replace("Link Failure Count: 0",
                                                         "Link Failure Count: 4294967296", 1)
    with pytest.raises(ParseError, match="Link Failure Count"):
        parse_bonding(text)


# --- evidence of the one-read collector (before issue 14) -----------------------------------

def test_bonding_one_read_healthy_passes_but_says_the_rise_was_not_judged():
    j = judge(old("bonding-healthy-lacp-and-active-backup.txt"), BOTH)
    assert j.status is Status.PASS, j.message
    assert "read once" in j.message and "not judged" in j.message, j.message


def test_bonding_one_read_count_above_the_limit_fails():
    text = old("bonding-healthy-lacp-and-active-backup.txt").replace(
        "Link Failure Count: 0", "Link Failure Count: 7", 1)
    j = judge(text, BOTH)
    assert j.status is Status.FAIL and "ens1f0 link failure count 7" in j.message, j.message


def test_bonding_one_read_member_without_a_count_is_an_error():
    text = old("bonding-healthy-lacp-and-active-backup.txt")
    i = text.index("Slave Interface: eno2")
    text = text[:i] + text[i:].replace("Link Failure Count: 0\n", "", 1)
    j = judge(text, BOTH)
    assert j.status is Status.ERROR and "eno2" in j.message and "Link Failure Count" in j.message


# --- the command and the profile ------------------------------------------------------------

def test_bonding_command_reads_twice_with_a_bounded_stated_delay():
    argv = bonding_command(BondingParams(), {})
    assert argv[:2] == ["sh", "-c"] and "/proc/net/bonding/*" in argv[2]
    assert argv[3:] == ["rackgate-bonding", "5"]  # $0, $1: data as arguments, not script text
    assert "sleep" in argv[2] and "/proc/uptime" in argv[2]
    assert bonding_command(BondingParams(interval_s=2), {})[-1] == "2"
    with pytest.raises(ValueError):
        BondingParams(interval_s=0)
    with pytest.raises(ValueError):
        BondingParams(interval_s=31)
    with pytest.raises(ValueError, match="timeout_s"):
        BondingParams(interval_s=20, timeout_s=20)


def test_bonding_command_runs_on_a_node_without_bonds():
    """This machine has no bond (a container's /proc/net/bonding is absent): the command's
    output parses to no bond, as on the demo rack's nodes."""
    if Path("/proc/net/bonding").exists() and any(Path("/proc/net/bonding").iterdir()):
        pytest.skip("this machine has bonds")
    argv = bonding_command(BondingParams(interval_s=1), {})
    out = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=True).stdout
    report = parse_bonding(out)
    assert report.bonds == () and report.first == () and report.interval_s >= 1.0
    assert judge_bonding(report, BondingParams(), LIMIT, HW).status is Status.PASS


def test_bonding_command_output_of_a_node_with_bonds_is_what_the_parser_reads(tmp_path):
    """The check's own script, its absolute paths moved under tmp_path, over files laid out
    as the kernel lays them out (the fixture's read 2): it prints two reads the parser
    takes back unchanged, at least interval_s apart."""
    read2 = _reads(HEALTHY_ARP)[1]
    for header in re.finditer(r"^==> (\S+) <==\n([^=#]*)", read2, re.MULTILINE):
        path = tmp_path / header.group(1).lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header.group(2), encoding="utf-8")
    (tmp_path / "proc" / "uptime").write_text("86412.31 170000.00\n", encoding="utf-8")
    argv = bonding_command(BondingParams(interval_s=1), {})
    script = argv[2]
    for root in ("/proc/net/bonding", "/proc/uptime", "/sys/class/net"):
        script = script.replace(root, f"{tmp_path}{root}")
    start = time.monotonic()
    out = subprocess.run([*argv[:2], script, *argv[3:]], capture_output=True, text=True,
                         timeout=20, check=True).stdout
    assert time.monotonic() - start >= 1.0  # it slept interval_s between the reads
    report = parse_bonding(out.replace(str(tmp_path), ""))
    assert report.bonds == report.first == parse_bonding(HEALTHY_ARP).bonds
    assert report.bonds[0].arp_validate == "all"
    assert [s.state for s in report.bonds[0].slaves] == ["active", "backup"]
    # the fake /proc/uptime stood still: reads 0 s apart show nothing, which is an error
    j = judge_bonding(report, AB, LIMIT, HW)
    assert j.status is Status.ERROR and "only 0.0 s apart" in j.message, j.message


def test_bonding_profiles_need_a_link_failure_limit_with_its_basis():
    demo = load_profile("demo")
    t = demo.model.checks["redundancy.bonding"].thresholds["link_failures"]
    assert t.upper_bound is not None and t.unit == "failures" and "since" in t.basis
    assert "link_failures" in CATALOG["redundancy.bonding"].metrics
    raw = dict(demo.raw)
    raw["checks"] = {**raw["checks"], "redundancy.bonding": {}}
    with pytest.raises(ProfileError, match=r"redundancy\.bonding\.thresholds\.link_failures"):
        profile_from_document(raw, "a test profile")


def test_bonding_threshold_without_an_upper_bound_is_an_error():
    lower = {"link_failures": Threshold(unit="failures", ref=1, min_ratio=1.0,
                                        basis="a lower bound is no limit on failures")}
    j = judge(body("bonding-two-reads-healthy.txt"), BOTH, lower)
    assert j.status is Status.ERROR and "link_failures" in j.message, j.message


# --- properties -----------------------------------------------------------------------------

HEALTHY = body("bonding-two-reads-healthy.txt")
HEALTHY_ARP = body("bonding-arp-monitor-validate-all-healthy.txt")
COUNT = re.compile(r"^Link Failure Count: ([0-9]+)$", re.MULTILINE)


def _reads(text: str) -> tuple[str, str]:
    first, mark, second = text.partition("### rackgate-bonding read=2")
    return first, mark + second


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_bonding_any_healthy_two_read_variant_passes(data):
    text = data.draw(st.sampled_from([HEALTHY, HEALTHY_ARP]))
    counts = data.draw(st.lists(st.integers(0, 1), min_size=4, max_size=4))
    up1 = data.draw(st.integers(1, 10**8)) / 100
    gap = data.draw(st.integers(100, 3000)) / 100
    first, second = _reads(text)
    it = iter(counts)
    first = COUNT.sub(lambda m: f"Link Failure Count: {next(it)}", first)
    it = iter(counts)
    second = COUNT.sub(lambda m: f"Link Failure Count: {next(it)}", second)
    if data.draw(st.booleans()):
        miimon = data.draw(st.integers(1, 1000))
        first, second = (p.replace("MII Polling Interval (ms): 100",
                                   f"MII Polling Interval (ms): {miimon}") for p in (first, second))
    text = (first + second).replace("uptime_s=86412.31", f"uptime_s={up1:.2f}").replace(
        "uptime_s=86417.34", f"uptime_s={up1 + gap:.2f}")
    params = BOTH if "bond0" in text else AB
    j = judge(text, params)
    assert j.status is Status.PASS, j.message


def _fault(data, text: str) -> str:
    first, second = _reads(text)
    spans = [m.span(1) for m in COUNT.finditer(second)]
    kind = data.draw(st.sampled_from(["rise", "above", "down", "miimon", "validate", "cut"]))
    if kind == "rise":
        a, b = data.draw(st.sampled_from(spans))
        second = second[:a] + str(data.draw(st.integers(1, 10**6))) + second[b:]
    elif kind == "above":
        n = str(data.draw(st.integers(2, 2**32 - 1)))
        a, b = data.draw(st.sampled_from(spans))
        pick = data.draw(st.sampled_from([0, 1]))
        if pick:
            second = second[:a] + n + second[b:]
        else:
            fa, fb = [m.span(1) for m in COUNT.finditer(first)][spans.index((a, b))]
            first = first[:fa] + n + first[fb:]
            second = second[:a] + n + second[b:]
    elif kind == "down":
        state = data.draw(st.sampled_from(["down", "going back", "going down", "unknown"]))
        where = data.draw(st.sampled_from(["first", "second"]))
        part = first if where == "first" else second
        slaves = [m.end() for m in re.finditer(r"^Slave Interface: \S+\n", part, re.MULTILINE)]
        i = data.draw(st.sampled_from(slaves))
        part = part[:i] + part[i:].replace("MII Status: up", f"MII Status: {state}", 1)
        first, second = (part, second) if where == "first" else (first, part)
    elif kind == "miimon":
        first, second = (re.sub(r"MII Polling Interval \(ms\): [0-9]+",
                                "MII Polling Interval (ms): 0", p) for p in (first, second))
        first, second = (re.sub(r"^ARP .*\n", "", p, flags=re.MULTILINE) for p in (first, second))
    elif kind == "validate":
        v = data.draw(st.sampled_from(["none 0", "active 1", "backup 2", "filter 4",
                                       "filter_active 5", "filter_backup 6"]))
        first, second = (re.sub(r"^(?:all 3|none 0)$", v, p, flags=re.MULTILINE)
                         for p in (first, second))
        first, second = (p.replace("MII Polling Interval (ms): 100", "MII Polling Interval (ms): 0")
                         for p in (first, second))
        if "ARP Polling" not in first:
            return first.replace("MII Polling Interval (ms): 0", "MII Polling Interval (ms): 0\n"
                                 "ARP Polling Interval (ms): 500\nARP IP target/s (n.n.n.n "
                                 "form): 10.0.0.1") + second.replace(
                "MII Polling Interval (ms): 0", "MII Polling Interval (ms): 0\nARP Polling "
                "Interval (ms): 500\nARP IP target/s (n.n.n.n form): 10.0.0.1")
    else:
        whole = first + second
        return whole[:data.draw(st.integers(0, len(whole.rstrip()) - 1))]
    return first + second


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_bonding_any_injected_fault_never_passes(data):
    text = data.draw(st.sampled_from([HEALTHY, HEALTHY_ARP]))
    params = BOTH if "bond0" in text else AB
    bad = _fault(data, text)
    assert outcome(parse_bonding, lambda r: judge_bonding(r, params, LIMIT, HW), bad) in BAD


@settings(max_examples=150, deadline=None)
@given(degraded(HEALTHY_ARP,
                numbers=r"(?:uptime_s=|Link Failure Count: |Interval \(ms\): |all )([0-9.]+)",
                lines=r"^(?:###|==>|Bonding Mode|MII |Slave Interface|Currently Active|ARP |"
                      r"Link Failure|all 3|active$|backup$)",
                end=len(HEALTHY_ARP.rstrip())))
def test_bonding_degraded_two_read_evidence_never_passes(text):
    assert outcome(parse_bonding, lambda r: judge_bonding(r, AB, LIMIT, HW), text) in BAD


def test_bonding_a_bond_where_the_profile_expects_none_is_foreign_and_fails():
    j = judge(body("bonding-two-reads-healthy.txt"), BondingParams())
    assert j.status is Status.FAIL, j.message
    assert j.message.startswith("bond(s) ") and "the profile expects none" in j.message
