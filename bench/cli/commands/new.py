"""``bench new``: a one-file template of a new component."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bench.cli.common import out, plain, user_errors


@user_errors
def new_component(
    kind: str = typer.Argument(..., help="defense, attack or task."),
    name: str = typer.Argument(..., help="Registry name, e.g. my-defense (the file is my_defense.py)."),
    folder: Optional[Path] = typer.Option(None, "--dir", help="Folder to write into (default: defenses/, attacks/ "
                                          "or tasks/ under the current directory)."),
) -> None:
    """Write a one-file template of a new component that passes `bench check-plugin`."""
    from bench.engine.templates import write_template

    path = write_template(kind, name, folder)
    out.print(f"wrote {plain(path)}; check it with: bench check-plugin {plain(path)}", highlight=False, soft_wrap=True)

