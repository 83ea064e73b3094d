"""The text table of ``dcgmi diag -r N`` (without ``-j``; NVIDIA/DCGM ``dcgmi/Diag.cpp``,
DCGM 2.x to 4.x), read into ``parsers.dcgm.model``'s record.

After the line ``Successfully ran diagnostic for group.``, a table of a 25-character name
cell and a 46-character result cell. A ``|-----  Category  ---+---|`` or
``+-----  Category  ---+---+`` row opens each category. ``Metadata`` (DCGM 3.3 on) holds
``DCGM Version``, ``Driver Version Detected``, ``GPU Device IDs Detected`` (one ID per GPU
of the run) and the like. DCGM 3.x prints one row per test: a Deployment check's bare
``Pass`` (a node-level result), a per-GPU test's ``Pass - All`` or ``Pass - GPUs: 1, 2``
with continuation rows (``Fail - GPU: 0``) for the other GPU sets; ``All`` means every
GPU of the run: GPUs 0..n-1 for the n device IDs (the check runs the default group), or
without that row the GPUs the other rows name. At level 1 only Metadata and Deployment
are printed. DCGM 4.x prints the test's overall result (node-level), then one
``|  | GPU3: Fail |`` row per entity; the overall row is kept only when it says more than
those (a Fail or Warn none has, or a message of its own). ``Warning`` / ``Error`` /
``Info`` rows (4.x: ``Warning: GPU3``) carry a message cut every 45 characters over
several rows, joined back here; a Warning goes to the result it names (that GPU's entity
row, or the failing row naming its GPU), an Error row is a (node-level) failure of its
test, naming the GPU its message names. A table without its closing ``+---+---+`` border
is marked incomplete: it can show a failure but is no evidence that every test ran.

>>> d = parse_dcgm_text(PREAMBLE + "\\n|-----  Deployment  ---+---|\\n| Inforom | Pass |\\n"
...                     "+-----+-----+")
>>> [(r.test, r.scope, r.status) for r in d.results], d.complete
([('Inforom', 'node', 'pass')], True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rackgate.parsers import ParseError
from rackgate.parsers.dcgm.model import (
    TEXT_FORMAT,
    DcgmDiag,
    DiagResult,
    DiagScope,
    DiagStatus,
    diag_status,
)

# linear in the line's length (no lazy group before a run of spaces: a line of 100,000
# spaces took minutes): a row's second cell is its text up to an optional closing '|' and
# trailing spaces; a category's name runs to the first spaces-dashes-'+' after it
_ROW = re.compile(r"^\|([^|]*)\|(.*)$")
_CATEGORY = re.compile(r"^[|+]-+\s+(?=\S)")
_CATEGORY_END = re.compile(r"(?<=\S)\s+-+\+")
_BORDER = re.compile(r"^\+[-=]+\+[-=]+\+$")  # both columns: a cut border is no border
_RESULT = re.compile(r"^(Pass|Fail|Warn|Skip|Not Run)\b"
                     r"(?:\s*-\s*(?:GPUs?:\s*([0-9,\s]{1,200})|(All)))?\s*$", re.IGNORECASE)
# DCGM 4: '|  | GPU3: Fail |', one per entity (DcgmFieldsGetEntityGroupString names the kinds)
_ENTITY = re.compile(r"^(GPU|vGPU|Switch|GPU_I|GPU_CI|LINK|CPU|CPU_CORE|ConnectX)([0-9]{1,4}): "
                     r"(Pass|Fail|Warn|Skip|Not Run)$", re.IGNORECASE)
_LABEL = re.compile(r"^(Warning|Error|Info)(?::\s*([A-Za-z_]{1,10}[0-9]{1,4}))?$",
                    re.IGNORECASE)
_CODE = re.compile(r"^Code: \([0-9]{1,20}\)$")  # DCGM 3: under 'Diagnostic | Warn - All'
PREAMBLE = "Successfully ran diagnostic for group."
_CHUNK = 45  # dcgmi cuts a message every 45 characters (Diag.cpp, DATA_INFO_TAG_LEN)
_RANK = {"pass": 0, "skip": 0, "warn": 1, "fail": 2}
# a test or category name: DCGM's fit its 25-character name cell ("Page Retirement/Row
# Remap", "targeted_stress"); anything longer, or other characters, is damage
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 /()_.+-]{0,39}", re.ASCII)


@dataclass
class _Draft:
    """A result while the table is read: ``entity`` names a DCGM 4 per-entity row
    ("GPU3"); ``everyone`` a DCGM 3 '- All' row, resolved once the GPUs are known;
    ``scope`` as in ``dcgm_model``."""

    category: str
    test: str
    gpus: tuple[int, ...]
    status: DiagStatus
    entity: str = ""
    everyone: bool = False
    info: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    scope: DiagScope = "gpu"


class _Table:
    """One ``dcgmi diag`` text table, fed row by row (dcgmi/Diag.cpp, DCGM 2.x to 4.x)."""

    def __init__(self) -> None:
        self.drafts: list[_Draft] = []
        self.test_drafts: list[_Draft] = []  # the current test's: [overall, per entity...]
        self.meta: dict[str, str] = {}
        self.category = self.test = ""
        self.message: tuple[str, str, list[str]] | None = None  # kind, entity, pieces
        self.complete = self.seen_row = False
        self.seen: set[tuple[str, ...]] = set()

    def flush(self) -> None:
        if self.message is None:
            return
        kind, entity, pieces = self.message
        self.message = None
        words = "".join(pieces).strip()
        if kind == "error":  # DCGM 3: an Error row is a failure of the test (or category)
            gpu = re.search(r"\bGPU ([0-9]{1,4})\b", words)
            self.add(_Draft(self.category, self.test or self.category,
                            (int(gpu.group(1)),) if gpu else (), "fail", warnings=[words],
                            scope="node"))
            return
        target = self.target(kind, entity, words)
        (target.warnings if kind == "warning" else target.info).append(words)

    def target(self, kind: str, entity: str, words: str) -> _Draft:
        label = f"{kind.title()}{': ' + entity if entity else ''}"
        if entity:
            found = [d for d in self.test_drafts if d.entity.lower() == entity.lower()]
            if not found:
                raise ParseError(f"{TEXT_FORMAT}: a '{label}' row under {self.test!r}, which "
                                 f"has no {entity} result (edited or mixed output?)")
            return found[-1]
        pool = self.test_drafts or self.drafts[-1:]
        if not pool:
            raise ParseError(f"{TEXT_FORMAT}: a '{label}' row before any test result")
        named = re.search(r"\bGPU ?([0-9]{1,4})\b", words)
        gpu = int(named.group(1)) if named else None
        for wanted in (("fail", "warn"), ("pass", "skip")):  # the result it explains
            hit = [d for d in pool if gpu in d.gpus and d.status in wanted]
            if hit:
                return hit[0]
        return pool[-1]

    def once(self, lineno: int, key: tuple[str, ...], what: str) -> None:
        """dcgmi prints each category, and each test in it, once, by a name of its own."""
        if not _NAME.fullmatch(key[-1]):
            raise ParseError(f"{TEXT_FORMAT}: line {lineno}: {key[0]} name {key[-1][:60]!r} "
                             "is no name dcgmi prints (damaged output?)")
        if key in self.seen:
            raise ParseError(f"{TEXT_FORMAT}: line {lineno}: {what} appears twice "
                             "(duplicated output?)")
        self.seen.add(key)

    def add(self, draft: _Draft) -> None:
        self.drafts.append(draft)
        self.test_drafts.append(draft)

    def close_test(self) -> None:
        """DCGM 4 prints a test's overall result, then one row per entity: the overall row
        only counts when it says more than they do (a Fail or Warn none of them has, or
        a message of its own)."""
        self.flush()
        head, entities = self.test_drafts[:1], [d for d in self.test_drafts if d.entity]
        if head and entities and not head[0].entity and not head[0].warnings:
            worst = max(_RANK[d.status] for d in entities)
            if _RANK[head[0].status] <= worst:
                self.drafts = [d for d in self.drafts if d is not head[0]]
        self.test_drafts = []

    def row(self, lineno: int, left: str, cell: str) -> None:
        right = cell.strip()
        piece = cell[1:] if cell.startswith(" ") else cell
        piece = piece[:_CHUNK] if len(piece) > _CHUNK else piece.rstrip()
        label = _LABEL.match(left)
        entity = _ENTITY.match(right) if not left else None
        if self.category.lower() == "metadata":
            if not left or left in self.meta:
                raise ParseError(f"{TEXT_FORMAT}: line {lineno}: a Metadata row "
                                 + (f"{left!r} given twice" if left else "without a name")
                                 + f": {right[:40]!r}")
            self.once(lineno, ("metadata", left), f"Metadata row {left!r}")
            self.meta[left] = right
        elif label:
            self.flush()
            self.message = (label.group(1).lower(), label.group(2) or "", [piece])
        elif entity:
            self.flush()
            if not self.test_drafts:
                raise ParseError(f"{TEXT_FORMAT}: line {lineno}: {right!r} belongs to no test")
            kind, index = entity.group(1), int(entity.group(2))
            self.add(_Draft(self.category, self.test,
                            (index,) if kind.upper() == "GPU" else (),
                            diag_status(entity.group(3), self.test, TEXT_FORMAT),
                            entity=f"{kind}{index}",
                            scope="gpu" if kind.upper() == "GPU" else "node"))
        elif not left and self.message is not None:
            self.message[2].append(piece)
        elif not left and _CODE.match(right) and self.test_drafts:
            self.test_drafts[-1].info.append(right)
        elif left in ("Diagnostic", "") and right in ("Result", ""):
            return
        else:
            self.flush()
            if left:
                self.close_test()
                self.once(lineno, ("test", self.category, left), f"test {left!r}")
            res = _RESULT.match(right)
            if not res:
                raise ParseError(f"{TEXT_FORMAT}: line {lineno}: result {right[:60]!r} of "
                                 f"{left or self.test!r} is not 'Pass', 'Fail', 'Warn' or "
                                 "'Skip' [- GPUs: n, ... | - All], nor 'GPUn: <result>'")
            self.test = left or self.test
            ids = res.group(2)
            parts = [x for x in re.split(r"[,\s]+", ids) if x] if ids else []
            if any(len(x) > 4 for x in parts):
                raise ParseError(f"{TEXT_FORMAT}: GPU list {ids.strip()[:40]!r} of "
                                 f"{self.test!r} is not a list of GPU indices")
            self.add(_Draft(self.category, self.test, tuple(int(x) for x in parts),
                            diag_status(res.group(1), self.test, TEXT_FORMAT),
                            everyone=res.group(3) is not None,
                            # a bare 'Pass': a Deployment check, or a DCGM 4 overall row
                            scope="gpu" if ids or res.group(3) else "node"))

    def feed(self, lineno: int, line: str) -> None:
        if _BORDER.match(line):
            self.close_test()
            self.complete = self.seen_row
            return
        cat = _CATEGORY.match(line)
        end = _CATEGORY_END.search(line, cat.end()) if cat else None
        if cat and end:
            name = line[cat.end():end.start()]
            self.close_test()
            self.once(lineno, ("category", name), f"category {name!r}")
            self.category, self.test, self.seen_row, self.complete = name, "", True, False
            return
        row = _ROW.match(line)
        if not row:
            raise ParseError(f"{TEXT_FORMAT}: line {lineno}: {line[:60]!r} is not a "
                             "'| name | result |' row")
        self.seen_row, self.complete = True, False
        second = row.group(2).rstrip()
        self.row(lineno, row.group(1).strip(), second[:-1] if second.endswith("|") else second)

    def result(self) -> DcgmDiag:
        self.close_test()
        if not self.drafts:
            raise ParseError(f"{TEXT_FORMAT}: no test result rows")
        # '- All' (DCGM 3): every GPU of the run. DCGM lists one device ID per GPU it ran
        # on, numbered 0..n-1 in the default group (the check passes no -g); without that
        # row, the GPUs the other rows name.
        ids = self.meta.get("GPU Device IDs Detected", "")
        devices = len([x for x in ids.split(",") if x.strip()]) \
            if ids and not ids.endswith("...") else None
        named = sorted({g for d in self.drafts if d.scope == "gpu" for g in d.gpus})
        everyone = tuple(range(devices)) if devices is not None else tuple(named)
        return DcgmDiag("text", tuple(
            DiagResult(d.category, d.test, everyone if d.everyone else d.gpus, d.status,
                       tuple(d.info), tuple(d.warnings), d.scope) for d in self.drafts),
            self.complete, self.meta.get("DCGM Version"), devices)


def parse_dcgm_text(text: str) -> DcgmDiag:
    """Parse the text table (from its first non-blank line); ParseError for anything else."""
    table = _Table()
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        if not line.strip() or (lineno == first + 1 and line.strip() == PREAMBLE):
            continue
        table.feed(lineno, line)
    return table.result()



__all__ = ["PREAMBLE", "parse_dcgm_text"]
