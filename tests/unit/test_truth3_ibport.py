"""Issue 29, t1: port state from ibv_devinfo, ibstatus and rdma link, the usual alternatives
to ibstat (and the only tools some images have), through fabric.ports' port probe.

Evidence is the probe's output (programs/probes/ib_ports.py): one header line naming the
tool that answered, then that tool's output. Fixtures (tests/fixtures/infiniband/probe-*,
each with its source in its header): ibstatus captured here by running the real script
over a sysfs tree in the kernel's formats (tests/unit/ib_sysfs.py, captured again below
where root and unshare allow), ibv_devinfo -v and rdma -j link written from rdma-core's
devinfo.c and iproute2's rdma/link.c. Each healthy capture passes with the shipped
dgx-h100 profile (rdma link, which prints no rate, with ``unconfirmed_rate: warn``, the
site's word that the state alone will do), each degraded one fails, and the defaults stay
strict: ibstat first, a rate nothing confirms an error.

Tests go through the check registry (``REGISTRY["fabric.ports"]``: its command, parser and
judge), so on a rackgate without the probe they fail by what the check does.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackgate.checks import REGISTRY, load_profile
from rackgate.model import Judgement, Status
from rackgate.parsers import ParseError
from rackgate.parsers.infiniband import parse_ibv_devinfo

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "infiniband"
PORTS = REGISTRY["fabric.ports"]
DGX = load_profile("dgx-h100")
HW = DGX.model.hardware


def fixture(name: str) -> str:
    """A fixture's evidence: what follows its '# ---' line."""
    text = (FIX / name).read_text(encoding="utf-8")
    _, sep, body = text.partition("\n# ---\n")
    assert sep, f"{name} has no '# ---' line after its header"
    return body


def header(argv: list[str], path: str, not_found: list[str]) -> str:
    return "### rackgate-ib-ports " + json.dumps(
        {"argv": argv, "path": path, "not_found": not_found}) + "\n"


def params(**extra: Any) -> Any:
    """dgx-h100's fabric.ports params (its compute_cas), with ``extra`` set."""
    cp = DGX.check("fabric.ports")
    assert cp is not None
    return PORTS.params_model.model_validate({**cp.params, **extra})


def judged(text: str, **extra: Any) -> Judgement:
    """The check's judgement of ``text`` under dgx-h100 (a ParseError is an error)."""
    try:
        record = PORTS.parse(text)
    except ParseError as exc:
        return Judgement(Status.ERROR, f"unparseable: {exc}")
    return PORTS.judge(record, params(**extra), {}, HW)


# ------------------------------------------------------------------ healthy and degraded


@pytest.mark.parametrize("name, tool", [
    ("probe-ibstatus-8x-ndr-healthy.txt", "ibstatus"),
    ("probe-ibv_devinfo-v-8x-ndr-healthy.txt", "ibv_devinfo -v"),
])
def test_truth3_t1_healthy_alternative_reader_passes(name: str, tool: str) -> None:
    j = judged(fixture(name))
    assert j.status is Status.PASS, j.message
    assert j.measured == 8 and "8 of 8 compute ports" in j.message
    assert j.details["tool"] == tool and f"read with {tool}" in j.message
    assert "ibstat" in str(j.details["tools_not_found"]).split(", ")


@pytest.mark.parametrize("name, words", [
    ("probe-ibstatus-port-down-mlx5_3.txt", ["mlx5_3 port 1", "Down/Polling", "7 of 8"]),
    ("probe-ibstatus-hdr-instead-of-ndr-mlx5_9.txt",
     ["mlx5_9 port 1", "rate 200 Gb/s, expected 400 Gb/s"]),
    ("probe-ibv_devinfo-v-port-down-mlx5_3.txt", ["mlx5_3 port 1", "Down/Polling", "7 of 8"]),
])
def test_truth3_t1_degraded_alternative_reader_fails_naming_the_port(name: str,
                                                                      words: list[str]) -> None:
    j = judged(fixture(name))
    assert j.status is Status.FAIL, j.message
    for w in words:
        assert w in j.message, (w, j.message)


def test_truth3_t1_rdma_link_healthy_is_accepted_when_the_profile_takes_the_state_alone():
    j = judged(fixture("probe-rdma-8x-ndr-healthy.txt"), unconfirmed_rate="warn")
    assert j.status is Status.WARN and not j.status.blocks_accept, j.message
    assert j.measured == 8 and "rdma link reports no rate" in j.message
    assert j.details["tool"] == "rdma -j link show"


