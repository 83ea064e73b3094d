"""Verify the rdma role's opensm on a simulated fabric (ibsim) in the molecule instance.

The scenario (molecule.yml) asks for opensm bound to the SM host's port GUID, priority 11,
the updn routing engine, one partition (storage, P_Key 0x0010, IPoIB with a 4096-byte
broadcast group: SM port and gpu001 full members, gpu002 limited, gpu003 not a member) and
immediate log flushing. prepare.yml (the harness, not the role) runs ibsim on
templates/fabric.net.j2 and points opensm@.service at it with LD_PRELOAD=libumad2sim.so.

What is verified:
  * the role's files hold what was asked: opensm.conf (every option line), partitions.conf
    (every rule, the default partition included), /etc/default/opensm (PORTS);
  * the role knows nothing of the simulator, and its routing engine list in vars/main.yml
    is the spec's choices;
  * opensm, restarted through opensm.service (which starts opensm@<guid>.service), writes
    "SUBNET UP" to its log within SUBNET_UP_TIMEOUT_S, after "updn tables configured on
    all switches" (the engine asked for routed the fabric; no fallback to minhop);
  * sminfo, run by another HCA of the fabric, finds the master SM at the bound GUID and the
    configured priority;
  * ibnetdiscover sees exactly the net file's nodes, with the LIDs the SM assigned (all
    non-zero, all distinct), and the SA (opensm's) returns each node's record by LID;
  * the P_Key table of every HCA port (smpquery pkeys) holds exactly the partitions the
    port belongs to, full members with the 0x8000 bit; the storage partition's IPoIB
    broadcast group exists with MTU code 5.

Not verified here (and why): the role starting or restarting opensm itself (it does so only
where an HCA exists outside a container; the default scenario checks the skip); ibsim 0.10
answers a multi-record SA table query (`saquery` with no LID) with its first record only,
so nodes are looked up one LID at a time.

When a test fails, the last 80 journal lines of ibsim and opensm are printed with it.
"""

import os
import re
import time
from pathlib import Path

import pytest
import yaml
from testinfra.utils.ansible_runner import AnsibleRunner

INVENTORY = AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
HOSTS = INVENTORY.get_hosts("all")
testinfra_hosts = [f"podman://{name}" for name in HOSTS]
# The scenario's group_vars (molecule.yml): what the role was asked for, and the harness.
VARS = INVENTORY.get_variables(HOSTS[0])

ROLE_DIR = Path(__file__).resolve().parents[3]
SCENARIO_DIR = Path(__file__).resolve().parents[1]
SOCKNAME = VARS["molecule_ibsim_sockname"]
SM_GUID = VARS["rdma_opensm_ports"][0]
SM_NODE = f"{HOSTS[0]} mlx5_0"
OTHER_NODE = "gpu001 mlx5_0"
LOG = f"/var/log/opensm.{SM_GUID}.log"
SUBNET_UP_TIMEOUT_S = 60
TOOL_TIMEOUT_S = 30
DEFAULT_FULL_PKEY = 0xFFFF


