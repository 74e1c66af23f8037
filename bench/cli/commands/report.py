"""``bench report``: the ranked privacy-utility tables (the worst case first), printed or written as the docs' pages."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Optional

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
    results_dir: Optional[Path] = ResultsOption,
) -> None:
    """Print the ranked privacy-utility tables from the records (Markdown): per task, each defense setting's worst
    case (its strongest attack), then every attack's; or write them as pages: bench report --results-dir results
    --pages docs/results regenerates the docs' results pages."""
    from bench.engine.applicable import applicable_attacks
    from bench.results.leaderboard import aggregate, seed_frame
    from bench.results.views import majority_by_config, splice
    from bench.results.views import report as render

    if out_path is not None and pages is not None:
        raise BenchError("--out and --pages write different things; give one of them.")
    if out_path is not None:
        output_file(out_path, "--out")
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
    text = render(board, source, majority_by_config((r.config_hash, r.notes) for r in records), applicable_attacks)
    if out_path is None:
        print(text, end="")
        return
    document = read_utf8(out_path) if out_path.is_file() else ""
    write_text_atomic(out_path, splice(document, text))
    out.print(f"wrote {len(records)} records' tables to {plain(out_path)}", highlight=False)


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
    scale = one_scale.page(board, source, command, headline_metrics(board), applicable_attacks)
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

