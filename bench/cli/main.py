"""The ``bench`` app: every command put together, and the console entry point."""

from __future__ import annotations

import typer

from bench.cli.commands import (
    analyze,
    audit,
    backfill,
    check_plugin,
    dashboard,
    listing,
    mlm,
    new,
    perf,
    report,
    reproduce,
    run,
    summarize,
)

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Privacy-utility benchmark for text-privacy defenses."
)
app.command()(run.run)
app.command("list")(listing.list_components)
app.command()(summarize.summarize)
app.command()(backfill.backfill)
app.command()(dashboard.dashboard)
app.command()(perf.perf)
app.command("check-plugin")(check_plugin.check_plugin)
app.command("new")(new.new_component)
app.command()(reproduce.reproduce)
app.command()(report.report)
app.command()(audit.audit)
app.add_typer(analyze.analyze, name="analyze")
app.add_typer(mlm.mlm_app, name="mlm")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
