"""The docs cannot drift from the board or from the commands.

1. The results pages (docs/results/, the reproduction pages and plausible deniability with them) are what
   `bench report --results-dir results --pages docs/results` prints from the committed records and reports.
2. Every table marked `<!-- printed by: COMMAND -->` is what COMMAND prints from the committed records.
3. Every command in a `bash` code block of the README and the docs either runs, or is checked in the form stated
   here, or is marked `# needs the hub`, `# needs a GPU` or `# needs a Ray cluster`:
   - every `bench` command is parsed by the command line's own parser (an unknown command, option or a bad value
     fails), and every single-cell `bench run` is resolved to its cell by `make_spec` (names, parameters, defense and
     attack pairing; nothing runs): a dry-run form, since a real cell takes minutes;
   - fast commands run for real: `bench list`, `bench new`, `bench check-plugin`, `bench report`, a grid of the
     repository as `bench run --grid G --dry-run`, and the first documented `--check` cell on the real encoder (where
     `$BENCH_DATA_DIR` has GLUE data);
   - `python scripts/X.py ...` must exist, and every option it is given must be one its `--help` lists;
   - `pip install` must install the pinned torch or this checkout with extras it declares; `pytest` must be the
     README's test command and `mkdocs build --strict` a step of `.ci/run`, which runs both.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import runpy
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import typer
from typer.testing import CliRunner

from bench.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
PAGES_COMMAND = "bench report --results-dir results --pages docs/results"
TEST_COMMAND = "BENCH_DATA_DIR=../shared/data HF_HUB_OFFLINE=1 pytest -n 2 --dist loadfile"
MARKS = ("needs the hub", "needs a GPU", "needs a Ray cluster")
PRINTED = re.compile(r"<!-- printed by: (.+?) -->\n(.*?)<!-- end printed -->", re.DOTALL)
runner = CliRunner()


def documents() -> list[Path]:
    """The README and every hand-written page of the docs (the generated results pages hold no commands)."""
    return [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md")
                                         if "results" not in p.relative_to(ROOT / "docs").parts)]


def test_the_results_pages_are_printed_from_the_committed_records(tmp_path):
    # printed by the command, in a fresh process: a component another test registered here would join the pages'
    # applicable attacks
    (tmp_path / "results").symlink_to(ROOT / "results")
    printed = subprocess.run([sys.executable, "-m", "bench.cli.main", *shlex.split(PAGES_COMMAND)[1:]], cwd=tmp_path,
                             capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr
    tmp_path = tmp_path / "docs" / "results"
    fresh = {p.relative_to(tmp_path).as_posix(): p.read_text(encoding="utf-8") for p in tmp_path.rglob("*.md")}
    committed = {p.relative_to(ROOT / "docs" / "results").as_posix(): p.read_text(encoding="utf-8")
                 for p in (ROOT / "docs" / "results").rglob("*.md")}
    stale = sorted(name for name in fresh.keys() | committed.keys() if fresh.get(name) != committed.get(name))
    assert not stale, f"docs/results is stale ({', '.join(stale)}): run `{PAGES_COMMAND}`"
    assert "sst2.md" in fresh and "reproduction/texthide_table2.md" in fresh and "deniability.md" in fresh
    assert "known-limits.md" in fresh and "(known-limits.md#attack-rss)" in fresh["sst2.md"]


def test_every_generated_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert [p for p in pages if p not in nav] == []


def _run_printing(command: str) -> str:
    """What ``command`` prints on stdout, run in this process from the checkout (a script, or bench)."""
    words = shlex.split(command)
    if words[:1] == ["bench"]:
        result = runner.invoke(app, words[1:], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        return result.stdout
    assert words[:1] == ["python"] and words[1].startswith("scripts/"), command
    out, argv = io.StringIO(), sys.argv
    try:
        sys.argv = words[1:]
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(ROOT / words[1]), run_name="__main__")
    finally:
        sys.argv = argv
    return out.getvalue()


def test_every_printed_table_is_what_its_command_prints(monkeypatch):
    monkeypatch.chdir(ROOT)
    blocks = [(path, *match.groups()) for path in documents()
              for match in PRINTED.finditer(path.read_text(encoding="utf-8"))]
    assert blocks, "docs/analyses.md prints its tables with <!-- printed by: ... --> blocks"
    for path, command, shown in blocks:
        assert "--results-dir results" in command, f"{path.name}: {command} must read the published records"
        assert _run_printing(command).strip() == shown.strip(), f"{path.name} is stale: rerun `{command}`"


# -- commands in code blocks ------------------------------------------------------------------------------------


def command_lines() -> list[tuple[str, str]]:
    """``(file, line)`` of every command in a ``bash`` block (continuation lines joined)."""
    found = []
    for path in documents():
        block, pending = False, ""
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                block = line.strip() in ("```bash", "```sh", "```shell") if not block else False
                continue
            if not block or not line.strip():
                continue
            pending += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
            if not line.endswith("\\"):
                found.append((path.relative_to(ROOT).as_posix(), pending.strip()))
                pending = ""
    return found


def simple_commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line: split at ``&&``, ``;`` and ``|``, comments, environment assignments,
    ``time`` and a ``.venv/bin/`` prefix removed."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="&;|")
    lexer.whitespace_split, lexer.commenters = True, "#"
    commands, current = [], []
    for token in lexer:
        if token in ("&&", ";", "|", "||", "&"):
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    cleaned = []
    for words in filter(None, commands):
        while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] == "time"):
            words = words[1:]
        if words:
            cleaned.append([words[0].removeprefix(".venv/bin/"), *words[1:]])
    return cleaned


def parse_bench(args: list[str]) -> tuple[str, dict]:
    """The command's name and its parsed parameters, by the command line's own parser (nothing runs)."""
    command = typer.main.get_command(app)
    ctx = command.make_context("bench", list(args))
    name = "bench"
    while hasattr(command, "resolve_command"):
        rest = list(getattr(ctx, "protected_args", None) or getattr(ctx, "_protected_args", [])) + list(ctx.args)
        name, command, rest = command.resolve_command(ctx, rest)
        ctx = command.make_context(name, rest, parent=ctx)
    return name, ctx.params


def check_bench(args: list[str], marked: bool, state: dict) -> None:
    name, params = parse_bench(args)
    if marked:
        return
    if name == "run" and params.get("grid") is None:
        from bench.engine.runner import make_spec

        make_spec(task=params["task"], defense=params["defense"], attack=params["attack"],
                  encoder=params["encoder"], defense_args=params["defense_args"], attack_args=params["attack_args"],
                  training_args=params["train_args"], mode=params["mode"], n_train=params["n_train"],
                  n_eval=params["n_eval"], pooling=params["pooling"], device="cpu", seed=params["seed"],
                  server_args=params["server_args"], precision=params["precision"] or "fp32")
        if params["check"] and not state.get("ran_check") and state["glue"]:
            state["ran_check"] = True
            result = runner.invoke(app, args)
            assert result.exit_code == 0, result.output
    elif name == "run" and Path(str(params["grid"])).is_file() and params["executor"] == "local":
        result = runner.invoke(app, [*args, "--dry-run"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "dry run, nothing runs" in result.output
    elif name in ("list", "new", "check-plugin", "report"):
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output


def check_script(words: list[str]) -> None:
    path = ROOT / words[1]
    assert path.is_file(), f"{words[1]} does not exist"
    shown = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120,
                           cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert shown.returncode == 0, shown.stderr
    for option in (w.split("=", 1)[0] for w in words[2:] if w.startswith("--")):
        assert option in shown.stdout, f"{words[1]} has no option {option}"


def check_pip(words: list[str]) -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
                 ["optional-dependencies"])
    targets = [w for w in words[2:] if not w.startswith("-") and not w.startswith("http")]
    assert words[1] == "install" and targets, words
    for target in targets:
        if target.startswith("torch"):
            assert target == "torch==2.13.0", f"the documented torch pin must be the project's: {target}"
            continue
        match = re.fullmatch(r"\.(?:\[([a-z,]+)\])?", target)
        assert match and "-e" in words, f"pip installs only the pinned torch or this checkout: {target}"
        assert set(filter(None, (match.group(1) or "").split(","))) <= extras, f"unknown extra in {target}"


SHELL = {"cd", "rm", "mkdir", ".", "source", "export", "ls", "git"}


def check_line(words: list[str], marked: bool, state: dict, ci: str) -> None:
    """Check one simple command (see the module docstring)."""
    if words[0] == "bench":
        check_bench(words[1:], marked, state)
    elif words[0] in ("python", "python3.11") and words[1:2] == ["-m"]:
        assert words[2] in ("venv", "pytest", "pip"), words
        if words[2] == "pip":
            check_pip(words[2:])
        elif words[2] == "pytest":
            assert words[3:] in ([], ["-n", "2", "--dist", "loadfile"]), words
    elif words[0] == "python":
        check_script(words)
    elif words[0] == "pip":
        check_pip(words)
    elif words[0] == "pytest":
        assert " ".join(words) == "pytest -n 2 --dist loadfile", words
    elif words[0] == "mkdocs":
        assert words == ["mkdocs", "build", "--strict"] and "mkdocs build --strict" in ci, words
    elif words[0] not in SHELL:
        assert marked, f"{words[0]} is neither run here nor marked as needing the hub, a GPU or a Ray cluster"


def test_every_documented_command_runs_or_is_marked(tmp_path, monkeypatch):
    from bench.core.registry import ATTACKS, DEFENSES, TASKS
    from tests.conftest import write_tiny_glue

    lines = command_lines()
    assert len(lines) > 30 and any("bench run --defense texthide --attack rss" in line for _, line in lines)
    data = Path(os.environ.get("BENCH_DATA_DIR") or Path.home() / ".cache/bench/data")
    state = {"glue": (data / "glue" / "SST-2").is_dir()}
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in (ROOT / "README.md").read_text(encoding="utf-8") and TEST_COMMAND in ci
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path / "mine"))
    if not state["glue"]:
        monkeypatch.setenv("BENCH_DATA_DIR", str(write_tiny_glue(tmp_path / "data")))
    for registry in (DEFENSES, ATTACKS, TASKS):
        registry.names()  # discovery first: the snapshot restored after each page holds every shipped component
    saved = {registry: dict(registry._items) for registry in (DEFENSES, ATTACKS, TASKS)}
    problems = []
    try:
        for number, where in enumerate(dict.fromkeys(where for where, _ in lines)):
            # each page's commands run in a scratch folder laid out as a checkout (a component `bench new` writes
            # lands there, never in the repository) and leave the registries as they found them
            scratch = tmp_path / f"checkout-{number}"
            scratch.mkdir()
            (scratch / "grids").symlink_to(ROOT / "grids")
            (scratch / "results").symlink_to(ROOT / "results")
            monkeypatch.chdir(scratch)
            for _, line in (item for item in lines if item[0] == where):
                marked = any(mark in line for mark in MARKS)
                for words in simple_commands(line):
                    try:
                        check_line(words, marked, state, ci)
                    except Exception as exc:  # noqa: BLE001 - every failing command is listed at once
                        problems.append(f"{where}: {' '.join(words)}: {exc.__class__.__name__}: {str(exc)[:300]}")
            for registry, items in saved.items():
                registry._items.clear()
                registry._items.update(items)
    finally:
        for registry, items in saved.items():
            registry._items.clear()
            registry._items.update(items)
    assert not problems, "\n".join(problems)
    assert state.get("ran_check") or not state["glue"], "no documented --check cell ran"