@pytest.fixture(autouse=True)
def journal_on_failure(request, host):
    """Print the simulator's and opensm's journal after a test that failed."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        journal = host.run(
            "journalctl -n 80 --no-pager -u ibsim.service -u opensm.service -u 'opensm@*'"
        )
        print(f"--- journalctl -n 80 (ibsim, opensm) rc={journal.rc} ---")
        print(journal.stdout or journal.stderr)


def sim(host, node, *argv):
    """Run an infiniband-diags tool on the simulated fabric, attached as HCA `node`."""
    command = [
        "timeout", str(TOOL_TIMEOUT_S), "env", f"IBSIM_SOCKNAME={SOCKNAME}",
        f"SIM_HOST={node}", "ibsim-run", *argv,
    ]
    result = host.run(" ".join(["%s"] * len(command)), *command)
    assert result.rc == 0, f"{command}: rc={result.rc}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def config_lines(host, path):
    """The non-comment, non-blank lines of a file."""
    text = host.file(path).content_string
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def subnet_up(host):
    """Restart opensm and wait for SUBNET UP in the part of its log written since."""
    size = host.run("stat -c %%s %s", LOG)
    offset = int(size.stdout) if size.rc == 0 else 0
    restart = host.run("systemctl restart opensm.service")
    assert restart.rc == 0, restart.stderr
    deadline = time.monotonic() + SUBNET_UP_TIMEOUT_S
    text = ""
    while time.monotonic() < deadline:
        text = host.run("tail -c +%s %s", str(offset + 1), LOG).stdout
        if any(line.endswith("-> SUBNET UP") for line in text.splitlines()):
            return text
        time.sleep(1)
    status = host.run("systemctl status --no-pager opensm.service 'opensm@*'")
    pytest.fail(
        f"waited {SUBNET_UP_TIMEOUT_S} s for a 'SUBNET UP' line in {LOG} after "
        f"`systemctl restart opensm.service`; the log since then:\n{text}\n{status.stdout}"
    )


def test_opensm_conf(host):
    options = dict(line.split(None, 1) for line in config_lines(host, "/etc/opensm/opensm.conf"))
    assert options == {
        "sm_priority": str(VARS["rdma_opensm_priority"]),
        "routing_engine": VARS["rdma_opensm_routing_engine"],
        "partition_config_file": "/etc/opensm/partitions.conf",
        "force_log_flush": "TRUE",
    }


def test_partitions_conf(host):
    # The default partition as opensm makes it without a file, then the scenario's one.
    assert config_lines(host, "/etc/opensm/partitions.conf") == [
        "Default=0x7fff, ipoib : ALL=full ;",
        "storage=0x0010, ipoib, mtu=5 : SELF=full, 0x0002c90300a00003=full, "
        "0x0002c90300a00005=limited ;",
    ]


def test_ports_file(host):
    assert config_lines(host, "/etc/default/opensm") == [f'PORTS="{SM_GUID}"']


def test_role_knows_nothing_of_the_simulator():
    found = [
        str(path.relative_to(ROLE_DIR))
        for folder in ("defaults", "handlers", "meta", "tasks", "templates", "vars")
        for path in sorted((ROLE_DIR / folder).rglob("*"))
        if path.is_file() and re.search(r"ibsim|umad2sim|SIM_HOST", path.read_text())
    ]
    assert found == [], f"role files that name the simulator: {found}"


def test_routing_engines_match_the_spec():
    specs = yaml.safe_load((ROLE_DIR / "meta" / "argument_specs.yml").read_text())
    choices = specs["argument_specs"]["main"]["options"]["rdma_opensm_routing_engine"]["choices"]
    private = yaml.safe_load((ROLE_DIR / "vars" / "main.yml").read_text())
    assert private["__rdma_opensm_routing_engines"] == choices


def test_subnet_up_with_the_asked_engine(subnet_up):
    events = [line.split("-> ", 1)[1] for line in subnet_up.splitlines() if "-> " in line]
    engine = VARS["rdma_opensm_routing_engine"]
    assert "Entering MASTER state" in events, subnet_up
    routed = [e for e in events if e.endswith("tables configured on all switches")]
    assert routed == [f"osm_ucast_mgr_process: {engine} tables configured on all switches"], (
        subnet_up
    )
    assert events.index(routed[0]) < events.index("SUBNET UP"), subnet_up
    errors = [e for e in events if " ERR " in f" {e}"]
    assert errors == [], subnet_up
    print("\n".join(line for line in subnet_up.splitlines()
                    if line.endswith(("-> SUBNET UP", routed[0]))))


SMINFO = re.compile(
    r"sminfo: sm lid (\d+) sm guid (0x[0-9a-fA-F]+), activity count (\d+) "
    r"priority (\d+) state (\d+) (SMINFO_[A-Z]+)"
)


def test_sminfo_reports_the_master(host, subnet_up):
    out = sim(host, OTHER_NODE, "sminfo").strip()
    print(out)
    match = SMINFO.fullmatch(out)
    assert match, f"sminfo printed {out!r}, not the sminfo line format"
    lid, guid, _, priority, state, name = match.groups()
    assert int(lid) > 0, out
    assert int(guid, 16) == int(SM_GUID, 16), out
    assert int(priority) == VARS["rdma_opensm_priority"], out
    assert (int(state), name) == (3, "SMINFO_MASTER"), out


NET_NODE = re.compile(r'(Switch|Hca) \d+ "(.+)"')
DISCOVERED_NODE = re.compile(r'(Switch|Ca)\t\d+ "[SH]-([0-9a-f]{16})"\t+# "([^"]*)"(.*)')
SWITCH_LID = re.compile(r" base port 0 lid (\d+) lmc \d+")
CA_PORT = re.compile(r'\[1\]\(([0-9a-f]+)\) \t"S-[0-9a-f]{16}"\[\d+\]\t+# lid (\d+) lmc \d+ .*')


def expected_nodes():
    """(type, description) of every node of the scenario's net file, the SM's named."""
    text = (SCENARIO_DIR / "templates" / "fabric.net.j2").read_text()
    text = text.replace("{{ __sm_node }}", SM_NODE)
    found = [NET_NODE.fullmatch(line) for line in text.splitlines()]
    return sorted(("Ca" if m[1] == "Hca" else m[1], m[2]) for m in found if m)


@pytest.fixture(scope="module")
def fabric(host, subnet_up):
    """ibnetdiscover's nodes: {description: (type, port GUID, LID)}; every node once."""
    out = sim(host, "gpu003 mlx5_0", "ibnetdiscover")
    nodes = {}
    current = None
    for line in out.splitlines():
        header = DISCOVERED_NODE.fullmatch(line)
        if header:
            kind, guid, desc, rest = header.groups()
            assert desc not in nodes, f"node {desc!r} twice in ibnetdiscover:\n{out}"
            lid = SWITCH_LID.search(rest) if kind == "Switch" else None
            nodes[desc] = [kind, int(guid, 16), int(lid[1]) if lid else None]
            current = desc
        elif current and nodes[current][0] == "Ca" and (port := CA_PORT.fullmatch(line)):
            nodes[current][1:] = [int(port[1], 16), int(port[2])]
    assert all(lid is not None for _, _, lid in nodes.values()), f"LID missing:\n{out}"
    return {desc: tuple(value) for desc, value in nodes.items()}


