"""Base for defenses that privatize the encoder's inputs token by token (d_chi, SanText, ...).

The client splits its text in a public token space (bench.privacy.token_space: the encoder's regular
WordPiece tokens by default, or the words of a GloVe-format file given as ``vectors``) and releases
either tokens (``text``: WordPiece ids, or words as text) or token vectors (``token_embeddings``).
The server feeds the release to the encoder, adding [CLS]/[SEP] and position embeddings itself, and
trains its head; in ``finetune`` mode the encoder trains with its input embedding layer frozen.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench.core.components import Cell, Defense, DefenseOutput
from bench.data.examples import flatten_segments
from bench.core.errors import BenchError
from bench.core.params import added_later, component_args, require
from bench.core.releases import Release, ReleaseKind

ADAPTATIONS = ("vanilla", "prob", "denoising")


@dataclass
class InputDefense(Defense):
    """A defense whose release replaces the encoder input (token ids or token vectors).

    ``adapt`` composes the mechanism with privacy-adaptive pretraining of the server's encoder
    (Qu et al. 2021 §3.4, bench.models.adaptation): before training its head, the server further pretrains
    its masked LM on public text privatized by this same mechanism and parameter, with the token
    embedding table frozen, and encodes the releases with the adapted encoder.
    """

    release_kind: ClassVar[ReleaseKind] = ReleaseKind.TEXT
    releases: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TEXT,)

    adapt: str = added_later("")  # privacy-adaptive pretraining: vanilla, prob or denoising MLM; empty = none
    adapt_steps: int = added_later(300)  # its optimizer steps on privatized public text (a CPU budget)
    adapt_batch_size: int = added_later(16)  # sequences per step (a CPU budget; see AdaptationConfig)
    adapt_lr: float = added_later(5e-5)  # AdamW learning rate
    adapt_corpus: str = added_later("auto")  # public text: offline squad/conll2003/agnews/auto, or a hub corpus

    def __post_init__(self) -> None:
        require(self.adapt in ("", *ADAPTATIONS),
                f"adapt must be vanilla, prob or denoising (or empty), got '{self.adapt}'.")
        require(self.adapt_steps >= 1, f"adapt_steps must be >= 1, got {self.adapt_steps}.")
        require(self.adapt_batch_size >= 1, f"adapt_batch_size must be >= 1, got {self.adapt_batch_size}.")
        require(self.adapt_lr > 0, f"adapt_lr must be > 0, got {self.adapt_lr}.")
        from bench.data.public_corpus import check_corpus_name

        check_corpus_name(self.adapt_corpus)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.releases = (cls.release_kind,)  # one release kind, declared once

    def token_space(self, encoder):
        """The space the mechanism works in: a ``vectors`` file if the defense has one set, else WordPiece."""
        from bench.privacy.token_space import token_space

        return token_space(encoder, getattr(self, "vectors", ""))

    def fit(self, ids: list[np.ndarray], space) -> None:
        """Learn client-side statistics from all of the client's token ids (default: none).

        SanText+ counts token frequencies here to pick its sensitive set; nothing is released.
        """

    def streaming(self) -> None:
        """Prepare for many small ``privatize`` calls (pretraining privatizes on the fly); default: nothing.

        Called on a copy of the defense, never on the one that makes a cell's releases.
        """

    def public_mechanism(self) -> dict:
        """The mechanism as an adversary knows it (name and parameters), for Bayesian attacks; default none."""
        return {}

    def privatize(self, ids: list[np.ndarray], space, rng: np.random.Generator) -> list[np.ndarray]:
        """The client's privatized ids (or vectors) for each sentence, in ``space`` (``table``, ``candidates``)."""
        raise NotImplementedError

    def run(self, cell: Cell) -> DefenseOutput:
        """Client privatizes both splits; server trains and predicts on what it receives."""
        from bench.core.seeding import numpy_generator
        from bench.models.training import finetune, predict, targets_for, train_head

        seed, config = cell.spec.seed, cell.training
        encoder = cell.encoder if config.mode == "frozen" else cell.fresh_encoder()
        adaptation = {}
        if self.adapt:
            encoder, adaptation = self._adapted_encoder(cell)
        if getattr(encoder, "tokenizer", None) is None:
            raise BenchError(
                f"{type(self).registry_name} perturbs tokens and needs a real encoder "
                f"(minilm or a hub id), not '{encoder.name}'."
            )
        space = self.token_space(encoder)
        train_segments, regroup_train = flatten_segments(cell.data.train.texts)  # a pair's sentences separately
        eval_segments, regroup_eval = flatten_segments(cell.data.eval.texts)
        train_ids = space.client_ids(train_segments, numpy_generator(seed, "client-train-oov"))
        eval_ids = space.client_ids(eval_segments, numpy_generator(seed, "client-eval-oov"))
        self.fit(train_ids + eval_ids, space)
        train_release = regroup_train(
            space.render(self.privatize(train_ids, space, numpy_generator(seed, "client-train"))))
        eval_release = regroup_eval(
            space.render(self.privatize(eval_ids, space, numpy_generator(seed, "client-eval"))))

        y_train = targets_for(cell.data.train.labels, cell.task.num_labels)
        unchanged = lambda x, y, generator: (x, y)  # noqa: E731  (the release is already private)
        if config.mode == "frozen":
            head = train_head(encoder.encode(train_release), y_train, unchanged, config, seed)
        else:
            encoder.model.get_input_embeddings().weight.requires_grad_(False)  # the client's side
            head = finetune(encoder, train_release, y_train, unchanged, config, seed)
        predictions = predict(head, encoder.encode(eval_release), cell.task.num_labels)
        release = Release(
            self.release_kind,
            eval_release,
            owners=np.arange(len(eval_release)),
            public={"defense": type(self).registry_name, **component_args(self), **space.public(),
                    "mechanism": self.public_mechanism()},
        )
        notes = {"released_tokens": int(sum(len(x) for x in eval_ids)), "token_space": space.format,
                 **self.describe(encoder.dim), **adaptation}
        return DefenseOutput(cell.task.score(predictions, cell.data.eval.labels), {self.release_kind: release},
                             notes, encoder)

    def _adapted_encoder(self, cell: Cell):
        """The server's encoder after privacy-adaptive pretraining (cached), and what the record says of it.

        One checkpoint serves every run seed (adaptation seed 0), as the paper pretrains once.
        """
        from bench.models.adaptation import AdaptationConfig, adapt_encoder
        from bench.models.encoders import Encoder, quiet_loading

        spec = cell.spec
        if getattr(self, "vectors", ""):
            raise BenchError("privacy-adaptive pretraining works in the encoder's WordPiece space; drop vectors= "
                             "or adapt=.")
        config = AdaptationConfig(self.adapt, self.adapt_steps, self.adapt_batch_size, self.adapt_lr,
                                  corpus=self.adapt_corpus)
        path = adapt_encoder(self, spec.encoder, config, spec.device, spec.task)
        info = json.loads((path / "adaptation.json").read_text(encoding="utf-8"))
        with quiet_loading():
            encoder = Encoder(str(path), spec.device, spec.pooling, spec.max_length,
                              cache=cell.training.mode == "frozen")
        pooler, original = (getattr(getattr(e, "model", None), "pooler", None) for e in (encoder, cell.encoder))
        if pooler is not None and original is not None:
            pooler.load_state_dict(original.state_dict())  # MLM pretraining never touches (nor saves) it
        encoder.revision = f"adapted-{info['key']}"
        notes = {f"adaptation_{k}": info[k] for k in ("objective", "corpus", "head", "mlm_top1_before",
                                                       "mlm_top1_after", "sequences_per_s", "privatize_share")
                 if k in info}
        notes["adaptation_objective"] = self.adapt
        return encoder, notes
