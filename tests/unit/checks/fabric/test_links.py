"""fabric.links: ``iblinkinfo -l`` (and its default listing) parsed and judged against the
test fabric's plan (tests/fixtures/fabric/plan.yml). The listings are captures of the real
tool under ibsim (tests/fixtures/fabric/iblinkinfo-l/ and iblinkinfo/, one per fault, each
with its header; the integration test takes them again live), and edits of them for states
ibsim does not reach (Armed, ends that disagree, a listing missing a line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rackgate.checks.fabric.links import CHECK, judge_links, lane_gbps
from rackgate.checks.fabric.query import FabricQueryParams
from rackgate.checks.shared.base import FabricCheck
from rackgate.fabric.findings import FabricVerdict
from rackgate.fabric.plan import load_plan
from rackgate.parsers import ParseError
from rackgate.parsers.infiniband.iblinkinfo import parse_iblinkinfo_ports

FABRIC = Path(__file__).resolve().parents[3] / "fixtures" / "fabric"
PLAN = load_plan(FABRIC / "plan.yml").plan
BOTH = ["gpu001", "gpu002"]
R0, R1 = "su1-leaf-r0 (rack r01 U40)", "su1-leaf-r1 (rack r01 U41)"
S1, S2 = "spine-01 (rack r01 U42)", "spine-02 (rack r01 U43)"
# the two lines of cable su1-leaf-r1/2 in iblinkinfo-l/healthy.txt
CA_LINE = ('0x0000000000100007 "                 gpu002 mlx5_1"      8    1[  ] ==( 4X        '
           '53.125 Gbps Active/  LinkUp)==>  0x0000000000200001      3    2[  ] "su1-leaf-r1" '
           '(Could be 12X )')
SW_LINE = ('0x0000000000200001 "                   su1-leaf-r1"      3    2[  ] ==( 4X        '
           '53.125 Gbps Active/  LinkUp)==>  0x0000000000100007      8    1[  ] '
           '"gpu002 mlx5_1" (Could be 12X )')


def listing(name: str, tool: str = "iblinkinfo-l") -> str:
    """A capture's tool output: the text after its '# ---' header line."""
    head, sep, body = (FABRIC / tool / f"{name}.txt").read_text().partition("\n# ---\n")
    assert sep and head.startswith("# source: captured here"), name
    return body


def judge(text: str) -> FabricVerdict:
    return judge_links(parse_iblinkinfo_ports(text), FabricQueryParams(), {}, PLAN)


def findings(text: str) -> list[tuple[str, str, list[str]]]:
    return [(f.status.label, f.message, sorted(f.hosts)) for f in judge(text).findings]


def test_line_mode_reads_every_port_with_its_states_and_peer() -> None:
    info = parse_iblinkinfo_ports(listing("healthy"))
    assert info.line_mode and len(info.ports) == 36
    p = info.ports[0]
    assert (p.lineno, p.guid, p.desc, p.name, p.lid, p.port) == (
        1, "0x0000000000100007", "                 gpu002 mlx5_1", "gpu002 mlx5_1", 8, 1)
    assert (p.width, p.speed_gbps, p.speed_text, p.state, p.physical_state, p.up, p.hint) == (
        "4X", 53.125, "53.125 Gbps", "Active", "LinkUp", True, "Could be 12X")
    assert p.peer is not None
    assert (p.peer.guid, p.peer.lid, p.peer.port, p.peer.desc) == (
        "0x0000000000200001", 3, 2, "su1-leaf-r1")
    down = [q for q in info.ports if q.peer is None]
    assert len(down) == 20 and {(q.state, q.physical_state, q.width, q.speed_gbps, q.hint)
                                for q in down} == {("Down", "Polling", None, None, "")}


def test_the_default_listing_reads_as_the_line_mode_does() -> None:
    def read(text: str) -> list[tuple[object, ...]]:
        return sorted((p.guid, p.name, p.lid, p.port, p.width, p.speed_text, p.state,
                       p.physical_state, str(p.peer), p.hint)
                      for p in parse_iblinkinfo_ports(text).ports)

    default = listing("healthy", "iblinkinfo")
    assert not parse_iblinkinfo_ports(default).line_mode
    assert read(default) == read(listing("healthy"))
    assert judge(default).findings == ()


