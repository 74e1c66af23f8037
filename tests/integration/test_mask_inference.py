"""Mask-token inference with the real offline encoder on small SST-2 slices.

The default attacker is minilm-mlm, minilm trained here as a masked LM on public text. A test cannot train it at
its full budget, so the test of the default attacker runs at --check's smoke budget (minilm-mlm@20: the first
layer, 20 steps): even that MLM beats the random guess on raw text, which the untrained head never did. The
ablation mlm=minilm-untrained (a fresh head tied to minilm's input embeddings) recovers nothing, from raw text as
from sanitized text (token accuracy 0.000 on the 718 raw tokens of 30 SST-2 sentences, as the random guess): its
record must say so. Other tests check the attack's assembly of masked rows against an independent forward pass,
and, where the hub is reachable, the ranking raw text > SanText > random guess with a pretrained head.
"""

import numpy as np
import pytest

from bench import Release, ReleaseKind
from bench.core.components import PublicKnowledge
from bench.core.params import build_component
from bench.core.registry import ATTACKS, TASKS
from bench.engine.runner import make_spec, run_cell
from bench.privacy.public import ExponentialMechanism, IdentityTokens, SpaceRef
from bench.privacy.token_space import WORD

N_EVAL = 30  # evaluation sentences, all attacked


def attack_cell(defense: str, defense_args: str = "", attack_args: str = "", server_args: str = "",
                smoke: bool = False):
    spec = make_spec(task="sst2", defense=defense, defense_args=defense_args, server_args=server_args,
                     attack="mask-inference",
                     attack_args=f"max_sentences={N_EVAL}{',' if attack_args else ''}{attack_args}", n_train=40,
                     n_eval=N_EVAL, training_args="epochs=1", smoke=smoke)
    return run_cell(spec)


@pytest.fixture(scope="module")
def sst2():
    return build_component(TASKS.get("sst2"), {}).load(40, N_EVAL, 0)


def test_the_default_attacker_is_a_trained_mlm_and_beats_its_random_reference_on_the_undefended_release():
    from bench.models.mlm import check_mlm_name

    attack = build_component(ATTACKS.get("mask-inference"), {})
    check_mlm_name(attack.mlm)  # a masked LM with a trained head, not minilm's untrained one
    raw = attack_cell("none", smoke=True)
    assert "smoke budget" in raw.notes["mlm_head"] and raw.spec["attack_args"]["mlm"] == "minilm-mlm"
    accuracy, chance = (raw.metrics[f"{k}/mask-inference/token_accuracy"] for k in ("privacy", "random"))
    assert accuracy > chance + 0.02, (accuracy, chance)


def test_plain_minilm_is_refused_and_the_untrained_head_is_an_ablation_by_name():
    from bench import BenchError

    with pytest.raises(BenchError, match="untrained head"):
        make_spec(task="sst2", defense="none", attack="mask-inference", attack_args="mlm=minilm")
    assert make_spec(task="sst2", defense="none", attack="mask-inference", attack_args="mlm=minilm-untrained")
    adapted = make_spec(task="sst2", defense="dchi-text", attack="mask-inference",
                        attack_args="mlm=minilm,adapted=denoising")  # adaptation trains minilm's head
    assert adapted.attack_args["mlm"] == "minilm"


def test_untrained_head_ablation_runs_against_raw_and_sanitized_text_and_the_record_says_it_is_untrained(sst2):
    from bench.models.loading import load_encoder
    from bench.privacy.mechanisms import client_token_ids

    raw, sanitized = (attack_cell(d, a, "mlm=minilm-untrained") for d, a in (("none", ""), ("santext", "eps=4")))
    true_tokens = sum(len(x) for x in client_token_ids(load_encoder("minilm"), sst2.eval.texts))
    for record in (raw, sanitized):
        assert "fresh BERT-style head tied to minilm's input embeddings (untrained)" == record.notes["mlm_head"]
        assert record.notes["masked_positions"] == true_tokens  # one masked row per released token
        assert record.notes["attacked_sentences"] == N_EVAL and "held-out" in record.notes["mlm_top1_text"]
        assert "random/mask-inference/mlm_top1" not in record.metrics  # the random reference has no MLM
    top1 = raw.metrics["privacy/mask-inference/mlm_top1"]
    assert top1 == sanitized.metrics["privacy/mask-inference/mlm_top1"] and top1 < 0.05  # a weak, untrained head
    accuracy = raw.metrics["privacy/mask-inference/token_accuracy"]
    assert accuracy < 0.05  # so weak that raw text gives it almost nothing: records must say which head
    assert accuracy >= sanitized.metrics["privacy/mask-inference/token_accuracy"]


def plain_release(items):
    """An undefended text release of ``items`` in the WordPiece space."""
    return Release(ReleaseKind.TEXT, items, np.arange(len(items)), mechanism=IdentityTokens(), space=SpaceRef())