def test_truth3_t1_rdma_link_port_down_still_fails_when_the_state_alone_is_taken():
    j = judged(fixture("probe-rdma-port-down-mlx5_3.txt"), unconfirmed_rate="warn")
    assert j.status is Status.FAIL, j.message
    assert "mlx5_3 port 1 (compute InfiniBand 400 Gb/s): Down/Polling" in j.message


def test_truth3_t1_by_default_a_rate_no_tool_printed_is_an_error_never_a_pass():
    j = judged(fixture("probe-rdma-8x-ndr-healthy.txt"))
    assert j.status is Status.ERROR, j.message
    assert "nothing confirms 400 Gb/s" in j.message and "unconfirmed_rate: error" in j.message


# ------------------------------------------------------------------ the evidence names its tool


def test_truth3_t1_a_tool_the_profile_does_not_allow_is_an_error():
    text = fixture("probe-ibstatus-8x-ndr-healthy.txt")
    assert judged(text).status is Status.PASS  # control: allowed by default
    j = judged(text, tools=["ibstat", "ibv_devinfo"])
    assert j.status is Status.ERROR and "read with ibstatus" in j.message, j.message


def _ibstat_body() -> str:
    return fixture("ibstat-8x-ndr-healthy.txt")


@pytest.mark.parametrize("text, why", [
    # plain ibstat output, as the command before the probe printed it: no header
    (_ibstat_body(), "no '### rackgate-ib-ports' header"),
    # the header names ibstatus, the body is ibstat's
    (header(["ibstatus"], "/usr/sbin/ibstatus", ["ibstat"]) + _ibstat_body(),
     "the output of ibstatus"),
    # a command fabric.ports never runs
    (header(["ibstat", "-p"], "/usr/sbin/ibstat", []) + _ibstat_body(), "not a command"),
    # the named tool at a path that is not its own
    (header(["ibstat"], "/usr/sbin/ibstatus", []) + _ibstat_body(), "path"),
])
def test_truth3_t1_output_that_does_not_match_the_named_tool_is_an_error(text: str, why: str):
    good = header(["ibstat"], "/usr/sbin/ibstat", []) + _ibstat_body()
    assert judged(good).status is Status.PASS  # control: the same ports, properly framed
    j = judged(text)
    assert j.status is Status.ERROR and why in j.message, j.message


def test_truth3_t1_ibv_devinfo_without_the_v_lines_is_not_the_probes_command():
    full = fixture("probe-ibv_devinfo-v-8x-ndr-healthy.txt")
    assert judged(full).status is Status.PASS
    cut = "\n".join(line for line in full.split("\n")
                    if not line.strip().startswith(("active_width", "active_speed")))
    j = judged(cut)
    assert j.status is Status.ERROR and "ibv_devinfo -v prints" in j.message, j.message


def _end_of_last(text: str, key: str) -> int:
    """The end of the last line holding ``key``: what the judge reads ends there."""
    return text.index("\n", text.rindex(key))


DEGRADED = {  # source -> (its judge's params, numbers the judge reads, end of what it reads)
    "probe-ibstatus-8x-ndr-healthy.txt": ({}, r"(?:state|rate):\s+([0-9]+)", "link_layer:"),
    "probe-ibv_devinfo-v-8x-ndr-healthy.txt": (
        {}, r"^\t\t\t(?:state|active_width|active_speed|phys_state):.*\(([0-9]+)\)$",
        "phys_state:"),
    "probe-rdma-8x-ndr-healthy.txt": ({"unconfirmed_rate": "warn"},
                                      r'"(?:lid|port|ifindex)":([0-9]+)', "]"),
}


@pytest.mark.parametrize("name", sorted(DEGRADED))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_truth3_t1_degraded_reader_output_never_passes(name: str, data: st.DataObject) -> None:
    """Issue 11's damage (a line printed twice, a number made non-finite, the output cut
    before the end of what the judge reads) never passes, nor is it accepted."""
    from degrade_helpers import BAD, degraded
    extra, numbers, last = DEGRADED[name]
    text = fixture(name)
    assert not judged(text, **extra).status.blocks_accept  # control
    mutant = data.draw(degraded(text, numbers, r"\S", _end_of_last(text, last)))
    assert judged(mutant, **extra).status in BAD


# ------------------------------------------------------------------ every line accounted for


