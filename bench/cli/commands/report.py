"""``bench report``: the ranked privacy-utility tables (the worst case first), printed or written as the docs' pages."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import List, Optional

import typer

from bench.cli.common import ResultsOption, out, plain, read_records, user_errors
from bench.core.errors import BenchError
from bench.core.files import output_file, read_utf8, write_text_atomic
from bench.core.spec import RunSpec


@user_errors
def report(
    out_path: Optional[Path] = typer.Option(None, "--out", help="Markdown file to update: the text between its "
                                            "'bench report' markers is replaced, the rest kept (default: print)."),
    pages: Optional[Path] = typer.Option(None, "--pages", help="Folder to write the board into as pages: index.md, "
                                         "one <task>.md per task, and reproduction/ with the papers' tables (from "
                                         "<results>/reproduction/*.json); pages it wrote before and no longer "
                                         "writes are removed."),
    task: Optional[str] = typer.Option(None, "--task", help="Print this task's tables only."),
    attack: Optional[str] = typer.Option(None, "--attack", help="Print this attack's table only ('worst case' for "
                                         "each setting's strongest attack, 'none' for the cells without an attack)."),
    defense: Optional[str] = typer.Option(None, "--defense", help="Print this defense's rows only (ranked among "
                                          "all of the table's)."),
    metric: Optional[List[str]] = typer.Option(None, "--metric", help="With --attack: another of its metrics as a "
                                               "column, e.g. auc (repeatable)."),
    note: Optional[List[str]] = typer.Option(None, "--note", help="A record note as a column, e.g. dp_epsilon_spent, "
                                             "runtime_s (the run's wall seconds) or machine (the CPU or GPU that "
                                             "ran it); repeatable."),
    audit: Optional[str] = typer.Option(None, "--audit", help="Print the published audit <results>/audits/NAME.json "
                                        "(written by bench audit --json) as Markdown."),
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Print the ranked privacy-utility tables from the records (Markdown): per task, each defense setting's worst
    case (its strongest attack), then every attack's; or write them as pages: bench report --results-dir results
    --pages docs/results regenerates the docs' results pages. --task, --attack, --defense, --metric and --note print
    one table with the rows and columns asked for; --audit one published audit of a token mechanism."""
    from bench.engine.applicable import applicable_attacks
    from bench.results.leaderboard import aggregate, seed_frame
    from bench.results.views import WORST, majority_by_config, record_notes, splice
    from bench.results.views import report as render

    if out_path is not None and pages is not None:
        raise BenchError("--out and --pages write different things; give one of them.")
    if pages is not None and (task or attack or defense or metric or note):
        raise BenchError("--pages writes the whole board; --task, --attack, --defense, --metric and --note print "
                         "one table.")
    if metric and not attack:
        raise BenchError("--metric names one of an attack's metrics: give --attack too.")
    if out_path is not None:
        output_file(out_path, "--out")
    if audit is not None:
        if out_path or pages or task or attack or defense or metric or note:
            raise BenchError("--audit prints one audit; give it alone (with --results-dir).")
        from bench.results.store import ResultStore

        print_audit(ResultStore(results_dir).root, audit)
        return
    store, records = read_records(results_dir)
    if not records:
        raise BenchError(f"no records in {store.records_dir}: run `bench run ...` first.")
    source = store.root.as_posix() if store.root.is_absolute() else f"{store.root.as_posix()}/"
    if pages is not None:
        command = " ".join(["bench report", *([f"--results-dir {results_dir.as_posix()}"] if results_dir else []),
                            f"--pages {pages.as_posix()}"])
        written = write_pages(records, store.root, source, command, pages)
        out.print(f"wrote {written} pages of {len(records)} records to {plain(pages)}", highlight=False)
        return
    board = aggregate(seed_frame(records), with_order=True)
    attack = "" if attack == "none" else attack  # the board's name for the cells without an attack
    metrics = chosen_metrics(board, task, attack, metric or [])
    if defense is not None and defense not in set(board["defense"]):
        raise BenchError(f"no record of defense {defense!r} is on the board; its defenses: "
                         f"{', '.join(sorted(set(board['defense'])))}.")
    shown = [r for r in records if (task is None or r.spec["task"] == task)
             and (attack in (None, WORST) or (r.spec.get("attack") or "") == attack)
             and (defense is None or r.spec["defense"] == defense)]
    notes = record_notes(shown, note) if note else None
    if note and (missing := [n for n in note if not any(values.get(n) for values in notes.values())]):
        raise BenchError(f"no record of this table has the note {missing[0]!r}; a record's notes are listed by "
                         "bench run --json.")
    text = render(board, source, majority_by_config((r.config_hash, r.notes) for r in records), applicable_attacks,
                  [task] if task else None, None if attack is None else [attack], metrics, notes,
                  [defense] if defense else None)
    if out_path is None:
        print(text, end="")
        return
    document = read_utf8(out_path) if out_path.is_file() else ""
    write_text_atomic(out_path, splice(document, text))
    out.print(f"wrote {len(records)} records' tables to {plain(out_path)}", highlight=False)


def print_audit(root: Path, name: str) -> None:
    """Print ``<root>/audits/<name>.json`` as its caption and Markdown table; an unknown name is refused with the
    audits there are."""
    from bench.reproduction.audit import caption, markdown
    from bench.results.store import AUDITS

    path = root / AUDITS / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in (root / AUDITS).glob("*.json"))
        raise BenchError(f"no audit {name!r} in {plain(root / AUDITS)}; "
                         + (f"its audits: {', '.join(known)}." if known else "bench audit --json writes one there."))
    try:
        report = json.loads(read_utf8(path))
        print(f"{caption(report)}\n\n{markdown(report)}", end="")
    except (ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"{plain(path)} is not an audit written by bench audit --json ({type(exc).__name__}: "
                         f"{exc}).") from None


