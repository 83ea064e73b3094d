"""Parser for ``nvidia-smi`` without options: the summary table, one block per GPU.

Format (nvidia-smi(1), "SUMMARY"; the layout as drivers print it, e.g. the tables quoted
in NVIDIA/open-gpu-kernel-modules issue #446, 525.x, and Project-HAMi/HAMi issue #1903,
580.x): an optional time stamp, then a boxed table. Its first row names the versions
(``NVIDIA-SMI 535.183.01  Driver Version: 535.183.01  CUDA Version: 12.2``); a row of
headings in three columns, two lines (older drivers) or three (``MIG M.``, R450 on):

    GPU  Name  Persistence-M | Bus-Id  Disp.A       | Volatile Uncorr. ECC
    Fan  Temp  Perf  Pwr:Usage/Cap | Memory-Usage  | GPU-Util  Compute M.
                                   |               | MIG M.

a ``|===+===+===|`` rule, then one block of as many lines per GPU, each block closed by a
``+---+---+---+`` border (the last one by a full-width border from R570 on). The column
widths changed across drivers (R530 widened the first column, R545 the second); cells are
read by their words, not their columns. Then other tables: ``MIG devices:`` where MIG is
on, and ``Processes:``, which nvidia-smi always prints last.

Where NVML returns an error for a field, nvidia-smi prints ``ERR!`` in its place (every
field of a GPU fallen off the bus, XID 79, or behind a GSP timeout, XID 119; one field
where one query failed); ``N/A`` where the GPU does not support it. Each GPU's fields that
read ``ERR!`` are kept, named by their heading. Lines nvidia-smi prints about GPUs it could
not open at all (``Unable to determine the device handle for GPU ...``, ``No devices were
found``, ``GPU is lost``, ``NVIDIA-SMI has failed``, ``WARNING: infoROM is corrupted``)
are kept as device errors; an output of only such lines has no table and no GPU.

Every line is accounted for: a cell that is not what its column holds, a block without
its border, a GPU index or bus ID given twice, a table not closed, a missing Processes
table (a cut output), any other text, is a ParseError.

>>> t = parse_nvidia_smi_table(EXAMPLE)
>>> [(g.index, g.name, g.bus_id) for g in t.gpus], t.driver_version
([(0, 'NVIDIA A40', '00000000:17:00.0'), (1, 'ERR!', '00000000:31:00.0')], '525.85.12')
>>> t.gpus[0].errors, t.gpus[1].errors[:4]
((), ('Name', 'Volatile Uncorr. ECC', 'Fan', 'Temp'))
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.parsers import ParseError
from rackgate.parsers.damage import DAMAGE

TABLE_FORMAT = "nvidia-smi summary table"
ERR = "ERR!"
_MAX_LINE = 400  # the widest table is under 100 columns
_STAMP = re.compile(r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} "
                    r"[0-9]{4}")
_DEVICE = re.compile(r"Unable to determine the device handle for GPU|GPU is lost|No devices "
                     r"were found|NVIDIA-SMI has failed|Failed to initialize NVML|"
                     r"WARNING: infoROM is corrupted")
_FULL = re.compile(r"\+-+\+")
_COLUMNS = re.compile(r"[|+]-+\+-+\+-+[|+]")
_RULE = re.compile(r"\|=+\+=+\+=+\|")
_BORDER3 = re.compile(r"\+-+\+-+\+-+\+")
_BOXED = re.compile(r"[+|].*[+|]")
# "Driver Version" / "CUDA Version", renamed "KMD Version" / "CUDA UMD Version" by newer
# branches (their ``nvidia-smi --version`` deprecation note); drivers before R410: no CUDA
_VERSIONS = re.compile(r"\|\s*NVIDIA-SMI\s+([0-9][0-9.]{0,15})\s+(?:Driver|KMD) Version:\s+"
                       r"([0-9][0-9.]{0,15})(?:\s+CUDA (?:UMD )?Version:\s+([0-9][0-9.]{0,7}|N/A))?"
                       r"\s*\|", re.IGNORECASE)
_HEADINGS = (("GPU Name Persistence-M", "Bus-Id Disp.A", "Volatile Uncorr. ECC"),
             ("Fan Temp Perf Pwr:Usage/Cap", "Memory-Usage", "GPU-Util Compute M."),
             ("", "", "MIG M."))
_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
# each field: its heading and the values nvidia-smi prints there (ERR! besides)
_ROW1 = (("Bus-Id", _BUS), ("Disp.A", "On|Off|N/A"))
_ROW2A = (("Fan", "[0-9]{1,3}%|N/A"), ("Temp", "[0-9]{1,3}C|N/A"), ("Perf", "P[0-9]{1,2}|N/A"),
          ("Pwr:Usage", "[0-9]{1,5}W|N/A"), ("", "/"), ("Pwr:Cap", "[0-9]{1,5}W|N/A"))
_ROW2B = (("Memory-Usage", "[0-9]{1,7}MiB|N/A"), ("", "/"), ("Memory-Usage", "[0-9]{1,7}MiB|N/A"))
_MODES = ("Default", "E. Process", "E. Thread", "Prohibited", "N/A", ERR)
_ECC = re.compile(r"0|[1-9][0-9]{0,9}|N/A|Off|On|ERR!")  # On, Off: MIG on, ECC off
_INDEX = re.compile(r"0|[1-9][0-9]{0,2}")


@dataclass(frozen=True)
class TableGpu:
    """One GPU's block: its index, the name as printed (cut with ``...`` where longer than
    the column), its PCI bus ID, the volatile uncorrectable ECC count (None where the
    table shows N/A, Off or On), and the headings of the fields that read ERR!."""

    index: int
    name: str
    bus_id: str
    ecc_uncorrectable: int | None
    errors: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class SmiTable:
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[TableGpu, ...]
    device_errors: tuple[str, ...]
    other_errors: tuple[str, ...]  # rows of the other tables (MIG devices) reading ERR!


def _fail(n: int, why: str, line: str) -> ParseError:
    return ParseError(f"{TABLE_FORMAT}: line {n}: {why}: {line.strip()[:100]!r}")


def _cells(n: int, line: str) -> list[str]:
    if not (line.startswith("|") and line.endswith("|")) or line.count("|") != 4:
        raise _fail(n, "not a row of the GPU table's three columns", line)
    return line[1:-1].split("|")


def _fields(n: int, line: str, cell: str, spec: tuple[tuple[str, str], ...],
            errors: list[str]) -> list[str]:
    """The words of ``cell`` against ``spec`` (heading, pattern): one word each."""
    words = cell.split()
    if len(words) != len(spec) or not all(
            re.fullmatch(p, w) or (h and w == ERR) for w, (h, p) in zip(words, spec, strict=True)):
        raise _fail(n, f"{' '.join(h or '/' for h, _ in spec)} read {' '.join(words)[:60]!r}",
                    line)
    errors += [h for w, (h, _) in zip(words, spec, strict=True) if w == ERR and h
               and h not in errors]
    return words


def _block(lines: list[tuple[int, str]], rows: int) -> TableGpu:
    """One GPU's ``rows`` lines (``lines``: their numbers and text)."""
    n, first = lines[0]
    a, b, c = _cells(n, first)
    errors: list[str] = []
    words = a.split()
    if len(words) < 3 or not _INDEX.fullmatch(words[0]) or words[-1] not in ("On", "Off", ERR):
        raise _fail(n, "GPU Name Persistence-M is not an index, a name and On/Off", first)
    name = " ".join(words[1:-1])
    errors += ["Name"] if name == ERR else []
    errors += ["Persistence-M"] if words[-1] == ERR else []
    bus = _fields(n, first, b, _ROW1, errors)[0]
    ecc = c.strip()
    if not _ECC.fullmatch(ecc):
        raise _fail(n, f"Volatile Uncorr. ECC reads {ecc[:20]!r}", first)
    errors += ["Volatile Uncorr. ECC"] if ecc == ERR else []
    m, second = lines[1]
    a, b, c = _cells(m, second)
    _fields(m, second, a, _ROW2A, errors)
    _fields(m, second, b, _ROW2B, errors)
    util, _, mode = c.strip().partition(" ")
    if not re.fullmatch(r"[0-9]{1,3}%|N/A|ERR!", util) or mode.strip() not in _MODES:
        raise _fail(m, "GPU-Util Compute M. is not a percentage and a compute mode", second)
    errors += [h for h, w in (("GPU-Util", util), ("Compute M.", mode.strip())) if w == ERR]
    if rows == 3:
        k, third = lines[2]
        a, b, c = _cells(k, third)
        if a.strip() or b.strip() or c.strip() not in ("Enabled", "Disabled", "N/A", ERR):
            raise _fail(k, "MIG M. is not Enabled, Disabled or N/A", third)
        errors += ["MIG M."] if c.strip() == ERR else []
    return TableGpu(int(words[0]), name, bus, int(ecc) if ecc.isdigit() else None,
                    tuple(errors), n)


