"""``bench perf --ndd``: candidates scored per second by the batched NDD metric, against the plain loop.

The workload follows Li et al. §4 on CoNLL-03. It takes the sentences of ``conll2003/eng.train`` that hold a gold
entity. In each, one entity drawn at random is the span. Its replacements are ``candidates`` distinct surface forms
of the same entity type found in the corpus, never the entity's own form. So the batched scorer's skipping of
duplicate and identical candidates plays no part in the timing. The MLM's WordPiece tokenizer splits the words,
and the span is the entity's tokens.

What is timed:

- the batched scorer (``ndd_scores`` with a fresh ``OriginalDistributions`` per sentence, exact: tol = 0) on all
  sentences;
- the plain loop (``ndd_scores_loop``) on the first ``loop_sentences``. Its rate is per candidate, so it
  extrapolates. Both count the original sentence's distributions in their time. The target is a batched rate at
  least ``TARGET_SPEEDUP`` times the loop's;
- what the ``ndd`` defense runs: ``ndd_select`` on all sentences. It finds the argmin only, dropping candidates
  whose partial NDD exceeds a complete score. Its rate is in candidates decided per second. Beside it: the share
  of the batched scorer's masked copies it ran, and the sentences where its choice equals the batched argmin;
- with ``selection_bf16``, the selection once more under bf16 autocast (a cell's ``--precision bf16``; no longer
  exact). Its choices are compared with the float32 argmin.

The ceiling (``forward_ceiling``) is the MLM's forward pass alone on full batches of the workload's masked copies.
It is converted to candidates per second with the copies exact scoring needs. No exact scorer beats it here, so it
says whether the target is reachable on this machine at all. The MLM's head may be untrained (minilm): the cost
does not depend on its weights.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from bench.core.errors import BenchError
from bench.core.examples import data_dir
from bench.core.seeding import numpy_generator
from bench.models.encoders import on_device
from bench.models.mlm import load_mlm
from bench.models.ndd import (
    OriginalDistributions,
    masked_log_probs,
    ndd_scores,
    ndd_scores_loop,
    ndd_select,
    prefilled_rows,
)
from bench.performance.mechanisms import machine_info

TARGET_SPEEDUP = 10.0  # batched candidates/s must be at least this many times the plain loop's
CONLL_FILE = ("conll2003", "eng.train")
MAX_TOKENS = 126  # longer sentences (a few CoNLL tables) are left out of the workload


def read_conll(path: Path) -> list[tuple[list[str], list[str]]]:
    """Sentences of a CoNLL-2003 column file: (words, NER tags), first and last column; -DOCSTART- dropped."""
    if not path.is_file():
        raise BenchError(f"{path} does not exist; set BENCH_DATA_DIR to the folder that holds conll2003/.")
    sentences, words, tags = [], [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        columns = line.split()
        if not columns:
            if words and words[0] != "-DOCSTART-":
                sentences.append((words, tags))
            words, tags = [], []
            continue
        words.append(columns[0])
        tags.append(columns[-1])
    return sentences


def entities(tags: list[str]) -> list[tuple[str, int, int]]:
    """(type, first word, end word exclusive) of each entity of IOB1 tags (seqeval reads I- after O as a start)."""
    from seqeval.metrics.sequence_labeling import get_entities

    return [(kind, start, end + 1) for kind, start, end in get_entities(tags)]


def ndd_workload(mlm, sentences: int, candidates: int, seed: int = 0) -> list[dict[str, Any]]:
    """``sentences`` items {ids, span, candidates} drawn from CoNLL-03 train (see the module docstring)."""
    corpus = read_conll(data_dir().joinpath(*CONLL_FILE))
    found = [entities(tags) for _, tags in corpus]
    forms: dict[str, dict[tuple[str, ...], None]] = {}  # distinct surface forms per entity type, in corpus order
    for s, spans in enumerate(found):
        for kind, start, end in spans:
            forms.setdefault(kind, {})[tuple(corpus[s][0][start:end])] = None
    pool = {kind: list(seen) for kind, seen in forms.items()}
    rng = numpy_generator(seed, "ndd-perf")
    eligible = [s for s, spans in enumerate(found) if spans]
    if len(eligible) < sentences:
        raise BenchError(f"CoNLL-03 train has {len(eligible)} sentences with an entity; asked for {sentences}.")
    tokenizer = mlm.tokenizer
    items = []
    for s in rng.permutation(eligible):
        if len(items) == sentences:
            break
        words = corpus[s][0]
        kind, start, end = found[s][rng.integers(len(found[s]))]
        encoded = tokenizer(words, is_split_into_words=True, add_special_tokens=False)
        word_ids = encoded.word_ids()
        inside = [t for t, w in enumerate(word_ids) if w is not None and start <= w < end]
        if not inside or len(encoded["input_ids"]) > MAX_TOKENS:
            continue
        own = tuple(words[start:end])
        others = [form for form in pool[kind] if form != own]
        picked = rng.choice(len(others), size=min(candidates, len(others)), replace=False)
        replacements = [np.asarray(tokenizer(list(others[p]), is_split_into_words=True, add_special_tokens=False)
                                   ["input_ids"], dtype=np.int64) for p in picked]
        items.append({"ids": np.asarray(encoded["input_ids"], dtype=np.int64), "span": (inside[0], inside[-1] + 1),
                      "candidates": replacements})
    return items


def forward_ceiling(mlm, items: list, batch_size: int) -> dict[str, float]:
    """Masked copies per second of the MLM's forward pass alone: the rate no exact NDD scorer beats here.

    The batches are full batches of the workload's own copies: every position of every sentence masked in turn,
    sorted by length so that padding is small. The vocabulary projection runs at the masked position only, with no
    bookkeeping. Every full batch runs once; a partial last batch is left out.
    """
    mask_id = mlm.tokenizer.mask_token_id
    copies = []
    for item in items:
        frame = np.concatenate([[mlm.tokenizer.cls_token_id], item["ids"], [mlm.tokenizer.sep_token_id]])
        copies += [(frame, k + 1) for k in range(len(item["ids"]))]
    copies.sort(key=lambda copy: len(copy[0]))
    size = min(batch_size, len(copies))  # a tiny workload: one batch of all
    batches = [_batch(copies[lo: lo + size], mask_id) for lo in range(0, len(copies) - size + 1, size)]
    masked_log_probs(mlm, *batches[len(batches) // 2])  # warm-up
    started = time.perf_counter()
    for batch in batches:
        masked_log_probs(mlm, *batch)
    elapsed = time.perf_counter() - started
    return {"ceiling_copies_per_s": len(batches) * size / elapsed, "ceiling_copies": len(batches) * size,
            "ceiling_s": elapsed}


def _masked_rows(items: list) -> int:
    """Masked copies exact scoring runs for ``items``: each sentence's own, then each candidate's unchanged ones."""
    return int(sum(len(i["ids"]) + sum(len(i["ids"]) - (i["span"][1] - i["span"][0]) for _ in i["candidates"])
                   for i in items))


def _batch(copies: list, mask_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows (padded with -1) and masked columns of a batch of ``(frame, column)`` copies."""
    where = np.array([column for _, column in copies])
    rows = prefilled_rows([frame for frame, _ in copies], list(where), [np.array([mask_id])] * len(copies))
    return rows, where


