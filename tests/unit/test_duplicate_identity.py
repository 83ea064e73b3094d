"""node.duplicate_identity: two nodes that are one node (a cloned image's machine-id, a
reflashed board's system serial, a copied HCA node GUID) both fail, naming each other.

Identity outputs are derived here from the hand-written probe fixture
tests/fixtures/identity/server-with-hcas.txt (header there) by editing one line each.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stored_runs import write_run

from rackgate.checks import RACK_REGISTRY, load_profile, profile_from_document
from rackgate.checks.identity import (
    DUPLICATES,
    NAME,
    DuplicateParams,
    IdentityParams,
    identity_command,
    judge_duplicates,
)
from rackgate.model import Result, Status
from rackgate.parsers import ParseError
from rackgate.parsers.identity import parse_identity
from rackgate.profile import ProfileError
from rackgate.run import judge_run

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "identity"
ALL = DuplicateParams(compare=["machine_id", "system_serial", "hca_node_guid"])


def probe(**edits: str) -> str:
    """The fixture's probe output, header dropped, with ``key=value`` lines replaced."""
    lines = [line for line in (FIX / "server-with-hcas.txt").read_text().splitlines()
             if not line.startswith("#")]
    out = []
    for line in lines:
        key = line.split("=", 1)[0]
        out.append(f"{key}={edits[key]}" if key in edits else line)
    return "\n".join(out) + "\n"


def node(n: int, *, mid: str | None = None, serial: str | None = None,
         guid: str | None = None) -> dict[str, str]:
    """Edits that make the fixture node number ``n`` unique, unless a value is given."""
    return {"machine_id": mid or f"{n:032x}", "product_serial": serial or f"SN{n:08d}",
            "hca_node_guids": f"mlx5_0={guid or f'a088:c203:00{n:02x}:3400'}"}


def judged(name: str, text: str) -> Result:
    """The node.identity result of one probe output, as the rack-level judge sees it."""
    from rackgate.checks.identity import judge_identity
    j = judge_identity(parse_identity(text), IdentityParams(), {})
    return Result.from_judgement(name, NAME, j, f"{name}/node.identity.out")


def by_node(results: list[Result]) -> dict[str, Result]:
    assert [r.check for r in results] == [DUPLICATES] * len(results)
    return {r.node: r for r in results}


def test_the_probe_reads_every_rdma_devices_node_guid():
    ident = parse_identity(probe())
    assert ident.hca_node_guids["mlx5_7"] == "a088:c203:0012:3407"
    assert len(ident.hca_node_guids) == 8
    script = identity_command(IdentityParams(), {})[2]
    assert "/sys/class/infiniband/*/node_guid" in script
    # the GUID line comes before machine_id: a cut output loses machine_id too (an error)
    assert script.index("hca_node_guids=") < script.index("machine_id=")


def test_evidence_from_before_the_guid_line_still_parses():
    text = "\n".join(line for line in probe().splitlines()
                     if not line.startswith("hca_node_guids="))
    assert parse_identity(text).hca_node_guids == {}


@pytest.mark.parametrize(("value", "match"), [
    ("mlx5_0", "is not DEVICE=GUID"),
    ("mlx5_0=a088:c203:0012", "is not DEVICE=GUID"),
    ("mlx5_0=a088:c203:0012:340g", "is not DEVICE=GUID"),
    ("mlx5_0=a088:c203:0012:3400 mlx5_0=a088:c203:0012:3401", "lists device mlx5_0 twice"),
    ("$(reboot)=a088:c203:0012:3400", "is not DEVICE=GUID"),
])
def test_a_malformed_guid_line_is_a_parse_error(value, match):
    with pytest.raises(ParseError, match=match):
        parse_identity(probe(hca_node_guids=value))


def test_a_cloned_image_fails_both_nodes_naming_each_other():
    rs = [judged("n1", probe(**node(1, mid="ab" * 16))), judged("n2", probe(**node(2))),
          judged("n3", probe(**node(3, mid="AB" * 16)))]
    out = by_node(judge_duplicates(rs, ALL))
    assert out["n1"].status is out["n3"].status is Status.FAIL
    assert out["n1"].message == f"machine-id {'ab' * 16} is also the machine-id of n3"
    assert out["n3"].message == f"machine-id {'ab' * 16} is also the machine-id of n1"
    assert out["n1"].details["same_as"] == "n3"
    assert out["n2"].status is Status.PASS
    assert out["n2"].message == ("machine-id, system serial, HCA node GUID: differ from every "
                                 "other node's (3 nodes compared)")


