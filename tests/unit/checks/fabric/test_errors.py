"""fabric.errors: the port error counters of every planned link, read twice, judged against
the fabric plan (tests/fixtures/fabric_counters: captures of the check's own script under
ibsim, retaken by tests/integration/test_fabric_ibsim_counters.py)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from rackgate.checks.fabric.errors import (
    CHECK,
    ERRORS_SCRIPT,
    REQUIRED,
    FabricErrorsParams,
    fabric_errors_command,
    judge_fabric_errors,
)
from rackgate.fabric.findings import node_results
from rackgate.fabric.plan import load_plan, plan_from_document
from rackgate.parsers import ParseError
from rackgate.parsers.infiniband.counters import parse_ibcounters
from rackgate.profile import Threshold

HERE = Path(__file__).resolve().parents[3] / "fixtures" / "fabric_counters"
PLAN = load_plan(HERE / "plan.yml").plan
PARAMS = FabricErrorsParams(window_s=5)
HDR_PER_H = 1e-12 * 4 * 53.125e9 * 3600  # errored bits an hour at BER 1e-12, 4X HDR: 765
THRESHOLDS = {
    "symbol_error_rise": Threshold(unit="errors/h", ref=HDR_PER_H, max_ratio=1.0,
                                   basis="BER 1e-12 on a 4X HDR link"),
    "rcv_error_rise": Threshold(unit="errors/h", ref=HDR_PER_H, max_ratio=1.0,
                                basis="BER 1e-12 on a 4X HDR link"),
    "link_error_recovery_rise": Threshold(unit="events/h", ref=1, max_ratio=1.0,
                                          basis="no retraining during acceptance"),
    "link_downed_rise": Threshold(unit="events/h", ref=1, max_ratio=1.0,
                                  basis="no link down during acceptance"),
}


def fixture(name: str) -> str:
    """The script's output after the fixture's '# ---' header line."""
    head, sep, body = (HERE / f"errors-{name}.txt").read_text(encoding="utf-8").partition(
        "\n# ---\n")
    assert sep and head.startswith("# source: captured here"), f"errors-{name}.txt header"
    return body


def judge(text: str, thresholds: dict[str, Threshold] | None = None,
          params: FabricErrorsParams = PARAMS) -> list[tuple[str, list[str], str]]:
    verdict = judge_fabric_errors(parse_ibcounters(text), params,
                                  THRESHOLDS if thresholds is None else thresholds, PLAN)
    return [(f.status.label, sorted(f.hosts), f.message) for f in verdict.findings]


def window(name: str) -> float:
    return parse_ibcounters(fixture(name)).window_s


def test_the_healthy_fabric_passes_every_node_with_what_was_read() -> None:
    rec = parse_ibcounters(fixture("healthy"))
    assert len(rec.ports) == 36 and rec.first.ports == () and rec.second.ports == ()
    assert rec.listing.nodes_checked == 8 and rec.first.walk.pma_failures == 0
    verdict = judge_fabric_errors(rec, PARAMS, THRESHOLDS, PLAN)
    assert verdict.findings == ()
    assert verdict.summary == (f"8 planned links: the error counters of both ends read twice "
                               f"{rec.window_s:.1f} s apart, none rising above its limit")
    results = node_results(verdict, ["gpu001", "gpu002"], "fabric.errors", "ev")
    assert [(r.node, r.status.label) for r in results] == [("gpu001", "pass"),
                                                           ("gpu002", "pass")]


def test_symbol_errors_rising_fail_the_link_naming_both_ends_cable_and_place() -> None:
    w = window("symbol-errors-rising")
    assert judge(fixture("symbol-errors-rising")) == [(
        "fail", ["gpu001"],
        f'cable C-0001 ("gpu001 mlx5_0"[1] <-> "leaf-r0"[1]): SymbolErrorCounter of '
        f'"leaf-r0"[1] rose from 0 to 40 in {w:.1f} s ({round(40 * 3600 / w):,} errors/h, above '
        f"the 765 errors/h limit of symbol_error_rise); at leaf-r0 (rack r01 U40)")]
    verdict = judge_fabric_errors(parse_ibcounters(fixture("symbol-errors-rising")), PARAMS,
                                  THRESHOLDS, PLAN)
    results = node_results(verdict, ["gpu001", "gpu002"], "fabric.errors", "ev")
    assert [(r.node, r.status.label) for r in results] == [("gpu001", "fail"),
                                                           ("gpu002", "pass")]


def test_a_link_down_on_an_uplink_fails_the_nodes_behind_its_leaf() -> None:
    w = window("link-downed-rising")
    assert judge(fixture("link-downed-rising")) == [(
        "fail", ["gpu001", "gpu002"],
        f'cable C-0103 ("leaf-r1"[5] <-> "spine-1"[2]): LinkDownedCounter of "spine-1"[2] '
        f"rose from 0 to 2 in {w:.1f} s ({round(2 * 3600 / w):,} events/h, above the 1 events/h "
        f"limit of link_downed_rise); at leaf-r1 (rack r01 U41), spine-1 (rack r02 U40)")]


def test_a_counter_cleared_mid_window_is_an_error() -> None:
    w = window("counter-cleared")
    assert judge(fixture("counter-cleared")) == [(
        "error", ["gpu002"],
        f'cable C-0004 ("gpu002 mlx5_1"[1] <-> "leaf-r1"[2]): SymbolErrorCounter of '
        f'"gpu002 mlx5_1"[1] fell from 5 to 0 in {w:.1f} s: cleared between the reads, so '
        f"its rise is unknown; at leaf-r1 (rack r01 U41)")]


def test_a_saturated_counter_cannot_show_a_rise() -> None:
    assert judge(fixture("counter-saturated")) == [(
        "error", ["gpu002"],
        'cable C-0003 ("gpu002 mlx5_0"[1] <-> "leaf-r0"[2]): LinkErrorRecoveryCounter of '
        '"gpu002 mlx5_0"[1] is at its maximum 255 (read 255, then 255): a saturated counter '
        "cannot show a rise; clear it (perfquery -R) and run again; at leaf-r0 (rack r01 U40)")]


def test_a_rise_into_saturation_beyond_the_limit_fails_as_at_least() -> None:
    text = fixture("symbol-errors-rising").replace(
        "[SymbolErrorCounter == 40]", "[SymbolErrorCounter == 65535]")
    (status, hosts, message), = judge(text)
    assert (status, hosts) == ("fail", ["gpu001"])
    assert "rose from 0 to 65535" in message and "(at least " in message


def _with_read1_port(text: str, line: str) -> str:
    """``text`` with a port line for "leaf-r0"[1] in its first read."""
    read1 = "### rackgate-fabric-errors read=1 uptime_s="
    head, _, rest = text.partition(read1)
    stamp, _, rest = rest.partition("\n")
    return (f'{head}{read1}{stamp}\nErrors for 0x200000 "leaf-r0"\n'
            f"   GUID 0x200000 port 1: {line}\n{rest}")


def test_extended_counters_are_64_bit_and_not_saturated_at_16_bits() -> None:
    steady = "[SymbolErrorCounter == 65535 (65.535K)]"
    text = _with_read1_port(fixture("symbol-errors-rising").replace(
        "[SymbolErrorCounter == 40]", steady), steady)
    rec = parse_ibcounters(text)
    port = rec.first.errors("leaf-r0", 1)
    assert port is not None and port.extended
    assert port.saturation("SymbolErrorCounter") == 2**64 - 1
    verdict = judge_fabric_errors(rec, PARAMS, THRESHOLDS, PLAN)
    assert verdict.findings == ()
    assert 'SymbolErrorCounter 65535 on "leaf-r0"[1]' in verdict.summary
    plain = text.replace(steady, "[SymbolErrorCounter == 65535]")
    (status, _, message), = judge(plain)
    assert status == "error"
    assert 'SymbolErrorCounter of "leaf-r0"[1] is at its maximum 65535 (read 65535, then ' \
           "65535)" in message


def test_steady_counts_within_limit_rises_and_unplanned_ports_pass_with_a_note() -> None:
    rec = parse_ibcounters(fixture("nonzero-not-failing"))
    verdict = judge_fabric_errors(rec, PARAMS, THRESHOLDS, PLAN)
    assert verdict.findings == ()
    assert verdict.summary == (
        f"8 planned links: the error counters of both ends read twice {rec.window_s:.1f} s "
        "apart, none rising above its limit (1 rose within it); 1 count(s) non-zero but "
        'steady (counted since the last clear), largest: LinkDownedCounter 3 on "leaf-r1"[2]; '
        "counters rose on 1 unplanned port(s), not judged here (fabric.as_built judges "
        'unplanned links): "spine-2"[7] SymbolErrorCounter +7')


def test_an_hca_unplugged_mid_window_is_not_read_and_a_counter_without_threshold_warns() -> None:
    w = window("hca-unplugged-mid-window")
    said = ("ibwarn: query_cap_mask: classportinfo query failed on gpu002 mlx5_0, Lid 7 port 1; "
            "ibwarn: print_errors: IB_GSI_PORT_COUNTERS query failed on gpu002 mlx5_0, Lid 7 "
            "port 1")
    assert judge(fixture("hca-unplugged-mid-window")) == [
        ("warn", ["gpu001"],
         f'cable C-0001 ("gpu001 mlx5_0"[1] <-> "leaf-r0"[1]): PortRcvSwitchRelayErrors of '
         f'"leaf-r0"[1] rose from 0 to 6 in {w:.1f} s ({round(6 * 3600 / w):,}/h; the profile sets '
         "no switch_relay_error_rise limit, so it is not judged); at leaf-r0 (rack r01 U40)"),
        ("error", ["gpu002"],
         f'cable C-0003 ("gpu002 mlx5_0"[1] <-> "leaf-r0"[2]): the counters of '
         f'"gpu002 mlx5_0"[1] could not be read in read 2 ({said}); at leaf-r0 (rack r01 U40)')]


def test_an_hca_the_walk_did_not_reach_is_an_error_not_a_zero() -> None:
    assert judge(fixture("hca-unplugged")) == [(
        "error", ["gpu002"],
        'cable C-0004 ("gpu002 mlx5_1"[1] <-> "leaf-r1"[2]): "gpu002 mlx5_1"[1] is not among '
        "the 35 ports the walk read (ibqueryerrors --counters), so its counters were not read;"
        " at leaf-r1 (rack r01 U41)")]


def test_two_nodes_with_one_description_cannot_be_told_apart() -> None:
    text = fixture("healthy").replace('Data Counters for 0x100004 "gpu002 mlx5_0"',
                                      'Data Counters for 0x100004 "gpu001 mlx5_0"')
    assert text != fixture("healthy")
    found = judge(text)
    assert [(s, h) for s, h, _ in found] == [("error", ["gpu001"]), ("error", ["gpu002"])]
    assert "two nodes answer to 'gpu001 mlx5_0' (GUIDs 100000, 100004)" in found[0][2]
    assert '"gpu002 mlx5_0"[1] is not among the 36 ports' in found[1][2]


def test_no_subnet_manager_is_unparseable_evidence_quoting_the_tool() -> None:
    with pytest.raises(ParseError, match="did not complete \\(rc 0, no summary\\): it said: "
                                         "ibwarn: sa_get_handle: No SM/SA found"):
        parse_ibcounters(fixture("no-sm"))


@pytest.mark.parametrize(("edit", "match"), [
    (lambda t: t.replace("### rackgate-fabric-errors done\n", ""), "did not finish"),
    (lambda t: t.replace("### rackgate-fabric-errors ports\n", ""), "outside any section"),
    (lambda t: t.replace("## Suppressed: PortXmitWait\n### rackgate-fabric-errors rc=0",
                         "## Suppressed: PortXmitWait\nLink info: 3 1[ ]\n"
                         "### rackgate-fabric-errors rc=0", 1), "unexpected line"),
    (lambda t: "stray\n" + t, "outside any section"),
    (lambda t: t.replace("uptime_s=2038.56", "uptime_s=2000.00"), "is not after read 1"),
    (lambda t: t.replace("rc=0\n### rackgate-fabric-errors read=2", "rc=255\n"
                         "### rackgate-fabric-errors read=2"), "did not complete \\(rc 255"),
    (lambda t: t.replace("## Summary: 8 nodes checked, 0 bad nodes found\n##          36 ports "
                         "checked, 0 ports have errors beyond threshold\n## Thresholds: [Sym",
                         "## Thresholds: [Sym", 1), "no summary"),
])
def test_damaged_evidence_is_a_parse_error(edit, match) -> None:
    text = edit(fixture("healthy"))
    assert text != fixture("healthy")
    with pytest.raises(ParseError, match=match):
        parse_ibcounters(text)


def test_a_port_printed_twice_or_garbled_counters_are_parse_errors() -> None:
    text = fixture("symbol-errors-rising")
    twice = text.replace("   GUID 0x200000 port 1: [SymbolErrorCounter == 40]\n",
                         "   GUID 0x200000 port 1: [SymbolErrorCounter == 40]\n" * 2)
    with pytest.raises(ParseError, match='"leaf-r0"\\[1\\] is printed twice'):
        parse_ibcounters(twice)
    with pytest.raises(ParseError, match="cannot read the counters"):
        parse_ibcounters(text.replace("port 1: [SymbolErrorCounter == 40]",
                                      "port 1: [SymbolErrorCounter == -4]"))


def _judged_healthy_with(old: str, new: str, **kw) -> list[tuple[str, list[str], str]]:
    text = fixture("healthy").replace(old, new, 1)
    assert text != fixture("healthy")
    return judge(text, **kw)


def test_thresholds_above_zero_or_suppressed_counters_hide_counts() -> None:
    assert _judged_healthy_with("[SymbolErrorCounter = 0]", "[SymbolErrorCounter = 10]") == [(
        "error", [], "read 1 was taken with ibqueryerrors thresholds above 0 "
        "(SymbolErrorCounter = 10): counts at or below them are not printed, so a zero cannot "
        "be told from a count under the threshold")]
    assert _judged_healthy_with("## Suppressed: PortXmitWait", "## Suppressed: PortXmitWait "
                                "LinkDownedCounter") == [(
        "error", [], "read 1 suppressed judged counters LinkDownedCounter")]


def test_failed_queries_the_tool_does_not_name_are_an_error_for_every_node() -> None:
    found = _judged_healthy_with("## Suppressed: PortXmitWait",
                                 "##          2 PMA query failures\n## Suppressed: PortXmitWait")
    assert found == [("error", [], "read 1: ibqueryerrors counts 2 failed PMA "
                                   "queries but names 0: no warning")]


def test_missing_or_limitless_thresholds_and_a_short_window_are_errors() -> None:
    text = fixture("healthy")
    partial = {k: v for k, v in THRESHOLDS.items() if k != "link_downed_rise"}
    assert judge(text, partial) == [
        ("error", [], "no link_downed_rise threshold in the profile")]
    floor = {**THRESHOLDS, "rcv_error_rise": Threshold(unit="errors/h", ref=1, min_ratio=1.0,
                                                       basis="a floor by mistake")}
    assert judge(text, floor) == [("error", [], "threshold rcv_error_rise has "
                                                "no max_ratio, so it sets no limit (errors/h)")]
    assert [m for _, _, m in judge(text, params=FabricErrorsParams(window_s=30))] == [
        f"the two reads are {window('healthy'):.1f} s apart, params.window_s "
        "is 30 s: not this check's evidence"]


def test_a_plan_without_links_is_an_error_not_a_pass() -> None:
    bare = plan_from_document({"schema": "rackgate.fabric/1", "name": "bare", "speed": "HDR",
                               "switches": [{"name": "leaf-r0", "role": "leaf", "ports": 8}]},
                              "bare plan")
    verdict = judge_fabric_errors(parse_ibcounters(fixture("healthy")), PARAMS, THRESHOLDS, bare)
    assert [(f.status.label, f.message) for f in verdict.findings] == [
        ("error", "fabric plan bare plans no link: there is no port to judge")]


def test_the_command_is_the_constant_script_with_validated_arguments() -> None:
    assert fabric_errors_command(PARAMS, {}) == ["sh", "-c", ERRORS_SCRIPT,
                                                 "rackgate-fabric-errors", "5", "", ""]
    argv = fabric_errors_command(FabricErrorsParams(ca="mlx5_0", port=1), {})
    assert argv[2] is ERRORS_SCRIPT and argv[3:] == ["rackgate-fabric-errors", "30", "mlx5_0",
                                                     "1"]
    for bad in ({"window_s": 4}, {"window_s": 601}, {"window_s": 60, "timeout_s": 100},
                {"ca": "mlx5_0; reboot"}, {"port": 0}, {"stray": 1}):
        with pytest.raises(ValidationError):
            FabricErrorsParams(**bad)
    assert CHECK.metrics == REQUIRED and CHECK.timeout_s(FabricErrorsParams()) == 300


def _fake(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_script_passes_its_arguments_as_words_and_zeroes_every_threshold(
        tmp_path: Path) -> None:
    """The real script under sh, with stand-ins for the tools (and sleep) that record how
    they were called: the query port reaches them as -C/-P words, the threshold file sets
    every error counter to 0, and the sections come out in order."""
    bindir, calls = tmp_path / "bin", tmp_path / "calls"
    bindir.mkdir()
    _fake(bindir, "ibnetdiscover", f'echo "ibnetdiscover $*" >> {calls}')
    _fake(bindir, "ibqueryerrors", f'echo "ibqueryerrors $*" >> {calls}; '
          'for a; do case $a in */thresholds) cat "$a" >> ' + str(calls) + ';; esac; done; '
          'echo "## Summary: 0 nodes checked, 0 bad nodes found"')
    _fake(bindir, "sleep", f'echo "sleep $*" >> {calls}')
    argv = fabric_errors_command(FabricErrorsParams(ca="mlx5_0", port=1), {})
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False,
                          env={**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    marks = [x for x in done.stdout.splitlines() if x.startswith("### ")]
    assert [m.split(" uptime_s=")[0] for m in marks] == [
        f"### rackgate-fabric-errors {m}" for m in
        ("discover", "rc=0", "ports", "rc=0", "read=1", "rc=0", "read=2", "rc=0", "done")]
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("ibnetdiscover -C mlx5_0 -P 1 --cache /")
    assert lines[1].startswith("ibqueryerrors -C mlx5_0 -P 1 --load-cache /")
    assert lines[1].endswith("/fabric --counters")
    assert lines[2].endswith(" -s PortXmitWait") and "--threshold-file" in lines[2]
    zeroes = lines[3:15]
    assert zeroes == [f"{c}=0" for c in (
        "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
        "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards",
        "PortXmitConstraintErrors", "PortRcvConstraintErrors", "LocalLinkIntegrityErrors",
        "ExcessiveBufferOverrunErrors", "VL15Dropped")]
    assert lines[15] == "sleep 30" and lines[16] == lines[2] and lines[17:] == zeroes
    cache = lines[0].split("--cache ")[1]
    assert cache.endswith("/fabric") and not Path(cache).parent.exists()  # removed on exit
