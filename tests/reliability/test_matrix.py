"""The reliability matrix of issue 18: bad input as a hostile but honest user types it ends in one sentence and exit
code 2 (or, where the promise is "report and go on", exit 0 with the report), and nothing is saved.

``CASES`` runs each command line in-process on tiny data with the mock encoder. ``ELSEWHERE`` lists the cases
of the matrix that an existing test already runs (kept there, not run twice); ``test_cases_elsewhere_exist``
keeps those references alive.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import files_under
from tests.reliability.conftest import invoke, one_sentence

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    """One command line (``{tmp}`` is the test's folder of files), its exit code and a phrase of its sentence."""

    name: str
    argv: tuple[str, ...]
    code: int
    phrase: str


def case(name: str, argv: str | list[str], code: int, phrase: str) -> Case:
    return Case(name, tuple(argv.split() if isinstance(argv, str) else argv), code, phrase)


RUN = "run --encoder mock --check"
PLUGIN_ATTACK = '''from dataclasses import dataclass
from bench import Attack, Metric, register_attack


@register_attack("no-kinds")
@dataclass
class NoKinds(Attack):
    """Accepts nothing."""

    metrics = (Metric("x", True, "x"),)
'''
GRID_HEAD = "tasks: [sst2]\nencoders: [mock]\n"
FILES = {
    "syntax.py": "def broken(:\n",
    "nothing.py": "X = 1\n",
    "no_kinds.py": PLUGIN_ATTACK,
    "notyaml.yaml": "tasks: [sst2\ndefenses: {\n",
    "list.yaml": "- none\n- texthide\n",
    "unknown_key.yaml": GRID_HEAD + "defenses: [none]\nattack: [rss]\n",
    "no_defenses.yaml": GRID_HEAD + "seeds: [0]\n",
    "precision.yaml": GRID_HEAD + "defenses: [none]\nsettings: {precision: float8}\n",
    "bad_seed.yaml": GRID_HEAD + "defenses: [none]\nseeds: [zero]\n",
    "unknown_defense.yaml": GRID_HEAD + "defenses: [texthid]\n",
    "bad_setting.yaml": GRID_HEAD + "defenses: [none]\nsettings: {n_trian: 40}\n",
    "bad_entry.yaml": GRID_HEAD + "defenses: [{name: texthide, argz: {m: 4}}]\n",
    "fractional_size.yaml": GRID_HEAD + "defenses: [none]\nsettings: {n_train: 32.5, n_eval: 16}\n",
    "infinite_size.yaml": GRID_HEAD + "defenses: [none]\nsettings: {n_train: .inf}\n",
    "numeric_device.yaml": GRID_HEAD + "defenses: [none]\nsettings: {device: 5}\n",
    "seed_setting.yaml": GRID_HEAD + "defenses: [none]\nsettings: {seed: 5}\n",
    "ok.yaml": GRID_HEAD + "defenses: [none]\nsettings: {n_train: 40, n_eval: 20, training_args: {epochs: 1}}\n",
}
LONG = "é" * 5000

CASES = [
    # unknown names, with the closest known ones
    case("unknown task", f"{RUN} --task sst3", 2, "Did you mean 'sst2'"),
    case("unknown defense", f"{RUN} --defense texthid", 2, "Did you mean 'texthide'"),
    case("unknown defense parameter", f"{RUN} --defense texthide --defense-args q=1", 2, "no parameter 'q'"),
    case("unknown attack parameter", f"{RUN} --defense texthide --attack rss --attack-args sbertt=x", 2,
         "no parameter 'sbertt'"),
    case("malformed mock encoder", f"{RUN} --encoder mock-x", 2, "as in mock-64"),
    case("unknown pooling", f"{RUN} --pooling max", 2, "pooling must be one of mean, cls, pooler"),
    case("unknown device", f"{RUN} --device tpu", 2, "device must be auto, cpu or cuda"),
    case("attack on a release the task's server cannot yield", "run --check --task conll2003 --attack rss", 2,
         "yields no sentence_embeddings release on this task"),
    case("fp16 precision", f"{RUN} --precision fp16", 2, "fp16 needs loss scaling"),
    case("grid with an unknown precision", "run --grid {tmp}/precision.yaml --results-dir {tmp}/r", 2,
         "precision must be fp32 or bf16"),
    case("unknown texthide scheme", f"{RUN} --defense texthide --defense-args scheme=outer", 2,
         "scheme must be intra or inter"),
    # bad values
    case("k of zero", f"{RUN} --defense texthide --defense-args k=0", 2, "must be >= 1"),
    case("k not a number", f"{RUN} --defense texthide --defense-args k=abc", 2, "'abc'"),
    case("argument without a value", f"{RUN} --defense texthide --defense-args m", 2, "key=value"),
    case("negative eta", f"{RUN} --defense dchi-text --defense-args eta=-5", 2, "eta"),
    case("one training example", f"{RUN} --n-train 1", 2, "n_train and n_eval must be at least 2"),
    case("zero epochs", f"{RUN} --train-args epochs=0", 2, "epochs"),
    case("mode in the training arguments", f"{RUN} --train-args mode=finetune", 2, "choose the training mode"),
    case("shard without a grid", f"{RUN} --shard 1/2", 2, "--shard splits a grid"),
    case("shard out of range", "run --grid {tmp}/ok.yaml --shard 3/2", 2, "--shard must be i/n"),
    # incompatible pairs
    case("text defense, representation attack", f"{RUN} --defense santext --attack rss", 2, "cannot be paired"),
    case("representation defense, token attack", f"{RUN} --defense texthide --attack inversion", 2,
         "cannot be paired"),
    case("tagging task, representation defense", f"{RUN} --task conll2003 --defense texthide", 2,
         "has no client part this task's server can train from"),
    # plugins
    case("plugin file missing", f"{RUN} --plugin {{tmp}}/absent.py", 2, "absent.py"),
    case("plugin with a syntax error", f"{RUN} --plugin {{tmp}}/syntax.py", 2, "syntax.py"),
    case("plugin that registers nothing", "check-plugin {tmp}/nothing.py", 2, "registers no defense, attack or task"),
    case("plugin attack without release kinds", f"{RUN} --plugin {{tmp}}/no_kinds.py", 2,
         "must declare the release kinds it accepts"),
    # malformed grids
    case("grid file missing", "run --grid {tmp}/absent.yaml", 2, "does not exist"),
    case("grid not YAML", "run --grid {tmp}/notyaml.yaml", 2, "is not valid YAML"),
    case("grid a list", "run --grid {tmp}/list.yaml", 2, "must be a mapping"),
    case("grid unknown key", "run --grid {tmp}/unknown_key.yaml", 2, "unknown keys attack"),
    case("grid without defenses", "run --grid {tmp}/no_defenses.yaml", 2, "lists no defenses"),
    case("grid seed not a number", "run --grid {tmp}/bad_seed.yaml", 2, "is not a valid entry"),
    case("grid unknown defense", "run --grid {tmp}/unknown_defense.yaml", 2, "Did you mean 'texthide'"),
    case("grid unknown setting", "run --grid {tmp}/bad_setting.yaml", 2, "unknown setting 'n_trian'"),
    case("grid malformed defense entry", "run --grid {tmp}/bad_entry.yaml", 2, "must be a name or"),
    case("grid with --json", "run --grid {tmp}/ok.yaml --json", 2, "drop --check, --json and --no-save"),
    # found by a review on 2026-11-29 (they failed: tracebacks, a record with Infinity, a silent start, exit 0)
    case("grid size not whole", "run --grid {tmp}/fractional_size.yaml", 2, "n_train must be a whole number"),
    case("grid size infinite", "run --grid {tmp}/infinite_size.yaml", 2, "n_train must be a whole number"),
    case("grid device a number", "run --grid {tmp}/numeric_device.yaml", 2, "device must be a name, got 5"),
    case("grid seed as a setting", "run --grid {tmp}/seed_setting.yaml", 2, "unknown setting 'seed'"),
    case("grid a folder", "run --grid {tmp} --dry-run", 2, "is a folder"),
    case("learning rate that overflows float32", f"{RUN} --train-args lr=1e308", 2, "lr must be positive and at most"),
    case("ray cell timeout nan", "run --grid {tmp}/ok.yaml --executor ray --cell-timeout nan --dry-run", 2,
         "--cell-timeout must be a positive number"),
    case("ray negative retries", "run --grid {tmp}/ok.yaml --executor ray --retries -1 --dry-run", 2,
         "--retries must be at least 0"),
    case("report into a folder", "report --out {tmp}", 2, "is a folder"),
    case("perf JSON into a folder", "perf --sentences 4 --defense dchi-token --json {tmp}", 2, "is a folder"),
    case("dashboard port out of range", "dashboard --port 99999", 2, "--port must be between 1 and 65535"),
    case("offline MLM for an unknown task", "mlm prepare --task sst3", 2, "unknown task 'sst3'"),
    case("template named like a registered defense", "new defense texthide --dir {tmp}/new", 2,
         "is registered already"),
    # long and unusual Unicode text
    case("Unicode task name", [*RUN.split(), "--task", "ßšt２"], 2, "unknown task 'ßšt２'"),
    case("zero-width space in a name", [*RUN.split(), "--defense", "texthide\u200b"], 2,
         "Did you mean 'texthide'"),
    case("5000-character value", [*RUN.split(), "--defense", "texthide", "--defense-args", f"scheme={LONG}"], 2,
         "scheme must be intra or inter"),
    case("right-to-left and emoji value", [*RUN.split(), "--defense", "texthide", "--defense-args",
                                           "scheme=\u202eedivid🙂"], 2, "scheme must be intra or inter"),
    # found while building the matrix (they failed: a traceback, a swallowed name, two lines, raw escapes)
    case("closing markup tag as a name", [*RUN.split(), "--task", "[/x]"], 2, "unknown task '[/x]'"),
    case("markup tag in a name", [*RUN.split(), "--task", "[bold]sst2"], 2, "unknown task '[bold]sst2'"),
    case("newline in a name", [*RUN.split(), "--task", "sst\n2"], 2, "unknown task 'sst\\n2'"),
    case("terminal escape in a value", [*RUN.split(), "--defense", "texthide", "--defense-args",
                                        "scheme=\x1b[2J\x1b[31mred"], 2, "got '\\x1b[2J\\x1b[31mred'"),
]

# cases of the matrix that existing tests run: (what, "path::test function")
ELSEWHERE = [
    ("unknown defense and attack names, bad values, server options (10 command lines)",
     "tests/unit/test_cli.py::test_bad_input_exits_2_with_one_sentence"),
    ("a pair no release kind joins (plugin attack)", "tests/unit/test_cli.py::test_incompatible_pair_exits_2"),
    ("task data missing", "tests/unit/test_cli.py::test_missing_data_exits_2"),
    ("plugin raising at import", "tests/unit/test_cli.py::test_broken_plugin_exits_2"),
    ("summarize over a corrupt record line",
     "tests/unit/test_cli.py::test_summarize_reports_a_corrupt_line_and_keeps_the_rest"),
    ("summarize a folder no cell ran into",
     "tests/reliability/test_files.py::test_summarize_of_a_folder_without_records_writes_nothing"),
    ("a torn record line cannot swallow the next",
     "tests/unit/test_store.py::test_corrupt_line_is_reported_and_cannot_swallow_the_next_record"),
    ("valid JSON that is no record", "tests/unit/test_store.py::test_valid_json_with_missing_fields_is_corrupt"),
    ("concurrent appends", "tests/unit/test_store.py::test_concurrent_appends_keep_every_line_whole"),
    ("odd grid files (9 kinds)", "tests/unit/test_grid.py::test_odd_grids_are_one_clear_error"),
    ("grid with single-cell flags", "tests/unit/test_grid.py::test_grid_refuses_single_cell_flags"),
    ("interrupted grid resumes", "tests/unit/test_grid.py::test_interrupted_grid_resumes"),
    ("concurrent shards", "tests/unit/test_grid.py::test_shards_split_a_grid_into_disjoint_parts_that_cover_it"),
    ("a cell another process finished",
     "tests/unit/test_grid.py::test_a_cell_another_process_finished_meanwhile_is_skipped"),
    ("unknown names suggest the closest", "tests/unit/test_registry.py::test_unknown_name_suggests_the_closest"),
    ("plugin import errors", "tests/unit/test_registry.py::test_plugin_that_fails_to_import_is_one_clear_error"),
    ("bad parameter values", "tests/unit/test_params.py::test_bad_values_are_rejected"),
    ("YAML booleans are not integers", "tests/unit/test_params.py::test_yaml_booleans_are_not_integers"),
    ("kill -9 mid-cell and resume",
     "tests/reliability/test_faults.py::test_worker_killed_mid_cell_then_resumed_records_every_cell_once"),
    ("two unsharded copies of one grid",
     "tests/reliability/test_concurrency.py::test_two_copies_of_one_grid_record_every_cell_once"),
    ("hostile HTML and Markdown in the dashboard",
     "tests/reliability/test_dashboard_markdown.py::test_captions_and_notes_render_file_contents_literally"),
]


@pytest.fixture
def workspace(tmp_path):
    folder = tmp_path / "files"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.mark.parametrize("item", CASES, ids=[c.name for c in CASES])
def test_matrix(tiny_data, results, workspace, item):
    result = invoke(*[arg.replace("{tmp}", str(workspace)) for arg in item.argv])
    if item.code == 2:
        one_sentence(result, item.phrase)
    else:
        assert result.exit_code == item.code, result.output
        assert item.phrase in result.output
    assert files_under(results) == []


@pytest.mark.parametrize("what, where", ELSEWHERE, ids=[w for w, _ in ELSEWHERE])
def test_cases_elsewhere_exist(what, where):
    path, function = where.split("::")
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    test = getattr(module, function, None)
    assert callable(test), f"{where} ({what}) is gone: move its case into CASES"
    assert isinstance(ast.parse(inspect.getsource(test)).body[0], ast.FunctionDef)


def test_long_and_unusual_unicode_text_runs(tiny_data, results):
    """Data sentences with emoji, right-to-left script, combining marks, zero-width joiners, a bidi override and
    20,000 characters run a cell like any other."""
    train = tiny_data / "glue" / "SST-2" / "train.tsv"
    lines = train.read_text(encoding="utf-8").splitlines()
    unusual = ["the film 🎬👩‍👩‍👧 is great", "الفيلم رائع جدا", "e\u0301le\u0301gant and moving", "\u202edlrow olleh",
               "ok " * 6667, "tab\u00a0nbsp\u2028line separator", "ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ"]
    lines = lines[:1] + [f"{i % 2}\t{text}" for i, text in enumerate(unusual)] + lines[1:14]  # all 20 are drawn
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = invoke("run", "--defense", "none", "--attack", "rss", "--attack-args", "sbert=mock", "--n-train", "20",
                    "--n-eval", "8", "--json", *RUN.split()[1:])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["sizes"] == {"n_train": 20, "n_eval": 8}


def test_a_size_larger_than_the_split_is_capped_and_said(tiny_data, results):
    """--n-train beyond the data runs on what there is, and the printed sizes say how many were asked for."""
    result = invoke("run", "--defense", "none", "--n-train", "100000000", "--n-eval", "8", *RUN.split()[1:])
    assert result.exit_code == 0, result.output
    printed = " ".join(result.stdout.split())  # however the console wrapped it
    assert "(of 100000000 asked)" in printed and "n_eval 8 ·" in printed
    default = invoke("run", "--defense", "none", "--n-eval", "8", *RUN.split()[1:])  # the default is "up to"
    assert default.exit_code == 0 and "asked" not in default.stdout
