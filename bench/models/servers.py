"""Servers: the service provider's model of each task family, trained on releases only.

A server never receives raw text: the engine hands it released token ids or vectors (which it
encodes with its own, public encoder) or released sentence representations, batch by batch, as
the client sends them. ``SentenceServer`` covers sentence(-pair) classification and regression
(frozen features + MLP head, fine-tuning, the BiLSTM); other families (a token tagger, a span parser,
an extractive reader, an MLM, a prediction API) implement the same small interface.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

import numpy as np

from bench.core.errors import BenchError
from bench.models.api import logits_of, train_victim
from bench.models.probe import fit_probe
from bench.models.training import TrainingConfig, initial_head, loss_fn, targets_for, train_loop

if TYPE_CHECKING:
    from bench.models.encoders import Encoder


@dataclass
class HiddenBatches:
    """What a client sends while the server trains: one released batch per (indices, client) request.

    ``batch(idx, client, generator) -> (x, y)`` runs on the client (it encodes and hides its own
    examples); the server only sees its result. ``trainable`` are parameters the server may train
    with its head (the shared encoder when fine-tuning through the defense, as TextHide does).
    """

    size: int
    dim: int
    num_outputs: int
    shards: list[np.ndarray]
    batch: Callable[..., tuple]
    trainable: Sequence[Any] = ()
    device: str = "cpu"
    finetuning: bool = False


class Server:
    """The interface every task family's server implements."""

    # client protocols it can train from, in order of preference: "representations" (hidden sentence
    # representations sent batch by batch) and "tokens" (released token ids or vectors it encodes itself)
    protocols: ClassVar[tuple[str, ...]] = ()
    # whether its model can train by DP-SGD (``bench.models.dp_sgd``; the engine sets ``privacy`` then)
    trains_privately: ClassVar[bool] = False

    def fit_tokens(self, released: list, labels: Any) -> None:
        """Train on released token ids / vectors (one item per example; pairs as tuples)."""
        raise BenchError(f"{type(self).__name__} does not train on token releases.")

    def predict_tokens(self, released: list) -> Any:
        """Predictions for released evaluation items."""
        raise BenchError(f"{type(self).__name__} does not predict token releases.")

    def fit_hidden(self, batches: HiddenBatches) -> None:
        """Train on hidden representations the client sends batch by batch."""
        raise BenchError(f"{type(self).__name__} does not train on sentence representations.")

    def predict_hidden(self, representations) -> Any:
        """Predictions for hidden evaluation representations."""
        raise BenchError(f"{type(self).__name__} does not predict sentence representations.")