def test_the_healthy_fabric_passes_and_says_what_was_checked() -> None:
    v = judge(listing("healthy"))
    assert v.findings == ()
    assert v.summary == ("8 planned links Active/LinkUp at their planned width and speed, "
                         "each seen from both ends (iblinkinfo -l: 36 port lines)")
    assert (v.measured, v.unit) == (8.0, "links")


CABLE = 'cable su1-leaf-r1/2: "gpu002 mlx5_1"[1] <-> "su1-leaf-r1"[2]'
NOT_UP = ("is Initialize/LinkUp, not Active/LinkUp (no subnet manager has brought it up)")
FAULTS = {
    "reduced-width": [(
        "fail", 'cable su1-leaf-r1/2: "gpu002 mlx5_1"[1] <-> "su1-leaf-r1"[2] is down-trained:'
        f" 4X planned, 1X found (iblinkinfo: Could be 12X); at {R1}", ["gpu002"])],
    "reduced-speed": [(
        "fail", 'cable su1-leaf-r1/6: "su1-leaf-r1"[6] <-> "spine-02"[2] is down-trained: HDR '
        "(53.125 Gb/s per lane) planned, 25.78125 Gb/s per lane found (iblinkinfo: Could be "
        f"12X Could be 53.125 Gbps); at {R1}, {S2}", BOTH)],
    "unlinked-uplink": [(
        "fail", 'cable su1-leaf-r0/5: "su1-leaf-r0"[5] <-> "spine-01"[1] is down '
        '("su1-leaf-r0"[5] Down/Polling, no peer; "spine-01"[1] Down/Polling, no peer); '
        f"at {R0}, {S1}", BOTH)],
    "swapped-cables": [
        ("fail", 'cable su1-leaf-r0/1: "gpu001 mlx5_0"[1] <-> "su1-leaf-r0"[1] is not cabled '
         'as planned: "gpu001 mlx5_0"[1] is linked to "su1-leaf-r0"[2], planned '
         f'"su1-leaf-r0"[1] (fabric.as_built names the cabling); at {R0}', ["gpu001"]),
        ("fail", 'cable su1-leaf-r0/2: "gpu002 mlx5_0"[1] <-> "su1-leaf-r0"[2] is not cabled '
         'as planned: "gpu002 mlx5_0"[1] is linked to "su1-leaf-r0"[1], planned '
         f'"su1-leaf-r0"[2] (fabric.as_built names the cabling); at {R0}', ["gpu002"])],
    "no-sm": [
        ("fail", f'cable su1-leaf-r0/1: "gpu001 mlx5_0"[1] <-> "su1-leaf-r0"[1] {NOT_UP}; '
         f"at {R0}", ["gpu001"]),
        ("fail", f'cable su1-leaf-r1/1: "gpu001 mlx5_1"[1] <-> "su1-leaf-r1"[1] {NOT_UP}; '
         f"at {R1}", ["gpu001"]),
        ("fail", f'cable su1-leaf-r0/2: "gpu002 mlx5_0"[1] <-> "su1-leaf-r0"[2] {NOT_UP}; '
         f"at {R0}", ["gpu002"]),
        ("fail", f'cable su1-leaf-r1/2: "gpu002 mlx5_1"[1] <-> "su1-leaf-r1"[2] {NOT_UP}; '
         f"at {R1}", ["gpu002"]),
        ("fail", f'cable su1-leaf-r0/5: "su1-leaf-r0"[5] <-> "spine-01"[1] {NOT_UP}; '
         f"at {R0}, {S1}", BOTH),
        ("fail", f'cable su1-leaf-r0/6: "su1-leaf-r0"[6] <-> "spine-02"[1] {NOT_UP}; '
         f"at {R0}, {S2}", BOTH),
        ("fail", f'cable su1-leaf-r1/5: "su1-leaf-r1"[5] <-> "spine-01"[2] {NOT_UP}; '
         f"at {R1}, {S1}", BOTH),
        ("fail", f'cable su1-leaf-r1/6: "su1-leaf-r1"[6] <-> "spine-02"[2] {NOT_UP}; '
         f"at {R1}, {S2}", BOTH)],
    "duplicate-description": [
        ("error", 'cable su1-leaf-r0/1: "gpu001 mlx5_0"[1] <-> "su1-leaf-r0"[1] cannot be '
         'judged: iblinkinfo prints "gpu001 mlx5_0"[1] 2 times (GUIDs 0x0000000000100001, '
         "0x0000000000100005): each node description must name one node; "
         f"at {R0}", ["gpu001"]),
        ("fail", 'cable su1-leaf-r0/2: "gpu002 mlx5_0"[1] <-> "su1-leaf-r0"[2] is not cabled '
         'as planned: "su1-leaf-r0"[2] is linked to "gpu001 mlx5_0"[1], planned '
         f'"gpu002 mlx5_0"[1] (fabric.as_built names the cabling); at {R0}', ["gpu002"])],
    "other-rail-leaf": [(
        "fail", f'{CABLE} is not cabled as planned: "gpu002 mlx5_1"[1] is linked to '
        '"su1-leaf-r0"[3], planned "su1-leaf-r1"[2] (fabric.as_built names the cabling); '
        f"at {R1}", ["gpu002"])],
    "extra-link": [],  # su1-leaf-r0[7] <-> spine-01[3], up, is not planned: not judged here
    "sharp-aggregation-nodes": [],  # the leaves' port 9: not planned, not judged here
    "host-port-down": [(
        "error", "iblinkinfo shows no linked port (1 port line(s), none with a peer): the "
        "fabric host's HCA port sees no fabric (a wrong -C/-P, its cable), so none of the 8 "
        "planned links is judged", [])],
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_is_named_with_both_ends_its_cable_and_where(fault: str) -> None:
    assert findings(listing(fault)) == FAULTS[fault]


def test_armed_is_not_up_either() -> None:
    text = listing("no-sm").replace("Initialize/", "     Armed/")
    assert {m for _, m, _ in findings(text)} >= {
        f'cable su1-leaf-r0/1: "gpu001 mlx5_0"[1] <-> "su1-leaf-r0"[1] is Armed/LinkUp, not '
        f"Active/LinkUp (no subnet manager has brought it up); at {R0}"}
    assert len(findings(text)) == 8


@pytest.mark.parametrize(("edit", "expected"), [
    ((CA_LINE, CA_LINE.replace("( 4X ", "( 1X ")), (
        "error", f'{CABLE} has ends that disagree: "gpu002 mlx5_1"[1] shows 1X 53.125 Gbps '
        f'Active/LinkUp, "su1-leaf-r1"[2] shows 4X 53.125 Gbps Active/LinkUp; at {R1}')),
    ((SW_LINE + "\n", ""), (
        "error", f'{CABLE} is printed at one end only: "gpu002 mlx5_1"[1] is linked to '
        f'"su1-leaf-r1"[2], but "su1-leaf-r1"[2] is not listed: its two ends disagree; '
        f"at {R1}")),
    ((SW_LINE, SW_LINE.split(" ==(")[0] + " ==(              Down/ Polling)==>             "
      '[  ] "" ( )'), (
        "error", f'{CABLE} is printed at one end only: "gpu002 mlx5_1"[1] is linked to '
        f'"su1-leaf-r1"[2], but "su1-leaf-r1"[2] shows no peer (Down/Polling): its two ends '
        f"disagree; at {R1}")),
    ((CA_LINE + "\n", ""), (
        "error", f'{CABLE} is printed at one end only: "su1-leaf-r1"[2] is linked to '
        f'"gpu002 mlx5_1"[1], but "gpu002 mlx5_1"[1] is not listed: its two ends disagree; '
        f"at {R1}")),
])
def test_a_link_its_ends_do_not_print_alike_is_an_error(edit: tuple[str, str],
                                                        expected: tuple[str, str]) -> None:
    text = listing("healthy")
    assert text.count(edit[0]) == 1
    assert [(s, m) for s, m, _ in findings(text.replace(*edit))] == [expected]


def test_a_planned_link_it_does_not_see_is_never_passed() -> None:
    text = listing("healthy").replace(CA_LINE + "\n", "").replace(SW_LINE + "\n", "")
    assert findings(text) == [(
        "fail", f"{CABLE} is not in iblinkinfo's output (neither end's port is listed): it is "
        f"not up (fabric.as_built says where it is cabled); at {R1}", ["gpu002"])]


def test_wider_or_faster_than_planned_warns_that_the_plan_may_be_wrong() -> None:
    text = listing("healthy")
    for line in (CA_LINE, SW_LINE):
        text = text.replace(line, line.replace("( 4X ", "(12X "))
    assert findings(text) == [(
        "warn", f"{CABLE} is wider than planned: 4X planned, 12X found (iblinkinfo: Could be "
        f"12X); at {R1}", ["gpu002"])]


def test_a_speed_that_is_no_lane_rate_is_an_error_not_a_fast_link() -> None:
    text = listing("healthy")
    for line in (CA_LINE, SW_LINE):
        text = text.replace(line, line.replace("   53.125 Gbps", "  999.125 Gbps"))
    assert findings(text) == [(
        "error", f"{CABLE} prints a speed '999.125 Gbps' that is no InfiniBand lane rate "
        "(2.5, 5.0, 10.0, 10.3125, 14.0625, 25.78125, 53.125, 106.25, 212.5 Gb/s) (iblinkinfo: "
        f"Could be 12X); at {R1}", ["gpu002"])]


def test_fdr10_is_read_as_printed_and_judged_at_its_own_rate() -> None:
    line = CA_LINE.replace("        53.125 Gbps", "  10.0 Gbps (FDR10)")
    p = parse_iblinkinfo_ports(line).ports[0]
    assert (p.speed_gbps, p.speed_text, p.fdr10, lane_gbps(p)) == (
        10.0, "10.0 Gbps (FDR10)", True, 10.3125)


def test_a_port_not_available_has_no_peer() -> None:
    line = CA_LINE.split("==>")[0] + '==>      "Port not available"'
    p = parse_iblinkinfo_ports(line).ports[0]
    assert (p.peer, p.up) == (None, True)


@pytest.mark.parametrize(("text", "error"), [
    ("", r"iblinkinfo: no port line"),
    ("ibwarn: [9] mad_rpc: _do_madrpc failed\n", r"line 1 is neither a port line .*'ibwarn"),
    (CA_LINE.replace("Active/", "Activ/"), r"line 1 .*: state 'Activ' is not one iblinkinfo "
     r"prints \(NoChange, Down, Initialize, Armed, Active\)"),
    (CA_LINE.replace("LinkUp)", "Linked)"), r"physical state 'Linked' is not one"),
    (CA_LINE.replace('"su1-leaf-r1" (Could be 12X )', '"su1-leaf-r1'),
     r"cannot read the peer in"),
    (CA_LINE.replace(")==>", ")=>"), r"no '==\( <width> <speed> <state>/<physical state> \)==>'"),
    ('           3    2[  ] ==( 4X        53.125 Gbps Active/  LinkUp)==>       8    1[  ] '
     '"gpu002 mlx5_1" ( )', r"line 1: a port line before any CA:/Switch: header"),
    ("Switch: su1-leaf-r1:\n", r"line 1: a Switch: header has the switch's GUID"),
    ("CA: gpu002 mlx5_1:\n      0x0000000000100007      8    1[  ] ==( 4X        53.125 Gbps "
     'Active/  LinkUp)==>       3    2[  ] "su1-leaf-r1" ( )\n' + CA_LINE,
     r"mixes -l lines with the default listing"),
])
def test_anything_else_is_refused_naming_the_line(text: str, error: str) -> None:
    with pytest.raises(ParseError, match=error):
        parse_iblinkinfo_ports(text)


def test_the_command_is_line_mode_through_the_hca_and_port_given() -> None:
    assert CHECK.command(FabricQueryParams(), {}) == ["iblinkinfo", "-l"]
    p = FabricQueryParams(ca="mlx5_0", port=2)
    assert CHECK.command(p, {}) == ["iblinkinfo", "-l", "-C", "mlx5_0", "-P", "2"]
    assert CHECK.needs(p, {}).root and isinstance(CHECK, FabricCheck)
