"""The masked LM of a name: a checkpoint (``bench.models.masked_lm``) or an MLM trained offline
(``bench.models.offline_mlm``), one shared copy per process, and what a record says of it."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from bench.core import smoke
from bench.core.errors import BenchError
from bench.models.masked_lm import HEAD_FILE, MaskedLM, has_mlm_head, load_checkpoint, masked_token_accuracy
from bench.models.offline_mlm import info, offline_dir, offline_steps


def load_mlm(name: str = "minilm", device: str = "cpu", seed: int = 0, task: str | None = None) -> MaskedLM:
    """The masked LM of encoder ``name``: a hub id, ``minilm`` (a fresh, untrained head), ``minilm-mlm`` (every
    layer trained offline by ``bench.models.offline_mlm``, trained on first use; ``minilm-mlm@N`` the same recipe
    trained N steps), or a directory saved by ``MaskedLM.save``.

    Each call returns a fresh copy (callers may train it). ``seed`` fixes a fresh head's initialisation.
    ``task``: the task the MLM will be used on; ``minilm-mlm`` is then trained without that task's text.
    """
    offline = offline_dir(name, task)  # the offline encoder's MLM with every layer trained here (trained if missing)
    if offline is not None:
        trained = load_checkpoint(str(offline), device, seed)
        trained.name = name
        return trained
    return load_checkpoint(name, device, seed)


def shared_mlm(name: str, task: str | None = None, device: str = "cpu") -> MaskedLM:
    """One read-only copy of the masked LM ``name`` for ``task`` per process (distortion and attacks never
    train it; ``minilm-mlm`` never trained on ``task``'s text), and one at the smoke budget (``bench.core.smoke``)."""
    return _shared_mlm(name, task, device, smoke.active())


@functools.lru_cache(maxsize=4)
def _shared_mlm(name: str, task: str | None, device: str, at_smoke_budget: bool) -> MaskedLM:
    return load_mlm(name, device, task=task)


def mlm_identity(name: str, task: str | None = None, device: str = "cpu") -> str:
    """SHA-256 (16 hex digits) of the weights of the masked LM ``name`` for ``task``: what a cached result of
    the MLM (a span rewrite) must match, whichever way the name resolves (offline recipe, directory, hub)."""
    return weights_digest(shared_mlm(name, task, device))


def weights_digest(mlm: MaskedLM) -> str:
    """SHA-256 (16 hex digits) of a loaded masked LM's weights."""
    import hashlib

    digest = hashlib.sha256()
    for key, tensor in sorted(mlm.model.state_dict().items()):
        digest.update(key.encode("utf-8"))
        digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


_HELD_OUT_TOP1: dict[tuple, float] = {}


def held_out_top1(mlm: MaskedLM, texts: list[str], seed: int = 0) -> float:
    """``masked_token_accuracy`` of ``mlm`` on ``texts``, measured once per process for the same weights, texts,
    seed and precision (every cell of a grid that attacks with one MLM asks the same question)."""
    import hashlib

    from bench.models.encoders import cell_precision

    key = (weights_digest(mlm), hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest(), seed,
           cell_precision(), str(mlm.model.device))
    if key not in _HELD_OUT_TOP1:
        _HELD_OUT_TOP1[key] = masked_token_accuracy(mlm, texts, seed=seed)
    return _HELD_OUT_TOP1[key]


def mlm_facts(name: str, task: str | None = None, device: str = "cpu") -> dict[str, Any]:
    """What a record says of the MLM ``name`` used on ``task``: its name, its head in words, its held-out masked
    top-1 (read from a trained offline MLM's info, else measured on the held-out public text) and the digest of its
    weights (``mlm_identity``), which tells whether a rebuilt or downloaded MLM is the one the record used."""
    return _mlm_facts(name, task, device, smoke.active())


@functools.lru_cache(maxsize=8)
def _mlm_facts(name: str, task: str | None, device: str, at_smoke_budget: bool) -> dict[str, Any]:
    from bench.data.public_corpus import held_out

    mlm = shared_mlm(name, task, device)
    offline = offline_dir(name, task)
    if offline is not None:
        top1 = info(offline)["held_out_top1"]
    else:
        texts, _, _ = held_out(task)
        top1 = round(masked_token_accuracy(mlm, texts), 4)
    return {"mlm": name, "mlm_head": mlm.head, "mlm_top1": top1, "mlm_weights": mlm_identity(name, task, device)}


def check_mlm_name(name: str, allow_untrained: bool = False) -> None:
    """Raise ``BenchError`` unless ``name`` is a masked LM with a trained head, without loading weights:
    ``minilm-mlm`` (or ``minilm-mlm@N``), a directory saved by ``MaskedLM.save``, or a hub checkpoint whose config
    names an MLM head. ``minilm`` (and a hub encoder without a head) would get a fresh, untrained head: accepted
    only with ``allow_untrained`` (plumbing tests)."""
    from bench.models.encoders import locate

    if offline_steps(name) is not None:
        return
    if not name or name.startswith("mock") or name == "bilstm":
        raise BenchError(f"'{name}' is not a masked LM; use minilm-mlm (offline) or a hub id with an MLM head such "
                         "as bert-base-cased.")
    if name == "minilm":
        if allow_untrained:
            return
        raise BenchError("mlm=minilm has an untrained prediction head; use minilm-mlm, the offline encoder's MLM "
                         "trained here.")
    from transformers import AutoConfig

    path, _ = locate(name)
    if (Path(path) / HEAD_FILE).is_file() or allow_untrained:
        return
    try:
        config = AutoConfig.from_pretrained(path)
    except (OSError, ValueError):
        raise BenchError(f"'{name}' is not a masked LM found here (minilm-mlm, a saved MLM directory, or a hub id "
                         "cached or reachable, such as bert-base-cased).") from None
    if has_mlm_head(config):
        return
    raise BenchError(f"'{name}' has no masked-LM head; use minilm-mlm or a hub id with one (bert-base-cased).")
