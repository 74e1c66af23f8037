"""The record's typed spec and its notes schema, against every committed record."""

import json
from pathlib import Path

import pytest

from bench.core.options import Adaptation, AdaptedPrivateTraining, Pretraining, PrivateTraining, TrainingConfig
from bench.core.spec import RunSpec
from bench.results.notes import SCHEMA, SchemaError, check, markdown, problems
from bench.results.record import ResultRecord

ROOT = Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "results" / "records").glob("*.jsonl"))


def committed() -> list[tuple[dict, ResultRecord]]:
    """Every committed record: its stored dictionary and the record read from it."""
    found = []
    for path in RECORDS:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                found.append((json.loads(line), ResultRecord.model_validate_json(line)))
    return found


def test_there_are_committed_records():
    assert len(committed()) > 1000


def test_every_committed_spec_rebuilds_typed_and_writes_back_what_is_stored():
    for stored, record in committed():
        spec = record.run_spec
        assert type(spec.training) is TrainingConfig
        assert spec.server is None or type(spec.server) in (Adaptation, Pretraining, PrivateTraining, AdaptedPrivateTraining)
        written = spec.to_dict()
        # what a record stores is what the typed spec writes back (older records lack precision and server)
        assert {k: v for k, v in written.items() if k in record.spec} == record.spec
        assert set(written) - set(record.spec) <= {"precision", "server"}
        assert json.dumps(written["training"]) == json.dumps(stored["spec"]["training"])  # key order too
        assert spec.config_hash() == record.config_hash


def test_a_spec_types_the_settings_it_is_given_as_dictionaries():
    spec = RunSpec("sst2", "none", None, "mock", training={"mode": "finetune", "epochs": 2, "lr": 1e-5,
                                                            "batch_size": 8, "head_layers": 0, "activation": "tanh",
                                                            "dropout": 0.1},
                   server={"pretrain_steps": 0})
    assert spec.training == TrainingConfig("finetune", 2, 1e-5, 8, 0, "tanh", 0.1)
    assert spec.server == Pretraining(pretrain_steps=0)
    assert RunSpec("sst2", "none", None, "mock", server={}).server is None
    assert RunSpec("sst2", "none", None, "mock", server={"adapt": "prob"}).server == Adaptation("prob")
    assert RunSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(TypeError):  # a mixture of the two is no server setting
        RunSpec("sst2", "none", None, "mock", server={"adapt": "prob", "pretrain_steps": 3})


def test_a_record_whose_training_settings_are_out_of_range_is_refused():
    stored, _ = committed()[0]
    stored["spec"]["training"]["epochs"] = 0
    with pytest.raises(ValueError, match="spec cannot be rebuilt"):
        ResultRecord.model_validate(stored)


def test_server_options_resolve_to_the_typed_part_that_applies():
    from bench.engine.server_options import ServerOptions

    options = ServerOptions(adapt="denoising", adapt_steps=7)
    assert options.resolved({"adapt": "denoising", "adapt_steps": "7"}) == Adaptation("denoising", adapt_steps=7)
    assert ServerOptions().resolved({}) is None
    assert ServerOptions(pretrain_steps=0).resolved({"pretrain_steps": "0"}, pretraining=True) == \
        Pretraining(pretrain_steps=0)
    assert ServerOptions.of(Adaptation("prob")).adaptation().objective == "prob"
    assert ServerOptions.of(None) == ServerOptions()


def test_every_note_of_every_committed_record_is_declared_typed_and_on_its_path():
    found = {}
    for _, record in committed():
        for problem in problems(record.notes, record.notes.get("protocol")):
            found[problem] = found.get(problem, 0) + 1
    assert not found, found


def test_every_declared_note_has_a_type_and_a_comment():
    for key, note in SCHEMA.items():
        assert note.key == key and note.types and note.paths
        assert note.comment and "\n" not in note.comment and len(note.comment) < 120, key


def test_an_undeclared_note_is_a_developer_error_in_one_sentence():
    with pytest.raises(SchemaError, match=r"^note 'radius_in_words' is not declared in bench/results/notes.py: "
                                          r"declare it there .*\.$"):
        check({"protocol": "tokens", "radius_in_words": "far"}, "tokens")
    with pytest.raises(SchemaError, match="note 'victim' is declared for the api path"):
        check({"victim": "a head"}, "tokens")
    with pytest.raises(SchemaError, match="note 'released_tokens' holds a str, declared int"):
        check({"released_tokens": "many"}, "tokens")
    with pytest.raises(SchemaError, match="holds a bool"):  # a boolean is no count
        check({"released_tokens": True}, "tokens")
    check({"released_tokens": 3, "mean_noise_radius": 2, "mlm": None}, "tokens")  # an int is a number


def test_an_undeclared_note_tells_a_plugin_how_to_declare_it():
    # a plugin cannot edit bench/results/notes.py: the sentence names the call it makes in its own file
    with pytest.raises(SchemaError, match=r"a plugin .*bench\.results\.notes\.declare"):
        check({"noise_norm": 1.0}, "representations")


def test_the_engine_checks_a_new_records_notes_before_the_attack(tiny_data, monkeypatch):
    from bench.defenses.dchi import DchiSequence
    from bench.engine.runner import make_spec, run_cell

    attacked = []
    monkeypatch.setattr(DchiSequence, "describe", lambda self, dim: {"radius_in_words": "far"})
    monkeypatch.setattr("bench.engine.runner.knowledge_for", lambda *a, **k: attacked.append(1))
    spec = make_spec(defense="dchi-sequence", attack="rss", attack_args="sbert=mock", encoder="mock",
                     training_args="epochs=1", n_train=20, n_eval=10)
    with pytest.raises(SchemaError, match="note 'radius_in_words' is not declared"):
        run_cell(spec)
    assert not attacked


def test_the_docs_page_is_generated_from_the_schema():
    page = (ROOT / "docs" / "record-notes.md").read_text(encoding="utf-8")
    assert page == markdown()
    assert all(f"`{key}`" in page for key in SCHEMA)


def test_what_each_defense_describes_is_declared_on_every_path_that_drives_it():
    # a defense's describe() goes into the notes of each path it runs on (a d_chi token defense also guards a
    # prediction API's training data): each key must be declared for all of them
    import bench.engine.runner  # noqa: F401 - registers the shipped components
    from bench.core.params import build_component
    from bench.core.registry import DEFENSES
    from bench.core.smoke import smoke_budget
    from bench.engine.paths import PATHS

    bad = []
    for name in DEFENSES.names():
        cls = DEFENSES.get(name)
        if not cls.__module__.startswith("bench.defenses."):
            continue  # a plugin another test registered
        with smoke_budget():  # NDD describes its MLM: built at the smoke budget, in seconds
            described = build_component(cls, {}).describe(384)
        for path in PATHS.values():
            if path.drives(cls):
                bad += [f"{name} on {path.name}: {p}" for p in problems(described, path.name)]
    assert bad == []
