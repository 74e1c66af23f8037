"""``bench analyze``: analyses of the privacy mechanisms themselves (no task, no server)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from bench.cli.common import ResultsOption, err, out, user_errors, wide
from bench.core.files import output_file

analyze = typer.Typer(no_args_is_help=True, help="Analyses of the privacy mechanisms themselves (no task, no server).")


@analyze.command("deniability")
@user_errors
def deniability(
    encoder: str = typer.Option("minilm", help="Encoder whose WordPiece table is perturbed (minilm or a hub id)."),
    mechanism: str = typer.Option("dchi-text", help="Token mechanism: dchi-text or santext."),
    tokens: str = typer.Option("200", help="Regular vocabulary tokens to perturb: a seeded sample size, or 'all'."),
    trials: int = typer.Option(1000, help="Perturbations of each token at each eta (T)."),
    eta: Optional[List[float]] = typer.Option(
        None, "--eta", help="Privacy parameter: eta for dchi-text, eps for santext (repeatable; default: the "
        "mechanism's grid, 30 45 60 80 100 120 160 for dchi-text, 4 7 10 14 20 30 40 for santext)."),
    seed: int = typer.Option(0, help="Seed of the token sample and of the mechanism's noise."),
    max_unchanged: float = typer.Option(0.5, "--max-unchanged", help="Selection bound: N_w/T at most this "
                                        "(0.5: modified at least 500 times in 1,000, Qu et al. §5.3)."),
    min_support: int = typer.Option(1, "--min-support", help="Selection bound: S_w at least this (1: no bound, as "
                                    "Qu et al.)."),
    quantile: float = typer.Option(
        1.0, help="Worst case: this quantile of N_w/T and the (1 - quantile) quantile of S_w meet the bounds (1: "
        "every token, as Qu et al.)."),
    merge: bool = typer.Option(
        False, "--merge", help="Add these etas to the existing report of the same run (same encoder, mechanism, "
        "tokens, T, seed and bounds) instead of replacing it; the selections are redone over all its etas."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Plausible deniability: N_w (outputs equal to the token) and S_w (distinct outputs) per token and eta."""
    from bench.reproduction.deniability import (
        DEFAULT_PARAMETERS,
        Thresholds,
        deniability_table,
        load_mergeable,
        merge_reports,
        parse_token_count,
        planned_identity,
        report_path,
        run_deniability,
        selection_lines,
        validate,
        write_report,
    )
    from bench.results.store import ResultStore

    count = parse_token_count(tokens)
    bounds = Thresholds(max_unchanged=max_unchanged, min_support=min_support, quantile=quantile)
    etas = list(eta) if eta else list(DEFAULT_PARAMETERS.get(mechanism, ()))
    validate(etas, trials, mechanism, bounds)  # before the encoder loads
    path = output_file(report_path(ResultStore(results_dir).root, encoder, mechanism, count is None),
                       "deniability report")  # before the work, so it is never lost to an unwritable folder
    earlier = load_mergeable(path, planned_identity(encoder, mechanism, count, trials, seed, bounds)) if merge else None
    report = run_deniability(encoder, mechanism, count, trials, etas, seed, bounds,
                             log=lambda message: err.print(f"[dim]{message}[/dim]", highlight=False, soft_wrap=True))
    if earlier is not None:
        report = merge_reports(earlier, report)
        err.print(f"[dim]merged with the {len(report['earlier_runs'])} earlier run(s) in {path}: etas "
                  f"{', '.join(f'{e:g}' for e in report['etas'])}[/dim]", highlight=False)
    wide(160).print(deniability_table(report))
    for line in selection_lines(report):
        out.print(line, highlight=False, soft_wrap=True)
    write_report(report, path)
    out.print(f"{report['runtime_s']:.0f} s · wrote {path}", highlight=False)

