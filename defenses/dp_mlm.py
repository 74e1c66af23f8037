"""DP-MLM: every token rewritten by the exponential mechanism over a masked LM's clipped logits.

Paper: Stephen Meisenbacher, Maulik Chevli, Juraj Vladika, Florian Matthes. "DP-MLM: Differentially Private Text
Rewriting Using Masked Language Models." Findings of ACL 2024. The paper is not among the project's copies; this
follows its well-known definition, and the defaults of the authors' released code where the definition is silent.
Threat model: the server and any eavesdropper see the rewritten token sequence; they know the MLM (public weights),
the clip bounds and eps, never the draws. The client rewrites locally; nothing else leaves it.

Mechanism. For position i of a sentence x, the MLM reads x followed by a copy of x whose i-th token is masked (the
paper's concatenation: the MLM sees the token's context, the original token included). Its logits u(x, y) at the
mask are clipped to [clip_min, clip_max], so their sensitivity is Delta = clip_max - clip_min over any two inputs.
The released token y is drawn with Pr[y] ∝ exp(eps · u(x, y) / (2 Delta)): the exponential mechanism, eps-DP for
the draw at position i whatever x is. Every position reads the original sentence (the paper's default: earlier
draws never feed later ones), so all positions are drawn at once; n draws compose to n·eps (basic composition),
which the record states per sentence (``dp_mlm_sentence_eps_*``).

Clip bounds: ``auto`` takes the authors' bounds for roberta-base (-3.2093127 and 16.304797887802124, from their
code) and, for any other MLM, measures them on held-out public text read as the mechanism reads a sentence:
clip_min the mean logit, clip_max the mean top logit over the masked positions. Caveat: that rule is ours; the
authors' code gives fixed numbers without their derivation, and a top logit above clip_max ties with every other
token above it. eps = 50 per token by default, inside the per-token range the paper evaluates (its exact grid is
not in the project's copies); a sentence's guarantee grows with its length.

Deviation in the unit: each regular token of the encoder's token space (a WordPiece of minilm) is one position and
each draw one token, so the release stays aligned token for token like the other token defenses'; the paper
rewrites each word (NLTK's tokens) from one masked position and one drawn token.
Deviation in the range: the draw ranges over the space's regular tokens (the MLM's vocabulary less its special and
unused tokens), which the server can read as text; the authors draw over every logit.
Deviation from the authors' code: every token is rewritten; their code keeps stopwords and punctuation unchanged by
default, which releases those tokens as they are.
Limit of this setting: the MLM must share the encoder's vocabulary (``minilm-mlm`` with minilm, ``roberta-base``
with ``--encoder roberta-base``); a sentence longer than the MLM's window (two copies and the special tokens) is
read in a window of the original centred on the position, as the authors' later code does. The cost per sentence
grows with the square of its length (n passes over 2n tokens).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from bench import TokenDefense, register_defense, require, within
from bench.core import smoke
from bench.core.errors import BenchError
from bench.core.progress import progress_bar
from bench.privacy.public import TokenMechanism

AUTO = "auto"
PAPER_BOUNDS = {"roberta-base": (-3.2093127, 16.304797887802124)}  # the authors' code, for roberta-base
PAPER_BOUNDS["FacebookAI/roberta-base"] = PAPER_BOUNDS["roberta-base"]
ROWS = 256  # masked copies per forward pass
CALIBRATION_SENTENCES = 32  # held-out public sentences the auto bounds are measured on (16 at the smoke budget)


@dataclass
class MaskedLMExponential(TokenMechanism):
    """The public mechanism: the MLM, its clip bounds and eps; a release carries it unfitted."""

    name: ClassVar[str] = "masked-lm-exponential"
    eps: float = 50.0
    mlm: str = "minilm-mlm"
    clip_min: float | str = AUTO
    clip_max: float | str = AUTO
    task: str = field(default="", init=False, repr=False, compare=False)  # the cell's task (its MLM never saw it)
    model: object = field(default=None, init=False, repr=False, compare=False)  # a MaskedLM given directly (tests)
    stats: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def bind_task(self, task: str) -> None:
        """The MLM used on ``task`` is the one trained without its text."""
        self.task = task

    def masked_lm(self):
        """The MLM (shared, read-only), or the one given directly."""
        if self.model is not None:
            return self.model
        from bench.models.encoders import cell_device
        from bench.models.mlm import shared_mlm

        return shared_mlm(self.mlm, self.task or None, cell_device())

    def bounds(self) -> tuple[float, float]:
        """(clip_min, clip_max): as given, the authors' for roberta-base, or measured on public text."""
        if self.clip_min != AUTO:
            return float(self.clip_min), float(self.clip_max)
        if self.mlm in PAPER_BOUNDS and self.model is None:
            return PAPER_BOUNDS[self.mlm]
        if self.model is not None:
            return measured_bounds(self.model, ())
        return _measured_bounds(self.mlm, self.task or None, smoke.active())

    def privatize(self, ids, space, rng):
        """Each token replaced by a draw of the exponential mechanism over the MLM's clipped logits there."""
        import torch

        mlm = self.masked_lm()
        _check_vocabulary(mlm, space, self.mlm)
        low, high = self.bounds()
        started = time.perf_counter()  # the rate counts the draws, not loading the MLM or measuring its bounds
        require(low < high, f"dp-mlm needs clip_min < clip_max, got {low:g} and {high:g}.")
        scale = self.eps / (2.0 * (high - low))
        candidates = torch.as_tensor(np.sort(np.asarray(space.candidates, dtype=np.int64)))
        generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        out = [np.asarray(x, dtype=np.int64).copy() for x in ids]
        jobs = [(s, i) for s, x in enumerate(out) for i in range(len(x))]
        jobs.sort(key=lambda job: len(out[job[0]]))  # a pass pads its rows to its longest: group equal lengths
        with progress_bar("DP-MLM: rewriting tokens", len(jobs), unit="tokens") as update:
            for start in range(0, len(jobs), ROWS):
                chunk = jobs[start:start + ROWS]
                logits = masked_logits(mlm, [ids[s] for s, _ in chunk], [i for _, i in chunk])
                utility = logits[:, candidates].double().clamp(low, high)
                drawn = torch.multinomial(torch.softmax(utility * scale, dim=1), 1, generator=generator)[:, 0]
                for (s, i), token in zip(chunk, candidates[drawn].tolist()):
                    out[s][i] = token
                update(start + len(chunk))
        seconds = time.perf_counter() - started
        lengths = np.array([len(x) for x in out if len(x)], dtype=np.float64)
        self._count(lengths, sum(int(np.sum(a != np.asarray(b))) for a, b in zip(out, ids)), seconds, low, high)
        return out

    def _count(self, lengths: np.ndarray, changed: int, seconds: float, low: float, high: float) -> None:
        """Add one call's counts to the record's facts (a cell privatizes its two splits in two calls)."""
        stats = self.stats
        stats["tokens"] = stats.get("tokens", 0) + int(lengths.sum())
        stats["changed"] = stats.get("changed", 0) + changed
        stats["seconds"] = stats.get("seconds", 0.0) + seconds
        stats["lengths"] = np.concatenate([stats.get("lengths", np.zeros(0)), lengths])
        stats["bounds"] = (low, high)

    def facts(self):
        """eps per token, the clip bounds, and the composed eps per sentence (n·eps); counts and speed."""
        stats = self.stats
        if not stats:
            return {}
        low, high = stats["bounds"]
        lengths = stats["lengths"]
        facts = {"dp_mlm_eps_per_token": float(self.eps), "dp_mlm_clip_min": float(low),
                 "dp_mlm_clip_max": float(high), "dp_mlm_sensitivity": float(high - low),
                 "dp_mlm_clip_source": _source(self), "dp_mlm_tokens": int(stats["tokens"]),
                 "dp_mlm_changed_share": stats["changed"] / stats["tokens"] if stats["tokens"] else 0.0,
                 "dp_mlm_tokens_per_s": round(stats["tokens"] / max(stats["seconds"], 1e-9), 1)}
        if self.model is None:
            from bench.models.mlm import mlm_facts

            facts.update(mlm_facts(self.mlm, self.task or None))
        if len(lengths):
            facts.update({"dp_mlm_sentence_eps_mean": float(self.eps * lengths.mean()),
                          "dp_mlm_sentence_eps_max": float(self.eps * lengths.max()),
                          "dp_mlm_composition": "basic: n·eps over the n tokens of a sentence"})
        return facts


