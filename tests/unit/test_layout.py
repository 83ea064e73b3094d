"""The package's layout keeps its promises (docs/architecture.md): no import cycle, the
dependency rules between the stages, small modules, and one place that knows where a
check runs. Read from the source with ``ast``: every ``import`` counts, also those inside
functions (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "validators" / "rackgate"
MAX_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> Iterator[str]:
    """Every rackgate module ``path`` imports (``from a import b`` counts as a.b when
    a.b is a module, else as a)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES
                     else node.module for a in node.names]
        else:
            continue
        yield from (n for n in names if n == "rackgate" or n.startswith("rackgate."))


GRAPH = {name: sorted(set(_imports(path)) & set(MODULES)) for name, path in MODULES.items()}


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a self-import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read_from_the_whole_package():
    assert len(MODULES) > 60 and "rackgate.placement" in MODULES
    assert "rackgate.checks.base" in GRAPH["rackgate.checks.fio"]


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]


def _depends(module: str) -> set[str]:
    """Everything ``module`` imports, directly or not."""
    seen: set[str] = set()
    todo = list(GRAPH[module])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += GRAPH[m]
    return seen


def _under(prefix: str) -> list[str]:
    return [m for m in MODULES if m == prefix or m.startswith(prefix + ".")]


# stage -> what it must never import (directly or through others)
RULES = {
    "rackgate.parsers": ["rackgate.checks", "rackgate.collect", "rackgate.judge",
                         "rackgate.store", "rackgate.reports", "rackgate.run", "rackgate.cli",
                         "rackgate.profile", "rackgate.placement"],
    "rackgate.profile": ["rackgate.checks", "rackgate.collect", "rackgate.judge",
                         "rackgate.run", "rackgate.cli"],
    "rackgate.checks": ["rackgate.collect.ansible", "rackgate.collect.plan",
                        "rackgate.collect.processes", "rackgate.judge", "rackgate.store",
                        "rackgate.reports", "rackgate.run", "rackgate.cli",
                        "rackgate.placement"],
    "rackgate.judge": ["rackgate.collect.ansible", "rackgate.collect.plan",
                       "rackgate.collect.processes", "rackgate.reports", "rackgate.run",
                       "rackgate.cli", "rackgate.demo"],
    "rackgate.store": ["rackgate.collect", "rackgate.judge", "rackgate.reports",
                       "rackgate.run", "rackgate.cli", "rackgate.placement"],
    "rackgate.reports": ["rackgate.collect", "rackgate.placement", "rackgate.judge.run",
                         "rackgate.judge.rack", "rackgate.run", "rackgate.cli"],
    # drain's decisions and commands are pure; only scheduler.apply runs them
    **{f"rackgate.scheduler.{m}": ["rackgate.collect.ansible", "rackgate.collect.processes",
                                   "rackgate.store", "rackgate.judge", "rackgate.reports",
                                   "rackgate.run", "rackgate.cli", "rackgate.placement"]
       for m in ("drain", "slurm", "kubernetes")},
    "rackgate.programs": ["rackgate.collect", "rackgate.judge", "rackgate.store",
                          "rackgate.reports", "rackgate.run", "rackgate.cli",
                          "rackgate.placement"],
}


@pytest.mark.parametrize("stage", sorted(RULES))
def test_dependency_rules(stage):
    broken = []
    for module in _under(stage):
        for dep in sorted(_depends(module)):
            if any(dep == f or dep.startswith(f + ".") for f in RULES[stage]):
                broken.append(f"{module} -> {dep}")
    assert broken == [], broken


def test_no_module_is_over_400_lines():
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_only_the_placements_ask_where_a_check_runs():
    asking = re.compile(r"runs_on\s*(==|!=|in\b)|\.runs_on\b")
    where = [f"{name}:{i}" for name, path in MODULES.items() if name != "rackgate.placement"
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if asking.search(line)]
    assert where == []


def test_every_check_declares_a_scope_its_placement_gives():
    from rackgate.checks import REGISTRY
    from rackgate.placement import placement_of

    assert {c.name: placement_of(c).name for c in REGISTRY.values()}  # none raises