@dataclass
class SentenceServer(Server):
    """Sentence(-pair) classifier or regressor: the server's encoder (frozen and cached, fine-tuned, or the
    BiLSTM) and an MLP head (``bench.models.training``). With ``privacy`` set the frozen head trains by DP-SGD
    (``bench.models.dp_sgd``); the trained server is the same object either way."""

    protocols: ClassVar[tuple[str, ...]] = ("representations", "tokens")
    trains_privately: ClassVar[bool] = True

    num_labels: int
    config: TrainingConfig
    seed: int
    encoder: Encoder | None = None  # the server's encoder for token releases (set by the engine)
    privacy: Any = None  # DP-SGD for the head (bench.models.dp_sgd.DPSGD; set by the engine), or None
    head: Any = field(default=None, init=False)
    # the deterministic convex probe on the frozen features (bench.models.probe; frozen mode only) and its
    # predictions for the items last predicted (None where no probe was fitted)
    probe: Any = field(default=None, init=False)
    probe_predictions: Any = field(default=None, init=False)

    def fit_tokens(self, released, labels):
        """Encode the released ids / vectors with the server's encoder and train the head (or fine-tune); frozen,
        also fit the probe on the same features."""
        from bench.models.training import finetune, targets_for, train_head

        targets = targets_for(labels, self.num_labels)
        unchanged = lambda x, y, generator: (x, y)  # noqa: E731  (the release is already private)
        if self.config.mode == "frozen":
            features = self.encoder.encode(released)
            self.head = train_head(features, targets, unchanged, self.config, self.seed, privacy=self.privacy)
            self.fit_probe(features, targets)
        else:
            self._no_private_finetuning()
            self.encoder.model.get_input_embeddings().weight.requires_grad_(False)  # the client's side
            self.head = finetune(self.encoder, released, targets, unchanged, self.config, self.seed)

    def _no_private_finetuning(self) -> None:
        if self.privacy is not None:
            raise BenchError("DP-SGD trains the frozen head here: fine-tuning under DP-SGD is not implemented.")

    def fit_probe(self, features: np.ndarray, targets: np.ndarray) -> None:
        """Fit the deterministic probe on frozen training features and their (one-hot, mixed or real) targets; none
        beside a DP-SGD head (the probe is not private, and its utility would be read as the private server's)."""
        private = self.privacy is not None and self.privacy.private
        self.probe = None if private else fit_probe(features, targets, self.num_labels)

    def _predict(self, features) -> np.ndarray:
        """The head's predictions; the probe's are kept in ``probe_predictions``."""
        from bench.models.training import predict

        self.probe_predictions = None
        if self.probe is not None:
            array = features.detach().cpu().numpy() if hasattr(features, "detach") else np.asarray(features)
            self.probe_predictions = self.probe.predict(array)
        return predict(self.head, features, self.num_labels)

    def predict_tokens(self, released):
        """Class ids (or regression values) for released evaluation items."""
        return self._predict(self.encoder.encode(released))

    def logits(self, features) -> np.ndarray:
        """The head's outputs ``(n, num_labels)`` for features (encoded releases or hidden representations)."""
        import torch

        with torch.inference_mode():
            return self.head(torch.as_tensor(features, dtype=torch.float32).cpu()).numpy()

    def unit_logits(self, released, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(logits, labels, owners)`` of released items: one unit per item (``bench.core.releases.ServerModel``)."""
        return self.logits(self.encoder.encode(released)), np.asarray(labels), np.arange(len(released))

    def fit_hidden(self, batches: HiddenBatches):
        """Train the head (and, fine-tuning, the shared encoder) on the client's hidden batches."""
        import torch


        clients = len(batches.shards)
        if batches.finetuning:
            self._no_private_finetuning()
            description = f"fine-tuning ({batches.size} examples)"
            optimizer = torch.optim.AdamW
        else:
            description = f"training head ({batches.size} examples, {clients} client{'s' * (clients > 1)})"
            optimizer = torch.optim.Adam
        head = train_loop(batches.shards, batches.dim, batches.num_outputs, self.config, self.seed, description,
                          batches.batch, optimizer, batches.trainable, batches.device, privacy=self.privacy)
        self.head = head.cpu() if batches.finetuning else head

    def predict_hidden(self, representations):
        """Class ids (or regression values) for hidden evaluation representations."""
        return self._predict(representations)


@dataclass
class TaggingServer(Server):
    """Token tagger: the server's frozen encoder gives each released token a representation, and an MLP head
    (``bench.models.training.make_head``) tags it. Labels are one tag per released token (the task aligns
    them with the public token space); only the token protocol applies (a tag needs its token). With ``privacy``
    set the head trains by DP-SGD with a sentence as the privacy unit (``bench.models.dp_sgd``): a lot holds
    ``batch_size`` sentences, where a plain batch holds ``batch_size`` tokens."""

    protocols: ClassVar[tuple[str, ...]] = ("tokens",)
    trains_privately: ClassVar[bool] = True

    num_tags: int
    config: TrainingConfig  # epochs, lr, batch_size, head_layers, activation, dropout
    seed: int
    encoder: Encoder | None = None
    privacy: Any = None  # DP-SGD for the head (bench.models.dp_sgd.DPSGD; set by the engine), or None
    head: Any = field(default=None, init=False)
    # the deterministic convex probe on the same token features (bench.models.probe) and its tags for the sentences
    # last predicted, one array per sentence as predict_tokens returns them
    probe: Any = field(default=None, init=False)
    probe_predictions: Any = field(default=None, init=False)

    def _features(self, released) -> tuple[list[np.ndarray], np.ndarray]:
        states = self.encoder.token_states(released)
        return states, np.concatenate(states) if states else np.zeros((0, self.encoder.dim), np.float32)

    def fit_tokens(self, released, labels):
        """Train the head on every released token's representation and its tag (minibatches, Adam), and fit the
        deterministic probe on the same token features and tags."""
        import torch


        states, features = self._features(released)
        tags = np.concatenate([np.asarray(tag, dtype=np.int64)[: len(s)] for tag, s in zip(labels, states)])
        targets = targets_for(tags, self.num_tags)  # one-hot, shared by the head and the probe
        x, y = torch.from_numpy(features), torch.from_numpy(targets)
        if self.privacy is not None and self.privacy.private:
            self._fit_privately(states, x, y)
            return
        head = initial_head(features.shape[1], self.num_tags, self.config, self.seed).train()
        optimizer = torch.optim.Adam(head.parameters(), lr=self.config.lr, foreach=True)
        order_generator = torch.Generator().manual_seed(self.seed)
        for _ in range(self.config.epochs):
            order = torch.randperm(len(x), generator=order_generator)
            for start in range(0, len(order), self.config.batch_size):
                idx = order[start : start + self.config.batch_size]
                loss = loss_fn(head(x[idx]), y[idx], regression=False)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        self.head = head.eval()
        self.probe = fit_probe(features, targets, self.num_tags)
        if self.privacy is not None:  # epsilon = inf: the plain tagger, its facts recorded
            self.privacy.record_plain(len(states), self.config.epochs * -(-len(x) // self.config.batch_size))

    def _fit_privately(self, states: list[np.ndarray], x, y) -> None:
        """DP-SGD with a sentence as the unit: Poisson lots of sentences, each sentence's gradient (the mean of its
        tokens' losses) clipped whole. No probe beside a private head."""
        import torch

        bounds = np.concatenate([[0], np.cumsum([len(s) for s in states])]).astype(np.int64)

        def batch(idx):
            rows = [np.arange(bounds[i], bounds[i + 1]) for i in idx.tolist()]
            owner = np.concatenate([np.full(len(r), k) for k, r in enumerate(rows)])
            return x[torch.from_numpy(np.concatenate(rows))], y[torch.from_numpy(np.concatenate(rows))], owner

        with torch.random.fork_rng():  # the same seeded initial head as the plain tagger's
            head = initial_head(x.shape[1], self.num_tags, self.config, self.seed)
            self.head = self.privacy.train(head, len(states), batch, self.config, self.seed, False, torch.optim.Adam)
        self.probe = None

    def unit_logits(self, released, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(logits, tags, owners)``: one unit per released token with its tag (``labels``: one tag array per
        sentence, aligned with the released tokens), owned by its sentence (``bench.core.releases.ServerModel``)."""
        import torch

        states, features = self._features(released)
        lengths = [min(len(s), len(tag)) for s, tag in zip(states, labels)]
        starts = np.cumsum([0] + [len(s) for s in states])
        keep = np.concatenate([np.arange(a, a + n) for a, n in zip(starts, lengths)] + [np.zeros(0, int)])
        tags = np.concatenate([np.asarray(tag, dtype=np.int64)[:n] for tag, n in zip(labels, lengths)]
                              + [np.zeros(0, np.int64)])
        with torch.inference_mode():
            logits = self.head(torch.from_numpy(features[keep])).numpy()
        return logits, tags, np.repeat(np.arange(len(states)), lengths)

    def predict_tokens(self, released):
        """One array of predicted tags per released sentence (the probe's are kept in ``probe_predictions``)."""
        import torch

        states, features = self._features(released)
        with torch.inference_mode():
            flat = self.head(torch.from_numpy(features)).argmax(dim=1).numpy()
        bounds = np.cumsum([len(s) for s in states])[:-1]
        self.probe_predictions = None
        if self.probe is not None:
            self.probe_predictions = np.split(self.probe.predict(features), bounds) if states else []
        return np.split(flat, bounds) if states else []


@dataclass
class PredictionServer(Server):
    """A prediction API's victim (``bench.models.api``): the server's frozen encoder and an MLP head trained on the
    released training data (text, or token ids a data defense released); it answers with logits that the
    engine passes through the output defense. With ``privacy`` set the victim's head trains by DP-SGD
    (``bench.models.dp_sgd``), so the API answers from a private model."""

    protocols: ClassVar[tuple[str, ...]] = ("api",)
    trains_privately: ClassVar[bool] = True

    num_labels: int
    config: TrainingConfig
    seed: int
    encoder: Encoder | None = None  # set by the engine
    privacy: Any = None  # DP-SGD for the victim's head (bench.models.dp_sgd.DPSGD; set by the engine), or None
    head: Any = field(default=None, init=False)
    facts: dict = field(default_factory=dict, init=False)

    def fit_released(self, released: list, labels: np.ndarray, objective=None) -> None:
        """Train the victim head on the released training items (``objective``: the nasty teacher's, or None)."""
        if self.config.mode != "frozen":
            raise BenchError("a prediction API's victim trains on frozen features here: use --mode frozen.")
        self.head, self.facts = train_victim(self.encoder.encode(released), np.asarray(labels), self.num_labels,
                                             self.config, self.seed, objective, self.privacy)

    def logits(self, items: list) -> np.ndarray:
        """The victim's logits for items (raw texts at query time)."""
        return logits_of(self.head, self.encoder.encode(list(items)))
