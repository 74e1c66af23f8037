"""``bench perf``: how fast each privacy mechanism runs, against what the machine allows."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from bench.cli.common import PluginOption, err, load_plugins, out, user_errors, wide
from bench.core.files import output_file, write_text_atomic
from bench.core.jsontext import strict_json


@user_errors
def perf(
    sentences: int = typer.Option(2000, help="SST-2 training sentences in the fixed batch."),
    repeats: int = typer.Option(3, help="Timed calls per mechanism; the median is reported."),
    defense: Optional[List[str]] = typer.Option(
        None, "--defense", help="Mechanism to time (repeatable; default: every registered mechanism)."),
    defense_args: str = typer.Option("", "--defense-args", help="Parameters of the one --defense, e.g. eta=60."),
    encoder: str = typer.Option("minilm", help="minilm (offline) or a Hugging Face hub id."),
    seed: int = typer.Option(0, help="Seed of the batch sample and of the mechanisms' randomness."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the figures to this JSON file."),
    adaptation: bool = typer.Option(False, "--adaptation", help="Time privacy-adaptive MLM pretraining instead: "
                                    "sequences/s and the mechanism's share of a step, per mechanism and objective."),
    objective: Optional[List[str]] = typer.Option(
        None, "--objective", help="With --adaptation: vanilla, prob or denoising (repeatable; default all three)."),
    steps: int = typer.Option(10, help="With --adaptation: timed pretraining steps."),
    warmup: int = typer.Option(1, help="With --adaptation: untimed steps first (SanText's row cache fills)."),
    batch_size: int = typer.Option(16, "--batch-size", help="With --adaptation: sequences per step."),
    ndd: bool = typer.Option(False, "--ndd", help="Time the NDD metric instead: candidates scored per second on "
                             "CoNLL-03, batched against the plain loop."),
    ndd_sentences: int = typer.Option(200, "--ndd-sentences", help="With --ndd: sentences scored batched."),
    ndd_loop_sentences: int = typer.Option(10, "--ndd-loop-sentences",
                                           help="With --ndd: the first sentences also scored by the plain loop."),
    candidates: int = typer.Option(8, "--candidates", help="With --ndd: same-type replacements per entity (k)."),
    ndd_mu: float = typer.Option(0.5, "--ndd-mu", help="With --ndd: the weights' decay mu (the ndd defense's "
                                 "default is 0.9)."),
    ndd_bf16: bool = typer.Option(False, "--ndd-bf16", help="With --ndd: also time the selection under bf16 "
                                  "autocast (a cell's --precision bf16) and count its float32-argmin agreement."),
    plugin: Optional[List[Path]] = PluginOption,
) -> None:
    """Time each mechanism (tokens/s) against the float32 matrix-product ceiling of exact search."""
    from bench.performance.mechanisms import perf_table, run_perf, write_json

    load_plugins(plugin)
    if json_path is not None:
        output_file(json_path, "--json")  # before the timing, which a bad path would otherwise lose
    if ndd:
        _perf_ndd(encoder, ndd_sentences, ndd_loop_sentences, candidates, ndd_mu, seed, json_path, ndd_bf16)
        return
    if adaptation:
        _perf_adaptation(defense, objective, defense_args, steps, warmup, batch_size, encoder, seed, json_path)
        return
    report = run_perf(sentences, repeats, defense, defense_args, encoder, seed,
                      progress=lambda message: err.print(f"[dim]{message}…[/dim]"))
    wide(160).print(perf_table(report))
    if json_path is not None:
        write_json(report, json_path)
        out.print(f"wrote {json_path}", highlight=False)


def _perf_ndd(encoder, sentences, loop_sentences, candidates, mu, seed, json_path, bf16=False) -> None:
    """``bench perf --ndd``: the NDD metric's rate, printed and written."""
    from bench.performance.ndd import ndd_table, run_ndd_perf

    row = run_ndd_perf(encoder, sentences, loop_sentences, candidates, mu=mu, seed=seed, selection_bf16=bf16,
                       progress=lambda message: err.print(f"[dim]{message}…[/dim]"))
    wide(160).print(ndd_table(row))
    if json_path is not None:
        write_text_atomic(json_path, strict_json(row, indent=2, default=str))
        out.print(f"wrote {json_path}", highlight=False)


def _perf_adaptation(defense, objective, defense_args, steps, warmup, batch_size, encoder, seed, json_path) -> None:
    """``bench perf --adaptation``: pretraining throughput per mechanism and objective, printed and written."""
    from bench.performance.adaptation import adaptation_table, run_adaptation_perf
    from bench.performance.mechanisms import machine_info

    rows = run_adaptation_perf(defense, objective, defense_args, steps, batch_size, encoder, seed, warmup,
                               progress=lambda message: err.print(f"[dim]{message}…[/dim]"))
    wide(160).print(adaptation_table(rows))
    if json_path is not None:
        write_text_atomic(json_path, strict_json({"machine": machine_info(), "encoder": encoder, "rows": rows},
                                                 indent=2, default=str))
        out.print(f"wrote {json_path}", highlight=False)

