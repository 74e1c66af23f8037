"""The release paths: their declarations, the dispatch that picks one per cell, and the task interfaces."""

from __future__ import annotations

import numpy as np
import pytest

from bench import BenchError, Metric, Task, TokenTask
from bench.core.components import PATH_HOOKS, Truth
from bench.core.examples import Examples, TaskData
from bench.core.registry import DEFENSES, TASKS
from bench.core.releases import PAYLOADS, ModelRelease, Release, ReleaseKind
from bench.engine.paths import PATHS, CellOutput, choose_path, path_named, released_kinds
from bench.engine.paths.api import PredictionOutput
from bench.engine.paths.pretraining import ModelOutput
from bench.engine.paths.representations import RepresentationOutput
from bench.engine.paths.tokens import TokenOutput


def test_every_path_declares_its_family_kinds_payloads_hooks_and_output():
    assert set(PATHS) == set(PATH_HOOKS)  # the names tasks declare in `protocols`
    for name, path in PATHS.items():
        assert path.name == name and path.families and path.kinds
        assert all(payload in (p if isinstance(p := PAYLOADS[kind], tuple) else (p,))
                   for kind, payload in path.yields.items())
        assert path.hooks is PATH_HOOKS[name]
        assert issubclass(path.output, CellOutput)
    every = [kind for path in PATHS.values() for kind in path.kinds]
    assert set(every) == set(ReleaseKind)  # each kind comes from a path
    # only the model release comes from several: a pretrained MLM's weights, or a trained server's model
    assert sorted(kind for kind in every if kind is not ReleaseKind.MODEL) == \
        sorted(kind for kind in ReleaseKind if kind is not ReleaseKind.MODEL)


def test_the_task_base_keeps_only_what_every_task_has():
    for hook in ("token_labels", "task_predictions", "evaluate_on", "span_kinds", "sensitive_spans",
                 "substitution_pool", "span_fragment", "rewrite_label", "utility_task", "patients",
                 "public_knowledge", "attributes", "attribute_measure"):
        assert not hasattr(Task, hook), hook
    for name in TASKS.names():
        task_cls = TASKS.get(name)
        assert all(issubclass(task_cls, PATH_HOOKS[path]) for path in task_cls.protocols)


def test_a_task_of_a_path_must_implement_its_hooks():
    class Plain(Task):
        registry_name = "plain"
        metrics = (Metric("accuracy", True, "share right"),)
        protocols = ("representations", "tokens")

    with pytest.raises(BenchError, match="subclass bench.TokenTask"):
        Plain.check_declarations()

    class Tokens(TokenTask):
        registry_name = "tokens-task"
        metrics = Plain.metrics
        protocols = ("representations", "tokens")

    Tokens.check_declarations()


def test_a_hook_declared_without_its_interface_is_refused():
    # a task written against the old Task (every path's hooks on it) declares spans on a token task: span_kinds()
    # reads them only from a SpanTask, so span defenses would say it declares none; registration says why instead
    class OldSpans(TokenTask):
        registry_name = "old-spans"
        metrics = (Metric("accuracy", True, "share right"),)
        protocols = ("tokens",)
        span_kinds = ("PER",)

        def sensitive_spans(self, data, split, index):
            return []

    with pytest.raises(BenchError, match="span_kinds.*subclass bench.SpanTask"):
        OldSpans.check_declarations()

    class OldAttributes(TokenTask):
        registry_name = "old-attributes"
        metrics = OldSpans.metrics
        protocols = ("tokens",)
        attributes = ("gender",)

    with pytest.raises(BenchError, match="attributes.*subclass bench.ApiTask"):
        OldAttributes.check_declarations()


@pytest.mark.parametrize("task,defense,wanted,expected", [
    ("sst2", "texthide", None, "representations"),
    ("sst2", "texthide", ReleaseKind.GRADIENTS, "representations"),
    ("sst2", "dchi-text", None, "tokens"),
    ("sst2", "none", ReleaseKind.TEXT, "tokens"),
    ("sst2", "none", ReleaseKind.SENTENCE_EMBEDDINGS, "representations"),
    ("conll2003", "ndd", ReleaseKind.REWRITTEN_TEXT, "tokens"),
    ("clinical-deid", "ndd", ReleaseKind.MODEL, "pretraining"),
    ("sst2", "texthide", ReleaseKind.MODEL, "representations"),  # the trained server's model
    ("sst2", "dchi-token", ReleaseKind.MODEL, "tokens"),
    ("clinical-deid", "none", None, "pretraining"),
    ("trustpilot", "softening", ReleaseKind.PREDICTIONS, "api"),
    ("trustpilot", "dchi-text", ReleaseKind.PREDICTIONS, "api"),
])
def test_choose_path_picks_the_one_that_yields_the_attacked_kind(task, defense, wanted, expected):
    assert choose_path(DEFENSES.get(defense), TASKS.get(task).protocols, wanted) is path_named(expected)


def test_a_defense_without_a_client_part_on_the_tasks_paths_is_refused():
    with pytest.raises(BenchError, match="no client part"):
        choose_path(DEFENSES.get("dchi-text"), TASKS.get("clinical-deid").protocols, None)  # perturbs tokens
    with pytest.raises(BenchError, match="yields no predictions release"):
        choose_path(DEFENSES.get("dchi-text"), TASKS.get("sst2").protocols, ReleaseKind.PREDICTIONS)
    with pytest.raises(BenchError, match="no release path 'weights'"):
        path_named("weights")
    assert ReleaseKind.PREDICTIONS in released_kinds(DEFENSES.get("dchi-text"))  # the API's training data
    assert ReleaseKind.PREDICTIONS not in released_kinds(DEFENSES.get("texthide"))


def _data():
    train = Examples(("a b", "c d", "e f"), np.array([0, 1, 0]))
    evaluation = Examples(("g h", "i j"), np.array([1, 1]))
    return TaskData(train, evaluation, "inline")


def test_each_output_gives_the_truth_only_its_path_holds():
    data = _data()
    rows = Release(ReleaseKind.TEXT, ["x", "y"], owners=np.array([1, 0]))
    plain = CellOutput({}, {ReleaseKind.TEXT: rows}).truth(rows, data)
    assert plain.texts == ["i j", "g h"] and plain.labels.tolist() == [1, 1] and plain.spans is None
    spans = [[(1,)], [(2,)]]
    assert TokenOutput({}, {}, truth_spans=spans).truth(rows, data).spans is None  # no slots: not scored on spans
    rows.slots = [[(0, 0, 1, "PER")], [(0, 0, 1, "PER")]]
    assert TokenOutput({}, {}, truth_spans=spans).truth(rows, data).spans == spans
    attributes = {"gender": np.array([0, 1])}
    assert PredictionOutput({}, {}, truth_attributes=attributes).truth(rows, data).attributes is attributes
    weights = Release(ReleaseKind.MODEL, ModelRelease("m", [], [], [], np.zeros(0)), owners=np.arange(2))
    truth = ModelOutput({}, {}, truth_records=["p", "q"]).truth(weights, data)
    assert isinstance(truth, Truth) and truth.texts == [] and truth.records == ["p", "q"]


def test_a_deferred_release_is_built_once_when_first_taken():
    built = []

    def gradients():
        built.append(1)
        return Release(ReleaseKind.GRADIENTS, None, owners=np.arange(0))

    output = RepresentationOutput({}, {}, deferred={ReleaseKind.GRADIENTS: gradients})
    first = output.release(ReleaseKind.GRADIENTS)
    assert output.release(ReleaseKind.GRADIENTS) is first and built == [1]
