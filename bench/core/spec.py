"""RunSpec: everything that defines one cell, with a hash of all of it but the seed."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from bench.core.options import ServerSettings, TrainingConfig, server_args, server_from, training_from
from bench.core.params import component_args

# Which release of its kind a cell attacks: what the client sends while the server trains (the default, and the
# only traffic of most paths), or the queries it sends for prediction afterwards (bench.engine.paths: a path
# declares the traffics it yields per kind).
TRAINING, INFERENCE = "training", "inference"
TRAFFICS = (TRAINING, INFERENCE)


@dataclass(frozen=True)
class RunSpec:
    """One cell of the matrix, with every default already resolved."""

    task: str  # registered task name
    defense: str  # registered defense name
    attack: str | None  # registered attack name, or None for utility only
    encoder: str  # "minilm", "mock" or a Hugging Face hub id
    defense_args: dict[str, Any] = field(default_factory=dict)  # resolved defense parameters
    attack_args: dict[str, Any] = field(default_factory=dict)  # resolved attack parameters
    training: TrainingConfig = field(default_factory=TrainingConfig)  # resolved server training settings
    server: ServerSettings = None  # privacy-adaptive pretraining, a pretraining task's settings, or none
    n_train: int = 0  # training examples drawn from the task's train split
    n_eval: int = 0  # evaluation examples drawn from the task's evaluation split
    pooling: str = "mean"  # sentence representation: mean of tokens, cls, or the model's pooler
    max_length: int = 128  # tokens per input (the papers' setting)
    device: str = "cpu"  # resolved device
    precision: str = "fp32"  # transformer forward passes: fp32, or bf16 mixed precision (autocast)
    seed: int = 0  # seeds data sampling, mechanism randomness and training
    smoke: bool = False  # a --check cell: what it builds once is built at the smoke budget (bench.core.smoke)
    traffic: str = TRAINING  # which of the path's releases of the attacked kind the attack takes (TRAFFICS)

    def __post_init__(self) -> None:
        """Training and server settings given as dictionaries (a stored record's) are typed here."""
        object.__setattr__(self, "training", training_from(self.training))
        object.__setattr__(self, "server", server_from(self.server))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dictionary, as records store it: the training and server settings as dictionaries (the
        server's empty when there are none), ``smoke`` only when set and ``traffic`` only when not the training
        traffic (so a real cell's dictionary and hash are as before either existed)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["defense_args"], data["attack_args"] = copy.deepcopy(self.defense_args), copy.deepcopy(self.attack_args)
        data["training"], data["server"] = component_args(self.training), server_args(self.server)
        if not data["smoke"]:
            data.pop("smoke")
        if data["traffic"] == TRAINING:
            data.pop("traffic")
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSpec":
        """Inverse of ``to_dict`` (unknown keys from newer versions are ignored)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def config_hash(self) -> str:
        """SHA-256 (16 hex digits) of every field but the seed.

        Empty server options and fp32 precision are left out, so cells recorded before either existed keep their
        hash.
        """
        payload = self.to_dict()
        payload.pop("seed")
        if not payload["server"]:
            payload.pop("server")
        if payload["precision"] == "fp32":
            payload.pop("precision")
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def label(self) -> str:
        """Short human-readable description."""
        args = ",".join(f"{k}={v}" for k, v in self.defense_args.items())
        defense = f"{self.defense}({args})" if args else self.defense
        server = ",".join(f"{k}={v}" for k, v in server_args(self.server).items() if k in ("adapt", "pretrain_steps", "dp_epsilon"))
        defense = f"{defense} + server({server})" if server else defense
        precision = "" if self.precision == "fp32" else f" / {self.precision}"
        smoke = " / smoke budget" if self.smoke else ""
        traffic = "" if self.traffic == TRAINING else f" on {self.traffic} traffic"
        return f"{self.task} / {defense} / {self.attack or '-'}{traffic}{precision} / seed {self.seed}{smoke}"
