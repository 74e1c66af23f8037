"""Mask token inference: mask each released token in turn and let a masked LM guess the original.

Paper: Xiang Yue, Minxin Du, Tianhao Wang, Yaliang Li, Huan Sun, Sherman S. M. Chow. "Differential
Privacy for Text Analytics via Natural Text Sanitization." Findings of ACL 2021 (their mask token
inference attack).
Threat model: the adversary holds a released (sanitized) text and a public masked LM — by default
``minilm-mlm``, the offline encoder's MLM trained here on public text (``bench.models.offline_mlm``; no
pretrained MLM head of it can be installed offline), online a hub checkpoint with its pretrained head (e.g.
``mlm=bert-base-uncased``, the paper's kind of attacker), or a saved (e.g. privacy-adapted) MLM
(``checkpoint``), or ``mlm`` adapted by the attacker to the release's public mechanism and parameters
(``adapted``: Qu et al. 2021 §3.4's pretraining, the very checkpoint a server adapting to that mechanism
uses, so a record shows whether adaptation helps the attacker too) — and the public token space the
release was made in. ``mlm=minilm-untrained`` (minilm with a fresh head tied to its input embeddings,
never trained) is an ablation only: it recovers nothing, from raw text as from sanitized text, so it
measures no defense. For each
position of each released sentence it replaces the released token by [MASK] (one model row per
position; the context is the rest of the released sentence, and for a sentence pair the partner
sentence too) and takes the MLM's most probable regular token as its guess of the original token
(in a word-vector space: the most probable whole-word token that is a word of the space). Metric
``token_accuracy``: the fraction of the evaluation release's true (regular) tokens recovered at their
position, the truth tokenised in the public token space as for ``inversion``; with ``max_sentences``
it is over the first N released sentences only (a pair counts as two). ``mlm_top1`` states the MLM's
strength: its BERT-masked top-1 accuracy on a fixed held-out slice of public text (200 SQuAD
sentences, CoNLL-03 when the task is SQuAD; no public corpus used for pretraining contains them); the
MLM's head kind goes to the record's notes (``mlm_head``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from bench import (
    Attack,
    BenchError,
    Metric,
    PublicKnowledge,
    Release,
    ReleaseKind,
    Truth,
    register_attack,
    require,
    within,
)
from bench.attacks.inversion import TokenGuesses, hits
from bench.core.examples import flatten_segments
from bench.core.params import added_later
from bench.privacy.token_space import space_of

UNTRAINED = "minilm-untrained"  # the ablation's mlm value: minilm with a fresh, untrained head (load_mlm "minilm")
HELD_OUT_SENTENCES = 200  # public sentences that measure the MLM (bench.data.public_corpus.held_out)
UNMAPPED = -2  # a guess that is no token of the space: never equals a true id (a missing word is -1)


@dataclass
class MaskGuesses(TokenGuesses):
    """Guessed ids per attacked sentence; ``random`` marks the random-guess reference (no MLM behind it)."""

    random: bool = False


@register_attack("mask-inference")
@dataclass
class MaskInference(Attack):
    """Each released token masked in turn; the MLM's top-1 regular token is the guess of the original."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TEXT,)
    reads_encoder_body: ClassVar[bool] = False  # the encoder's tokenizer and table; its MLM is its own
    version: ClassVar[str] = "2"  # 2: the default attacker is the trained offline MLM (was minilm's untrained head)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("token_accuracy", True, "fraction of the attacked tokens the MLM recovers at their position"),
        Metric("mlm_top1", True, "the attacker's masked LM: top-1 accuracy at masked held-out public text"),
    )

    # minilm-mlm@N, a hub id (bert-base-uncased: its pretrained head), or the ablation minilm-untrained (a fresh head)
    mlm: str = "minilm-mlm"  # the attacker's MLM: by default minilm trained offline as a masked LM
    checkpoint: str = ""  # a directory saved by bench.models.mlm.MaskedLM.save (e.g. privacy-adapted); overrides mlm
    batch_size: int = within(64, "[1, 65536]")  # masked rows per forward pass
    max_sentences: int = within(0, "[0, 1e9]")  # attack (and score) only the first N released sentences (0 = all)
    # vanilla, prob or denoising: the attacker adapts mlm itself (Qu et al. §3.4) on public text privatized by
    # the release's own public mechanism and parameters, the checkpoint the server would adapt to (cached)
    adapted: str = added_later("")  # vanilla, prob or denoising: adapt mlm to the release's mechanism; empty = no
    adapted_steps: int = within(300, "[1, 1e8]", later=True)  # that adaptation's optimizer steps

    @classmethod
    def version_for(cls, args: dict, kind=None) -> str:
        """1 for an adapted attacker: it adapts ``mlm`` as before, so its recorded cells stand."""
        return "1" if args.get("adapted") else cls.version

    def __post_init__(self) -> None:
        from bench.models.adaptation import OBJECTIVES

        require(self.adapted in ("", *OBJECTIVES),
                f"mask-inference adapted must be vanilla, prob or denoising (or empty), got '{self.adapted}'.")
        require(self.adapted_steps >= 1, f"mask-inference adapted_steps must be >= 1, got {self.adapted_steps}.")
        require(not (self.adapted and self.checkpoint), "mask-inference takes checkpoint or adapted, not both.")
        require(self.batch_size >= 1, f"mask-inference batch_size must be >= 1, got {self.batch_size}.")
        require(self.max_sentences >= 0, f"mask-inference max_sentences must be >= 0, got {self.max_sentences}.")
        require(not self.checkpoint or Path(self.checkpoint).expanduser().is_dir(),
                f"mask-inference checkpoint '{self.checkpoint}' is not a directory saved by bench.models.mlm "
                "(MaskedLM.save); leave it empty to use mlm.")
        self.run_notes: dict = {}
        self._model = None
        self._top1: float | None = None
        self._top1_note: dict = {}

    def check(self) -> None:
        """The attacker's MLM must resolve (no weights are loaded; a checkpoint is checked in __post_init__)."""
        from bench.models.loading import check_model_name
        from bench.models.mlm import check_mlm_name
        from bench.models.offline_mlm import offline_steps

        if self.checkpoint or self.mlm == UNTRAINED or offline_steps(self.mlm) is not None:
            return  # minilm-mlm is trained offline on first use
        if self.mlm.startswith("mock") or self.mlm == "bilstm":
            raise BenchError(f"mask-inference mlm='{self.mlm}' has no WordPiece transformer to use as a masked LM; "
                             "use minilm-mlm or a hub id such as bert-base-uncased.")
        if self.mlm == "minilm" and not self.adapted:  # adapted, minilm's head is trained by the adaptation
            raise BenchError(f"mask-inference mlm=minilm would attack with an untrained head; use minilm-mlm (the "
                             f"default: trained offline), or mlm={UNTRAINED} to run that head as an ablation.")
        check_model_name(self.mlm, f"mask-inference mlm='{self.mlm}', the attacker's masked LM,")
        if not self.adapted:  # an adapted attacker trains the head itself
            check_mlm_name(self.mlm)

    def offline_mlms(self, defense_mlms: tuple[str, ...] = ()) -> tuple[str, ...]:
        """Its ``mlm``, unless it loads a checkpoint, adapts its own or runs the untrained head."""
        return () if self.checkpoint or self.adapted or self.mlm == UNTRAINED else (self.mlm,)

    def _load(self, public: PublicKnowledge, release: Release | None = None):
        """The attacker's MLM, loaded once (``release`` names the mechanism an ``adapted`` MLM is adapted to)."""
        from bench.models.mlm import load_mlm

        if self._model is None:
            device = getattr(public.encoder, "device", "cpu")
            if self.checkpoint:
                name = str(Path(self.checkpoint).expanduser())
            elif self.adapted:
                name = self._adapted_checkpoint(release, public, device)
            else:
                name = "minilm" if self.mlm == UNTRAINED else self.mlm
            self._model = load_mlm(name, device, task=public.task)  # minilm-mlm never trained on the task's text
        return self._model

    def _adapted_checkpoint(self, release: Release | None, public: PublicKnowledge, device: str) -> str:
        """Pretrain (or find cached) ``mlm`` adapted to the release's public mechanism (Qu et al. §3.4)."""
        from bench.models.adaptation import AdaptationConfig, adapt_encoder

        if release is None or release.mechanism is None:
            raise BenchError("mask-inference adapted= needs a release that carries its public mechanism.")
        if release.space is not None and release.space.format != "wordpiece":
            raise BenchError("mask-inference adapted= works in the encoder's WordPiece space; the release was made "
                             "in a word-vector space.")
        config = AdaptationConfig(self.adapted, self.adapted_steps)
        name = "minilm" if self.mlm == UNTRAINED else self.mlm
        return str(adapt_encoder(release.mechanism.fresh(), name, config, device, public.task))

    def _segments(self, release: Release, space) -> tuple[list, list]:
        """The attacked segments (ids or strings) and, for a pair, the partner segment and which comes first."""
        items = list(release.data)
        flat, _ = flatten_segments(items)
        if items and isinstance(items[0], tuple):  # (partner segment, whether the attacked one comes first)
            partners = [(flat[i + 1], True) if i % 2 == 0 else (flat[i - 1], False) for i in range(len(flat))]
        else:
            partners = [None] * len(flat)
        if self.max_sentences:
            flat, partners = flat[: self.max_sentences], partners[: self.max_sentences]
        return flat, partners

    def attack(self, release: Release, public: PublicKnowledge) -> MaskGuesses:
        """The MLM's guess at every position of every attacked released sentence."""
        from bench.models.masked_lm import top1_at

        space = space_of(release.space, public.encoder)
        mlm = self._load(public, release)
        units = _Units(space, mlm)
        segments, partners = self._segments(release, space)
        max_length = int(getattr(public.encoder, "max_length", 128))
        rows, types, where, lengths = [], [], [], []
        for segment, partner in zip(segments, partners):
            pieces = units.pieces(segment)
            context = None if partner is None else np.concatenate(units.pieces(partner[0]) or [np.zeros(0, np.int64)])
            first = partner is None or partner[1]
            lengths.append(len(pieces))
            for position in range(len(pieces)):
                row, token_types, at = _masked_row(pieces, position, context, first, mlm.tokenizer, max_length)
                rows.append(row)
                types.append(token_types)
                where.append(np.array([at]))
        found = top1_at(mlm, rows, types, where, units.allowed, self.batch_size,
                        f"mask-inference on {len(rows)} positions") if rows else []
        flat = units.to_space(np.concatenate(found) if found else np.zeros(0, dtype=np.int64))
        bounds = np.cumsum([0, *lengths])
        self.run_notes = {"mlm": self.checkpoint or self.mlm, "mlm_head": mlm.head, "masked_positions": len(rows),
                          "attacked_sentences": len(segments), **self._top1_note}
        return MaskGuesses({"token_accuracy": [flat[a:b] for a, b in zip(bounds, bounds[1:])]}, space)

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> MaskGuesses:
        """A uniformly drawn regular token (a word of a word space) at every attacked position."""
        space = space_of(release.space, public.encoder)
        segments, _ = self._segments(release, space)
        shapes = space.released_ids(segments) if segments and isinstance(segments[0], str) else segments
        return MaskGuesses({"token_accuracy": [rng.choice(space.candidates, size=len(x)) for x in shapes]}, space,
                           random=True)

    def score(self, guesses: MaskGuesses, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Fraction of the attacked sentences' true tokens recovered; and (not for the random reference) the
        MLM's top-1 accuracy on held-out public text."""
        found = guesses.by_metric["token_accuracy"]
        true_ids = guesses.space.client_ids(flatten_segments(truth.texts)[0][: len(found)])
        total = sum(len(t) for t in true_ids)
        scores = {"token_accuracy": hits(found, true_ids) / total if total else 0.0}
        if not guesses.random:
            scores["mlm_top1"] = self._held_out_top1(public)
        return scores

    def _held_out_top1(self, public: PublicKnowledge) -> float:
        """On the same held-out sentences for every run; measured once per process for the same MLM weights."""
        from bench.data.public_corpus import held_out
        from bench.models.mlm import held_out_top1

        if self._top1 is None:
            texts, description, _ = held_out(public.task, HELD_OUT_SENTENCES)
            self._top1 = held_out_top1(self._load(public), texts, seed=0)
            self._top1_note = {"mlm_top1_text": description}
        self.run_notes.update(self._top1_note)
        return self._top1


class _Units:
    """How released sentences become MLM input: one unit (a run of WordPiece ids) per token of the space,
    and how the MLM's guesses map back into the space."""

    def __init__(self, space, mlm) -> None:
        self.space, self.tokenizer = space, mlm.tokenizer
        if space.format == "wordpiece":
            if space.encoder.tokenizer.get_vocab() != mlm.tokenizer.get_vocab():
                raise BenchError(f"mask-inference: the MLM '{mlm.name}' has another WordPiece vocabulary than the "
                                 f"release's encoder '{space.encoder.name}'; choose an MLM with the same tokenizer.")
            self.allowed = mlm.regular
            self.lookup = None
            return
        # word space: whole-word regular tokens that are words of the space, mapped to their word ids
        vocabulary = mlm.tokenizer.get_vocab()
        ids, words = [], []
        for token, token_id in vocabulary.items():
            word = space.index.get(token, space.index.get(token.lower(), -1))
            if word >= 0 and not token.startswith("##"):
                ids.append(token_id)
                words.append(word)
        keep = np.isin(ids, mlm.regular)
        if not keep.any():
            raise BenchError(f"mask-inference: no token of the MLM '{mlm.name}' is a word of {space.path}.")
        self.allowed = np.asarray(ids)[keep]
        self.lookup = np.full(max(vocabulary.values()) + 1, UNMAPPED, dtype=np.int64)
        self.lookup[self.allowed] = np.asarray(words)[keep]

    def pieces(self, segment) -> list[np.ndarray]:
        """One array of WordPiece ids per token of the space in a released segment."""
        if self.lookup is None:
            ids = self.space.released_ids([segment])[0] if isinstance(segment, str) else np.asarray(segment)
            return [np.array([i], dtype=np.int64) for i in ids]
        words = segment.split()  # a released word-space segment: its words, as the space rendered them
        encoded = self.tokenizer(words, add_special_tokens=False)["input_ids"] if words else []
        return [np.asarray(x or [self.tokenizer.unk_token_id], dtype=np.int64) for x in encoded]

    def to_space(self, guesses: np.ndarray) -> np.ndarray:
        """WordPiece guesses as ids of the space."""
        return guesses if self.lookup is None else self.lookup[guesses]


def _masked_row(pieces: list[np.ndarray], position: int, partner: np.ndarray | None, first: bool, tokenizer,
                max_length: int) -> tuple[np.ndarray, np.ndarray, int]:
    """[CLS] a [SEP] (b [SEP]) with one [MASK] in the attacked segment, its token types and the [MASK]'s index.

    The partner (the other sentence of a pair) keeps its place, first or second, when both fit in
    ``max_length``; otherwise the attacked segment stands alone, cut to a window around the masked token
    if it is longer than the budget.
    """
    before = np.concatenate(pieces[:position] or [np.zeros(0, np.int64)])
    after = np.concatenate(pieces[position + 1 :] or [np.zeros(0, np.int64)])
    own = np.concatenate([before, [tokenizer.mask_token_id], after]).astype(np.int64)
    at = len(before)
    if partner is not None and len(own) + len(partner) + 3 <= max_length:
        a, b = (own, partner) if first else (partner, own)
        row = np.concatenate([[tokenizer.cls_token_id], a, [tokenizer.sep_token_id], b,
                              [tokenizer.sep_token_id]]).astype(np.int64)
        types = np.concatenate([np.zeros(len(a) + 2, np.int64), np.ones(len(b) + 1, np.int64)])
        return row, types, at + 1 if first else len(partner) + 2 + at
    budget = max_length - 2
    if len(own) > budget:
        start = min(max(0, at - budget // 2), len(own) - budget)
        own, at = own[start : start + budget], at - start
    row = np.concatenate([[tokenizer.cls_token_id], own, [tokenizer.sep_token_id]]).astype(np.int64)
    return row, np.zeros(len(row), np.int64), at + 1
