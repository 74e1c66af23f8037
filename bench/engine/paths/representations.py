"""The representations path: the client encodes its text with the public encoder and hides the representations.

The defense family is ``RepresentationDefense``: TextHide's mixing and masking, d_chi noise. The client hides its
representations in batches once, or every epoch afresh where the defense's paper does so
(``RepresentationDefense.rehides_each_epoch``). The server trains on the hidden batches it receives and predicts
hidden evaluation representations. The releases: the evaluation sentences hidden as training batches are (training
traffic, the default) or as the client sends them for prediction (inference traffic: ``spec.traffic``; TextHide
masks them without mixing), and the single-example client updates of a client layer and the server's head
(``gradients``, built only if an attack takes them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from bench.core.components import RepresentationDefense, Task
from bench.core.errors import BenchError
from bench.core.registry import TASKS
from bench.core.releases import GradientRelease, Release, ReleaseKind, ServerModel
from bench.core.spec import INFERENCE, TRAINING
from bench.engine.membership import defer_model_release
from bench.engine.paths.base import CellContext, CellOutput, ReleasePath, probe_scores
from bench.models.generators import torch_generator
from bench.models.servers import HiddenBatches
from bench.models.training import client_shards, initial_client_layer, initial_head, loss_fn, targets_for

GRADIENT_UPDATES = 64  # single-example updates a gradients release holds (the attack's N is at most this)


@dataclass
class RepresentationOutput(CellOutput):
    """A representation release's output: the gradients release is deferred until an attack takes it."""

    deferred: dict[ReleaseKind, Callable[[], Release]] = field(default_factory=dict)  # kind -> () -> Release

    def release(self, kind: ReleaseKind) -> Release:
        """The release of ``kind``, building a deferred one on first use."""
        if kind not in self.releases:
            self.releases[kind] = self.deferred.pop(kind)()
        return self.releases[kind]


class RepresentationsPath(ReleasePath):
    """Sentence representations hidden on the client, and the client updates of federated training."""

    name = "representations"
    families = (RepresentationDefense,)
    yields = {ReleaseKind.SENTENCE_EMBEDDINGS: np.ndarray, ReleaseKind.GRADIENTS: GradientRelease,
              ReleaseKind.MODEL: ServerModel}
    traffics = {ReleaseKind.SENTENCE_EMBEDDINGS: (TRAINING, INFERENCE)}  # client updates are training traffic only
    hooks = Task
    output = RepresentationOutput

    def run(self, defense: RepresentationDefense, context: CellContext, server) -> RepresentationOutput:
        """Encode and hide; train the server on hidden batches and score it on hidden evaluation data."""
        return run_representations(defense, context, server)


@dataclass
class ClientSide:
    """What a representation defense's ``prepare`` may use: the cell's public facts and the client's encoder."""

    task: str
    n_train: int
    seed: int
    mode: str
    encoder: Any

    def public_texts(self, task: str) -> list:
        """Training texts of another (public) task, as many as the cell's training split."""
        return list(TASKS.get(task)().load(self.n_train, 2, self.seed).train.texts)

    def sampler(self, texts: list):
        """``(count, generator) -> representations`` of random members of ``texts``, encoded as the client
        encodes its own (cached features when frozen; through the encoder being trained when fine-tuning)."""
        import torch

        encoder = self.encoder
        if self.mode == "frozen":
            reps = torch.from_numpy(encoder.encode(texts))
            return lambda count, g: reps[torch.randint(len(texts), (count,), generator=g)]
        return lambda count, g: encoder.pooled(
            [texts[i] for i in torch.randint(len(texts), (count,), generator=g).tolist()]).cpu()


