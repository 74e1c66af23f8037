"""How often NDD selection in bf16 keeps the candidate float32 keeps, and how much faster it runs.

It runs the ``ndd`` defense's own rewrite twice on the first ``--examples`` training examples of a task. Both runs
draw the same candidates from the same seeded generator: one with ``mlm_precision=fp32``, one with ``bf16``. It
prints the seconds each took, the spans where both kept the same candidate, and the mean NDD each chose (each scored
in its own precision). The substitution pool and the MLM are the cell's: for SQuAD, the minilm-mlm trained without
SQuAD's text. SQuAD offers no public text, so its spans are drawn from the client's own (``--pool own``).

    BENCH_DATA_DIR=../shared/data python scripts/ndd_precision_agreement.py --task squad --pool own --examples 15 \
        --window 16
"""

import argparse
import time

import numpy as np

from bench import TASKS
from bench.defenses.ndd import NDDDistortion
from bench.engine.spans import SpanBatch, select_spans, substitution_pool, task_spans
from bench.models.mlm import shared_mlm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="squad")
    parser.add_argument("--examples", type=int, default=40, help="the first training examples rewritten")
    parser.add_argument("--mode", default="substitutive", choices=["substitutive", "generative"])
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=0, help="training examples loaded (default: the task's)")
    parser.add_argument("--pool", default="public", choices=["public", "own"], help="the defense's substitution pool")
    args = parser.parse_args()

    task = TASKS.get(args.task)()
    data = task.load(args.n_train or task.default_n_train, task.default_n_eval, args.seed)
    texts, labels = list(data.train.texts), list(data.train.labels)
    spans = task_spans(task, data, "train")
    source = NDDDistortion(mode=args.mode, pool=args.pool).substitution_source()
    pool = substitution_pool(task, data, texts, labels, spans, source)  # as the cell draws it
    chosen = select_spans(task, spans[:args.examples], (), 1.0, np.random.default_rng(args.seed))
    batch = SpanBatch(texts[:args.examples], labels[:args.examples], chosen, pool, task.registry_name)

    kept, seconds, means = {}, {}, {}
    for precision in ("fp32", "bf16"):
        defense = NDDDistortion(mode=args.mode, select="ndd", k=args.k, window=args.window, pool=args.pool,
                                mlm_precision=precision)
        shared_mlm(defense.mlm, task.registry_name, "cpu")  # loaded (or trained) before the clock starts
        started = time.perf_counter()
        edits = defense.rewrite(batch, np.random.default_rng(args.seed))
        seconds[precision] = time.perf_counter() - started
        kept[precision] = [edit.words for example in edits for edit in example]
        means[precision] = defense.stats.get("ndd_chosen_mean", float("nan"))
    same = sum(a == b for a, b in zip(kept["fp32"], kept["bf16"]))
    print(f"{args.task}: {args.examples} examples, {len(kept['fp32']):,} spans, k = {args.k}, window {args.window}")
    print(f"fp32 {seconds['fp32']:.1f} s, bf16 {seconds['bf16']:.1f} s: bf16 {seconds['fp32'] / seconds['bf16']:.2f}x "
          f"as fast")
    print(f"same candidate kept in {same:,} of {len(kept['fp32']):,} spans ({same / max(len(kept['fp32']), 1):.3f})")
    print(f"mean NDD chosen: fp32 {means['fp32']:.4f}, bf16 {means['bf16']:.4f}")


if __name__ == "__main__":
    main()
