"""fabric.as_built: ``ibnetdiscover -p`` parsed and judged against the test fabric's plan
(tests/fixtures/fabric/plan.yml). The listings are captures of the real tool under ibsim
(tests/fixtures/fabric/ibnetdiscover-p/, one per fault, each with its header; the
integration test takes them again live), and a few edits of them for what ibsim cannot
cable (a listing that contradicts itself)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rackgate.checks.fabric.as_built import CHECK, judge_as_built
from rackgate.checks.fabric.query import FabricQueryParams
from rackgate.checks.shared.base import FabricCheck
from rackgate.fabric.findings import FabricVerdict, node_results
from rackgate.fabric.plan import load_plan
from rackgate.parsers import ParseError
from rackgate.parsers.infiniband.ibnetdiscover import parse_ibnetdiscover_ports

FABRIC = Path(__file__).resolve().parents[3] / "fixtures" / "fabric"
PLAN = load_plan(FABRIC / "plan.yml").plan
BOTH = ["gpu001", "gpu002"]
R0, R1 = "su1-leaf-r0 (rack r01 U40)", "su1-leaf-r1 (rack r01 U41)"
S1, S2 = "spine-01 (rack r01 U42)", "spine-02 (rack r01 U43)"


def listing(name: str) -> str:
    """A capture's tool output: the text after its '# ---' header line."""
    head, sep, body = (FABRIC / "ibnetdiscover-p" / f"{name}.txt").read_text().partition(
        "\n# ---\n")
    assert sep and head.startswith("# source: captured here"), name
    return body


def judge(text: str) -> FabricVerdict:
    return judge_as_built(parse_ibnetdiscover_ports(text), FabricQueryParams(), {}, PLAN)


def findings(text: str) -> list[tuple[str, str, list[str]]]:
    return [(f.status.label, f.message, sorted(f.hosts)) for f in judge(text).findings]


def test_the_healthy_listing_reads_as_every_link_once_with_both_ends() -> None:
    d = parse_ibnetdiscover_ports(listing("healthy"))
    assert len(d.ports) == 36 and sum(p.peer is None for p in d.ports) == 20
    assert len(d.links) == 8 and all(k.both_ends for k in d.links)
    assert sorted(d.switches.values()) == ["spine-01", "spine-02", "su1-leaf-r0", "su1-leaf-r1"]
    assert sorted(e.name for e in d.ca_ports) == ["gpu001 mlx5_0", "gpu001 mlx5_1",
                                                  "gpu002 mlx5_0", "gpu002 mlx5_1"]
    k = next(k for k in d.links if k.a.name == "gpu002 mlx5_1")
    assert (k.a.kind, k.a.lid, k.a.port, k.a.guid) == ("CA", 8, 1, "0x0000000000100007")
    assert (k.b.kind, k.b.lid, k.b.port, k.b.guid, k.b.desc) == (
        "SW", 3, 2, "0x0000000000200001", "su1-leaf-r1")
    assert (k.width, k.speed, k.lineno) == ("4x", "HDR", 1)


def test_the_healthy_fabric_passes_and_says_what_was_checked() -> None:
    v = judge(listing("healthy"))
    assert v.findings == ()
    assert v.summary == ("8 planned links found as planned (ibnetdiscover -p: 4 switches, "
                         "4 CA ports, 8 links)")
    assert (v.measured, v.unit) == (8.0, "links")


