"""Registries of defenses, attacks and tasks, filled by importing the modules that define them.

A component registers itself with a decorator; the registry discovers the modules of its package
(``defenses/``, ``attacks/``, ``tasks/``, installed as ``bench.defenses`` and so on) on first lookup, and
``load_plugin`` imports an out-of-tree file the same way. Nothing here names a component.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import re
import sys
from pathlib import Path
from typing import Callable, Generic, TypeVar

from bench.core.errors import BenchError

T = TypeVar("T", bound=type)

# registry names: lower-case letters and digits, words joined by single hyphens or underscores; they name
# record files (results/records/<defense>.jsonl) and record keys, so nothing else is allowed
NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")


PLUGIN_PACKAGE = "bench_plugins"  # load_plugin imports a file as bench_plugins.<stem>


def _identity(cls: type) -> tuple[str, str]:
    """Module and qualified name: the same class imported again has both, another file's class does not."""
    return cls.__module__, cls.__qualname__


def _source(cls: type) -> str:
    """The file that defines a class (its module name when the file is unknown)."""
    module = sys.modules.get(cls.__module__)
    return str(getattr(module, "__file__", None) or cls.__module__)


class Registry(Generic[T]):
    """Name -> component class for one kind of component (defense, attack or task)."""

    def __init__(self, kind: str, folder: str) -> None:
        self.kind = kind
        self.folder = folder  # the repository's folder of these components
        self.package = f"bench.{folder}"  # where that folder is installed
        self._items: dict[str, T] = {}
        self._discovered = False

    def register(self, name: str | None = None) -> Callable[[T], T]:
        """Class decorator; ``name`` defaults to the stem of the defining module."""

        def decorate(cls: T) -> T:
            key = name or cls.__module__.rsplit(".", 1)[-1]
            if not NAME.match(key):
                raise BenchError(f"{self.kind} name '{key}' must be lower-case letters and digits joined by '-' or "
                                 "'_' (as in santext-plus); rename it.")
            existing = self._items.get(key)
            if existing is not None and _identity(existing) != _identity(cls):
                plugin = next((c for c in (cls, existing) if c.__module__.startswith(PLUGIN_PACKAGE + ".")), cls)
                other = existing if plugin is cls else cls
                raise BenchError(
                    f"{self.kind} name '{key}' is registered twice ({_source(other)} and {_source(plugin)}); "
                    f"rename the one in {_source(plugin)} (e.g. register_{self.kind}(\"{key}-2\"))."
                )
            cls.registry_name = key
            check = getattr(cls, "check_declarations", None)
            if check is not None:
                check()  # metrics, release kinds: refused now, never after a cell has run
            self._items[key] = cls
            return cls

        return decorate

    def discover(self) -> None:
        """Import every module of the registry's package once."""
        if self._discovered:
            return
        self._discovered = True
        package = importlib.import_module(self.package)
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_"):
                continue
            module_name = f"{self.package}.{info.name}"
            try:
                importlib.import_module(module_name)
            except BenchError:
                raise
            except SystemExit as exc:
                raise BenchError(f"the {self.kind} module {self.folder}/{info.name}.py called sys.exit({exc.code}) "
                                 "while it was imported; a component file must not exit.") from None
            except Exception as exc:
                raise BenchError(
                    f"the {self.kind} module {self.folder}/{info.name}.py failed to import "
                    f"({type(exc).__name__}: {exc}); fix or remove that file."
                ) from exc

    def names(self) -> list[str]:
        """Sorted names of every registered component."""
        self.discover()
        return sorted(self._items)

    def get(self, name: str) -> T:
        """The class registered as ``name``; unknown names fail with the closest matches."""
        self.discover()
        if name in self._items:
            return self._items[name]
        close = difflib.get_close_matches(name, list(self._items), n=3, cutoff=0.4)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise BenchError(
            f"unknown {self.kind} '{name}'; known: {', '.join(sorted(self._items))}.{hint}"
        )


