"""``bench audit``: a local token mechanism's audited privacy loss against the loss it claims."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from bench.cli.common import PluginOption, err, load_plugins, out, user_errors, wide
from bench.core.files import output_file


@user_errors
def audit(
    defense: str = typer.Option(..., "--defense", help="Token defense to audit: dchi-token, dchi-text, santext or "
                                "santext-plus."),
    defense_args: str = typer.Option("", "--defense-args", help="Its parameters, e.g. eta=5 or eps=3,p=0.3,w=0.9."),
    encoder: str = typer.Option("minilm", help="minilm (offline) or a Hugging Face hub id: its embedding table is "
                                "the mechanism's space."),
    anchors: int = typer.Option(3, help="Random anchor tokens; each is paired with its --ranks nearest tokens."),
    ranks: str = typer.Option("1,10,100,1000", help="Which nearest tokens pair with each anchor (1 = the nearest)."),
    trials: int = typer.Option(10000, help="Releases of each token of a pair (half choose events, half bound them)."),
    alpha: float = typer.Option(0.05, help="Error probability shared by all pairs' bounds (Bonferroni)."),
    seed: int = typer.Option(0, help="Seed of the pairs and of the mechanism's randomness."),
    leak: float = typer.Option(0.0, help="Plant a bug: release each token as it is with this probability."),
    fit_sentences: int = typer.Option(2000, "--fit-sentences", help="Public sentences whose counts fit SanText+'s "
                                      "sensitive set."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the audit to this JSON file; "
                                             "results/audits/NAME.json publishes it (bench report --audit NAME)."),
    as_markdown: bool = typer.Option(False, "--markdown", help="Print the table as Markdown (for the docs)."),
    plugin: Optional[List[Path]] = PluginOption,
) -> None:
    """Audit a token mechanism: per pair of tokens, the privacy loss its releases show (a lower bound with
    Clopper-Pearson confidence) against the loss it claims; exit code 1 if any pair exceeds its claim."""
    from bench.reproduction.audit import audit_table, markdown, parse_ranks, run_audit, write_json

    load_plugins(plugin)
    parsed = parse_ranks(ranks)
    if json_path is not None:
        output_file(json_path, "--json")  # before the audit, which a bad path would otherwise lose
        from bench.engine.provenance import check_publishable
        from bench.results.store import ResultStore

        check_publishable(ResultStore(json_path.resolve().parent.parent))  # results/audits/: the published board
    report = run_audit(defense, defense_args, encoder, anchors, parsed, trials, alpha, seed, leak, fit_sentences,
                       progress=lambda message: err.print(f"[dim]{message}…[/dim]"))
    if as_markdown:
        print(markdown(report), end="")
    else:
        wide(160).print(audit_table(report))
    if json_path is not None:
        write_json(report, json_path)
        out.print(f"wrote {json_path}", highlight=False)
    if report["exceeded"]:
        err.print(f"[red]audit failed:[/red] {report['exceeded']} of {len(report['pairs'])} pairs show more privacy "
                  "loss than the mechanism claims.", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
