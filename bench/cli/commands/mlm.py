"""``bench mlm``: the offline encoder's masked LM, trained here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from bench.cli.common import ResultsOption, out, user_errors
from bench.core.registry import TASKS
from bench.models.offline_mlm import MLMRecipe

mlm_app = typer.Typer(no_args_is_help=True, help="The offline encoder's masked LM, trained here (load_mlm name "
                                                   "minilm-mlm).")

_RECIPE = MLMRecipe()  # the defaults load_mlm("minilm-mlm") uses


@mlm_app.command("prepare")
@user_errors
def mlm_prepare(
    budget_minutes: float = typer.Option(_RECIPE.budget_minutes, "--budget-minutes",
                                         help="Training-time cap (evaluations excluded)."),
    steps: int = typer.Option(_RECIPE.steps, help="Optimizer steps (0 = as many as the time budget allows); the "
                              "default fixes the model whatever else runs on the machine."),
    lr: float = typer.Option(_RECIPE.lr, help="AdamW peak learning rate."),
    batch_size: int = typer.Option(_RECIPE.batch_size, "--batch-size", help="Packed sequences per step."),
    freeze_embeddings: bool = typer.Option(False, "--freeze-embeddings", help="Keep the input embedding table "
                                           "(= the tied decoder weight) fixed."),
    task: str = typer.Option("", "--task", help="The task the MLM will serve: its text is left out of the corpus "
                             "when it is in it (span defenses and span-recovery load the MLM of their cell's task)."),
    curve: bool = typer.Option(False, "--curve", help="Also measure the held-out top-1 at 2, 5, 10 and 20 minutes "
                               "of the same run and write results/analysis/mlm-curve-<encoder>.json."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Train (or find cached) the offline MLM; print its directory and held-out top-1."""
    from bench.models.offline_mlm import CURVE_MINUTES, info, prepare, recipe_for, write_curve

    if task:
        TASKS.get(task)  # an unknown name is refused with the close ones, before any training
    recipe = replace(recipe_for(task), budget_minutes=budget_minutes, steps=steps, lr=lr, batch_size=batch_size,
                     train_embeddings=not freeze_embeddings)
    path = prepare(recipe, checkpoints=CURVE_MINUTES if curve else ())
    details = info(path)
    out.print(f"{path}: {details['head']} ({details['seconds']:.0f} s, {details['sequences_per_s']} sequences/s)",
              highlight=False, soft_wrap=True)
    if curve:
        from bench.results.store import ResultStore

        written = write_curve(details, ResultStore(results_dir).root / "analysis")
        out.print(f"wrote {written}", highlight=False)

