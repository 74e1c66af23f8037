"""What every command shares: the consoles, the shared options and the error rule.

Bad input exits 2 with one red sentence.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape

from bench.core.errors import BenchError
from bench.core.registry import load_plugin, plugin_fault

out = Console()
err = Console(stderr=True)


def folder_argument(value: str) -> Path | str:
    """A folder option's value as a path.

    An empty value stays "", since ``Path("")`` is the working folder. ``ResultStore`` refuses it in one sentence.
    """
    return value if not value.strip() else Path(value)


PluginOption = typer.Option(None, "--plugin", help="Extra component file to load (repeatable).")
# one rule for every command: --results-dir, else $BENCH_RESULTS_DIR, else ./bench-results
ResultsOption = typer.Option(None, "--results-dir", parser=folder_argument,
                             help="Results folder (default: $BENCH_RESULTS_DIR, else "
                             "./bench-results); the published board is results/, read or changed only with "
                             "--results-dir results.")


def plain(value: object) -> str:
    """Text from users or files, printed literally on one line.

    Rich markup is escaped: ``[/x]`` would raise and ``[bold]`` would vanish. Characters that are not printable
    (newline, ESC, a bidi override, a zero-width space) are shown as their escapes.
    """
    return escape("".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(value)))


def user_errors(command):
    """Turn a ``BenchError`` into one red sentence and exit code 2.

    An exception raised in a plugin's own code gets the same: its file and line, not a traceback.
    """

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except BenchError as exc:
            err.print(f"[red]error:[/red] {plain(exc)}", highlight=False, soft_wrap=True)
            raise typer.Exit(2)
        except Exception as exc:
            fault = plugin_fault(exc)
            if fault is None:
                raise
            err.print(f"[red]error:[/red] {plain(fault)}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


def load_plugins(plugins: Optional[List[Path]]) -> None:
    """Load each ``--plugin`` file."""
    for path in plugins or []:
        load_plugin(path)


def read_records(results_dir: Optional[Path]):
    """The store and the records a reading command reads, unreadable lines warned.

    The folder follows the one rule: ``--results-dir``, else ``$BENCH_RESULTS_DIR``, else ./bench-results. Records
    made at the smoke budget (``--check``) are left out. The reference tables and their mappings come from the
    folder when it has them, else from the published ``results/`` (``bench.reproduction.reproduce.definitions``).
    """
    from bench.results.store import ResultStore

    store = ResultStore(results_dir)
    store.check_exists()
    records, problems = store.read()
    for problem in problems:
        err.print(f"[yellow]warning:[/yellow] {plain(problem)}", highlight=False, soft_wrap=True)
    return store, [r for r in records if not r.at_smoke_budget]


def wide(width: int) -> Console:
    """The console for a wide table: stdout on a terminal, else a console this many columns wide."""
    return out if out.is_terminal else Console(width=width)