def _source(mechanism: MaskedLMExponential) -> str:
    if mechanism.clip_min != AUTO:
        return "given"
    if mechanism.mlm in PAPER_BOUNDS and mechanism.model is None:
        return "the authors' bounds for roberta-base"
    return "measured: mean logit and mean top logit at masked positions of held-out public text"


@register_defense("dp-mlm")
@dataclass
class DPMLM(TokenDefense):
    """Every token replaced by an exponential-mechanism draw over a masked LM's clipped logits at its position."""

    eps: float = within(50.0, "(0, 1e6]")  # privacy parameter per token (the draw is eps-DP; n tokens compose to n·eps)
    mlm: str = "minilm-mlm"  # the masked LM (minilm-mlm@N; a hub id sharing the encoder's vocabulary: roberta-base)
    clip_min: float | str = within(AUTO, "[-1e4, 1e4]")  # lower logit clip (auto: the MLM's, see the docstring)
    clip_max: float | str = within(AUTO, "[-1e4, 1e4]")  # upper logit clip; Delta = clip_max - clip_min

    def __post_init__(self) -> None:
        require(self.eps > 0, f"dp-mlm eps must be > 0, got {self.eps}.")
        given = [v for v in (self.clip_min, self.clip_max) if v != AUTO]
        require(all(isinstance(v, (int, float)) for v in given),
                f"dp-mlm clip bounds must be numbers or auto, got {self.clip_min} and {self.clip_max}.")
        require(len(given) in (0, 2), "dp-mlm takes both clip_min and clip_max, or neither (auto).")
        require(not given or self.clip_min < self.clip_max,
                f"dp-mlm needs clip_min < clip_max, got {self.clip_min} and {self.clip_max}.")
        from bench.models.mlm import check_mlm_name

        check_mlm_name(self.mlm)

    def offline_mlms(self) -> tuple[str, ...]:
        """The masked LM."""
        return (self.mlm,)

    def token_mechanism(self):
        """The exponential mechanism over the MLM's clipped logits, with this eps and these bounds."""
        return MaskedLMExponential(self.eps, self.mlm, self.clip_min, self.clip_max)