def _headings(lines: list[tuple[int, str]]) -> int:
    """How many lines a GPU's block has: the heading rows above the ``|===|`` rule."""
    got = tuple(tuple(" ".join(c.split()) for c in _cells(n, line)) for n, line in lines)
    if got not in (_HEADINGS[:2], _HEADINGS):
        n, line = lines[0] if lines else (0, "")
        raise _fail(n, "the headings are not nvidia-smi's GPU / Name / Persistence-M, Fan / "
                       "Temp / ... and MIG M. rows", line)
    return len(got)


def _gpu_table(lines: list[tuple[int, str]], at: int) -> tuple[list[TableGpu], int]:
    """The GPU blocks from ``lines[at]`` (after the rule); the index after the table."""
    start = at
    while at < len(lines) and not _RULE.fullmatch(lines[at][1]):
        at += 1
    if at == len(lines):
        raise ParseError(f"{TABLE_FORMAT}: no '|===+===+===|' rule under the headings "
                         "(truncated output?)")
    rows = _headings(lines[start:at])
    gpus, at = [], at + 1
    while True:
        block = lines[at:at + rows]
        if len(block) < rows or not all(line.startswith("|") for _, line in block):
            n, line = block[0] if block else lines[-1]
            raise _fail(n, f"a GPU's block of {rows} rows is cut short (truncated output?)",
                        line)
        gpus.append(_block(block, rows))
        at += rows
        if at == len(lines) or not (_BORDER3.fullmatch(lines[at][1])
                                    or _FULL.fullmatch(lines[at][1])):
            n, line = lines[min(at, len(lines) - 1)]
            raise _fail(n, f"GPU {gpus[-1].index}'s block is not closed by a border "
                           "(truncated output?)", line)
        at += 1
        if _FULL.fullmatch(lines[at - 1][1]) or at == len(lines) \
                or not lines[at][1].startswith("|"):
            return gpus, at