def run_representations(defense: RepresentationDefense, context: CellContext, server) -> RepresentationOutput:
    """The client encodes and hides; the server trains on hidden batches and predicts hidden evaluation data."""
    import torch

    spec, config = context.spec, context.training
    seed = spec.seed
    train, evaluation = context.data.train, context.data.eval
    num_labels = context.task.num_labels
    y_train, y_eval = targets_for(train.labels, num_labels), targets_for(evaluation.labels, num_labels)
    clients = defense.client_count()
    shards = client_shards(len(train), clients, seed)
    transforms = [defense.client_transform(c) for c in range(clients)]
    encoder = context.encoder if config.mode == "frozen" else context.fresh_encoder()
    defense.setup(encoder.dim, torch_generator(seed, "client-secrets"))
    defense.prepare(ClientSide(spec.task, spec.n_train, seed, config.mode, encoder))
    y_all = torch.from_numpy(y_train)

    def release_once(x_train):
        """The training split hidden once as its batches are: what the learning attacks and the probe get."""
        return release_like_training(defense, torch.from_numpy(x_train), y_all, config.batch_size,
                                     torch_generator(seed, "client-release-train"))

    known = None
    if context.client_only and config.mode != "frozen":
        raise BenchError("a fine-tuned encoder's release depends on the server's training: run the cell in full.")
    if config.mode == "frozen":
        x_train = encoder.encode(train.texts)
        x_all = torch.from_numpy(x_train)
        if defense.rehides_each_epoch:
            def batch(idx, client, generator):
                return transforms[client](x_all[idx], y_all[idx], generator)
        else:  # the training split is released once; every epoch trains on that release
            known, known_targets = release_once(x_train)

            def batch(idx, client, generator):
                return known[idx], known_targets[idx]
        if not context.client_only:
            server.fit_hidden(HiddenBatches(len(train), x_train.shape[1], y_train.shape[1], shards, batch))
    else:
        texts = train.texts

        def batch(idx, client, generator):
            reps = encoder.pooled([texts[i] for i in idx.tolist()])
            x, y = transforms[client](reps.cpu(), y_all[idx], generator)
            return x.to(encoder.device), y.to(encoder.device)

        encoder.model.train()
        server.fit_hidden(HiddenBatches(len(train), encoder.dim, y_train.shape[1], shards, batch,
                                        list(encoder.model.parameters()), encoder.device, finetuning=True))
        encoder.model.eval()
        x_train = encoder.encode(train.texts)  # by the fine-tuned encoder
    x_eval = torch.from_numpy(encoder.encode(evaluation.texts))
    sent = defense.hide_inference(x_eval, torch_generator(seed, "client-inference"))
    if known is None:  # re-hidden every epoch, or encoded by a fine-tuned encoder: released once, after training
        known, known_targets = release_once(x_train)
    utility, probe, probe_notes = {}, {}, {}
    if not context.client_only:  # the server's part: the releases below never depend on it when frozen
        if config.mode == "frozen" and hasattr(server, "fit_probe"):
            # the probe trains on the training split hidden once as its batches are (``known``, with mixed
            # targets); predict_hidden then gives its predictions of the hidden evaluation representations
            server.fit_probe(known.numpy(), known_targets.numpy())
        utility = context.task.score(server.predict_hidden(sent), evaluation.labels)
        probe = probe_scores(context.task, server, getattr(server, "probe_predictions", None), evaluation.labels,
                             probe_notes)
    mechanism = defense.representation_mechanism()
    corpus_row = {text: i for i, text in enumerate(context.data.index_corpus()[0])}
    rows = np.array([corpus_row[t] for t in train.texts])
    if spec.traffic == INFERENCE:  # the queries the server predicted, and the training split hidden as they are
        hidden_train = defense.hide_inference(torch.from_numpy(x_train),
                                              torch_generator(seed, "client-inference-train"))
        release = Release(ReleaseKind.SENTENCE_EMBEDDINGS, sent.numpy(), owners=np.arange(len(evaluation)),
                          mechanism=mechanism, known_pairs=(hidden_train.numpy(), rows))
        attacked = ("the evaluation sentences as the client sends them for prediction (what an eavesdropper on "
                    "inference traffic sees); known pairs: the training split hidden the same way, with its "
                    "plaintext (for learning attacks)")
    else:
        observed, _ = release_like_training(defense, x_eval, torch.from_numpy(y_eval), config.batch_size,
                                            torch_generator(seed, "client-release"))
        release = Release(ReleaseKind.SENTENCE_EMBEDDINGS, observed.numpy(), owners=np.arange(len(evaluation)),
                          mechanism=mechanism, known_pairs=(known.numpy(), rows))
        attacked = (f"evaluation sentences hidden as training batches of {config.batch_size} (what an eavesdropper "
                    "on training traffic sees); known pairs: the training split hidden the same way, with its "
                    "plaintext (for learning attacks)")
    notes = {
        **probe_notes,
        "attacked_release": attacked,
        **({"clients": clients} if clients > 1 else {}),
        "public_mechanism": mechanism.describe(),
        **defense.describe(encoder.dim),
    }

    def gradients() -> Release:
        return gradient_release(defense, mechanism, x_eval, torch.from_numpy(y_eval), config, seed)

    output = RepresentationOutput(utility, {ReleaseKind.SENTENCE_EMBEDDINGS: release}, notes, encoder, probe=probe,
                                  deferred={ReleaseKind.GRADIENTS: gradients})
    if not context.client_only and hasattr(server, "logits"):  # a sentence server: its model is a release too
        def query(texts: list, labels, rng: np.random.Generator):
            """The deployed pipeline: the client encodes the query and hides it as it does its evaluation data."""
            generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
            hidden = defense.hide_inference(torch.from_numpy(encoder.encode(list(texts))), generator)
            return server.logits(hidden), np.asarray(labels), np.arange(len(texts))

        output.query = query
        defer_model_release(output, RepresentationsPath(), defense, context, server, mechanism)
    return output


def release_like_training(defense: RepresentationDefense, reps, targets, batch_size: int, generator):
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
        out[idx], out_targets[idx] = defense.hide_batch(reps[idx], targets[idx], generator)
    return out, out_targets


def gradient_release(defense: RepresentationDefense, mechanism, reps, targets, config,
                     seed: int) -> Release[GradientRelease]:
    """Single-example client updates in the first round of federated training (DLG's setting).

    The update is TextHide's as its Appendix C.1 mimic has it: the client passes each representation through a
    trained layer (``initial_client_layer``), hides the layer's outputs as training batches are hidden (mixing
    partners from their batch, then the mask), and the server's freshly initialised head takes them. As in
    Algorithm 2, whose clients send the encoder's gradients with the head's, the update holds the gradients of
    the client layer and of the head. The first ``GRADIENT_UPDATES`` evaluation examples make one update each.
    """
    import torch

    count = min(len(reps), GRADIENT_UPDATES)
    client = initial_client_layer(reps.shape[1], config, seed).eval()
    model = initial_head(reps.shape[1], targets.shape[1], config, seed).eval()
    parameters = list(client.parameters()) + list(model.parameters())
    hidden, mixed = release_like_training(defense, client(reps), targets, config.batch_size,
                                          torch_generator(seed, "client-updates"))
    regression = targets.shape[1] == 1
    updates = []
    for i in range(count):
        loss = loss_fn(model(hidden[i : i + 1]), mixed[i : i + 1].detach(), regression)
        grads = torch.autograd.grad(loss, parameters, retain_graph=i + 1 < count)
        updates.append([g.detach().numpy().copy() for g in grads])
    data = GradientRelease(model, updates, mixed[:count, None, :].detach().numpy(), regression, batch_size=1,
                           client=client)
    return Release(ReleaseKind.GRADIENTS, data, owners=np.arange(count), mechanism=mechanism)