@pytest.mark.parametrize("old, new, why", [
    ("\tlink_layer:\t InfiniBand\n", "\tlink_layer:\t InfiniBand\n\tspeed:\t\t fast\n",
     "no line ibstatus prints"),
    ("\tstate:\t\t 4: ACTIVE\n", "\tstate:\t\t 4: ACTIVE\n\tstate:\t\t 4: ACTIVE\n",
     "printed twice"),
    ("\tstate:\t\t 4: ACTIVE\n", "\tstate:\t\t 4: DOWN\n", "not the kernel's"),
    ("\tstate:\t\t 4: ACTIVE\n", "\tstate:\t\t 4: Active\n", "not the kernel's"),
    ("\tphys state:\t 5: LinkUp\n", "\tphys state:\t 2: LinkUp\n", "not the kernel's"),
    ("400 Gb/sec (4X NDR)", "400 Gb/sec (4X HDR)", "lanes times the speed"),
    ("\tsm lid:\t\t 0x1\n", "", "lacks sm lid"),
])
def test_truth3_t1_ibstatus_lines_are_read_from_an_allow_list(old: str, new: str, why: str):
    text = fixture("probe-ibstatus-8x-ndr-healthy.txt")
    assert judged(text).status is Status.PASS and old in text
    j = judged(text.replace(old, new, 1))
    assert j.status is Status.ERROR and why in j.message, j.message


@pytest.mark.parametrize("old, new, why", [
    ('"physical_state":"LINK_UP"', '"physical_state":"LINK_UP","rate":400', "no key"),
    ('"state":"ACTIVE"', '"state":"Active"', "not what rdma link prints"),
    ('"lid":100,', "", "without lid"),
    ('"port":1', '"port":0', "1-255"),
])
def test_truth3_t1_rdma_link_records_are_read_from_an_allow_list(old: str, new: str, why: str):
    text = fixture("probe-rdma-8x-ndr-healthy.txt")
    assert judged(text, unconfirmed_rate="warn").status is Status.WARN and old in text
    j = judged(text.replace(old, new, 1), unconfirmed_rate="warn")
    assert j.status is Status.ERROR and why in j.message, j.message


@pytest.mark.parametrize("old, new, why", [
    ("\t\t\tmax_msg_sz:\t\t0x40000000\n",
     "\t\t\tmax_msg_sz:\t\t0x40000000\n\t\t\tmax_msg_sz:\t\t0x40000000\n", "printed twice"),
    ("\t\t\tmax_msg_sz:\t\t0x40000000\n",
     "\t\t\tmax_msg_sz:\t\t0x40000000\n\t\t\trate:\t\t\t400\n", "no line of a port section"),
    ("PORT_ACTIVE (4)", "PORT_ACTIVE (1)", "not what ibv_devinfo prints"),
    ("4X (2)", "4X (16)", "not what ibv_devinfo prints"),
    ("\tphys_port_cnt:\t\t\t1\n", "\tphys_port_cnt:\t\t\t2\n", "cut or repeated"),
])
def test_truth3_t1_ibv_devinfo_port_sections_hold_only_devinfo_lines(old: str, new: str,
                                                                     why: str) -> None:
    text = fixture("ibv_devinfo-v-ndr-mlx5_3-down.txt")
    devices = parse_ibv_devinfo(text)  # control
    assert devices[0].ports[0].state == "PORT_ACTIVE" and old in text
    with pytest.raises(ParseError, match=why):
        parse_ibv_devinfo(text.replace(old, new, 1))


def test_truth3_t1_rdma_link_text_reads_every_port_and_its_link_layer():
    from rackgate.parsers.rdma_link import parse_rdma_link
    st = parse_rdma_link(fixture("rdma-d-link-show-port-down-mlx5_3.txt"))
    ports = {c.name: c.ports[0] for c in st.cas}
    assert len(ports) == 12 and all(p.rate_gbps is None for p in ports.values())
    assert (ports["mlx5_3"].state, ports["mlx5_3"].physical_state) == ("Down", "Polling")
    assert ports["mlx5_1"].link_layer == "Ethernet" and ports["mlx5_0"].link_layer == "InfiniBand"
    assert ports["mlx5_0"].up and not ports["mlx5_3"].up