FAULTS = {
    "swapped-cables": [(
        "fail", 'cables su1-leaf-r0/1 and su1-leaf-r0/2 are swapped: "gpu001 mlx5_0"[1] is '
        'found on "su1-leaf-r0"[2] and "gpu002 mlx5_0"[1] on "su1-leaf-r0"[1], planned '
        '"gpu001 mlx5_0"[1] <-> "su1-leaf-r0"[1] and "gpu002 mlx5_0"[1] <-> "su1-leaf-r0"[2]'
        f"; at {R0}", BOTH)],
    "swapped-uplinks": [(
        "fail", 'cables su1-leaf-r0/5 and su1-leaf-r0/6 are swapped: "su1-leaf-r0"[5] is '
        'found on "spine-02"[1] and "su1-leaf-r0"[6] on "spine-01"[1], planned '
        '"su1-leaf-r0"[5] <-> "spine-01"[1] and "su1-leaf-r0"[6] <-> "spine-02"[1]; '
        f"at {R0}, {S1}, {S2}", BOTH)],
    "wrong-port": [(
        "fail", 'cable su1-leaf-r0/2: "gpu002 mlx5_0"[1] is found on "su1-leaf-r0"[3], '
        f'planned "su1-leaf-r0"[2]: the wrong port; at {R0}', ["gpu002"])],
    "other-rail-leaf": [(
        "fail", 'cable su1-leaf-r1/2: "gpu002 mlx5_1"[1] is found on "su1-leaf-r0"[3], on '
        "rail 0's leaf su1-leaf-r0, planned rail 1 on \"su1-leaf-r1\"[2]; "
        f"at {R0}, {R1}", ["gpu002"])],
    "unexpected-switch": [(
        "fail", 'cable su1-leaf-r0/5: "su1-leaf-r0"[5] is found on "spine-02"[3], an '
        f'unexpected switch, planned "spine-01"[1]; at {R0}, {S2}, {S1}', BOTH)],
    "extra-link": [(
        "fail", f'link not in the plan: "spine-01"[3] <-> "su1-leaf-r0"[7]; at {S1}, {R0}',
        BOTH)],
    "unlinked-uplink": [(
        "fail", 'cable su1-leaf-r0/5 is missing: "su1-leaf-r0"[5] <-> "spine-01"[1] is not '
        'found ("su1-leaf-r0"[5] has no link; "spine-01"[1] has no link); '
        f"at {R0}, {S1}", BOTH)],
    "spine-missing": [
        ("fail", 'cable su1-leaf-r0/6 is missing: "su1-leaf-r0"[6] <-> "spine-02"[1] is not '
         'found ("su1-leaf-r0"[6] has no link; "spine-02" is not found); '
         f"at {R0}, {S2}", BOTH),
        ("fail", 'cable su1-leaf-r1/6 is missing: "su1-leaf-r1"[6] <-> "spine-02"[2] is not '
         'found ("su1-leaf-r1"[6] has no link; "spine-02" is not found); '
         f"at {R1}, {S2}", BOTH),
        ("fail", f"planned switch {S2} is not found: none of its ports is in the discovery",
         [])],
    "hca-missing": [
        ("fail", 'cable su1-leaf-r1/2 is missing: "gpu002 mlx5_1"[1] <-> "su1-leaf-r1"[2] is '
         'not found ("gpu002 mlx5_1" is not found; "su1-leaf-r1"[2] has no link); '
         f"at {R1}", ["gpu002"]),
        ("fail", 'planned HCA "gpu002 mlx5_1" of gpu002 is not found: none of its ports is '
         "in the discovery", ["gpu002"])],
    "duplicate-description": [
        ("fail", 'node description "gpu001 mlx5_0" is found on 2 nodes (its port 1: port '
         "GUIDs 0x0000000000100001, 0x0000000000100005): its links cannot be told apart, so "
         "its 1 planned cable(s) are not judged (su1-leaf-r0/1); give every node its own "
         "description", BOTH),
        ("fail", 'cable su1-leaf-r0/2 is missing: "gpu002 mlx5_0"[1] <-> "su1-leaf-r0"[2] is '
         'not found ("gpu002 mlx5_0" is not found; "su1-leaf-r0"[2] is linked to '
         f'"gpu001 mlx5_0"[1]); at {R0}', ["gpu002"]),
        ("fail", 'planned HCA "gpu002 mlx5_0" of gpu002 is not found: none of its ports is '
         "in the discovery", ["gpu002"])],
    "host-port-down": [(
        "error", "ibnetdiscover -p found no link (1 port line(s), none linked): the fabric "
        "host's HCA port sees no fabric (a wrong -C/-P, its cable, or no subnet manager), so "
        "none of the 8 planned links is judged", [])],
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_fault_is_named_with_both_ends_its_cable_and_where(fault: str) -> None:
    assert findings(listing(fault)) == FAULTS[fault]


def test_a_fault_fails_the_nodes_it_bears_on_and_passes_the_others() -> None:
    v = judge(listing("wrong-port"))
    results = node_results(v, ["gpu001", "gpu002"], CHECK.name, "ev")
    assert [(r.node, r.status.label) for r in results] == [("gpu001", "pass"),
                                                           ("gpu002", "fail")]
    assert results[0].message == ("7 of 8 planned links found as planned; no finding bears "
                                  "on this node (ibnetdiscover -p: 4 switches, 4 CA ports, "
                                  "8 links)")


def test_a_switchs_sharp_aggregation_node_past_its_external_ports_is_not_judged() -> None:
    v = judge(listing("sharp-aggregation-nodes"))
    assert v.findings == ()
    assert v.summary == ("8 planned links found as planned (ibnetdiscover -p: 4 switches, "
                         "6 CA ports, 10 links, 2 to SHARP aggregation nodes)")


def test_an_aggregation_node_on_an_external_port_is_judged_as_any_node() -> None:
    text = listing("sharp-aggregation-nodes").replace(
        "SW     2  3 0x0000000000200000 4x SDR                                    "
        "'su1-leaf-r0'\n", "").replace("SW     2  9 0x0000000000200000", "SW     2  3 "
        "0x0000000000200000").replace("- SW     2  9 0x0000000000200000",
                                      "- SW     2  3 0x0000000000200000")
    assert findings(text) == [(
        "fail", 'link not in the plan: "Mellanox Technologies Aggregation Node"[1] (CA '
        '0x0000000000100009, not in the plan) <-> "su1-leaf-r0"[3]; at su1-leaf-r0 (rack r01 '
        "U40)", BOTH)]


def test_descriptions_are_compared_without_the_blanks_around_them() -> None:
    padded = listing("healthy").replace("'su1-leaf-r0'", "' su1-leaf-r0  '")
    d = parse_ibnetdiscover_ports(padded)
    assert {e.desc for e in d.ends() if e.name == "su1-leaf-r0"} == {" su1-leaf-r0  "}
    assert judge(padded).findings == ()


def test_a_listing_that_contradicts_itself_is_an_error_not_a_cabling() -> None:
    # su1-leaf-r0[1]'s own line names gpu002 mlx5_0 as its peer, which the HCAs' lines deny
    text = listing("healthy").replace(
        "SW     2  1 0x0000000000200000 4x HDR - CA     1  1 0x0000000000100001 ( "
        "'su1-leaf-r0' - 'gpu001 mlx5_0' )",
        "SW     2  1 0x0000000000200000 4x HDR - CA     7  1 0x0000000000100005 ( "
        "'su1-leaf-r0' - 'gpu002 mlx5_0' )")
    assert findings(text) == [
        ("error", 'ibnetdiscover -p contradicts itself: "gpu002 mlx5_0"[1] is printed linked '
         'to "su1-leaf-r0"[2] (line 27) and to "su1-leaf-r0"[1] (line 35): a damaged listing, '
         "the cables of that port are not judged", BOTH),
        ("error", 'ibnetdiscover -p contradicts itself: "su1-leaf-r0"[1] is printed linked to '
         '"gpu002 mlx5_0"[1] (line 35) and to "gpu001 mlx5_0"[1] (line 36): a damaged '
         "listing, the cables of that port are not judged", BOTH)]


def test_a_node_of_the_other_kind_than_planned_is_not_trusted() -> None:
    text = listing("healthy").replace("CA     5  1 0x0000000000100003", "RT     5  1 "
                                      "0x0000000000100003").replace(
        "- CA     5  1 0x0000000000100003", "- RT     5  1 0x0000000000100003")
    assert findings(text) == [(
        "fail", 'node description "gpu001 mlx5_1" is found as a router (0x0000000000100003), '
        "planned an HCA: its links cannot be told apart, so its 1 planned cable(s) are not "
        "judged (su1-leaf-r1/1); see what is cabled in its place", ["gpu001"])]


def test_an_unplanned_node_is_named_with_its_guid() -> None:
    text = listing("healthy").replace("'gpu002 mlx5_1'", "'localhost mlx5_1'")
    assert findings(text) == [
        ("fail", 'cable su1-leaf-r1/2 is missing: "gpu002 mlx5_1"[1] <-> "su1-leaf-r1"[2] is '
         'not found ("gpu002 mlx5_1" is not found; "su1-leaf-r1"[2] is linked to '
         '"localhost mlx5_1"[1] (CA 0x0000000000100007, not in the plan)); at '
         f"{R1}", ["gpu002"]),
        ("fail", 'planned HCA "gpu002 mlx5_1" of gpu002 is not found: none of its ports is in '
         "the discovery", ["gpu002"]),
        ("fail", 'link not in the plan: "localhost mlx5_1"[1] (CA 0x0000000000100007, not in '
         f'the plan) <-> "su1-leaf-r1"[2]; at {R1}', ["gpu002"])]


@pytest.mark.parametrize(("text", "error"), [
    ("", r"no port line in the output \(empty\)"),
    ("ibwarn: [123] mad_rpc: _do_madrpc failed\n",
     r"line 1 is not a port line .*'ibwarn: \[123\]"),
    ("SW 2 1 0x0000000000200000 4x HDR - CA 1 1 0x0000000000100001 ( 'a' - 'b' - 'c' )\n",
     r"line 1: cannot tell the two node descriptions apart"),
    ("SW 2 1 0x0000000000200000 3x HDR   'leaf'\n", r"line 1: width '3x' / speed 'HDR'"),
    ("SW 70000 1 0x0000000000200000 4x HDR   'leaf'\n", r"line 1: LID 70000 is above 65535"),
    ("XX 2 1 0x0000000000200000 4x HDR   'leaf'\n", r"line 1: node type 'XX'"),
])
def test_anything_else_is_refused_naming_the_line(text: str, error: str) -> None:
    with pytest.raises(ParseError, match=error):
        parse_ibnetdiscover_ports(text)


def test_a_line_cut_in_the_middle_is_refused() -> None:
    first = listing("healthy").splitlines()[0]
    with pytest.raises(ParseError, match=r"ibnetdiscover -p: line 2 is not a port line"):
        parse_ibnetdiscover_ports(f"{first}\n{first[:60]}\n")


def test_the_command_queries_through_the_hca_and_port_given() -> None:
    assert CHECK.command(FabricQueryParams(), {}) == ["ibnetdiscover", "-p"]
    p = FabricQueryParams(ca="mlx5_3", port=1)
    assert CHECK.command(p, {}) == ["ibnetdiscover", "-p", "-C", "mlx5_3", "-P", "1"]
    assert CHECK.needs(p, {}).rdma_devices == ("mlx5_3",)
    assert isinstance(CHECK, FabricCheck)
    assert (CHECK.judge_plan, CHECK.timeout_s(p)) == (judge_as_built, 180)


@pytest.mark.parametrize("bad", [{"ca": "mlx5_0 -s"}, {"ca": "-x"}, {"ca": "$(id)"},
                                 {"port": 0}, {"port": 300}, {"hca": "mlx5_0"}])
def test_params_that_could_reach_the_command_line_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        FabricQueryParams.model_validate(bad)