def run_ndd_perf(encoder: str = "minilm", sentences: int = 200, loop_sentences: int = 10, candidates: int = 8,
                 mu: float = 0.5, batch_size: int = 64, seed: int = 0, selection_bf16: bool = False,
                 progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Time the batched NDD scorer and the plain loop on the CoNLL-03 workload; return the figures."""
    import torch

    if sentences < 1 or candidates < 1 or loop_sentences < 0:
        raise BenchError(f"need at least one sentence and one candidate, got {sentences} and {candidates}.")
    if loop_sentences > sentences:
        raise BenchError(f"loop_sentences ({loop_sentences}) cannot exceed sentences ({sentences}).")
    progress(f"loading the masked LM {encoder}")
    mlm = load_mlm(encoder)
    items = ndd_workload(mlm, sentences, candidates, seed)

    def batched(item):
        cache = OriginalDistributions(mlm, item["ids"], batch_size)
        return ndd_scores(mlm, item["ids"], item["span"], item["candidates"], mu, original=cache,
                          batch_size=batch_size)

    with torch.inference_mode():
        batched(items[0])  # warm-up: kernels and allocator
    progress(f"batched NDD on {sentences} sentences x {candidates} candidates")
    scores, item_s = [], []
    for item in items:
        started = time.perf_counter()
        scores.append(batched(item))
        item_s.append(time.perf_counter() - started)
    batched_s = float(np.sum(item_s))

    def selection(precision: str) -> tuple[list, float]:
        picked, seconds = [], 0.0
        with on_device("cpu", precision):
            for item in items:
                started = time.perf_counter()
                cache = OriginalDistributions(mlm, item["ids"], batch_size)
                picked.append(ndd_select(mlm, item["ids"], item["span"], item["candidates"], mu, original=cache,
                                         batch_size=batch_size))
                seconds += time.perf_counter() - started
        return picked, seconds

    def agreeing(picked: list) -> int:  # sentences where the selection chose the batched float32 argmin
        return int(sum(c.index == int(np.argmin(s)) for c, s in zip(picked, scores)))

    progress(f"NDD selection (the argmin) on the same {sentences} sentences")
    choices, select_s = selection("fp32")
    bf16 = {}
    if selection_bf16:
        progress(f"NDD selection under bf16 autocast on the same {sentences} sentences")
        picked, seconds = selection("bf16")
        bf16 = {"select_bf16_s": seconds, "select_bf16_candidates_per_s": sentences * candidates / seconds,
                "select_bf16_agrees": agreeing(picked)}
    progress(f"plain loop on {loop_sentences} sentences")
    started = time.perf_counter()
    loop_scores = [ndd_scores_loop(mlm, item["ids"], item["span"], item["candidates"], mu)
                   for item in items[:loop_sentences]]
    loop_s = time.perf_counter() - started
    difference = max(float(np.max(np.abs(a - b))) for a, b in zip(scores, loop_scores)) if loop_scores else None
    scale = max(float(np.max(np.abs(b))) for b in loop_scores) if loop_scores else None
    batched_rate = sentences * candidates / batched_s
    loop_rate = loop_sentences * candidates / loop_s if loop_sentences else None
    tokens = [len(item["ids"]) for item in items]
    masked_rows = _masked_rows(items)
    progress("the MLM's forward pass alone on full batches (the ceiling)")
    ceiling = forward_ceiling(mlm, items, batch_size)
    # exact scoring needs masked_rows copies for the workload's candidates: the ceiling in candidates per second
    ceiling_rate = ceiling["ceiling_copies_per_s"] * sentences * candidates / masked_rows
    subset_ceiling = None  # like for like: the ceiling on the loop's own (shorter) sentences
    if loop_sentences:
        subset = items[:loop_sentences]
        subset_ceiling = (forward_ceiling(mlm, subset, batch_size)["ceiling_copies_per_s"]
                          * loop_sentences * candidates / _masked_rows(subset))
    return {
        "encoder": encoder, "head": mlm.head, "sentences": sentences, "loop_sentences": loop_sentences,
        "candidates": candidates, "mu": mu, "batch_size": batch_size, "seed": seed,
        "mean_tokens": float(np.mean(tokens)),
        "masked_rows": masked_rows, **ceiling, "ceiling_candidates_per_s": ceiling_rate,
        "ceiling_speedup": ceiling_rate / loop_rate if loop_rate else None,
        "ceiling_subset_candidates_per_s": subset_ceiling,
        "ceiling_subset_speedup": subset_ceiling / loop_rate if loop_rate else None,
        "batched_share_of_ceiling": batched_rate / ceiling_rate,
        "batched_s": batched_s, "batched_candidates_per_s": batched_rate,
        "loop_s": loop_s, "loop_candidates_per_s": loop_rate,
        "speedup": batched_rate / loop_rate if loop_rate else None, "target": TARGET_SPEEDUP,
        # like for like: the batched scorer's time on the very sentences the loop ran
        "batched_subset_s": float(np.sum(item_s[:loop_sentences])),
        "subset_speedup": float(loop_s / np.sum(item_s[:loop_sentences])) if loop_sentences else None,
        "max_abs_difference": difference, "max_abs_score": scale,
        "select_s": select_s, "select_candidates_per_s": sentences * candidates / select_s,
        "select_speedup": sentences * candidates / select_s / loop_rate if loop_rate else None,
        "select_copies": int(sum(c.copies for c in choices)),
        "select_copies_exhaustive": int(sum(c.copies_exhaustive for c in choices)),
        "select_agrees": agreeing(choices),
        **bf16,
        "machine": machine_info(),
    }


def ndd_table(row: dict[str, Any]):
    """The rich table of ``run_ndd_perf``'s figures."""
    from rich.table import Table

    table = Table(title=f"NDD metric: candidates scored per second on CoNLL-03 train ({row['encoder']}, "
                        f"k={row['candidates']}, exact, target >= {row['target']:.0f}x the plain loop)")
    for column in ("scorer", "sentences", "candidates", "seconds", "candidates/s", "speedup", "target"):
        table.add_column(column, justify="left" if column == "scorer" else "right")
    table.add_row(f"batched (batch {row['batch_size']})", str(row["sentences"]),
                  str(row["sentences"] * row["candidates"]), f"{row['batched_s']:.1f}",
                  f"{row['batched_candidates_per_s']:.2f}",
                  f"{row['speedup']:.1f}x" if row["speedup"] else "-",
                  ("met" if row["speedup"] >= row["target"] else "missed") if row["speedup"] else "-")
    if row["loop_candidates_per_s"]:
        subset = row["loop_sentences"] * row["candidates"]
        table.add_row("batched, the loop's sentences", str(row["loop_sentences"]), str(subset),
                      f"{row['batched_subset_s']:.1f}", f"{subset / row['batched_subset_s']:.2f}",
                      f"{row['subset_speedup']:.1f}x",
                      "met" if row["subset_speedup"] >= row["target"] else "missed")
        table.add_row("plain loop", str(row["loop_sentences"]), str(row["loop_sentences"] * row["candidates"]),
                      f"{row['loop_s']:.1f}", f"{row['loop_candidates_per_s']:.2f}", "1.0x", "")
    if row.get("ceiling_candidates_per_s"):
        rate = row["ceiling_candidates_per_s"]
        table.add_row("ceiling: the forward passes exact scoring needs, alone", str(row["sentences"]),
                      str(row["sentences"] * row["candidates"]), "", f"{rate:.2f}",
                      f"{row['ceiling_speedup']:.1f}x" if row.get("ceiling_speedup") else "-", "")
    if row.get("ceiling_subset_candidates_per_s"):
        table.add_row("ceiling, the loop's sentences", str(row["loop_sentences"]),
                      str(row["loop_sentences"] * row["candidates"]), "",
                      f"{row['ceiling_subset_candidates_per_s']:.2f}", f"{row['ceiling_subset_speedup']:.1f}x",
                      "reachable" if row["ceiling_subset_speedup"] >= row["target"] else "out of reach")
    if row.get("select_s"):
        table.add_row("selection: the argmin only (ndd defense)", str(row["sentences"]),
                      str(row["sentences"] * row["candidates"]), f"{row['select_s']:.1f}",
                      f"{row['select_candidates_per_s']:.2f}",
                      f"{row['select_speedup']:.1f}x" if row["select_speedup"] else "-", "")
    if row.get("select_bf16_s"):
        rate = row["select_bf16_candidates_per_s"]
        table.add_row("selection under bf16 autocast (not exact)", str(row["sentences"]),
                      str(row["sentences"] * row["candidates"]), f"{row['select_bf16_s']:.1f}", f"{rate:.2f}",
                      f"{rate / row['loop_candidates_per_s']:.1f}x" if row["loop_candidates_per_s"] else "-", "")
    agreement = "" if row["max_abs_difference"] is None else \
        f"max |batched - loop| = {row['max_abs_difference']:.2e} (largest score {row['max_abs_score']:.2f}); "
    if row.get("select_s"):
        agreement += (f"selection ran {row['select_copies']:,} of {row['select_copies_exhaustive']:,} candidate "
                      f"copies and chose the batched argmin in {row['select_agrees']}/{row['sentences']}; ")
    if row.get("select_bf16_s"):
        agreement += f"bf16 selection chose the float32 argmin in {row['select_bf16_agrees']}/{row['sentences']}; "
    if row.get("ceiling_candidates_per_s"):
        agreement += (f"the MLM alone runs {row['ceiling_copies_per_s']:.0f} masked copies/s on full batches and exact "
                      f"scoring needs {row['masked_rows']:,} copies, so the batched scorer runs at "
                      f"{row['batched_share_of_ceiling']:.0%} of that ceiling; ")
    table.caption = (f"mu {row['mu']:g}; mean {row['mean_tokens']:.1f} tokens/sentence; {agreement}"
                     f"load average {row['machine'].get('load_average')}")
    return table