@pytest.mark.parametrize("text", [
    # iproute2 before 5.5 (rdma/link.c before "Rewrite custom JSON and prints logic")
    "0/1: mlx5_0/1: subnet_prefix fe80:0000:0000:0000 lid 13 sm_lid 1 lmc 0 state ACTIVE "
    "physical_state LINK_UP \n1/1: mlx5_1/1: state DOWN physical_state DISABLED netdev ens2f0 "
    "\n",
    '[{"ifindex":0,"port":1,"ifname":"mlx5_0/1","subnet_prefix":"fe80:0000:0000:0000",'
    '"lid":13,"sm_lid":1,"lmc":0,"state":"ACTIVE","physical_state":"LINK_UP"},{"ifindex":1,'
    '"port":1,"ifname":"mlx5_1/1","state":"DOWN","physical_state":"DISABLED",'
    '"netdev":"ens2f0","netdev_index":4}]\n',
])
def test_truth3_t1_rdma_link_of_older_iproute2_names_the_port_in_the_device(text: str):
    from rackgate.parsers.rdma_link import parse_rdma_link
    st = parse_rdma_link(text)
    assert [(c.name, c.ports[0].number, c.ports[0].state, c.ports[0].link_layer)
            for c in st.cas] == [("mlx5_0", 1, "Active", "InfiniBand"),
                                 ("mlx5_1", 1, "Down", "Ethernet")]
    with pytest.raises(ParseError, match="port"):  # the two port numbers must agree
        parse_rdma_link(text.replace("mlx5_0/1", "mlx5_0/2"))


# ------------------------------------------------------------------ the probe, run for real


def _probe(tools: list[str] | None, path: str) -> subprocess.CompletedProcess[str]:
    argv = PORTS.command(PORTS.params_model.model_validate(
        {} if tools is None else {"tools": tools}), {})
    assert argv[:2] == ["python3", "-c"], argv  # a fixed program, its inputs separate words
    return subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True,
                          timeout=60, check=False, env={**os.environ, "PATH": path})


def _fake_tools(where: Path, names: list[str]) -> str:
    """Executables named ``names`` in ``where`` that print their argv (the probe's choice
    is what is tested; test-only stand-ins, never shipped)."""
    where.mkdir()
    for name in names:
        tool = where / name
        tool.write_text('#!/bin/sh\necho ran "$0" "$@"\n', encoding="ascii")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return str(where)


def test_truth3_t1_the_probe_runs_ibstat_when_present_else_the_first_alternative(tmp_path):
    both = _fake_tools(tmp_path / "a", ["ibstat", "ibstatus", "rdma"])
    first = _probe(None, both)
    assert first.returncode == 0, first.stderr
    head, _, out = first.stdout.partition("\n")
    assert json.loads(head.removeprefix("### rackgate-ib-ports ")) == {
        "argv": ["ibstat"], "path": f"{both}/ibstat", "not_found": []}
    assert out == f"ran {both}/ibstat\n"
    alone = _fake_tools(tmp_path / "b", ["rdma", "ibstatus"])
    second = _probe(None, alone)
    head, _, out = second.stdout.partition("\n")
    assert json.loads(head.removeprefix("### rackgate-ib-ports ")) == {
        "argv": ["ibstatus"], "path": f"{alone}/ibstatus",
        "not_found": ["ibstat", "ibv_devinfo"]}
    assert out == f"ran {alone}/ibstatus\n"
    last = _probe(None, _fake_tools(tmp_path / "c", ["rdma"]))
    assert last.stdout.split("\n")[1] == f"ran {tmp_path}/c/rdma -j link show"


def test_truth3_t1_the_probe_starts_nothing_when_no_allowed_tool_is_there(tmp_path):
    where = _fake_tools(tmp_path / "a", ["ibstatus"])
    r = _probe(["ibstat", "rdma"], where)
    assert r.returncode == 3 and r.stdout == ""
    assert "none of ibstat, rdma is on PATH" in r.stderr


def test_truth3_t1_shipped_profiles_keep_ibstat_first_and_the_strict_rate():
    from rackgate.parsers.infiniband.ports import TOOL_ARGV
    assert list(TOOL_ARGV) == ["ibstat", "ibv_devinfo", "ibstatus", "rdma"]
    for name in ("dgx-h100", "hgx-h200", "dgx-a100"):
        cp = load_profile(name).check("fabric.ports")
        assert cp is not None
        p = PORTS.params_model.model_validate(cp.params)
        assert p.tools == ["ibstat", "ibv_devinfo", "ibstatus", "rdma"]
        assert p.unconfirmed_rate == "error"
        argv = PORTS.command(p, {})
        assert argv[3:] == ["--", "ibstat", "--", "ibv_devinfo", "-v", "--", "ibstatus",
                            "--", "rdma", "-j", "link", "show"]
        assert "sh" not in argv