def test_masked_rows_match_a_direct_forward_pass_for_sentences_and_pairs():
    import torch

    from bench.models.loading import load_encoder

    encoder = load_encoder("minilm")
    texts = ["a gripping , funny film .", "the plot is thin but the cast is great"]
    pairs = [("a gripping film .", "it is funny ."), ("the plot is thin", "but the cast is great")]
    public = PublicKnowledge(encoder, "sst2")
    attack = build_component(ATTACKS.get("mask-inference"), {"batch_size": 3, "mlm": "minilm-untrained"})
    single = attack.attack(plain_release(texts), public)
    paired = attack.attack(plain_release(pairs), public)
    wide = build_component(ATTACKS.get("mask-inference"), {"mlm": "minilm-untrained"}).attack(
        Release(ReleaseKind.TEXT, texts, np.arange(2), mechanism=IdentityTokens(), space=SpaceRef()), public)
    batched = zip(single.by_metric["token_accuracy"], wide.by_metric["token_accuracy"])
    assert all(np.array_equal(a, b) for a, b in batched)  # batch size and padding change nothing

    mlm, tokenizer = attack._model, encoder.tokenizer
    regular = torch.as_tensor(mlm.regular)

    def direct(first, second, segment, position):
        batch = tokenizer(first, second, return_tensors="pt") if second else tokenizer(first, return_tensors="pt")
        where = 1 + position + (0 if segment == 0 else len(tokenizer(first, add_special_tokens=False)["input_ids"]) + 1)
        batch["input_ids"][0, where] = tokenizer.mask_token_id
        with torch.inference_mode():
            logits = mlm.model(**batch).logits[0, where]
        return int(regular[logits[regular].argmax()])

    assert [len(x) for x in single.by_metric["token_accuracy"]] == [6, 9]
    for position in (0, 3, 5):
        assert single.by_metric["token_accuracy"][0][position] == direct(texts[0], None, 0, position)
    guesses = paired.by_metric["token_accuracy"]  # segments in turn: pair 0 first, pair 0 second, ...
    assert [len(x) for x in guesses] == [4, 4, 4, 5]
    assert guesses[2][1] == direct(*pairs[1], 0, 1) and guesses[3][4] == direct(*pairs[1], 1, 4)


def test_word_space_release_is_guessed_in_words(tmp_path, sst2):
    # GloVe's own tokens 's and u.s. are words of the space that client-text splitting would cut in two or four
    words = sorted({w.lower() for t in sst2.eval.texts for w in WORD.findall(t)} | {"'s", "u.s."})
    path = tmp_path / "tiny.8d.txt"
    rng = np.random.default_rng(0)
    path.write_text("".join(f"{w} {' '.join(f'{v:.3f}' for v in rng.standard_normal(8))}\n" for w in words))
    from bench.models.loading import load_encoder
    from bench.privacy.token_space import WordVectorSpace

    space = WordVectorSpace(str(path))
    client = space.client_ids(list(sst2.eval.texts[:4]))  # every word is in the file: no draws needed
    client[0] = np.concatenate([client[0], [space.index["'s"], space.index["u.s."]]])  # as a mechanism may draw them
    released = space.render(client)  # as the client releases it: the space's words joined by spaces
    release = Release(ReleaseKind.TEXT, released, np.arange(4), mechanism=ExponentialMechanism(),
                      space=SpaceRef("words", str(path)))
    attack = build_component(ATTACKS.get("mask-inference"), {"mlm": "minilm-untrained"})
    guesses = attack.attack(release, PublicKnowledge(load_encoder("minilm"), "sst2"))
    found = guesses.by_metric["token_accuracy"]
    assert [len(x) for x in found] == [len(x) for x in client]  # one guess per released word
    assert np.isin(np.concatenate(found), space.candidates).all()  # every guess is a word of the space


def test_pretrained_head_ranks_raw_text_above_santext_above_random():
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained("bert-base-uncased")
    except OSError:
        pytest.skip("bert-base-uncased (a pretrained MLM head) needs the Hugging Face hub")
    raw, sanitized = (attack_cell(d, a, "mlm=bert-base-uncased") for d, a in (("none", ""), ("santext", "eps=4")))
    assert "pretrained MLM head" in raw.notes["mlm_head"] and raw.metrics["privacy/mask-inference/mlm_top1"] > 0.3
    accuracy = raw.metrics["privacy/mask-inference/token_accuracy"]
    assert accuracy > sanitized.metrics["privacy/mask-inference/token_accuracy"] + 0.1
    assert sanitized.metrics["privacy/mask-inference/token_accuracy"] > \
        sanitized.metrics["random/mask-inference/token_accuracy"]


def test_an_adapted_attacker_uses_the_servers_checkpoint_for_the_same_mechanism(tmp_path, monkeypatch):
    from bench import BenchError

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    record = attack_cell("dchi-text", "eta=60", "mlm=minilm,adapted=denoising,adapted_steps=2",
                         server_args="adapt=denoising,adapt_steps=2")
    assert "trained by denoising MLM adaptation (2 steps)" in record.notes["mlm_head"]
    assert record.notes["adaptation_head"] == record.notes["mlm_head"]  # the server's checkpoint, not a second one
    assert len(list((tmp_path / "adapted").iterdir())) == 1
    assert 0 <= record.metrics["privacy/mask-inference/token_accuracy"] <= 1
    for bad, message in (("adapted=mlm", "adapted must be"), ("adapted=prob,checkpoint=.", "not both")):
        with pytest.raises(BenchError, match=message):
            build_component(ATTACKS.get("mask-inference"), bad)
