"""The package's layout keeps its promises (docs/architecture.md): no import cycle, the
dependency rules between the stages, small modules, and one place that knows where a
check runs. Read from the source with ``ast``: every ``import`` counts, also those inside
functions (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "validators" / "rackgate"


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
    assert "rackgate.checks.shared.base" in GRAPH["rackgate.checks.storage.fio"]


def test_no_import_cycle():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]


# The stages, lowest first. A module imports only modules of its own stage or of the stages
# before it (docs/architecture.md). A module belongs to the stage of its longest prefix
# below; the scheduler's pure commands and decisions sit with the commands, its actions
# (which run collections and drains) with the run.
STAGES: list[tuple[str, list[str]]] = [
    ("foundation", ["rackgate", "rackgate.figures", "rackgate.documents", "rackgate.model",
                    "rackgate.refusal", "rackgate.environment"]),
    ("parsers", ["rackgate.parsers"]),
    ("domain", ["rackgate.thresholds", "rackgate.hardware", "rackgate.profile",
                "rackgate.inventory", "rackgate.fabric", "rackgate.store", "rackgate.exposition",
                "rackgate.programs", "rackgate.demo"]),
    ("commands", ["rackgate.commands", "rackgate.scheduler.slurm",
                  "rackgate.scheduler.kubernetes", "rackgate.scheduler.drain",
                  "rackgate.scheduler.stale"]),
    ("checks", ["rackgate.checks"]),
    ("placement", ["rackgate.placement"]),
    ("collect, judge", ["rackgate.collect", "rackgate.judge", "rackgate.selection",
                        "rackgate.overrides", "rackgate.reports", "rackgate.health"]),
    ("run", ["rackgate.run", "rackgate.rejudge", "rackgate.verify", "rackgate.baseline",
             "rackgate.baseline_input", "rackgate.baseline_sample", "rackgate.scheduler",
             "rackgate.scheduler.apply", "rackgate.scheduler.session",
             "rackgate.scheduler.retest"]),
    ("cli", ["rackgate.cli", "rackgate.__main__", "rackgate.programs.healthcheck"]),
]
# Within the stage "collect, judge" the parts are siblings: none imports another (collection
# never judges; judging never collects; reports never re-judge).
SIBLINGS = "collect, judge"


def _stage(module: str) -> tuple[int, str]:
    """(stage index, the prefix that placed it) of ``module``."""
    best = max(((i, p) for i, (_, prefixes) in enumerate(STAGES) for p in prefixes
                if module == p or module.startswith(p + ".")), key=lambda ip: len(ip[1]),
               default=None)
    if best is None:
        raise AssertionError(f"module {module} is in no stage of STAGES")
    return best


def _back_imports(graph: dict[str, list[str]]) -> list[str]:
    """Every import that runs back up the stages, or across siblings."""
    out = []
    for module, deps in sorted(graph.items()):
        (here, part) = _stage(module)
        for dep in deps:
            (there, dep_part) = _stage(dep)
            if there > here:
                out.append(f"{module} ({STAGES[here][0]}) -> {dep} ({STAGES[there][0]})")
            elif there == here and STAGES[here][0] == SIBLINGS and part != dep_part:
                out.append(f"{module} -> {dep} (siblings in {SIBLINGS})")
    return out


def test_every_module_is_in_a_stage():
    assert all(_stage(m) for m in MODULES)  # _stage names a module in no stage


def test_imports_run_one_way_through_the_stages():
    back = _back_imports(GRAPH)
    print("\n".join(back) or "no import runs back up the stages")
    assert back == []


def test_the_stage_test_finds_an_import_back_up():
    graph = {"rackgate.checks.mpi": ["rackgate.collect.ansible"],
             "rackgate.collect.ansible": ["rackgate.judge.stored"],
             "rackgate.collect.phases": ["rackgate.checks.shared.base"]}
    assert _back_imports(graph) == [
        "rackgate.checks.mpi (checks) -> rackgate.collect.ansible (collect, judge)",
        "rackgate.collect.ansible -> rackgate.judge.stored (siblings in collect, judge)"]


# The cap serves the reader: a module grows past WARN_LINES only when splitting it would
# scatter one idea (it is listed, as a warning); past MAX_LINES it must be split.
WARN_LINES = 400
MAX_LINES = 600


def _lengths() -> dict[str, int]:
    return {name: len(path.read_text(encoding="utf-8").splitlines())
            for name, path in MODULES.items()}


def test_no_module_is_over_600_lines():
    lengths = _lengths()
    long = {name: n for name, n in lengths.items() if n > WARN_LINES}
    for name, n in sorted(long.items(), key=lambda kv: -kv[1]):
        warnings.warn(f"{name} has {n} lines (over {WARN_LINES}: read it as one idea, or "
                      f"split it)", stacklevel=1)
    assert {name: n for name, n in long.items() if n > MAX_LINES} == {}


def test_every_check_is_one_kind_and_its_kind_places_it():
    from rackgate.checks import REGISTRY
    from rackgate.checks.shared.base import AcrossCheck, ControlCheck, FabricCheck, NodeCheck
    from rackgate.placement import placement_of

    kinds = {NodeCheck: "node", ControlCheck: "control", AcrossCheck: "launcher",
             FabricCheck: "fabric"}
    assert {c.name: placement_of(c).name for c in REGISTRY.values()} == {
        c.name: kinds[type(c)] for c in REGISTRY.values()}
    assert set(map(type, REGISTRY.values())) == set(kinds)  # every kind is used


def test_a_check_is_declared_as_a_kind_with_a_scope_it_can_give():
    from rackgate.checks.shared.base import Check, NodeCheck, Params, Scope

    fields = dict(name="x.y", tags=frozenset(), description="d", params_model=Params,
                  metrics=frozenset(), command=lambda p, hv: ["true"], parse=str)
    with pytest.raises(TypeError, match="declare it as one of the kinds"):
        Check(**fields)
    with pytest.raises(ValueError, match="a NodeCheck cannot have scope rack"):
        NodeCheck(**fields, scope=Scope.RACK, judge=lambda *a: None)


def test_the_architecture_names_every_package():
    """docs/architecture.md names every package as its path with a trailing slash
    (`checks/fabric/`), so a reader finds each in it."""
    text = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(str(p.parent.relative_to(PACKAGE)) + "/"
                      for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    assert len(packages) > 20 and "checks/fabric/" in packages
    assert [p for p in packages if f"`{p}`" not in text] == []


# --- tests mirror the code (CONTRIBUTING.md, "Tests") --------------------------------------

TESTS = Path(__file__).resolve().parent / "checks"


def _families() -> list[str]:
    """Every check family: a module of checks/ (not a package's __init__, not the shared
    helpers) that registers its checks with a top-level ``CHECK`` or ``CHECKS``."""
    found = []
    for path in sorted((PACKAGE / "checks").rglob("*.py")):
        rel = path.relative_to(PACKAGE / "checks")
        if path.name == "__init__.py" or rel.parts[0] == "shared":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                   for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                   if isinstance(t, ast.Name)}
        if targets & {"CHECK", "CHECKS"}:
            found.append(str(rel.with_suffix("")))
    return found


def _test_module(family: str) -> Path:
    where = Path(family)
    return TESTS / where.parent / f"test_{where.name}.py"


def test_every_check_family_has_a_test_module_of_its_own():
    families = _families()
    assert len(families) > 20 and "fabric/links" in families and "cooling" in families
    assert [str(_test_module(f).relative_to(TESTS.parents[2])) for f in families
            if not _test_module(f).is_file()] == []


def test_every_family_test_module_names_a_family():
    """A test module under tests/unit/checks/ that names no family is a stale mirror."""
    wanted = {_test_module(f) for f in _families()}
    assert sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
                  if p not in wanted) == []
