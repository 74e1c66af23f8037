"""Import rules of the layout, read from the source with ``ast`` (every import, also inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("bench", "dashboard", "attacks", "defenses", "tasks", "scripts")
HEAVY = ("torch", "transformers")
COMPONENT_FOLDERS = ("defenses", "attacks", "tasks")
COMPONENT_PACKAGES = tuple(f"bench.{folder}" for folder in COMPONENT_FOLDERS)
# folders of the repository installed inside the bench package (pyproject.toml's package-dir)
INSTALLED_INSIDE = (*COMPONENT_FOLDERS, "dashboard")


def python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] in INSTALLED_INSIDE:
        parts.insert(0, "bench")
    return ".".join(parts)


def module_path(name: str) -> Path:
    """The file or folder of a project module, without its suffix (bench.defenses.x is defenses/x)."""
    parts = name.split(".")
    if parts[0] == "bench" and len(parts) > 1 and parts[1] in INSTALLED_INSIDE:
        parts = parts[1:]
    return ROOT.joinpath(*parts)


def within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def is_project(name: str) -> bool:
    """A module of the library or its components (the dashboard is outside the import graph)."""
    return _top(name) == "bench" and not within(name, ("bench.dashboard",))


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
    target = module_path(name)
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _where(path: Path, line: int, name: str) -> str:
    return f"{path.relative_to(ROOT)}:{line} imports {name}"


def test_core_and_results_never_import_torch():
    bad = [_where(p, line, name) for p in python_files("bench/core", "bench/results")
           for name, line in imports(p) if _top(name) in HEAVY]
    assert bad == []


# the attacks that apply to a defense on a task (the board's worst case marks a setting attacked by fewer as
# incomplete) are the engine's pairing checks; that module loads no model (tests/unit/test_worst_case.py)
DASHBOARD_ENGINE = ("bench.engine.applicable",)


def test_dashboard_imports_only_bench_results():
    bad = [_where(p, line, name) for p in python_files("dashboard") for name, line in imports(p)
           if _top(name) == "bench" and not within(name, ("bench.results", "bench.dashboard"))
           and name not in DASHBOARD_ENGINE]
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
           if within(name, ("bench.defenses",))]
    assert bad == []


def test_bench_never_imports_components_by_name():
    bad = [_where(p, line, name) for p in python_files("bench") for name, line in imports(p)
           if within(name, COMPONENT_PACKAGES)]
    assert bad == []


# The layers, lowest first: a module imports its own layer or lower ones, never a higher one (also inside a
# function, also for a type under TYPE_CHECKING). ``bench`` itself (the components' facade) re-exports core.
# Components (tasks, defenses, attacks) build on the library layers; the engine finds them by discovery, not by name.
LAYERS = (
    ("bench", "bench.core"),  # spec, params, errors, registry, components' base classes, examples, public mechanisms
    ("bench.privacy",),  # the public mechanisms' math (numpy; no models)
    ("bench.data",),  # corpora and alignment of words to released pieces
    ("bench.models",),  # encoders, servers, MLMs, adaptation, and the math that runs them (NDD, gradient matching)
    ("bench.results",),  # records, store, leaderboard
    COMPONENT_PACKAGES,  # components
    ("bench.engine",),  # runner, executors, grid
    ("bench.reproduction", "bench.performance"),  # the papers' tables; how fast the mechanisms run
    ("bench.cli",),
)
GRAPH_DIRS = ("bench", *COMPONENT_FOLDERS)


def layer_of(module: str) -> int:
    """The rank of ``module``'s layer (the longest matching prefix in LAYERS)."""
    best, rank = "", -1
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, rank = prefix, number
    if rank < 0:
        raise AssertionError(f"module {module} is in no layer of LAYERS")
    return rank


def project_imports(type_checking: bool = True) -> list[tuple[Path, int, str]]:
    """(file, line, imported project module) of every import in GRAPH_DIRS, inside functions too;
    ``type_checking=False`` leaves out the imports under ``if TYPE_CHECKING:``."""
    found = []
    for path in python_files(*GRAPH_DIRS):
        skip = set() if type_checking else _type_checking_lines(path)
        found += [(path, line, name) for name, line in imports(path) if is_project(name) and line not in skip]
    return found


