"""bench: a benchmark and attack-evaluation harness for privacy-preserving NLP.

The public API a component file needs: the base classes, the registry decorators, parameter helpers,
release kinds and metric declarations. The engine (``bench.engine``) runs cells; see DESIGN.md.
"""

__version__ = "0.2.0"

from bench.core.components import (
    KNOWLEDGE,
    Attack,
    Defense,
    OutputDefense,
    PublicKnowledge,
    RepresentationDefense,
    SpanDefense,
    Task,
    TokenDefense,
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
    "PublicKnowledge",
    "Release",
    "ReleaseKind",
    "RepresentationDefense",
    "RunSpec",
    "Span",
    "SpanDefense",
    "TASKS",
    "Task",
    "TaskData",
    "TokenDefense",
    "Truth",
    "load_plugin",
    "register_attack",
    "register_defense",
    "register_task",
    "require",
    "within",
]
