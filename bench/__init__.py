"""bench: a benchmark and attack-evaluation harness for privacy-preserving NLP.

The public API a component file needs: the base classes (a task's interface per release path among them), the
registry decorators, parameter helpers, release kinds and metric declarations. The engine (``bench.engine``) runs
cells; see DESIGN.md.
"""

__version__ = "0.2.0"

import importlib.util
import sys
from pathlib import Path

from bench.core.components import (
    KNOWLEDGE,
    ApiTask,
    Attack,
    Defense,
    OutputDefense,
    PretrainingTask,
    PublicKnowledge,
    RepresentationDefense,
    SpanDefense,
    SpanTask,
    Task,
    TokenDefense,
    TokenTask,
    Truth,
)
from bench.core.errors import BenchError
from bench.core.examples import Examples, TaskData
from bench.core.metrics import Metric
from bench.core.params import added_later, allows_infinity, require, within
from bench.core.registry import ATTACKS, DEFENSES, TASKS, load_plugin, register_attack, register_defense, register_task
from bench.core.releases import Release, ReleaseKind
from bench.core.spans import Edit, Span
from bench.core.spec import RunSpec

__all__ = [
    "added_later",
    "ApiTask",
    "allows_infinity",
    "ATTACKS",
    "Attack",
    "BenchError",
    "DEFENSES",
    "Edit",
    "Defense",
    "Examples",
    "KNOWLEDGE",
    "Metric",
    "OutputDefense",
    "PretrainingTask",
    "PublicKnowledge",
    "Release",
    "ReleaseKind",
    "RepresentationDefense",
    "RunSpec",
    "Span",
    "SpanDefense",
    "SpanTask",
    "TASKS",
    "Task",
    "TaskData",
    "TokenDefense",
    "TokenTask",
    "Truth",
    "load_plugin",
    "register_attack",
    "register_defense",
    "register_task",
    "require",
    "within",
]

# the repository's component folders, installed inside this package (pyproject.toml's package-dir)
COMPONENT_FOLDERS = ("defenses", "attacks", "tasks", "dashboard")


def _checkout_components() -> None:
    """In a checkout the component folders sit beside this package: import them as ``bench.<folder>`` from there,
    so a checkout on PYTHONPATH (a worktree, a Ray worker) runs its own components, installed or not."""
    here = Path(__file__).resolve().parent
    for folder in COMPONENT_FOLDERS:
        init, name = here.parent / folder / "__init__.py", f"{__name__}.{folder}"
        if name in sys.modules or (here / folder).is_dir() or not init.is_file():
            continue  # an installed copy holds the folder itself
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        globals()[folder] = module


_checkout_components()
