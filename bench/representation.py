"""Base for defenses that act on sentence representations (TextHide, d_chi on sequences, ...).

A subclass overrides ``hide`` (one transform for training and inference) or, like TextHide,
``hide_batch`` (training batches: representations and targets) and ``hide_inference``. ``setup``
draws the client's secrets once. ``run`` is the whole cell: the client encodes and hides, the
server trains its head on hidden batches and predicts hidden evaluation representations.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from bench.components import Cell, Defense, DefenseOutput
from bench.params import component_args
from bench.releases import Release, ReleaseKind


class RepresentationDefense(Defense):
    """A defense whose release is the (transformed) sentence representation."""

    releases: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.SENTENCE_EMBEDDINGS,)

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

    def release_like_training(self, reps, targets, batch_size: int, generator):
        """Hide ``reps`` exactly as training batches are hidden; row i still belongs to example i.

        This is what an eavesdropper on training traffic observes for these sentences.
        """
        import torch

        order = torch.randperm(len(reps), generator=generator)
        bounds = list(range(0, len(order), batch_size)) + [len(order)]
        if len(bounds) > 2 and bounds[-1] - bounds[-2] == 1:
            del bounds[-2]  # a batch of one could only mix with itself: fold it into the previous one
        out = torch.empty_like(reps)
        for start, stop in zip(bounds, bounds[1:]):
            idx = order[start:stop]
            out[idx], _ = self.hide_batch(reps[idx], targets[idx], generator)
        return out

    def run(self, cell: Cell) -> DefenseOutput:
        """Client hides, server trains on hidden batches; utility on hidden evaluation data."""
        import torch

        from bench.seeding import torch_generator
        from bench.training import finetune, predict, targets_for, train_head

        seed, config = cell.spec.seed, cell.training
        train, evaluation = cell.data.train, cell.data.eval
        y_train = targets_for(train.labels, cell.task.num_labels)
        y_eval = targets_for(evaluation.labels, cell.task.num_labels)
        if config.mode == "frozen":
            encoder = cell.encoder
            self.setup(encoder.dim, torch_generator(seed, "client-secrets"))
            head = train_head(encoder.encode(train.texts), y_train, self.hide_batch, config, seed)
            x_eval = encoder.encode(evaluation.texts)
        else:
            encoder = cell.fresh_encoder()
            self.setup(encoder.dim, torch_generator(seed, "client-secrets"))
            head = finetune(encoder, train.texts, y_train, self.hide_batch, config, seed)
            x_eval = encoder.encode(evaluation.texts)
        x_eval = torch.from_numpy(x_eval)
        sent = self.hide_inference(x_eval, torch_generator(seed, "client-inference"))
        utility = cell.task.score(predict(head, sent, cell.task.num_labels), evaluation.labels)
        observed = self.release_like_training(
            x_eval, torch.from_numpy(y_eval), config.batch_size, torch_generator(seed, "client-release")
        )
        release = Release(
            ReleaseKind.SENTENCE_EMBEDDINGS,
            observed.numpy(),
            owners=np.arange(len(evaluation)),
            public={"defense": type(self).registry_name, **component_args(self)},
        )
        notes = {
            "attacked_release": "evaluation sentences hidden as training batches of "
            f"{config.batch_size} (what an eavesdropper on training traffic sees)",
            **self.describe(encoder.dim),
        }
        return DefenseOutput(utility, {ReleaseKind.SENTENCE_EMBEDDINGS: release}, notes, encoder)
