"""What an attack may know: the corpora it declares, and public text that no private split holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from bench import KNOWLEDGE, Attack, BenchError, Metric, PublicKnowledge, ReleaseKind
from bench.core.examples import Examples, TaskData
from bench.core.registry import ATTACKS
from bench.engine import runner
from bench.engine.cell import cell_context
from bench.engine.knowledge import knowledge_for, public_of
from tests.conftest import write_tiny_glue

PLANTED = "volcano"  # one WordPiece of the public encoder's vocabulary, written only into the attacked split


def test_every_shipped_attack_declares_known_corpora_with_a_reason():
    for name in ATTACKS.names():
        declared = ATTACKS.get(name).knowledge
        assert set(declared) <= set(KNOWLEDGE), name
        assert all(reason.strip() for reason in declared.values()), name


def test_an_unknown_or_unexplained_declaration_is_refused_at_registration():
    @dataclass
    class Peeks(Attack):
        accepts: ClassVar[tuple] = (ReleaseKind.TEXT,)
        metrics: ClassVar[tuple] = (Metric("hit", True, "hits"),)
        knowledge: ClassVar[dict] = {"private": "it wants the answers"}

    Peeks.registry_name = "peeks"
    with pytest.raises(BenchError, match="unknown knowledge 'private'"):
        Peeks.check_declarations()
    Peeks.knowledge = {"public": " "}
    with pytest.raises(BenchError, match="reason"):
        Peeks.check_declarations()


def test_a_corpus_the_attack_did_not_declare_cannot_be_read():
    public = PublicKnowledge(None, "sst2", frozenset({"public"}), ["a private sentence"], ["a public one"])
    assert public.public == ["a public one"]
    with pytest.raises(BenchError, match="index corpus without declaring it"):
        public.index


def test_public_text_drops_every_sentence_a_private_split_holds():
    train = Examples(("kept private", "shared line"), np.array([0, 1]))
    evaluation = Examples((("pair one", "pair two"),), np.array([1]))
    data = TaskData(train, evaluation, "x", public=("a public line", "shared line", "pair two"), public_source="rest")
    texts, source = public_of(data, "sst2")
    assert texts == ["a public line"] and "2 sentences a private split also holds left out" in source


def plant(root):
    """Write PLANTED five times into every sentence of SST-2's evaluation file (the attacked split), so that a prior
    counted on that split would rank it first of all tokens; training has none."""
    dev = root / "glue" / "SST-2" / "dev.tsv"
    lines = dev.read_text(encoding="utf-8").splitlines()
    dev.write_text("\n".join([lines[0]] + [f"{line}{f' {PLANTED}' * 5}" for line in lines[1:]]) + "\n", encoding="utf-8")


def test_a_token_only_the_attacked_split_holds_comes_only_through_the_release(tmp_path, monkeypatch):
    from bench.attacks.inversion import _released_ids

    root = write_tiny_glue(tmp_path / "data")
    plant(root)
    monkeypatch.setenv("BENCH_DATA_DIR", str(root))
    spec = runner.make_spec("sst2", "dchi-text", "inversion", defense_args={"eta": 5}, n_train=200, n_eval=60,
                            device="cpu")
    context, defense, wanted, path = cell_context(spec, client_only=True)
    output = path.run(defense, context, context.task.server(spec, context.training))
    release = output.release(wanted)
    attack_cls = ATTACKS.get("inversion")
    public = knowledge_for(attack_cls, release, context.data, context.encoder, "sst2")
    assert all(PLANTED not in sentence.split() for sentence in public.public)  # the prior and candidates
    assert all(PLANTED in text for text in context.data.eval.texts)  # planted where the attack is scored
    attack = attack_cls()
    guesses = attack.attack(release, public)
    space = guesses.space
    planted = space.client_ids([PLANTED])[0]
    assert len(planted) == 1 and planted[0] >= 0
    released = np.concatenate(_released_ids(release, space))
    bayes = np.concatenate(guesses.by_metric["bayes_token_accuracy"])
    assert np.any(released != planted[0])  # the mechanism moved some planted tokens away
    assert not np.any((bayes == planted[0]) & (released != planted[0]))  # only where the release shows it
    drawn = attack.random_guess(release, public, np.random.default_rng(0)).by_metric["token_accuracy"]
    again = attack.random_guess(release, knowledge_for(attack_cls, release, context.data, context.encoder, "sst2"),
                                np.random.default_rng(0)).by_metric["token_accuracy"]
    assert all(np.array_equal(a, b) for a, b in zip(drawn, again))


def test_the_task_keeps_the_rest_of_its_training_file_as_public_text_and_samples_as_before(tiny_data):
    from bench.core.examples import sample_indices
    from bench.core.registry import TASKS
    from bench.core.seeding import numpy_generator

    data = TASKS.get("sst2")().load(100, 40, 3)
    assert data.public and not set(data.public) & set(data.train.texts) and not set(data.public) & set(data.eval.texts)
    rng = numpy_generator(3, "data", "sst2")
    full = (tiny_data / "glue" / "SST-2" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    texts = [line.split("\t", 1)[1] for line in full]
    assert list(data.train.texts) == [texts[i] for i in sample_indices(len(texts), 100, rng)]
    assert len(data.public) == len(texts) - 100


@pytest.mark.parametrize("defense,args", [("dchi-text", {"eta": 20}), ("santext-plus", {"eps": 3})])
def test_the_client_only_part_releases_the_evaluation_split_as_a_full_run_does(tiny_data, defense, args):
    """An attack-only re-run (bench.engine.reuse) skips the training split's release: the attacked one is unchanged."""
    spec = runner.make_spec("sst2", defense, "inversion", defense_args=args, n_train=60, n_eval=40, device="cpu",
                            training_args={"epochs": 1})
    releases = []
    for client_only in (False, True):
        context, mechanism, wanted, path = cell_context(spec, client_only=client_only)
        output = path.run(mechanism, context, context.task.server(spec, context.training))
        releases.append(output.release(wanted).data)
    full, alone = releases
    assert len(full) == len(alone) == 40
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(full, alone))