DEFENSES: Registry = Registry("defense", "defenses")
ATTACKS: Registry = Registry("attack", "attacks")
TASKS: Registry = Registry("task", "tasks")

register_defense = DEFENSES.register
register_attack = ATTACKS.register
register_task = TASKS.register


# project modules a plugin written against an older layout may import, and where they are now
MOVED = {"bench.data.examples": "bench.core.examples", "bench.models.cache": "bench.core.cache",
         "bench.engine.protocols": "bench.engine.paths (its ModelRelease: bench.core.releases)",
         "bench.privacy.ndd": "bench.models.ndd",
         "bench.privacy.gradient_inversion": "bench.models.gradient_inversion",
         "bench.analysis.perf": "bench.performance.mechanisms", "bench.analysis.ndd_perf": "bench.performance.ndd",
         "bench.analysis.adaptation_perf": "bench.performance.adaptation",
         "bench.analysis.deniability": "bench.reproduction.deniability",
         "bench.analysis.reproduce": "bench.reproduction.reproduce", "bench.analysis": "bench.reproduction"}


def load_plugin(path: str | Path) -> str:
    """Import a component file so that the components it registers become available; returns its module's name.

    A file of the shipped folders (``defenses/my_noise.py``, as ``bench new`` writes it) was already imported by
    discovery, so its module is returned as it is rather than imported a second time under another name.
    """
    path = Path(path)
    if not path.is_file():
        raise BenchError(f"plugin file {path} does not exist; pass the path of a .py file.")
    for registry in (DEFENSES, ATTACKS, TASKS):  # built-ins first, so a clash names the plugin's file
        registry.discover()
    discovered = _module_of_file(path)
    if discovered is not None:
        return discovered
    # a dotted name keeps the module stem as the default registry name
    module_name = f"{PLUGIN_PACKAGE}.{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise BenchError(f"plugin {path} is not an importable Python file.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BenchError:
        sys.modules.pop(module_name, None)
        raise
    except SystemExit as exc:
        sys.modules.pop(module_name, None)
        raise BenchError(f"plugin {path} exited (sys.exit({exc.code})) while it was imported; "
                         "a plugin file must only define and register components.") from None
    except Exception as exc:
        sys.modules.pop(module_name, None)
        moved = MOVED.get(getattr(exc, "name", None) or "") if isinstance(exc, ModuleNotFoundError) else None
        if moved:
            raise BenchError(f"plugin {path} imports {exc.name}, which is now {moved}; change its import.") from None
        raise BenchError(
            f"plugin {path} failed to import ({type(exc).__name__}: {exc})."
        ) from exc
    return module_name


def plugin_fault(exc: BaseException) -> BenchError | None:
    """One sentence for an exception raised inside a plugin's code (its innermost frame in a file ``load_plugin``
    imported: a ``__post_init__``, a ``setup()``, a mechanism), naming the file and line; None when no plugin
    frame is on the traceback (a fault of the harness keeps its traceback)."""
    import traceback

    files = {getattr(module, "__file__", None) for name, module in list(sys.modules.items())
             if name.startswith(PLUGIN_PACKAGE + ".")} - {None}
    inside = [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename in files]
    if isinstance(exc, BenchError) or not inside:
        return None
    frame = inside[-1]
    message = " ".join(str(exc).split())[:300]
    return BenchError(f"plugin {frame.filename}:{frame.lineno} raised {type(exc).__name__} in {frame.name}()"
                      f"{f' ({message})' if message else ''}; fix the plugin and check it with "
                      f"bench check-plugin {frame.filename}.")


def _module_of_file(path: Path) -> str | None:
    """The name of the discovered component module defined by ``path`` (None for a file outside the shipped
    folders, which ``load_plugin`` imports as a plugin)."""
    wanted, packages = path.resolve(), tuple(f"{r.package}." for r in (DEFENSES, ATTACKS, TASKS))
    for name, module in list(sys.modules.items()):
        source = getattr(module, "__file__", None)
        if name.startswith(packages) and source and Path(source).resolve() == wanted:
            return name
    return None