def _rest(lines: list[tuple[int, str]], at: int, device: list[str]) -> list[str]:
    """The other tables after the GPU table (MIG devices, Processes): boxed lines only,
    each table opened by a border and its title row, the last line a border (a closed
    table), the Processes table among them; their rows reading ERR! are returned, after
    the title of their table."""
    errors: list[str] = []
    titles: list[str] = []
    boxed = [(n, line) for n, line in lines[at:] if not _DEVICE.search(line)]
    device += [line.strip() for _, line in lines[at:] if _DEVICE.search(line)]
    for k, (n, line) in enumerate(boxed):
        if not _BOXED.fullmatch(line):
            raise _fail(n, "not part of nvidia-smi's tables", line)
        cell = line.strip("|").strip()
        opens = line.startswith("+") and (k == 0 or boxed[k - 1][1].startswith("+"))
        if opens and (k + 1 == len(boxed) or boxed[k + 1][1].strip("|").strip()
                      not in ("MIG devices:", "Processes:")):
            raise _fail(n, "a table that does not open with its title (MIG devices:, "
                           "Processes:)", line)
        if cell in ("MIG devices:", "Processes:"):
            titles.append(cell)
        elif ERR in line:
            errors.append(f"{titles[-1] if titles else 'a table'} {cell[:80]}")
    if "Processes:" not in titles or not boxed[-1][1].startswith("+"):
        raise ParseError(f"{TABLE_FORMAT}: no closed 'Processes:' table after the GPU table: "
                         "the output was cut short")
    return errors