def test_truth3_t1_real_ibstatus_over_a_kernel_format_sysfs_is_the_fixture(tmp_path):
    """The real ibstatus script and the real probe, run over a sysfs tree written in the
    kernel's formats (ib_sysfs.py), print exactly the ibstatus fixtures."""
    import ib_sysfs
    why = ib_sysfs.can_run()
    if why:
        pytest.skip(why)
    for name, faults in (("probe-ibstatus-8x-ndr-healthy.txt", {}),
                         ("probe-ibstatus-port-down-mlx5_3.txt",
                          {"mlx5_3": (1, 2, "10 Gb/sec (4X SDR)")})):
        root = ib_sysfs.write_tree(tmp_path / name, ib_sysfs.dgx_ports(faults))
        r = ib_sysfs.run_probe(root)
        assert r.returncode == 0, r.stderr
        head, _, out = r.stdout.partition("\n")
        want_head, _, want_out = fixture(name).partition("\n")
        assert out == want_out
        got = json.loads(head.removeprefix("### rackgate-ib-ports "))
        want = json.loads(want_head.removeprefix("### rackgate-ib-ports "))
        assert got["path"] == shutil.which("ibstatus")  # where this machine has it
        assert {**got, "path": want["path"]} == want == {
            "argv": ["ibstatus"], "path": want["path"], "not_found": ["ibstat", "ibv_devinfo"]}
    assert judged(r.stdout).status is Status.FAIL


def test_truth3_t1_the_probe_reads_real_ibstat_under_ibsim(tmp_path):
    """With ibstat on PATH the probe runs it: the real ibstat, attached to ibsim."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fabric_sim import missing_tools, sim_fabric
    if missing_tools():
        pytest.skip(f"not installed: {', '.join(missing_tools())}")
    net = ('Switch 4 "leaf-1"\n[1] "node01 mlx5_0"[1] w=2 e=4\n[2] "node02 mlx5_0"[1] w=2 e=4\n'
           '\nHca 1 "node01 mlx5_0"\n[1] "leaf-1"[1] w=2 e=4\n'
           '\nHca 1 "node02 mlx5_0"\n[1] "leaf-1"[2] w=2 e=4\n')
    argv = PORTS.command(params(), {})
    with sim_fabric(net, tmp_path, sm_host="node01 mlx5_0") as fabric:
        fabric.console('Unlink "node02 mlx5_0"[1]')
        states = {}
        for host in ("node01 mlx5_0", "node02 mlx5_0"):
            r = fabric.tool([sys.executable, *argv[1:]], host=host)
            assert r.returncode == 0, r.stderr
            reading = PORTS.parse(r.stdout)
            assert (reading.tool, reading.not_found) == ("ibstat", ())
            port = reading.ports.cas[0].ports[0]
            states[host] = (port.state, port.physical_state)
    assert states == {"node01 mlx5_0": ("Active", "LinkUp"),
                      "node02 mlx5_0": ("Down", "Polling")}


# ------------------------------------------------------------------ the plan


def test_truth3_t1_the_plan_wants_one_of_the_port_readers():
    """``validate --plan`` on the example DGX H100 rack: a node with none of the readers is
    a problem for fabric.ports; one with rdma alone is not."""
    from test_preflight import EXAMPLE, HEALTHY, answers

    from rackgate.collect.preflight import build, judge
    from rackgate.selection import prepare
    prepared = prepare([EXAMPLE], load_profile("dgx-h100"))
    pre = build(prepared.view, prepared.selected)
    none = {**HEALTHY, "tools": {k: v for k, v in HEALTHY["tools"].items() if k != "ibstat"}}
    problems = [p.message for p in judge(pre, answers(pre, node=none))
                if p.check == "fabric.ports"]
    assert problems and all("none of ibstat, ibv_devinfo, ibstatus, rdma is on host" in m
                            for m in problems), problems
    rdma_only = {**none, "tools": {**none["tools"], "rdma": "/usr/sbin/rdma"}}
    assert [p for p in judge(pre, answers(pre, node=rdma_only))
            if p.check == "fabric.ports"] == []