def chosen_metrics(board, task: str | None, attack: str | None, names: list[str]) -> list[str]:
    """The full keys of the metrics ``--metric`` names (``auc`` -> ``privacy/membership/auc``), after checking
    that the board has ``task`` and ``attack``; unknown names are refused with the ones there are."""
    from bench.results.views import WORST

    if task is not None and task not in set(board["task"]):
        raise BenchError(f"no record of task {task!r} is on the board; its tasks: "
                         f"{', '.join(sorted(set(board['task'])))}.")
    rows = board if task is None else board[board["task"] == task]
    if attack is not None and attack != WORST and attack not in set(rows["attack"]):
        known = ", ".join(sorted(a or "none" for a in set(rows["attack"])))
        raise BenchError(f"no record of attack {attack or 'none'!r} is on the board{f' for {task}' if task else ''}; "
                         f"its attacks: {known}, or 'worst case'.")
    rows = rows[rows["attack"] == attack]
    keys = list(dict.fromkeys(rows.sort_values("order")["metric"]))
    chosen = []
    for name in names:
        found = [k for k in keys if k == name or k.rsplit("/", 1)[-1] == name and not k.startswith("random/")]
        if not found:
            shown = ", ".join(dict.fromkeys(k.rsplit("/", 1)[-1] for k in keys if not k.startswith("random/")))
            raise BenchError(f"{attack or 'no attack'} records no metric {name!r}; its metrics: {shown or 'none'}.")
        chosen += found
    return list(dict.fromkeys(chosen))


def write_pages(records, root: Path, source: str, command: str, folder: Path) -> int:
    """Write the board of ``records`` as pages into ``folder``, and return how many were written.

    The known-limits page goes with them, and the reproduction reports' pages into ``folder/reproduction``. Pages an
    earlier run wrote there and this one does not are removed.
    """
    import yaml

    from bench.core.versions import component_versions
    from bench.engine.applicable import applicable_attacks
    from bench.reproduction.deniability import deniability_markdown
    from bench.reproduction.reproduce import definitions, reproduction_pages
    from bench.results import limits, one_scale
    from bench.results.leaderboard import aggregate, seed_frame
    from bench.results.record import superseded
    from bench.results.views import GENERATED, headline_metrics, majority_by_config, report_pages

    board = aggregate(seed_frame(records), with_order=True)
    majority = majority_by_config((r.config_hash, r.notes) for r in records)
    known = limits.components()
    awaiting = Counter()
    stale = [bool(superseded(r)) for r in records]
    kept = {(r.config_hash, r.seed) for r, old in zip(records, stale) if not old}
    for record, old in zip(records, stale):
        if old and not record.at_smoke_budget and (record.config_hash, record.seed) not in kept:
            was, now = record.component_versions().split(" "), component_versions(RunSpec.from_dict(record.spec))
            moved = [(a, b) for a, b in zip(was, now.split(" ")) if a != b]
            awaiting[(record.spec["task"], record.spec["defense"], record.spec.get("attack") or "",
                      ", ".join(f"{a} → {b.rpartition('@')[2]}" for a, b in moved))] += 1

    reports = [json.loads(read_utf8(path)) for path in sorted((root / "reproduction").glob("*.json"))]
    unmapped = {}
    for path in sorted((definitions(root) / "reproduction").glob("*.yaml")):
        mapping = yaml.safe_load(read_utf8(path)) or {}
        if isinstance(mapping, dict) and mapping.get("not_mapped"):
            unmapped[path.stem] = str(mapping["not_mapped"])
    reproduced = reproduction_pages(reports, source, command, unmapped) if reports else {}
    generated = report_pages(board, source, command, majority, known, applicable_attacks)
    generated[limits.PAGE] = limits.page(command, known, awaiting)
    scale = one_scale.page(board, source, command, headline_metrics(board), applicable_attacks,
                           one_scale.read_audits(root))
    if scale is not None:
        generated[one_scale.PAGE] = scale
        generated["index.md"] += (f"\nEvery defense family side by side, utility against membership inference, the "
                                  f"worst case and formal ε: [One scale]({one_scale.PAGE}).\n")
    analyses = sorted((root / "analysis").glob("deniability-*.json"))
    if analyses:
        generated["deniability.md"] = "\n".join([
            GENERATED, "# Plausible deniability", "",
            f"Printed by `{command}` from the reports of `bench analyze deniability` in `{source}analysis/`. Per "
            "token, N_w counts the releases equal to the token (small is deniable) and S_w the distinct releases "
            "(large is deniable), after Qu et al. (CIKM 2021, §5.3) and Feyisetan et al. (WSDM 2020).", "",
            *(deniability_markdown(json.loads(read_utf8(path)), f"{source}analysis/{path.name}")
              for path in analyses)]).rstrip() + "\n"
    written = 0
    for where, generated in ((folder, generated), (folder / "reproduction", reproduced)):
        if where.exists() and not where.is_dir():
            raise BenchError(f"--pages {where} is a file; name a folder.")
        where.mkdir(parents=True, exist_ok=True)
        for stale in sorted(where.glob("*.md")):
            if stale.name not in generated and read_utf8(stale).startswith(GENERATED):
                stale.unlink()
        for name, text in generated.items():
            write_text_atomic(where / name, text)
            written += 1
    return written

