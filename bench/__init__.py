"""bench: a benchmark and attack-evaluation harness for privacy-preserving NLP."""

__version__ = "0.1.0"

from bench.components import Attack, Cell, Defense, DefenseOutput, PublicKnowledge, Task, Truth
from bench.data import Examples, TaskData
from bench.errors import BenchError
from bench.input_defense import InputDefense
from bench.params import added_later, require
from bench.registry import ATTACKS, DEFENSES, TASKS, load_plugin, register_attack, register_defense, register_task
from bench.releases import Release, ReleaseKind
from bench.representation import RepresentationDefense
from bench.spec import RunSpec

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