def parse_nvidia_smi_table(text: str) -> SmiTable:
    """Parse plain ``nvidia-smi`` output; ParseError naming the line for anything else."""
    text = text.replace("\r\n", "\n")
    if m := DAMAGE.search(text):
        where = text.count("\n", 0, m.start()) + 1
        raise ParseError(f"{TABLE_FORMAT}: line {where} holds {m.group()!r}, a character "
                         "nvidia-smi never prints (damaged output?)")
    lines = [(n, line.rstrip()) for n, line in enumerate(text.split("\n"), 1)
             if line.strip()]
    if long := next((n for n, line in lines if len(line) > _MAX_LINE), None):
        raise ParseError(f"{TABLE_FORMAT}: line {long} is longer than {_MAX_LINE} characters: "
                         "no line of nvidia-smi's table (damaged output?)")
    device: list[str] = []
    at = stamps = 0
    while at < len(lines) and not lines[at][1].startswith("+"):
        n, line = lines[at]
        if _DEVICE.search(line):
            device.append(line.strip())
        elif _STAMP.fullmatch(line) and not stamps:
            stamps += 1
        else:
            raise _fail(n, "neither nvidia-smi's time stamp nor a message about a GPU", line)
        at += 1
    if at == len(lines):
        if device:  # nvidia-smi could open no GPU: no table
            return SmiTable(None, None, (), tuple(device), ())
        raise ParseError(f"{TABLE_FORMAT}: no table (empty output, or not nvidia-smi?)")
    if at + 2 >= len(lines) or not _FULL.fullmatch(lines[at][1]) \
            or not _COLUMNS.fullmatch(lines[at + 2][1]):
        n, line = lines[at]
        raise _fail(n, "the table does not open with its version row and column border", line)
    versions = _VERSIONS.fullmatch(lines[at + 1][1])
    if versions is None:
        raise _fail(lines[at + 1][0], "not the NVIDIA-SMI / Driver Version row",
                    lines[at + 1][1])
    gpus, at = _gpu_table(lines, at + 3)
    for what, values in (("index", [str(g.index) for g in gpus]),
                         ("bus ID", [g.bus_id for g in gpus if g.bus_id != ERR])):
        if twice := sorted({v for v in values if values.count(v) > 1}):
            raise ParseError(f"{TABLE_FORMAT}: GPU {what} {twice[0]} is listed twice "
                             "(duplicated output?)")
    other = _rest(lines, at, device)
    cuda = versions.group(3)
    return SmiTable(versions.group(2), None if cuda in (None, "N/A") else cuda, tuple(gpus),
                    tuple(device), tuple(other))


EXAMPLE = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 525.85.12    Driver Version: 525.85.12    CUDA Version: 12.0     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  NVIDIA A40          On   | 00000000:17:00.0 Off |                    0 |
|  0%   31C    P8    22W / 300W |      4MiB / 46068MiB |      0%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+
|   1  ERR!                On   | 00000000:31:00.0 Off |                 ERR! |
|ERR!  ERR! ERR!    ERR! / ERR! |      0MiB / 46068MiB |    ERR!      Default |
|                               |                      |                 ERR! |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|  No running processes found                                                 |
+-----------------------------------------------------------------------------+
"""

__all__ = ["ERR", "TABLE_FORMAT", "SmiTable", "TableGpu", "parse_nvidia_smi_table"]
