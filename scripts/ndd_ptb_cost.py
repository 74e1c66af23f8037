"""What exact NDD would cost on PTB's training slice if its sentences were capped at a length.

Exact NDD scores a candidate by masking each unchanged piece of the sentence in turn. So one candidate costs about
n² piece-positions for a sentence of n WordPieces. Per word cap, this prints the sentences and rewritten spans kept.
It also prints their cost, sum(spans × n²), relative to the recorded 33%-NP cell (grids/ndd_ptb.yaml) at full
length, for the grid's three span settings. The last row is the ``ptb-20`` task (sentences of at most 20 words,
grids/ndd_ptb20.yaml). The 33% of the NPs count as 0.33 of each sentence's NP spans (the defense draws which).
Nothing runs through the MLM.

    BENCH_DATA_DIR=../shared/data python scripts/ndd_ptb_cost.py [--caps 15 20 25 30 40 0]
"""

import argparse

import numpy as np

from bench.engine.spans import select_spans, task_spans
from bench.models.loading import load_encoder
from bench.tasks.ptb import PTB, PTB20

SETTINGS = {"every phrase": ((), 1.0), "every NP": (("NP",), 1.0), "33% of the NPs": (("NP",), 0.33)}  # the grid's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caps", type=int, nargs="+", default=[15, 20, 25, 30, 40, 0], help="0 = no cap")
    parser.add_argument("--n-train", type=int, default=PTB.default_n_train)
    args = parser.parse_args()

    tokenizer = load_encoder("minilm").tokenizer
    words, pieces, counts = workload(PTB(), args.n_train, tokenizer)
    unit = float(np.sum(counts["33% of the NPs"] * pieces**2))
    print(f"{len(words)} training sentences, {words.mean():.1f} words on average (median {np.median(words):.0f}, "
          f"longest {words.max()}); cost relative to the recorded 33%-NP cell at full length")
    print(f"{'cap (words)':>11} {'sentences':>10} " + " ".join(f"{n + ' spans / cost':>32}" for n in SETTINGS))
    for cap in args.caps:
        kept = words <= cap if cap else np.ones_like(words, dtype=bool)
        cells = [f"{counts[n][kept].sum():>14,.0f} / {np.sum(counts[n][kept] * pieces[kept]**2) / unit:>5.2f}×"
                 for n in SETTINGS]
        print(f"{cap or 'none':>11} {kept.sum():>10,} " + " ".join(f"{c:>32}" for c in cells))
    _, short_pieces, short = workload(PTB20(), PTB20.default_n_train, tokenizer)
    cells = [f"{short[n].sum():>14,.0f} / {np.sum(short[n] * short_pieces**2) / unit:>5.2f}×" for n in SETTINGS]
    print(f"{'ptb-20':>11} {len(short_pieces):>10,} " + " ".join(f"{c:>32}" for c in cells))


def workload(task: PTB, n_train: int, tokenizer) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Per training sentence: words, WordPieces (with [CLS] and [SEP]) and rewritten spans of each setting."""
    data = task.load(n_train, task.default_n_eval, 0)
    words = np.array([len(text.split()) for text in data.train.texts])
    pieces = np.array([len(ids) for ids in tokenizer(list(data.train.texts))["input_ids"]], dtype=np.float64)
    spans = task_spans(task, data, "train")
    rng = np.random.default_rng(0)
    counts = {name: np.array([len(s) for s in select_spans(task, spans, kinds, 1.0, rng)]) * share
              for name, (kinds, share) in SETTINGS.items()}
    return words, pieces, counts


if __name__ == "__main__":
    main()