def test_ibnetdiscover_sees_the_net_file(fabric):
    assert sorted((kind, desc) for desc, (kind, _, _) in fabric.items()) == expected_nodes()
    lids = [lid for _, _, lid in fabric.values()]
    assert all(lid > 0 for lid in lids) and len(set(lids)) == len(lids), fabric
    assert fabric[SM_NODE][1] == int(SM_GUID, 16), fabric


def test_sa_knows_every_node(host, fabric):
    for desc, (kind, guid, lid) in sorted(fabric.items()):
        out = sim(host, OTHER_NODE, "saquery", "NR", str(lid))
        record = dict(re.findall(r"^\t\t(\w+)\.+(.*)$", out, flags=re.MULTILINE))
        assert record.get("NodeDescription") == desc, out
        assert int(record.get("port_guid", "-1"), 16) == guid, out
        assert record.get("node_type") == ("Switch" if kind == "Switch" else "Channel Adapter")


def expected_pkeys(port_guid):
    """The P_Keys a CA port must hold under the scenario's partitions."""
    partitions = VARS["rdma_opensm_partitions"]
    assert all(int(p["pkey"], 16) != 0x7FFF for p in partitions), "model assumes no Default entry"
    keys = {DEFAULT_FULL_PKEY}  # Default=0x7fff, ipoib : ALL=full ;
    for partition in partitions:
        pkey = int(partition["pkey"], 16)
        for member in partition["members"]:
            port = member["port"]
            assert port == "SELF" or port.startswith("0x"), f"{port} is not modelled here"
            guid = int(SM_GUID, 16) if port == "SELF" else int(port, 16)
            if guid == port_guid:
                keys.add(pkey | 0x8000 if member["membership"] == "full" else pkey)
    return keys


PKEY_ROW = re.compile(r"\s*(\d+):((?: 0x[0-9a-f]{4})+)")
PKEY_CAPACITY = re.compile(r"(\d+) pkeys capacity for this port")


def test_pkey_tables_follow_the_partitions(host, fabric):
    cas = {desc: value for desc, value in fabric.items() if value[0] == "Ca"}
    assert len(cas) == 4, fabric
    for desc, (_, guid, lid) in sorted(cas.items()):
        out = sim(host, OTHER_NODE, "smpquery", "pkeys", str(lid), "1")
        entries = [int(k, 16) for row in out.splitlines()
                   if (m := PKEY_ROW.fullmatch(row)) for k in m[2].split()]
        capacity = PKEY_CAPACITY.search(out)
        assert capacity and len(entries) == int(capacity[1]), out
        present = [key for key in entries if key & 0x7FFF]
        assert len(present) == len(set(present)), f"{desc}: a P_Key twice\n{out}"
        assert set(present) == expected_pkeys(guid), f"{desc} (lid {lid}):\n{out}"


def test_storage_ipoib_group_has_mtu_4096(host, subnet_up):
    out = sim(host, OTHER_NODE, "saquery", "-g")
    groups = re.findall(r"MGID\.+(\S+)\n\t\tMlid\.+\S+\n\t\tMtu\.+(0x[0-9A-Fa-f]+)\n"
                        r"\t\tpkey\.+(0x[0-9A-Fa-f]+)", out)
    storage = [(mtu, pkey) for mgid, mtu, pkey in groups if mgid == "ff12:401b:8010::ffff:ffff"]
    assert len(storage) == 1, out
    mtu, pkey = storage[0]
    assert int(pkey, 16) == 0x8010 and int(mtu, 16) & 0x3F == 5, out
