"""Issue 28: what the fuzz property tests (test_fuzz_parsers.py) found in the parsers, one
regression each. Every case is a mutant the fuzz drew (or its shortest form) of a source
of tests/unit/fuzz_subjects.py: the base read it as a healthy record that the judge
passed, or raised something else than ParseError, or took minutes on one long line. Each
must now be refused (ParseError, or a verdict that is not ``pass``) and fast.

The hang cases run the parser in a child process bounded by ``HANG_S`` seconds: the base
took 30 s to minutes on them (the lazy regular expressions before a run of 100,000
spaces), the fixed parsers milliseconds; the bound says what the test waits for.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fuzz_subjects import SUBJECTS, judged

from rackgate.model import Status

HANG_S = 20.0


def source(subject: str, name: str) -> str:
    s = next(x for x in SUBJECTS if x.name == subject)
    return next(x for x in s.sources if x.name == name).text


def damaged(subject: str, name: str, old: str, new: str) -> str:
    text = source(subject, name)
    assert old in text, f"{old!r} is not in {subject} / {name}: the case tests nothing"
    return text.replace(old, new, 1)


IPMI_SENSOR = "sensor healthy"
BOND = "lacp and active-backup"
X = "x" * 300

CASES = [
    # (what was wrong, subject, source, text as found, damaged)
    ("ipmitool sensor: a unit cell no ipmitool prints dropped the PSU's power sensor",
     "ipmi", IPMI_SENSOR, "| Watts      | ok", "|" + "," * 300 + " Watts | ok"),
    ("ipmitool sensor: a reading of 100 digits read as 400.01 W", "ipmi", IPMI_SENSOR,
     "| 400.000    |", "| 400.00" + "9" * 100 + "0    |"),
    ("ipmi: a Watts reading with other text became a state, the sensor no PSU's",
     "ipmi", "elist healthy", "| 400 Watts", "| 400 ====Watts"),
    ("bonding: a label cut by a CR was an unknown label, its Aggregator ID lost",
     "bonding", BOND, "Aggregator ID: 1", "Ag\rgregator ID: 1"),
    ("bonding: a CR before an indented line moved it out of its block",
     "bonding", BOND, "\tAggregator ID: 1", "\t\rAggregator ID: 1"),
    ("bonding: a MAC address cut by a CR was read as 44:38:39:ff:",
     "bonding", BOND, "system mac address: 44:38:39:ff:00:01",
     "system mac address: 44:38:39:ff:\r00:01"),
    ("bonding: an MII status on no list", "bonding", BOND, "MII Status: up", "MII Status: u<<p"),
    ("bonding: an active slave no interface name",
     "bonding", BOND, "Currently Active Slave: eno1", "Currently Active Slave: eno1" + "," * 40),
    ("conformance: a key behind a byte-order mark was dropped",
     "conformance", "gpu node", "service.nvidia-dcgm=active", "\ufeffservice.nvidia-dcgm=active"),
    ("conformance: a module name no kernel gives", "conformance", "gpu node", "mlx5_ib,",
     "m<<<<lx5_ib,"),
    ("identity: a serial longer than a sysfs page mended the VM's missing DMI",
     "identity", "identity/vm-without-dmi.txt", "board_serial=\n", f"board_serial={X * 14}\n"),
    ("Redfish: a damaged property name hid PowerCapacityWatts",
     "redfish power", "healthy mockup", '"PowerCapacityWatts"', f'"PowerC{X}apacityWatts"'),
    ("Redfish: a figure of 100 digits read as another figure",
     "redfish cooling", "healthy mockup", '"Reading": 32.0', '"Reading": 32.' + "0" * 99 + "1"),
    ("ibstat: a GUID no ibstat prints", "ibstat", "8 ndr", "GUID: 0x946dae0300a00001",
     "GUID: 0x946||||dae0300a00001"),
    ("ibstat: a damaged field name hid the port's Base lid",
     "ibstat", "8 ndr", "\t\tBase lid: 110", "\t\tBase li::d: 110"),
    ("ibstat: a device name no kernel gives", "ibstat", "8 ndr", "CA 'mlx5_2'",
     "CA 'mlx5||||_2'"),
    ("multipath: an H:C:T:L with leading zeros", "multipath", "2 maps 2 paths", "1:0:0:2 sdc",
     "001:0:0:2 sdc"),
    ("multipath: a WWID cut by a CR became a map of its tail", "multipath", "2 maps 2 paths",
     "3600a098038303053453f463045727a31", "3600a098038303\r053453f463045727a31"),
    ("multipath: a vendor longer than SCSI's 8 bytes", "multipath", "2 maps 2 paths",
     "NETAPP,", "NETAP====P,"),
    ("mpi: a damaged key hid the MPI library", "mpi allreduce", "2 nodes", '"mpi":',
     '"mp===i":'),
    ("mpi: a figure of 100 digits read as another figure", "mpi allreduce", "2 nodes",
     '"algbw_gbps": 0.3732', '"algbw_gbps": 0.37' + "9" * 100 + "32"),
    ("nccl-tests: a type no nccl-tests prints", "nccl-tests", "8 h100 text",
     "536870912     134217728     float", "536870912     134217728     fl" + "9" * 40 + "oat"),
    ("nccl-tests JSON: a damaged key hid out_of_place", "nccl-tests", "8 h100 json",
     '"out_of_place"', f'"out_of_place{X}"'),
    ("nccl rails: a bus bandwidth of 100 digits read as 46 GB/s", "nccl rails", "8 rails",
     "46965.00   45.73", "46965.00   45." + "9" * 100 + "73"),
    ("fio: a damaged key hid the read latency", "fio seq read", "seq read", '"clat_ns"',
     f'"cla{X}t_ns"'),
    ("pairwise: a CR inside the client's row dropped the rest of it", "pairwise", "4 nodes",
     "0.745773\n", "0.745\r773\n"),
    ("nvlink: a UUID longer than NVML's", "nvlink", "h100 18 links",
     "(UUID: GPU-00000000-0000-0000-0000-000000000003)",
     f"(UUID: GPU-000000{X}00-0000-0000-0000-000000000003)"),
    ("topo: a CPU affinity no kernel writes", "topo", "8 gpus 8 nics", "\t0-55,112-167\t0\t",
     "\t0-55,112====-167\t0\t"),
    ("nvidia-smi XML: a CR inside a value", "nvidia-smi xml", "h100 8 gpus",
     "<uuid>GPU-00000000-0000-4000-8000-000000000002</uuid>",
     "<uuid>GPU-00000000-0000-400\r0-8000-000000000002</uuid>"),
    ("DCGM JSON: a test name longer than any dcgmi message", "dcgm", "r2 pass",
     '"name": "software"', '"name": "soft' + " " * 10_000 + 'ware"'),
    ("nvidia-smi text: a label cut by a CR became two headings",
     "nvidia-smi text", "h100 2 gpus", "Attached GPUs                             : 2",
     "Attached GPUs                          \r   : 2"),
    ("nvidia-smi text: a label no nvidia-smi prints", "nvidia-smi text", "h100 2 gpus",
     "                Max                       : 16x",
     "                Max                   " + "9" * 80 + "    : 16x"),
    ("nvidia-smi text: a driver version nvidia-smi would not print",
     "nvidia-smi text", "h100 2 gpus", ": 535.183.01", ": 53" + "9" * 40 + "5.183.01"),
    ("nvidia-smi text: a line of '=' swallowed the line after it",
     "nvidia-smi text", "h100 2 gpus", "    VBIOS Version", "=" * 20 + "    VBIOS Version"),
]


@pytest.mark.parametrize(("what", "subject", "name", "old", "new"), CASES,
                         ids=[c[0].split(":")[0] + ": " + c[0].split(": ", 1)[1][:40]
                              for c in CASES])
def test_a_mutant_the_fuzz_found_is_refused(what, subject, name, old, new):
    s = next(x for x in SUBJECTS if x.name == subject)
    status, _ = judged(s, damaged(subject, name, old, new))
    assert status is not Status.PASS, what


DIGITS = "9" * 100_000
VALUE_ERRORS = [  # int() of more digits than Python converts raised ValueError out of these
    ("nic pcie", "dgx h100 12 ports", "max_link_width=16", f"max_link_width=1{DIGITS}6"),
    ("nccl-tests", "nccl/allreduce-8xh100-truncated-mid-row.txt", "Pid  41207",
     f"Pid  41207{DIGITS}"),
    ("nccl rails", "one rail at hdr", "rc=0", f"rc=0{DIGITS}"),
    ("ibcounters", "errors-hca-unplugged-mid-window.txt", "## Summary: 8 nodes",
     f"## Summary: 8{DIGITS} nodes"),
    ("sminfo", "sm-wrong-priority.txt", "Lid:.............................1",
     f"Lid:.............................1{DIGITS}"),
    # found once the pairwise subject's long line went from 2,000 to 100,000 characters
    ("pairwise", "4 nodes", "### pair round=1 ", f"### pair round=1{DIGITS} "),
    ("pairwise", "4 nodes", "Mtu             : 4096", f"Mtu             : 4096{DIGITS}"),
]


@pytest.mark.parametrize(("subject", "name", "old", "new"), VALUE_ERRORS,
                         ids=[v[0] for v in VALUE_ERRORS])
def test_a_figure_of_100000_digits_is_a_parse_error_not_a_value_error(subject, name, old, new):
    s = next(x for x in SUBJECTS if x.name == subject)
    status, record = judged(s, damaged(subject, name, old, new))
    assert status is Status.ERROR and (record is None or s.judge is not None)


# (parser, subject and source of the text, the line's text, where 100,000 spaces go in it)
HANGS = [
    ("rackgate.parsers.dcgm:parse_dcgm_diag", "dcgm",
     "topology/dcgm-diag-r2-v4-text-gpu3-memory-fail.txt", "| 4.2.3", "| 4.2"),
    ("rackgate.parsers.bonding:parse_bonding", "bonding", BOND, "system mac address: 0c",
     "system mac address: 0c"),
    ("rackgate.parsers.infiniband.iblinkinfo:parse_iblinkinfo_ports", "iblinkinfo", "healthy.txt",
     "53.125 Gbps", "53.125 Gbp"),
    ("rackgate.parsers.nvidia_smi:parse_nvidia_smi_text", "nvidia-smi text", "h100 2 gpus",
     "Driver Version", "Driver"),
]


@pytest.mark.parametrize(("parser", "subject", "name", "old", "at"), HANGS,
                         ids=[h[0].split(":")[1] for h in HANGS])
def test_a_line_of_100000_characters_is_read_in_time(parser, subject, name, old, at):
    """The parser's answer (a record or a ParseError) on a line with 100,000 spaces in it
    (300,000 for nvidia-smi's) comes within HANG_S seconds."""
    spaces = 300_000 if "nvidia_smi" in parser else 100_000  # its base took 15 s at 100,000
    text = damaged(subject, name, old, at + " " * spaces + old[len(at):])
    module, function = parser.split(":")
    code = (f"import sys\nfrom rackgate.parsers import ParseError\nfrom {module} import "
            f"{function} as parse\ntry:\n    parse(sys.stdin.read())\nexcept ParseError:\n"
            "    pass\n")
    done = subprocess.run([sys.executable, "-c", code], input=text, text=True,
                          capture_output=True, timeout=HANG_S, env=os.environ.copy(),
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
