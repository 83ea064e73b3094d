"""Print a digest of what every registered parser makes of a set of files, to compare two
versions of the code (issue 19: parsers made faster must give the same records and errors).

    PYTHONHASHSEED=0 python bench/compare_parsers.py RUN_DIR > after.txt
    PYTHONHASHSEED=0 PYTHONPATH=/tmp/rg-base19/validators:bench \
        python bench/compare_parsers.py RUN_DIR > before.txt
    diff before.txt after.txt

For each file (tests/fixtures, tests/conformance, ../shared/corpus when present, and the
evidence of the first ``--nodes`` nodes of RUN_DIR) and each parser of a check in the
registry (plus both nvidia-smi readers), one line: the file, the parser and the sha256 of
the record's repr or of the error's type and message. A fixture with a ``# ---`` header is
parsed whole and without its header. PYTHONHASHSEED=0: a record holding a set has the same
repr in both processes.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import standin_checks  # noqa: F401  (registers the bench stand-ins)

import rackgate
from rackgate.checks import REGISTRY
from rackgate.parsers.nvidia_smi import parse_nvidia_smi, parse_nvidia_smi_text

REPO = Path(__file__).resolve().parent.parent


def files(run_dir: Path | None, nodes: int) -> list[Path]:
    out: list[Path] = []
    for root in (REPO / "tests" / "fixtures", REPO / "tests" / "conformance",
                 REPO.parent / "shared" / "corpus"):
        out += sorted(p for p in root.rglob("*") if p.is_file())
    if run_dir is not None:
        for host in sorted((run_dir / "evidence").iterdir())[:nodes]:
            out += sorted(host.glob("*.out"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, nargs="?")
    ap.add_argument("--nodes", type=int, default=30)
    args = ap.parse_args(argv)
    print(f"rackgate from {Path(rackgate.__file__).parent}", file=sys.stderr)
    parsers: dict[str, Callable[[str], Any]] = {
        f"{c.parse.__module__}.{c.parse.__name__}": c.parse for c in REGISTRY.values()}
    parsers["parse_nvidia_smi"] = parse_nvidia_smi
    parsers["parse_nvidia_smi_text"] = parse_nvidia_smi_text
    for path in files(args.run_dir, args.nodes):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        variants = [text, text.partition("\n# ---\n")[2]] if "\n# ---\n" in text else [text]
        for v in variants:
            for name, parse in sorted(parsers.items()):
                try:
                    out = repr(parse(v))
                except Exception as exc:  # the error is part of what is compared
                    out = f"{type(exc).__name__}: {exc}"
                print(path, name, hashlib.sha256(out.encode()).hexdigest()[:16])
    return 0


if __name__ == "__main__":
    sys.exit(main())
