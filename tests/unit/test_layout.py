"""Import rules of the layout, read from the source with ``ast`` (every import, also inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("bench", "dashboard", "attacks", "defenses", "tasks", "scripts")
HEAVY = ("torch", "transformers")
COMPONENT_PACKAGES = ("defenses", "attacks", "tasks")


def python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module of a ``from ... import`` (relative imports resolved against ``path``)."""
    if not node.level:
        return node.module or ""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path, module_level_only: bool = False) -> list[tuple[str, int]]:
    """(imported module, line) of each import in ``path``; ``from a import b`` gives a.b when that is a
    module of the repository, else a. Module level skips ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    nodes = _module_level(tree.body) if module_level_only else ast.walk(tree)
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                found.append((sub if _is_module(sub) else base, node.lineno))
    return found


def _module_level(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _module_level(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers"):  # if / try / with at module level
            if isinstance(node, (ast.If, ast.Try, ast.With)) or isinstance(node, ast.ExceptHandler):
                yield from _module_level(getattr(node, field, []) or [])


def _is_module(name: str) -> bool:
    target = ROOT.joinpath(*name.split("."))
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _where(path: Path, line: int, name: str) -> str:
    return f"{path.relative_to(ROOT)}:{line} imports {name}"


def test_core_and_results_never_import_torch():
    bad = [_where(p, line, name) for p in python_files("bench/core", "bench/results")
           for name, line in imports(p) if _top(name) in HEAVY]
    assert bad == []


def test_dashboard_imports_only_bench_results():
    bad = [_where(p, line, name) for p in python_files("dashboard") for name, line in imports(p)
           if _top(name) == "bench" and not name.startswith("bench.results")]
    assert bad == []


def test_reproduce_reads_records_only():
    """`bench reproduce`'s logic imports bench.core and bench.results only (no engine, models or torch), so the
    dashboard and offline tests can use it; --run's engine imports live in the CLI."""
    path = ROOT / "bench" / "reproduction" / "reproduce.py"
    bad = [_where(path, line, name) for name, line in imports(path)
           if (_top(name) == "bench" and not name.startswith(("bench.core", "bench.results"))) or _top(name) in HEAVY]
    assert bad == []


def test_attacks_never_import_defenses():
    bad = [_where(p, line, name) for p in python_files("attacks") for name, line in imports(p)
           if _top(name) == "defenses"]
    assert bad == []


def test_bench_never_imports_components_by_name():
    bad = [_where(p, line, name) for p in python_files("bench") for name, line in imports(p)
           if _top(name) in COMPONENT_PACKAGES]
    assert bad == []


def import_graph() -> dict[str, set[str]]:
    """bench module -> bench modules it imports at module level."""
    graph: dict[str, set[str]] = {}
    for path in python_files("bench"):
        graph[module_name(path)] = {name for name, _ in imports(path, module_level_only=True)
                                    if _top(name) == "bench" and name != module_name(path)}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules, the first repeated at the end), or None; iterative DFS."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph.get(start, ())))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_find_cycle_reports_the_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycles_among_bench_modules():
    assert find_cycle(import_graph()) is None


@pytest.mark.parametrize("needle", ["rev-parse"])
def test_provenance_only_in_its_module(needle):
    allowed = ROOT / "bench" / "engine" / "provenance.py"
    bad = [str(p.relative_to(ROOT)) for p in python_files(*SOURCE_DIRS)
           if p != allowed and needle in p.read_text(encoding="utf-8")]
    assert bad == []
    assert needle in allowed.read_text(encoding="utf-8")
