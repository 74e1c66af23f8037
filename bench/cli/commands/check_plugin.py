"""``bench check-plugin``: a component file checked against the component contract."""

from __future__ import annotations

from pathlib import Path

import typer

from bench.cli.common import out, plain, user_errors
from bench.core.errors import BenchError


@user_errors
def check_plugin(file: Path = typer.Argument(..., help="Component file to check (as passed to --plugin).")) -> None:
    """Check every component a file registers against the component contract (bench.engine.contracts)."""
    from bench.engine.contracts import check_file

    warnings: dict[str, list[str]] = {}
    results = check_file(file, warnings)
    if not results:
        raise BenchError(f"{file} registers no defense, attack or task; decorate a class with register_defense, "
                         "register_attack or register_task.")
    for component, problems in results.items():
        status = "[green]passes[/green]" if not problems else f"[red]{len(problems)} problem(s)[/red]"
        out.print(f"[bold]{plain(component)}[/bold]: {status}")
        for problem in problems:
            out.print(f"  [red]✗[/red] {plain(problem)}", highlight=False, soft_wrap=True)
        for warning in warnings.get(component, []):
            out.print(f"  [yellow]warning:[/yellow] {plain(warning)}", highlight=False, soft_wrap=True)
    failing = {c: p for c, p in results.items() if p}
    if failing:
        details = "; ".join(f"{c}: {', '.join(p)}" for c, p in failing.items())
        raise BenchError(f"{len(failing)} of {len(results)} components in {file} fail the contract ({details}).")

