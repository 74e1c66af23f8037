"""Base for defenses that act on sentence representations (TextHide, d_chi on sequences, ...).

A subclass overrides ``hide`` (one transform for training and inference) or, like TextHide,
``hide_batch`` (training batches: representations and targets) and ``hide_inference``. ``setup``
draws the client's secrets once. ``run`` is the whole cell: the client encodes and hides, the
server trains its head on hidden batches and predicts hidden evaluation representations.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from bench.core.components import Cell, Defense, DefenseOutput
from bench.core.params import component_args
from bench.core.releases import GradientRelease, Release, ReleaseKind


class RepresentationDefense(Defense):
    """A defense whose release is the (transformed) sentence representation."""

    releases: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.SENTENCE_EMBEDDINGS, ReleaseKind.GRADIENTS)

    def setup(self, dim: int, generator) -> None:
        """Draw the client's secrets for representations of size ``dim`` (default: none)."""

    def hide(self, reps, generator):
        """Transform a batch of representations ``(n, dim)`` (default: unchanged)."""
        return reps

    def hide_batch(self, reps, targets, generator):
        """Transform a training batch and its targets (default: ``hide`` on the representations)."""
        return self.hide(reps, generator), targets

    def hide_inference(self, reps, generator):
        """Transform representations sent for prediction (default: ``hide``)."""
        return self.hide(reps, generator)

    def client_transform(self, client: int):
        """The batch transform federated client ``client`` applies (default: ``hide_batch``)."""
        return self.hide_batch

    def prepare(self, cell: Cell, encoder) -> None:
        """Load what the client needs beyond its own data (e.g. a public corpus); default nothing."""

    def release_like_training(self, reps, targets, batch_size: int, generator):
        """Hide ``reps`` exactly as training batches are hidden; row i still belongs to example i.

        This is what an eavesdropper on training traffic observes for these sentences. Returns the
        hidden rows and their (mixed) targets.
        """
        import torch

        order = torch.randperm(len(reps), generator=generator)
        bounds = list(range(0, len(order), batch_size)) + [len(order)]
        if len(bounds) > 2 and bounds[-1] - bounds[-2] == 1:
            del bounds[-2]  # a batch of one could only mix with itself: fold it into the previous one
        out, out_targets = torch.empty_like(reps), torch.empty_like(targets)
        for start, stop in zip(bounds, bounds[1:]):
            idx = order[start:stop]
            out[idx], out_targets[idx] = self.hide_batch(reps[idx], targets[idx], generator)
        return out, out_targets

    def run(self, cell: Cell) -> DefenseOutput:
        """Client hides, server trains on hidden batches; utility on hidden evaluation data."""
        import torch

        from bench.core.seeding import torch_generator
        from bench.models.training import client_shards, finetune, predict, targets_for, train_head

        seed, config = cell.spec.seed, cell.training
        train, evaluation = cell.data.train, cell.data.eval
        y_train = targets_for(train.labels, cell.task.num_labels)
        y_eval = targets_for(evaluation.labels, cell.task.num_labels)
        clients = max(1, getattr(self, "clients", 0))
        shards = client_shards(len(train), clients, seed)
        transforms = [self.client_transform(c) for c in range(clients)]
        encoder = cell.encoder if config.mode == "frozen" else cell.fresh_encoder()
        self.setup(encoder.dim, torch_generator(seed, "client-secrets"))
        self.prepare(cell, encoder)
        if config.mode == "frozen":
            x_train = encoder.encode(train.texts)
            head = train_head(x_train, y_train, transforms, config, seed, shards)
        else:
            head = finetune(encoder, train.texts, y_train, transforms, config, seed, shards)
            x_train = encoder.encode(train.texts)  # by the fine-tuned encoder
        x_eval = torch.from_numpy(encoder.encode(evaluation.texts))
        sent = self.hide_inference(x_eval, torch_generator(seed, "client-inference"))
        utility = cell.task.score(predict(head, sent, cell.task.num_labels), evaluation.labels)
        public = {"defense": type(self).registry_name, **component_args(self)}
        observed, _ = self.release_like_training(
            x_eval, torch.from_numpy(y_eval), config.batch_size, torch_generator(seed, "client-release")
        )
        known, _ = self.release_like_training(
            torch.from_numpy(x_train), torch.from_numpy(y_train), config.batch_size,
            torch_generator(seed, "client-release-train"),
        )
        corpus_row = {text: i for i, text in enumerate(cell.data.corpus()[0])}
        release = Release(
            ReleaseKind.SENTENCE_EMBEDDINGS,
            observed.numpy(),
            owners=np.arange(len(evaluation)),
            public=public,
            known_pairs=(known.numpy(), np.array([corpus_row[t] for t in train.texts])),
        )
        notes = {
            "attacked_release": "evaluation sentences hidden as training batches of "
            f"{config.batch_size} (what an eavesdropper on training traffic sees); known pairs: the "
            "training split hidden the same way, with its plaintext (for learning attacks)",
            **({"clients": clients} if clients > 1 else {}),
            **self.describe(encoder.dim),
        }

        def gradients() -> Release:
            return self.gradient_release(x_eval, torch.from_numpy(y_eval), config, seed, public)

        return DefenseOutput(utility, {ReleaseKind.SENTENCE_EMBEDDINGS: release}, notes, encoder,
                             deferred={ReleaseKind.GRADIENTS: gradients})

    def gradient_release(self, reps, targets, config, seed: int, public: dict) -> Release:
        """Single-example client updates on the server's freshly initialised head (DLG's setting).

        The first ``GRADIENT_UPDATES`` evaluation examples are hidden as training batches are (mixing
        partners from their batch), and each one's hidden representation and target make one update:
        the gradient of the head's loss, as a federated client with batch size 1 would send it in the
        first round. Only the head's gradients are released: they are the part of the update that
        sees the hidden representation directly.
        """
        import torch

        from bench.core.seeding import torch_generator
        from bench.models.training import initial_head, loss_fn

        hidden, mixed = self.release_like_training(reps, targets, config.batch_size,
                                                   torch_generator(seed, "client-updates"))
        count = min(len(reps), GRADIENT_UPDATES)
        model = initial_head(reps.shape[1], targets.shape[1], config, seed).eval()
        regression = targets.shape[1] == 1
        updates = []
        for i in range(count):
            loss = loss_fn(model(hidden[i : i + 1]), mixed[i : i + 1], regression)
            updates.append([g.detach().numpy().copy() for g in torch.autograd.grad(loss, list(model.parameters()))])
        data = GradientRelease(model, updates, mixed[:count, None, :].numpy(), regression, batch_size=1)
        return Release(ReleaseKind.GRADIENTS, data, owners=np.arange(count), public=public)


GRADIENT_UPDATES = 64  # single-example updates a gradients release holds (the attack's N is at most this)
