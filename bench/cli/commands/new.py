"""``bench new``: a one-file template of a new component."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bench.cli.common import out, plain, user_errors
from bench.core.errors import BenchError


@user_errors
def new_component(
    kind: str = typer.Argument(..., help="defense, attack or task."),
    name: str = typer.Argument(..., help="Registry name, e.g. my-defense (the file is my_defense.py)."),
    family: Optional[str] = typer.Option(None, "--family", help="A defense's family (representation, token, span, "
                                         "output) or a task's (classification, tagging, attribute); default the "
                                         "first."),
    release: Optional[str] = typer.Option(None, "--release", help="The release kind a new attack reads "
                                          "(sentence_embeddings, text, token_embeddings, rewritten_text, "
                                          "predictions, gradients); default the first."),
    folder: Optional[Path] = typer.Option(None, "--dir", help="Folder to write into (default: defenses/, attacks/ "
                                          "or tasks/ under the current directory)."),
) -> None:
    """Write a one-file template of a new component that passes `bench check-plugin` (and, for a defense, its
    reference test)."""
    from bench.engine.templates import write_template

    if release is not None and kind in ("defense", "task"):
        raise BenchError(f"--release chooses a new attack's release kind; a {kind} takes --family.")
    if family is not None and kind == "attack":
        raise BenchError("a new attack is chosen by the release kind it reads: use --release, not --family.")
    written = write_template(kind, name, folder, release if kind == "attack" else family)
    out.print(f"wrote {plain(written.component)} ({written.choice}); check it with: bench check-plugin "
              f"{plain(written.component)}", highlight=False, soft_wrap=True)
    if written.reference is not None:
        out.print(f"wrote {plain(written.reference)}: its reference test; run it with: pytest "
                  f"{plain(written.reference)}", highlight=False, soft_wrap=True)
