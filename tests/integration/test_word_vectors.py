"""Text mechanisms in a word-vector space (GloVe format), with the real encoder as the server's.

No GloVe file ships offline, so the test writes one: a seeded random 50-dimensional vector for every
word of the slice. The release is then text in those words, and inversion is scored in words.
"""

import numpy as np
import pytest

from bench.core.params import build_component
from bench.core.registry import TASKS
from bench.engine.runner import make_spec, run_cell
from bench.privacy.token_space import WORD


@pytest.fixture(scope="module")
def vectors(tmp_path_factory):
    data = build_component(TASKS.get("sst2"), {}).load(64, 32, 0)
    words = sorted({w.lower() for text in data.train.texts + data.eval.texts for w in WORD.findall(text)})
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("glove") / "tiny.50d.txt"
    path.write_text("".join(f"{w} {' '.join(f'{v:.4f}' for v in rng.standard_normal(50))}\n" for w in words))
    return str(path)


def run(defense, args, vectors):
    spec = make_spec(task="sst2", defense=defense, defense_args={**args, "vectors": vectors}, attack="inversion",
                     n_train=64, n_eval=32, training_args="epochs=2")
    return run_cell(spec)


@pytest.mark.parametrize("defense, weak, strong", [("santext", {"eps": 1e4}, {"eps": 0.01}),
                                                   ("dchi-text", {"eta": 1e5}, {"eta": 0.1})])
def test_word_space_release_is_text_and_the_privacy_parameter_matters(vectors, defense, weak, strong):
    little_noise, much_noise = run(defense, weak, vectors), run(defense, strong, vectors)
    assert little_noise.notes["token_space"] == "words"
    assert little_noise.metrics["privacy/inversion/token_accuracy"] > 0.95
    assert much_noise.metrics["privacy/inversion/token_accuracy"] < 0.2
    assert much_noise.metrics["privacy/inversion/bayes_token_accuracy"] >= 0.0


def test_random_replacement_in_a_word_space_keeps_about_one_word_in_the_vocabulary_size(vectors):
    record = run("random", {}, vectors)
    vocabulary = sum(1 for _ in open(vectors, encoding="utf-8"))
    assert record.notes["token_space"] == "words"
    assert record.metrics["privacy/inversion/token_accuracy"] < 5 / vocabulary + 0.02  # chance: 1 / |V| per word