def _type_checking_lines(path: Path) -> set[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {child.lineno for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in
            ast.unparse(node.test) for stmt in node.body for child in ast.walk(stmt) if hasattr(child, "lineno")}


def import_graph() -> dict[str, set[str]]:
    """project module -> project modules it imports anywhere in its file (functions included; type-only imports
    under TYPE_CHECKING left out, they never run)."""
    graph: dict[str, set[str]] = {}
    for path in python_files(*GRAPH_DIRS):
        graph.setdefault(module_name(path), set())
    for path, _, name in project_imports(type_checking=False):
        if name != module_name(path):
            graph[module_name(path)].add(name)
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


def test_imports_inside_functions_are_read(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    if True:\n        from bench.core.errors import BenchError\n")
    assert imports(source) == [("bench.core.errors", 3)]


def test_no_import_cycles_among_project_modules():
    """No cycle, counting the imports inside functions (a cycle there only waits for the wrong call order)."""
    assert find_cycle(import_graph()) is None


def test_no_module_imports_a_higher_layer():
    bad = [_where(path, line, name) for path, line, name in project_imports()
           if layer_of(name) > layer_of(module_name(path))]
    assert bad == []


def test_layer_of_reads_the_longest_prefix():
    assert layer_of("bench.core.spec") == 0 and layer_of("bench") == 0
    assert layer_of("bench.engine.runner") > layer_of("bench.attacks.inversion") > layer_of("bench.results.record")


def test_no_private_name_crosses_a_module():
    """``from x import _name`` reaches into another module's internals: make the name public or move it."""
    bad = []
    for path in python_files(*GRAPH_DIRS):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and is_project(_absolute(path, node)):
                bad += [_where(path, node.lineno, f"{_absolute(path, node)}.{alias.name}") for alias in node.names
                        if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert bad == []


@pytest.mark.parametrize("needle", ["rev-parse"])
def test_provenance_only_in_its_module(needle):
    allowed = ROOT / "bench" / "engine" / "provenance.py"
    bad = [str(p.relative_to(ROOT)) for p in python_files(*SOURCE_DIRS)
           if p != allowed and needle in p.read_text(encoding="utf-8")]
    assert bad == []
    assert needle in allowed.read_text(encoding="utf-8")


# Where a project module may be imported inside a function; everywhere else it is imported at the top of the file.
# Components: `bench list` imports every component, so the model stack, the results and the public corpora load
# when a cell runs.
COMPONENT_LAZY = ("bench.models", "bench.results", "bench.data.public_corpus")
# The library: (file, imported module) -> why the import waits.
LIBRARY_LAZY = {
    ("bench/models/offline_mlm.py", "bench.data.public_corpus"): "the CLI imports offline_mlm as it starts",
    ("bench/models/offline_mlm.py", "bench.models.masked_lm"): "the CLI imports offline_mlm as it starts",
    ("bench/models/offline_mlm.py", "bench.models.encoders"): "the CLI imports offline_mlm as it starts",
    ("bench/engine/ray_executor.py", "bench.core.registry"): "runs in a Ray worker process",
    ("bench/engine/ray_executor.py", "bench.engine.runner"): "runs in a Ray worker process",
    ("bench/engine/ray_executor.py", "bench.models.encoders"): "runs in a Ray worker process",
    # names the tests replace on their module (monkeypatch), read when the function runs
    ("bench/core/journal.py", "bench.core.cache"): "identity_key",
    ("bench/engine/spans.py", "bench.core.cache"): "identity_key",
    ("bench/engine/knowledge.py", "bench.data.public_corpus"): "public_corpus",
    ("bench/models/adaptation.py", "bench.data.public_corpus"): "public_corpus, held_out",
    ("bench/models/adaptation.py", "bench.models.mlm"): "load_mlm",
    ("bench/models/adaptation.py", "bench.models.masked_lm"): "masked_token_accuracy",
    ("bench/models/mlm.py", "bench.data.public_corpus"): "held_out",
    ("bench/models/mlm.py", "bench.models.encoders"): "locate",
    ("bench/models/further_pretraining.py", "bench.models.encoders"): "locate",
    ("bench/models/further_pretraining.py", "bench.models.mlm"): "load_mlm",
    ("bench/models/further_pretraining.py", "bench.models.offline_mlm"): "train",
    ("bench/models/servers.py", "bench.models.training"): "finetune, predict",
}


def _function_imports(path: Path) -> list[tuple[int, str]]:
    """(line, project module) of each ``from ... import`` inside a function of ``path``."""
    found = []
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and is_project(base := _absolute(path, node)):
                    found += [(node.lineno, f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base)
                              for a in node.names]
    return found


# The command line builds one app of every command (``bench --help``, ``bench list``); a command imports the layers it
# drives when it runs, so starting the CLI loads neither the engine nor pandas (bench.results.views).
COMMANDS_LAZY = "bench/cli/"


def test_project_modules_are_imported_at_the_top():
    bad = []
    for path in python_files(*GRAPH_DIRS):
        relative = str(path.relative_to(ROOT))
        if relative.startswith(COMMANDS_LAZY):
            continue
        for line, name in _function_imports(path):
            component = relative.split("/", 1)[0] in COMPONENT_FOLDERS
            if (component and not name.startswith(COMPONENT_LAZY)) or \
                    (not component and (relative, name) not in LIBRARY_LAZY):
                bad.append(_where(path, line, name))
    assert bad == []



def test_every_package_is_installed_under_bench():
    """pyproject.toml lists every package of the repository, the component folders inside ``bench``."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    packages = {module_name(p) for folder in ("bench", *INSTALLED_INSIDE) for p in (ROOT / folder).rglob("__init__.py")
                if "__pycache__" not in p.parts}
    assert sorted(config["packages"]) == sorted(packages)
    assert config["package-dir"] == {f"bench.{folder}": folder for folder in INSTALLED_INSIDE}


def test_no_file_imports_a_component_folder_as_a_top_level_package():
    """``defenses`` alone would be a second copy of ``bench.defenses`` (its components registered twice)."""
    bad = [_where(p, line, name) for p in python_files(*SOURCE_DIRS, "tests") for name, line in imports(p)
           if _top(name) in INSTALLED_INSIDE]
    assert bad == []


def test_the_component_folders_import_as_bench_packages():
    import importlib

    for folder in INSTALLED_INSIDE:
        module = importlib.import_module(f"bench.{folder}")
        assert Path(module.__file__).resolve() == ROOT / folder / "__init__.py"
