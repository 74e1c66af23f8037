"""``bench reproduce``: a paper's table beside our records, with a verdict on each of its claims."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from bench.cli.common import ResultsOption, err, out, read_records, user_errors
from bench.core.errors import BenchError
from bench.core.files import output_file


@user_errors
def reproduce(
    table: Optional[str] = typer.Argument(None, help="Reference table (a results/reference/*.json stem); omit to "
                                          "list the tables and how many of their cells we have records for."),
    run_missing: bool = typer.Option(False, "--run", help="First run the table's cells without records, at the "
                                     "offline defaults of its mapping (slow); without it nothing runs."),
    recorded: bool = typer.Option(False, "--recorded", help="Print only the rows we have records for."),
    as_markdown: bool = typer.Option(False, "--markdown", help="Print the rows we have records for and the claims "
                                     "as Markdown tables (for the README and docs)."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """A paper's table beside our records (mean ± std over seeds, n), with a verdict on each of its claims;
    writes results/reproduction/<table>.json for the dashboard."""
    from bench.reproduction import reproduce as rep

    if table is not None:
        rep.report_path(Path("."), table)  # a name that could write outside reproduction/ is refused first
    store, records = read_records(results_dir)
    console = out if out.is_terminal else Console(width=int(os.environ.get("COLUMNS") or 200))
    if table is None:
        if run_missing:
            raise BenchError("--run needs a TABLE: name the table whose missing cells should run.")
        console.print(_coverage_table(rep.coverage(store.root, records)))
        return
    output_file(rep.report_path(store.root, table), "reproduction report")  # before any work
    if run_missing:
        from bench.engine.provenance import check_publishable

        store.check_writable()
        check_publishable(store)
        _run_missing(rep, store, table, records)
        records = [r for r in store.read()[0] if not r.at_smoke_budget]
    report = rep.reproduce(store.root, table, records)
    path = rep.write_report(store.root, report)
    if as_markdown:
        print(rep.markdown(report), end="")
        return
    _print_reproduction(console, report, recorded)
    out.print(f"wrote {path}", highlight=False)



def _run_missing(rep, store, table: str, records) -> None:
    """Run the table's cells that have no records, at the offline defaults of its mapping."""
    from bench.engine.grid import run_grid
    from bench.engine.runner import make_spec

    cells = rep.missing_cells(store.root, table, records)
    specs = []
    for kwargs in cells:
        try:
            specs.append(make_spec(**kwargs))
        except BenchError as exc:
            err.print(f"[yellow]skipped[/yellow] {kwargs}: {exc}", highlight=False, soft_wrap=True)
    err.print(f"{table}: {len(specs)} missing cells to run")
    ran, skipped = run_grid(specs, store, lambda spec, status: err.print(f"  {status:8} {spec.label()}",
                                                                          highlight=False))
    err.print(f"ran {ran} cells, skipped {skipped} already recorded")


def _coverage_table(rows) -> Table:
    """Each reference table: mapped or not, the rows and cells with records, and its claims by verdict."""
    from bench.reproduction.reproduce import VERDICTS

    table = Table(title="reference tables and our records", title_justify="left")
    for column in ("table", "status", "rows with records", "cells used", "claims: " + " / ".join(VERDICTS)):
        table.add_column(column)
    for row in rows:
        if row["status"] != "mapped":
            table.add_row(row["table"], row["status"], "", "", row.get("reason", ""))
            continue
        claims = row["claims"]
        table.add_row(row["table"], "mapped", f"{row['rows_with_records']} / {row['rows']}", str(row["cells"]),
                      " / ".join(str(claims.get(verdict, 0)) for verdict in VERDICTS))
    return table


def _fmt(value, std=None, n=None) -> str:
    """``0.812 ± 0.004 (n=3)``, or ``-`` for no value."""
    if value is None:
        return "-"
    text = f"{value:.3f}" + (f" ± {std:.3f}" if std is not None else "")
    return text + (f" (n={n})" if n is not None else "")


def _print_reproduction(console: Console, report: dict, recorded: bool) -> None:
    """A reproduction report: the settings, the rows beside the paper's, the claims and a summary line."""
    from bench.reproduction import reproduce as rep

    verdict_style = {"holds": "green", "fails": "red", "unresolved": "magenta", "not applicable": "cyan",
                     "no records": "yellow"}
    console.print(f"[bold]{report['title']}[/bold]  ({report['paper_table']}, {report['reference']})", highlight=False)
    for side, setting in (("paper", report["paper_setting"]), ("ours", report["our_setting"])):
        if setting:
            console.print(f"  {side}: " + " · ".join(f"{k} {v}" for k, v in setting.items()), highlight=False)
    for deviation in report["deviations"]:
        console.print(f"  [dim]deviation: {deviation}[/dim]", highlight=False)
    def where(ours) -> str:
        setting = ours["setting"]
        if not setting:
            return ""
        return (f"{setting['encoder']} · n_train {setting['n_train']} · {setting['mode']} · {setting['epochs']} epochs "
                f"· seeds {','.join(map(str, ours['seeds']))}")

    settings = Counter(where(row["ours"]) for row in report["rows"] if row["ours"]["mean"] is not None)
    common = settings.most_common(1)[0][0] if settings else ""
    if common:
        console.print(f"  our records (unless a row says otherwise): {common}", highlight=False)
    table = Table(title_justify="left")
    for column in ("row", "metric", "paper", "ours (mean ± std, n)", "ours - paper", "note"):
        table.add_column(column, no_wrap=column != "note")
    for row in report["rows"]:
        ours = row["ours"]
        if recorded and ours["mean"] is None:
            continue
        setting = where(ours)
        table.add_row(row["id"], row["metric"].rsplit("/", 1)[-1], _fmt(row["paper"]["value"], row["paper"]["std"]),
                      _fmt(ours["mean"], ours["std"], ours["n"]) if ours["mean"] is not None else "no records",
                      "" if row["difference"] is None else f"{row['difference']:+.3f}",
                      "; ".join(filter(None, [setting if setting != common else "", ours["note"]])))
    console.print(table)
    claims = Table(title="claims (checked on our records; 'paper' = the same checks on the paper's numbers)",
                   title_justify="left")
    for column in ("claim", "ours", "paper", "checks"):
        claims.add_column(column, no_wrap=column in ("ours", "paper"))
    for claim in report["claims"]:
        checked, idle = rep.check_counts(claim)
        failing = [c["detail"] for c in claim["checks"] if c["verdict"] == "fails"][:3]
        open_ = [c["detail"] for c in claim["checks"] if c["verdict"] == rep.UNRESOLVED][:2]
        detail = (f"{checked}/{len(claim['checks'])} checked" + (f", {idle} at chance (not applicable)" if idle else "")
                  + ("; failing: " + "; ".join(failing) if failing else "")
                  + (f"; {len(open_)} unresolved by the seeds: " + "; ".join(open_) if open_ else ""))
        claims.add_row(f"{claim['id']}\n[dim]{claim['text']}[/dim]",
                       f"[{verdict_style[claim['verdict']]}]{claim['verdict']}[/]",
                       claim["paper_verdict"] if claim["paper_verdict"] != "no records" else "n/a", detail)
    console.print(claims)
    summary = report["summary"]
    console.print(f"{summary['rows_with_records']} of {summary['rows']} rows have records; claims: "
                  + ", ".join(f"{n} {v}" for v, n in summary["claims"].items()), highlight=False)

