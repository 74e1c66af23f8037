"""The server's settings a spec records: how it trains its utility model, and what it does beyond the head.

They sit on the ground floor because a ``RunSpec`` holds them. The engine resolves them (``make_spec``) and checks
the names they hold (``bench.engine.server_options``); the models read them (``bench.models.training``).
A spec's server settings are one of: none, privacy-adaptive pretraining (``Adaptation``), DP-SGD training of the
server's head (``PrivateTraining``), both (``AdaptedPrivateTraining``), or the further pretraining of a pretraining
task (``Pretraining``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Union

from bench.core.params import component_args, require, within

MODES = ("frozen", "finetune")  # frozen: cached features, head only; finetune: the encoder trains too
ACTIVATIONS = ("relu", "tanh")
MAX_LR = 1e30  # Adam's first step is lr / (1 - beta1) = 10 lr, which must stay below float32's 3.4e38


@dataclass(frozen=True)
class TrainingConfig:
    """How the server trains its utility model."""

    mode: str = "frozen"  # frozen (cached features, head only) or finetune (encoder trains too)
    epochs: int = within(120, "[1, 1e5]")  # passes over the training releases
    lr: float = within(2e-3, "(0, 10]")  # peak learning rate (Adam; AdamW when fine-tuning), cosine decay to 0
    batch_size: int = within(64, "[2, 65536]")  # examples per batch; TextHide mixes within a batch (paper: 32)
    head_layers: int = within(2, "[0, 64]")  # hidden layers of the MLP head, each as wide as the encoder
    activation: str = "relu"  # relu, or tanh as in TextHide's code (tanh fails on frozen masked features)
    dropout: float = within(0.0, "[0, 1)")  # dropout on the head's input (TextHide used 0.4 on SST-2 when fine-tuning)

    def __post_init__(self) -> None:
        require(self.mode in MODES, f"mode must be frozen or finetune, got '{self.mode}'.")
        require(self.epochs >= 1, f"epochs must be at least 1, got {self.epochs}.")
        require(0 < self.lr <= MAX_LR, f"lr must be positive and at most {MAX_LR:g} (larger overflows the "
                f"optimizer's float32 steps), got {self.lr}.")
        require(self.batch_size >= 2, f"batch_size must be at least 2, got {self.batch_size}.")
        require(self.head_layers >= 0, f"head_layers must be >= 0, got {self.head_layers}.")
        require(0 <= self.dropout < 1, f"dropout must be in [0, 1), got {self.dropout}.")
        require(self.activation in ACTIVATIONS, f"activation must be relu or tanh, got '{self.activation}'.")


@dataclass(frozen=True)
class Adaptation:
    """Privacy-adaptive pretraining (Qu et al. 2021 §3.4): the server further pretrains its MLM on public text
    privatized by the release's own mechanism, before it trains on the releases."""

    adapt: str = ""  # privacy-adaptive pretraining: vanilla, prob or denoising MLM; empty = none
    adapt_steps: int = within(300, "[1, 1e8]")  # its optimizer steps on privatized public text (a CPU budget)
    adapt_batch_size: int = within(16, "[1, 65536]")  # sequences per step (a CPU budget; see AdaptationConfig)
    adapt_lr: float = within(5e-5, "(0, 10]")  # AdamW learning rate
    adapt_corpus: str = "auto"  # public text: offline squad/conll2003/agnews/auto, or a hub corpus

    def __post_init__(self) -> None:
        require(self.adapt_steps >= 1, f"adapt_steps must be >= 1, got {self.adapt_steps}.")
        require(self.adapt_batch_size >= 1, f"adapt_batch_size must be >= 1, got {self.adapt_batch_size}.")
        require(self.adapt_lr > 0, f"adapt_lr must be > 0, got {self.adapt_lr}.")