def test_same_system_serial_and_same_hca_guid_are_named():
    rs = [judged("n1", probe(**node(1, serial="SN-X", guid="a088:c203:0000:0001"))),
          judged("n2", probe(**node(2, serial="SN-X"))),
          judged("n3", probe(**node(3, guid="A088:C203:0000:0001")))]
    out = by_node(judge_duplicates(rs, ALL))
    assert out["n1"].message == ("system serial SN-X is also the system serial of n2; "
                                 "HCA node GUID a088:c203:0000:0001 is also the HCA node GUID "
                                 "of n3")
    assert out["n1"].details["same_as"] == "n2, n3"
    assert out["n2"].status is out["n3"].status is Status.FAIL


def test_the_profile_chooses_what_is_compared():
    rs = [judged("n1", probe(**node(1, mid="cd" * 16))),
          judged("n2", probe(**node(2, mid="cd" * 16)))]
    serials = DuplicateParams(compare=["system_serial", "hca_node_guid"])
    assert {r.status for r in judge_duplicates(rs, serials)} == {Status.PASS}
    assert {r.status for r in judge_duplicates(rs, ALL)} == {Status.FAIL}


def test_a_node_whose_identity_was_not_read_gets_no_result_and_the_others_are_compared():
    """Its own node.identity error (which rejects it) says why; it is not repeated."""
    broken = Result("n2", NAME, Status.ERROR, "host unreachable, nothing collected: x")
    rs = [judged("n1", probe(**node(1))), broken, judged("n3", probe(**node(3))),
          Result("n4", "fio.seq_read", Status.PASS, "ok")]
    out = by_node(judge_duplicates(rs, ALL))
    assert sorted(out) == ["n1", "n3"]
    assert out["n1"].status is out["n3"].status is Status.PASS
    assert "(2 nodes compared)" in out["n1"].message


def test_nothing_to_compare_is_a_skip_never_a_pass():
    vm = {"product_serial": "", "board_serial": "", "chassis_serial": "", "hca_node_guids": ""}
    rs = [judged("n1", probe(**vm)), judged("n2", probe(**vm))]
    out = by_node(judge_duplicates(rs, DuplicateParams(compare=["system_serial",
                                                                 "hca_node_guid"])))
    assert {r.status for r in out.values()} == {Status.SKIP}
    assert out["n1"].message == ("nothing to compare: the node recorded no system serial, "
                                 "HCA node GUID")


def test_without_node_identity_in_the_run_there_is_no_result():
    rs = [Result(n, "fio.seq_read", Status.PASS, "ok") for n in ("n1", "n2")]
    assert judge_duplicates(rs, ALL) == []


def test_the_check_is_registered_and_configured_by_the_profiles():
    assert DUPLICATES in RACK_REGISTRY
    for name in ("dgx-a100", "dgx-h100", "hgx-h200"):
        cp = load_profile(name).rack_check(DUPLICATES)
        assert cp is not None and cp.enabled, name
        assert DuplicateParams.model_validate(cp.params) == ALL, name
    demo = load_profile("demo").rack_check(DUPLICATES)
    assert demo is not None and demo.enabled
    # the demo rack's containers all boot one image, so they share its machine-id
    assert "machine_id" not in DuplicateParams.model_validate(demo.params).compare


def test_an_unknown_identity_kind_is_refused_naming_the_field():
    doc = dict(load_profile("demo").raw)
    doc["rack"] = {DUPLICATES: {"params": {"compare": ["mac_address"]}}}
    with pytest.raises(ProfileError, match=r"rack\.node\.duplicate_identity\.params\.compare"):
        profile_from_document(doc, "test")


def test_a_stored_run_with_a_cloned_node_is_rejected_naming_both(tmp_path):
    profile = load_profile("dgx-h100")
    hosts = ["dgx01", "dgx02", "dgx03"]
    evidence = {("dgx01", NAME): probe(**node(1, mid="ef" * 16)),
                ("dgx02", NAME): probe(**node(2)),
                ("dgx03", NAME): probe(**node(3, mid="ef" * 16))}
    run = write_run(tmp_path / "run", profile, [NAME], hosts, evidence=evidence)
    doc = json.loads(judge_run(run).report_json.read_text())
    results = {(n["name"], r["check"]): r for n in doc["nodes"] for r in n["results"]}
    assert results[("dgx01", DUPLICATES)]["status"] == "fail"
    assert "is also the machine-id of dgx03" in results[("dgx01", DUPLICATES)]["message"]
    assert "is also the machine-id of dgx01" in results[("dgx03", DUPLICATES)]["message"]
    assert results[("dgx02", DUPLICATES)]["status"] == "pass"
    verdicts = {n["name"]: n["verdict"] for n in doc["nodes"]}
    assert verdicts == {"dgx01": "REJECT", "dgx02": "ACCEPT", "dgx03": "REJECT"}
