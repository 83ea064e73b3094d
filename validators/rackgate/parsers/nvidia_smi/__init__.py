"""Parsers for ``nvidia-smi -q -x`` (XML) and ``nvidia-smi -q`` (text): per-GPU health.

Format: nvidia-smi(1), option ``-q`` / ``-x``, and the DTD shipped with the driver
(``nvsmi_device_v12.dtd``, named in the output's ``<!DOCTYPE>``). The root
``nvidia_smi_log`` holds ``driver_version``, ``cuda_version``, ``attached_gpus`` and one
``gpu id="<pci bus id>"`` per device. The text form is nvidia-smi's indented
``Label : value`` layout (4 spaces per level); its labels are read as snake-case keys,
which for most sections equal the XML element names. Both forms become one tree, read into
the per-GPU record by ``parsers.nvidia_smi.fields`` (which names each field's element in
every driver's spelling).

Incomplete output is refused, never read as a smaller healthy node: XML must be
well-formed up to the closing ``</nvidia_smi_log>``; in the text form every GPU block
must reach its last section, ``Processes``. A complete report of fewer sections (``-d
PERFORMANCE`` and the like) is refused too, but as filtered, naming the sections it lacks
(``nvidia_smi_fields.filtered_report``), not as truncated. A text line that is no
``Label : value`` line of nvidia-smi's labels, nor a heading with lines under it (a line
cut in two by a carriage return, a label with a byte-order mark or 100,000 characters),
and a driver or CUDA version nvidia-smi would not print, are refused too; so is XML
holding a character nvidia-smi never prints (``parsers.damage``) or a line over 4,096.

>>> q = parse_nvidia_smi_xml('<nvidia_smi_log><driver_version>535.54.03</driver_version>'
...     '<attached_gpus>1</attached_gpus><gpu id="00000000:01:00.0">'
...     '<product_name>NVIDIA A100-SXM4-80GB</product_name>'
...     '<fb_memory_usage><total>81920 MiB</total></fb_memory_usage></gpu></nvidia_smi_log>')
>>> q.driver_version, q.gpus[0].pci_bus_id, q.gpus[0].fb_memory_total_mib
('535.54.03', '00000000:01:00.0', 81920)
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

from rackgate.parsers import ParseError
from rackgate.parsers.damage import DAMAGE
from rackgate.parsers.nvidia_smi.fields import (
    REASONS,
    EccCounts,
    Gpu,
    GpuQuery,
    Node,
    Reader,
    filtered_report,
    looks_filtered,
    read_gpu,
    snake,
)

_DEVICE_ERROR = re.compile(r"Unable to determine the device handle|GPU is lost|"
                           r"No devices were found|NVIDIA-SMI has failed", re.IGNORECASE)
_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
_GPU_LINE = re.compile(rf"^GPU ({_BUS_ID})\s*$")
# a label nvidia-smi -q prints ("Clocks Event Reasons", "Max Customer Boost Clocks"), and
# its versions; anything else is a damaged line
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9 ()/._,+#&'%:-]{0,63}", re.ASCII)
_DRIVER = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}", re.ASCII)
_CUDA = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}", re.ASCII)
_MAX_LINE = 4096  # nvidia-smi's XML lines are a tag and a short value
_LONG_LINE = re.compile(rf"[^\n]{{{_MAX_LINE + 1}}}")
_BANNER = re.compile(r"=+NVSMI LOG=+")  # the one line of '=' nvidia-smi -q prints
_MAX_VALUE = 256  # NVML's longest string buffer is 96 bytes (NVML_DEVICE_NAME_V2_BUFFER_SIZE)
# the first line whose first non-blank character is '<' ([^\S\n]: a blank of that line;
# \s would run on over the next lines from every empty line: quadratic in empty lines)
_XML_LINE = re.compile(r"(?m)^[^\S\n]*<")
_MAX_DEPTH = 64  # nvidia-smi nests about 6 levels; recursion must never be exhausted


def _depth(root: ET.Element) -> int:
    """Nesting depth, iteratively and level by level (a recursive walk could exhaust the
    stack); counting stops past _MAX_DEPTH."""
    deepest, level = 0, [root]
    while level:
        deepest += 1
        if deepest > _MAX_DEPTH:
            break
        level = [c for el in level for c in el]
    return deepest


def _device_errors(lines: Iterator[str] | list[str]) -> tuple[str, ...]:
    return tuple(line.strip() for line in lines if _DEVICE_ERROR.search(line))


def parse_nvidia_smi_xml(text: str) -> GpuQuery:
    """Parse ``nvidia-smi -q -x``; raise ParseError on anything else or on truncation."""
    fmt = "nvidia-smi -q -x XML"
    text = text.replace("\r\n", "\n")
    start = next((m.start() for m in _XML_LINE.finditer(text)), None)
    if start is None:
        raise ParseError(f"{fmt}: no line starts with '<' (empty output, or not run with -x?)"
                         + (f": {text.strip()[:120]!r}" if text.strip() else ""))
    prefix, body = text[:start], text[start:]
    if "<!ENTITY" in body:
        raise ParseError(f"{fmt}: entity declarations are not part of nvidia-smi's format")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        line, col = exc.position
        raise ParseError(f"{fmt}: not well-formed at line {line + prefix.count(chr(10))} "
                         f"column {col}: {exc} (truncated output?)") from None
    except ValueError as exc:  # text the XML parser cannot even encode
        raise ParseError(f"{fmt}: unreadable text: {str(exc)[:80]}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"{fmt}: the root element is <{str(root.tag)[:40]}>, expected "
                         "<nvidia_smi_log>")
    if _depth(root) > _MAX_DEPTH:
        raise ParseError(f"{fmt}: elements nested deeper than {_MAX_DEPTH} levels: not "
                         "nvidia-smi's layout")
    if m := DAMAGE.search(text) or _LONG_LINE.search(text):  # scanned once, in C
        line = text.count("\n", 0, m.start()) + 1
        raise ParseError(f"{fmt}: line {line} holds " + (
            f"{m.group()!r}, a character nvidia-smi never prints" if len(m.group()) == 1 else
            f"more than {_MAX_LINE:,} characters") + " (damaged output?)")
    top = Node.of_element(root)  # elements become nodes when read (most never are)
    attached = Reader(fmt, top, "the log").integer("", "attached_gpus")
    elements = root.findall("gpu")
    nodes = [Node.of_element(el) for el in elements]
    filtered = filtered_report(fmt, nodes, attached, "nvidia-smi -q -x")
    if filtered is not None:
        raise filtered
    gpus = []
    for i, (el, node) in enumerate(zip(elements, nodes, strict=True)):
        listed = node.text("pci/pci_bus_id")
        bus = el.get("id") or listed or f"gpu[{i}]"
        if listed is not None and listed.lower() != bus.lower():
            raise ParseError(f"{fmt}: <gpu id={bus!r}> holds pci_bus_id {listed!r}: two GPUs' "
                             "output mixed?")
        gpus.append(read_gpu(fmt, i, bus, node, text_form=False))
    return GpuQuery("xml", *_versions(fmt, top), attached, tuple(gpus),
                    _device_errors(prefix.splitlines()))


_LISTS = ("processes", "accounted_processes")  # sections that repeat their keys per entry


def _versions(fmt: str, top: Node) -> tuple[str | None, str | None]:
    """The driver and CUDA versions, as nvidia-smi prints them ("535.183.01", "12.2"), or
    None where absent; ParseError for anything else (the drift check compares them)."""
    out = []
    for key, shape in (("driver_version", _DRIVER), ("cuda_version", _CUDA)):
        value = top.text(key)
        if value is not None and not shape.fullmatch(value):
            raise ParseError(f"{fmt}: {key} {value[:40]!r} is no version nvidia-smi prints")
        out.append(value)
    return out[0], out[1]


def _key_value(line: str) -> tuple[str, str | None]:
    """``Label : value`` split at the first colon followed by a space or the end of the
    line (a value holds colons: bus IDs, times); ``(label, None)`` for a section's heading.
    A scan, not a regex, so a long line costs its length once."""
    at = line.find(":")
    while at >= 0:
        if at + 1 == len(line) or line[at + 1] == " ":
            return line[:at].strip(), line[at + 2:]
        at = line.find(":", at + 1)
    return line.strip(), None


def _opens(lines: list[str], n: int) -> bool:
    """Whether the heading on line ``n`` (1-based) has lines indented under it, or ends the
    output (a cut report, which the caller names as truncated)."""
    indent = len(lines[n - 1]) - len(lines[n - 1].lstrip(" "))
    while n < len(lines) and not lines[n].strip():
        n += 1
    return n == len(lines) or len(lines[n]) - len(lines[n].lstrip(" ")) > indent


def _text_tree(lines: list[str], fmt: str) -> tuple[Node, list[tuple[str, Node]], list[str]]:
    top = Node("", None)
    gpus: list[tuple[str, Node]] = []
    errors: list[str] = []
    stack: list[tuple[int, Node]] = [(-1, top)]
    for n, line in enumerate(lines, 1):
        if not line.strip() or _BANNER.fullmatch(line):
            continue
        if _DEVICE_ERROR.search(line):
            errors.append(line.strip())
            continue
        gpu = _GPU_LINE.match(line)
        if gpu:
            node = Node("gpu", gpu.group(1))
            gpus.append((gpu.group(1), node))
            stack = [(-1, top), (0, node)]
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, value = _key_value(line)
        if not _KEY.fullmatch(key):
            raise ParseError(f"{fmt}: line {n} is no 'Label : value' line nor a section: "
                             f"{line[:120]!r}")
        if value is None and not _opens(lines, n):
            raise ParseError(f"{fmt}: line {n} {line.strip()[:120]!r} has no ' : value' and "
                             "no lines under it (a cut or damaged line?)")
        while stack[-1][0] >= indent:
            stack.pop()
        if not stack:
            raise ParseError(f"{fmt}: line {n} is indented less than its section: {line!r}")
        if indent % 4 or "\r" in line or len(value or "") > _MAX_VALUE:
            # 4 spaces a level; no CR inside nvidia-smi's lines; NVML's strings are short
            why = f"indented {indent} spaces" if indent % 4 else "holds a carriage return" \
                if "\r" in line else f"has a value of {len(value or ''):,} characters"
            raise ParseError(f"{fmt}: line {n} {why}: {line[:120]!r}")
        if indent > 0 and len(stack) == 1:
            raise ParseError(f"{fmt}: line {n} is indented but belongs to no GPU: {line!r}")
        child = Node(snake(key), value)
        parent = stack[-1][1]
        if parent.key not in _LISTS and any(c.key == child.key for c in parent.children):
            raise ParseError(f"{fmt}: line {n}: {key.strip()!r} given twice in "
                             f"{parent.key or 'the header'} (duplicated output?)")
        parent.children.append(child)
        if value is None:
            stack.append((indent, child))
    return top, gpus, errors


def parse_nvidia_smi_text(text: str) -> GpuQuery:
    """Parse ``nvidia-smi -q`` (the text report) into the same record as the XML parser."""
    fmt = "nvidia-smi -q text"
    text = text.replace("\r\n", "\n")
    banner = text.find("==============NVSMI LOG==============")
    prefix = text[:banner] if banner >= 0 else ""
    lines = text[banner:].split("\n") if banner >= 0 else text.split("\n")
    top, blocks, errors = _text_tree(lines, fmt)
    errors = [*_device_errors(prefix.splitlines()), *errors]
    attached = Reader(fmt, top, "the header").integer("", "attached_gpus")
    if attached is None and not blocks:
        raise ParseError(f"{fmt}: no 'Attached GPUs' line and no 'GPU <bus id>' block "
                         "(empty or truncated output, or not nvidia-smi -q?)")
    filtered = filtered_report(fmt, [node for _, node in blocks], attached, "nvidia-smi -q")
    if filtered is not None:
        raise filtered
    gpus = []
    # a report filtered with -d has no Processes in any GPU: its last GPU is the one cut
    unnamed = bool(blocks) and looks_filtered(blocks[0][1])
    for i, (bus, node) in enumerate(blocks):
        if node.find("processes") is None:
            i, bus = (len(blocks) - 1, blocks[-1][0]) if unnamed else (i, bus)
            announced = f" of {attached} announced" if attached is not None else ""
            raise ParseError(f"{fmt}: GPU {i}{announced} ({bus}) ends before its 'Processes' "
                             "section: truncated output"
                             + (" (a report filtered with -d, cut short?)" if unnamed else ""))
        gpus.append(read_gpu(fmt, i, bus, node, text_form=True))
    return GpuQuery("text", *_versions(fmt, top), attached, tuple(gpus), tuple(errors))


def parse_nvidia_smi(text: str) -> GpuQuery:
    """Either form: XML when the first line that starts with '<' comes before the banner."""
    xml_at = _XML_LINE.search(text)
    banner = text.find("NVSMI LOG")
    parse: Callable[[str], GpuQuery] = parse_nvidia_smi_xml \
        if xml_at and (banner < 0 or xml_at.start() < banner) else parse_nvidia_smi_text
    return parse(text)


__all__ = ["REASONS", "EccCounts", "Gpu", "GpuQuery", "parse_nvidia_smi", "parse_nvidia_smi_text",
           "parse_nvidia_smi_xml"]