@dataclass(frozen=True)
class Pretraining:
    """A pretraining task's server (the clinical tasks): the MLM further pretrained on the released text, its
    budget, and the sizes of the utility task the released encoder is scored on."""

    pretrain_mlm: str = "minilm-mlm"  # pretraining tasks: the MLM further pretrained on the release (load_mlm name)
    pretrain_steps: int = within(200, "[0, 1e8]")  # pretraining tasks: its optimizer steps (0 = the MLM as it is)
    pretrain_allow_untrained: bool = False  # pretraining tasks: accept an MLM with an untrained head (tests only)
    utility_n_train: int = within(1000, "[2, 1e8]")  # pretraining tasks: training sentences of the utility task
    utility_n_eval: int = within(300, "[2, 1e8]")  # pretraining tasks: evaluation sentences of the utility task

    def __post_init__(self) -> None:
        require(self.pretrain_steps >= 0, f"pretrain_steps must be >= 0 (0 = the MLM as it is), got "
                                          f"{self.pretrain_steps}.")
        require(self.utility_n_train >= 2 and self.utility_n_eval >= 2,
                f"utility_n_train and utility_n_eval must be at least 2, got {self.utility_n_train} and "
                f"{self.utility_n_eval}.")


DP_ACCOUNTANTS = ("prv", "rdp")  # Opacus' accountants (bench.models.dp_sgd)


@dataclass(frozen=True)
class PrivateTraining:
    """DP-SGD (Abadi et al. 2016, ``bench.models.dp_sgd``): the server trains its head with per-example clipping,
    Poisson sampling and Gaussian noise calibrated to a target (epsilon, delta) by Opacus' accountant."""

    dp_epsilon: float | None = within(None, "(0, 1e4]", infinite=True)  # DP-SGD's target epsilon; inf: non-private
    dp_delta: float | None = within(None, "(0, 1)")  # its target delta; empty = 1 / (training examples)
    dp_clip: float = within(1.0, "(0, 1e6]")  # per-example gradient clipping norm (L2)
    dp_accountant: str = "prv"  # Opacus accountant that finds the noise and reports epsilon: prv or rdp

    def __post_init__(self) -> None:
        epsilon, delta = self.dp_epsilon, self.dp_delta
        require(epsilon is None or epsilon > 0, f"dp_epsilon must be positive (inf: no privacy), got {epsilon}.")
        require(delta is None or (math.isfinite(delta) and 0 < delta < 1),
                f"dp_delta must lie strictly between 0 and 1, got {delta}.")
        require(math.isfinite(self.dp_clip) and self.dp_clip > 0,
                f"dp_clip must be a positive finite norm, got {self.dp_clip}.")
        require(self.dp_accountant in DP_ACCOUNTANTS,
                f"dp_accountant must be {' or '.join(DP_ACCOUNTANTS)}, got '{self.dp_accountant}'.")


@dataclass(frozen=True)
class AdaptedPrivateTraining(Adaptation, PrivateTraining):
    """Privacy-adaptive pretraining of the server's encoder, then DP-SGD training of its head."""

    def __post_init__(self) -> None:
        Adaptation.__post_init__(self)
        PrivateTraining.__post_init__(self)


ServerSettings = Union[Adaptation, Pretraining, PrivateTraining, AdaptedPrivateTraining, None]  # what a spec
# records of the server beyond its head
PRETRAINING_PREFIXES = ("pretrain_", "utility_")  # the option names of Pretraining
DP_PREFIX = "dp_"  # the option names of PrivateTraining
SETTINGS = (Adaptation, Pretraining, PrivateTraining, AdaptedPrivateTraining)


def training_from(value: TrainingConfig | Mapping[str, Any]) -> TrainingConfig:
    """A spec's training settings, typed (a stored dictionary is rebuilt)."""
    return value if type(value) is TrainingConfig else TrainingConfig(**value)


def server_from(value: ServerSettings | Mapping[str, Any]) -> ServerSettings:
    """A spec's server settings, typed: a stored dictionary is none (empty), a pretraining task's (its keys start
    ``pretrain_`` or ``utility_``), DP-SGD (keys ``dp_``), privacy-adaptive pretraining, or the last two."""
    if value is None or type(value) in SETTINGS:
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"server settings must be Adaptation, Pretraining, PrivateTraining, a mapping or None, got "
                        f"{type(value)}")
    if not value:
        return None
    private = any(k.startswith(DP_PREFIX) for k in value)
    if any(k.startswith(PRETRAINING_PREFIXES) for k in value):
        cls = Pretraining
    elif private:
        cls = AdaptedPrivateTraining if any(k.startswith("adapt") for k in value) else PrivateTraining
    else:
        cls = Adaptation
    return cls(**value)


def server_args(server: ServerSettings) -> dict[str, Any]:
    """The dictionary a record stores for the server settings (empty for none)."""
    return {} if server is None else component_args(server)
