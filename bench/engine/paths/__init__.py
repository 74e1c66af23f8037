"""The release paths: one module per way a client releases, and the dispatch that picks one for a cell.

- ``tokens`` (``tokens.py``): text or token vectors privatized token by token, span rewrites included;
- ``representations`` (``representations.py``): hidden sentence representations, and client updates;
- ``pretraining`` (``pretraining.py``): the weights of an MLM pretrained on the client's (rewritten) text;
- ``api`` (``api.py``): query access to a victim trained on the client's data, behind an output defense.

Each path declares the defense families it drives, the release kinds it yields with their payload types, the task
interface whose hooks it calls and its output type (``base.ReleasePath``). A task lists the paths its server takes
in ``Task.protocols``, preferred first; ``choose_path`` picks the one of a cell. Records keep its name
(``notes["protocol"]``). The server (the task family's, ``bench.models.servers``) only ever receives releases; the
truth stays in the path's output and in the runner.
"""

from __future__ import annotations

from bench.core.errors import BenchError
from bench.core.releases import ReleaseKind
from bench.core.versions import released_kinds, rewrites_text
from bench.engine.paths.api import ApiPath
from bench.engine.paths.base import CellContext, CellOutput, ReleasePath
from bench.engine.paths.pretraining import PretrainingPath
from bench.engine.paths.representations import RepresentationsPath
from bench.engine.paths.tokens import TokensPath

PATHS: dict[str, ReleasePath] = {path.name: path for path in (TokensPath(), RepresentationsPath(),
                                                              PretrainingPath(), ApiPath())}

__all__ = ["PATHS", "CellContext", "CellOutput", "ReleasePath", "choose_path", "path_named", "released_kinds",
           "rewrites_text"]


def path_named(name: str) -> ReleasePath:
    """The path of ``name`` (as tasks declare it and records keep it)."""
    try:
        return PATHS[name]
    except KeyError:
        raise BenchError(f"no release path '{name}'; the paths: {', '.join(PATHS)}.") from None


def choose_path(defense_cls: type, server_paths: tuple[str, ...], wanted: ReleaseKind | None) -> ReleasePath:
    """The path of a cell: the one that yields the attacked release kind, else the server's first."""
    offered = [PATHS[name] for name in server_paths if PATHS[name].drives(defense_cls)]
    if not offered:
        raise BenchError(f"defense '{defense_cls.registry_name}' has no client part this task's server can train "
                         f"from (it takes {', '.join(server_paths)}).")
    if wanted is not None:
        for path in offered:
            if wanted in path.kinds:
                return path
        if wanted == ReleaseKind.PREDICTIONS or any(path.name == "api" for path in offered):
            raise BenchError(f"this task's server ({', '.join(server_paths)}) yields no {wanted} release: "
                             "prediction-API attacks need a task that serves one (trustpilot, blog, agnews), and "
                             "those tasks release predictions only.")
        yields = sorted({kind.value for path in offered for kind in path.kinds}
                        & {kind.value for kind in released_kinds(defense_cls)}) or ["nothing an attack takes"]
        raise BenchError(f"defense '{defense_cls.registry_name}' yields no {wanted.value} release on this task "
                         f"(its server takes {', '.join(server_paths)}, so the release is "
                         f"{' or '.join(yields)}); choose an attack on that release (bench list shows the pairs).")
    return offered[0]
