"""The shape of the house (docs/architecture.md), checked on the source tree.

* no import cycle among the modules of ``src/dperm``, counting function-level
  imports (import-linter's layers contract, run by ``.ci/run``, checks the
  direction between floors; this test checks the modules inside a floor too);
* no module over 800 lines;
* the estimators never test for a backend: ``DPLinearModelBase.fit`` goes
  through the one dispatch of :mod:`dperm.design`.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 800


def _modules() -> dict[str, Path]:
    mods = {}
    for path in sorted((SRC / "dperm").rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


def _targets(mods: dict[str, Path], current: str, node: ast.AST) -> set[str]:
    package = current if mods[current].name == "__init__.py" else current.rpartition(".")[0]
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        names = [base] + [f"{base}.{alias.name}" for alias in node.names]
    out = set()
    for target in names:
        while target and target not in mods and "." in target:
            target = target.rpartition(".")[0]
        if target in mods and target != current and not target.startswith(current + "."):
            out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    """module → the dperm modules it imports (anywhere in the file)."""
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _targets(mods, name, node)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    # the package root re-exports lazily by name (importlib), so it is no edge
    found = cycles(import_graph())
    assert found == [], f"import cycles (function-level imports count): {found}"


def test_no_module_over_800_lines():
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines: {long}"


def test_no_merge_conflict_markers_anywhere():
    """A conflict left in a docstring or a page passes ruff and the import checks: look
    for the markers in every source, test, benchmark and docs file."""
    root = Path(__file__).resolve().parents[1]
    marker = re.compile(r"^\s*(<{7}|>{7}) |^={7}$", re.MULTILINE)
    files = [
        p
        for folder in ("src", "tests", "benchmarks", "docs")
        for p in (root / folder).rglob("*")
        if p.suffix in (".py", ".md", ".toml", ".yml", ".txt")
    ]
    files += [root / "README.md", root / "pyproject.toml", root / "mkdocs.yml"]
    hits = [str(p.relative_to(root)) for p in files if marker.search(p.read_text("utf-8"))]
    assert hits == [], f"merge conflict markers in {hits}"


def test_estimator_fit_never_tests_for_a_backend():
    from dperm.estimators._base import DPLinearClassifierBase, DPLinearModelBase

    for fn in (
        DPLinearModelBase.fit,
        DPLinearModelBase._linear_scores,
        DPLinearClassifierBase._encode_targets,
    ):
        source = inspect.getsource(fn).lower()
        assert "dask" not in source, f"{fn.__qualname__} names a backend"


@pytest.mark.parametrize("module", ["dperm.algorithms", "dperm.accounting", "dperm.losses"])
def test_low_floors_do_not_import_dask(module):
    graph = import_graph()
    for name, path in _modules().items():
        if name == module or name.startswith(module + "."):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    assert all(a.name.split(".")[0] != "dask" for a in node.names), name
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    assert node.module.split(".")[0] not in ("dask", "distributed"), name
    assert graph  # the walk saw the package
