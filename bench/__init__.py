"""bench: a benchmark and attack-evaluation harness for privacy-preserving NLP."""

__version__ = "0.1.0"

from bench.core.components import Attack, Cell, Defense, DefenseOutput, PublicKnowledge, Task, Truth
from bench.data.examples import Examples, TaskData
from bench.core.errors import BenchError
from bench.engine.input_defense import InputDefense
from bench.core.params import added_later, require
from bench.core.registry import ATTACKS, DEFENSES, TASKS, load_plugin, register_attack, register_defense, register_task
from bench.core.releases import Release, ReleaseKind
from bench.engine.representation import RepresentationDefense
from bench.core.spec import RunSpec

__all__ = [
    "added_later",
    "ATTACKS",
    "Attack",
    "BenchError",
    "Cell",
    "DEFENSES",
    "Defense",
    "DefenseOutput",
    "Examples",
    "InputDefense",
    "PublicKnowledge",
    "Release",
    "ReleaseKind",
    "RepresentationDefense",
    "RunSpec",
    "TASKS",
    "Task",
    "TaskData",
    "Truth",
    "load_plugin",
    "register_attack",
    "register_defense",
    "register_task",
    "require",
]