def pair_input(tokenizer, ids: np.ndarray, position: int, limit: int) -> tuple[list[int], list[int], int]:
    """The MLM's input for ``position`` of ``ids``: the original, then a copy with that token masked (a window
    centred on it when both copies do not fit in ``limit`` tokens); its token types and the mask's index."""
    (prefix, prefix_types), (middle, middle_types), (suffix, suffix_types), (first, second) = _pair_layout(tokenizer)
    window = (limit - len(prefix) - len(middle) - len(suffix)) // 2
    low = max(0, min(position - window // 2, len(ids) - window)) if len(ids) > window else 0
    original = [int(t) for t in ids[low:low + window]]
    masked = list(original)
    masked[position - low] = tokenizer.mask_token_id
    row = prefix + original + middle + masked + suffix
    types = prefix_types + [first] * len(original) + middle_types + [second] * len(masked) + suffix_types
    return row, types, len(prefix) + len(original) + len(middle) + position - low


@functools.lru_cache(maxsize=8)
def _pair_layout(tokenizer):
    """How the tokenizer lays out a pair of sequences: the special ids (and their token types) before, between and
    after them, and the token types of the first and second sequence; read off one encoded pair."""
    a = tokenizer("hello", add_special_tokens=False)["input_ids"]
    b = tokenizer("world", add_special_tokens=False)["input_ids"]
    pair = tokenizer("hello", "world")
    ids = list(pair["input_ids"])
    types = list(pair.get("token_type_ids") or [0] * len(ids))
    starts = [i for i in range(len(ids)) if ids[i:i + len(a)] == a]
    ends = [j for j in range(len(ids)) if ids[j:j + len(b)] == b and starts and j >= starts[0] + len(a)]
    if not starts or not ends:
        raise BenchError("dp-mlm cannot read how this MLM's tokenizer joins two sequences.")
    i, j = starts[0], ends[0]
    part = lambda lo, hi: (ids[lo:hi], types[lo:hi])  # noqa: E731
    return part(0, i), part(i + len(a), j), part(j + len(b), len(ids)), (types[i], types[j])


def masked_logits(mlm, sentences: list, positions: list[int]):
    """The MLM's logits ``(rows, vocab)`` (float32, on the CPU) at the masked copy of ``positions[r]`` of
    ``sentences[r]``, one forward pass for all rows."""
    import torch

    from bench.models.encoders import autocast
    from bench.models.masked_lm import prediction_head

    tokenizer, model = mlm.tokenizer, mlm.model
    limit = min(int(getattr(model.config, "max_position_embeddings", 512)), 512)
    limit -= 2 if getattr(model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert") else 0
    built = [pair_input(tokenizer, np.asarray(s), p, limit) for s, p in zip(sentences, positions)]
    width = max(len(row) for row, _, _ in built)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(built), width), pad, dtype=torch.long)
    types = torch.zeros((len(built), width), dtype=torch.long)
    attention = torch.zeros((len(built), width), dtype=torch.long)
    for r, (row, kinds, _) in enumerate(built):
        ids[r, :len(row)] = torch.as_tensor(row)
        types[r, :len(row)] = torch.as_tensor(kinds)
        attention[r, :len(row)] = 1
    device = model.device
    batch = {"input_ids": ids.to(device), "attention_mask": attention.to(device)}
    if getattr(model.config, "type_vocab_size", 0) > 1:
        batch["token_type_ids"] = types.to(device)
    rows = torch.arange(len(built), device=device)
    where = torch.as_tensor([m for _, _, m in built], device=device)
    head = prediction_head(model)
    with torch.inference_mode(), autocast(device):
        if head is not None:
            logits = head(model.base_model(**batch).last_hidden_state[rows, where])
        else:
            logits = model(**batch).logits[rows, where]
    return logits.float().cpu()


def measured_bounds(mlm, texts) -> tuple[float, float]:
    """(mean logit, mean top logit) over the regular tokens at every masked position of ``texts``, each read as the
    mechanism reads it; ``texts`` empty: a few fixed sentences (a test MLM)."""
    texts = list(texts) or ["the cat sat on the mat .", "a quiet film about a long journey home ."]
    regular = np.asarray(mlm.regular)
    encoded = mlm.tokenizer(texts, add_special_tokens=False, truncation=True, max_length=126)["input_ids"]
    jobs = [(np.asarray(x), i) for x in encoded for i in range(len(x))]
    means, tops = [], []
    for start in range(0, len(jobs), ROWS):
        chunk = jobs[start:start + ROWS]
        logits = masked_logits(mlm, [s for s, _ in chunk], [i for _, i in chunk])[:, regular].double()
        means.append(logits.mean(dim=1).numpy())
        tops.append(logits.max(dim=1).values.numpy())
    return float(np.concatenate(means).mean()), float(np.concatenate(tops).mean())


@functools.lru_cache(maxsize=8)
def _measured_bounds(name: str, task: str | None, at_smoke_budget: bool) -> tuple[float, float]:
    from bench.data.public_corpus import held_out
    from bench.models.encoders import cell_device
    from bench.models.mlm import shared_mlm

    texts, _, _ = held_out(task, smoke.HELD_OUT if at_smoke_budget else CALIBRATION_SENTENCES)
    return measured_bounds(shared_mlm(name, task, cell_device()), texts)


def _check_vocabulary(mlm, space, name: str) -> None:
    """The MLM's ids are the space's: its vocabulary is the encoder's (or the space is a bare table of ids)."""
    encoder = getattr(space, "encoder", None)
    if encoder is not None and getattr(encoder, "tokenizer", None) is not None:
        if encoder.tokenizer.get_vocab() != mlm.tokenizer.get_vocab():
            raise BenchError(f"dp-mlm mlm={name} has another vocabulary than the encoder {encoder.name}; run it with "
                             f"--encoder {name}, or give an MLM of the encoder's vocabulary.")
    elif len(space.candidates) and int(np.max(space.candidates)) >= len(mlm.tokenizer):
        raise BenchError(f"dp-mlm mlm={name}: the token space holds ids beyond the MLM's vocabulary.")
