"""Time span-recovery version 1's beam search on PTB sentences, and the padding its forward passes carry.

Version 2 scores candidates instead of searching left to right, so ``--module`` must name a version-1 file, e.g.
``git show d43c761~1:attacks/span_recovery.py > /tmp/span_recovery_v1.py``. Usage (one torch thread):

    OMP_NUM_THREADS=1 python scripts/beam_search_timing.py --sentences 60 [--module FILE] [--no-search]

Slots are drawn per sentence from a fixed seed (one per four WordPieces, 1-3 pieces each), so two versions search the
same slots; the MLM is minilm with an untrained head (the cost does not depend on its weights). It prints the
padded area of the first filling step's passes (width x rows over the rows' own length) for rows in job order and
for rows grouped by length, then the search's wall time.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def padded_area(lengths: np.ndarray, rows_per_pass: int) -> float:
    """Width x rows summed over passes of ``rows_per_pass`` consecutive rows, over the rows' summed length."""
    area = sum(int(lengths[i:i + rows_per_pass].max()) * len(lengths[i:i + rows_per_pass])
               for i in range(0, len(lengths), rows_per_pass))
    return area / int(lengths.sum())


def main() -> None:
    """Build the slots, report the padding, time the search."""
    sys.path.insert(0, str(ROOT))
    from nltk import Tree

    from bench.models.mlm import load_mlm
    from tasks.ptb import read_treebank

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=60)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--module", type=Path, default=ROOT / "attacks" / "span_recovery.py")
    parser.add_argument("--no-search", action="store_true", help="report the padding only")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("span_recovery_timed", args.module)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)

    mlm = load_mlm("minilm", task="ptb")
    treebank = Path(os.environ.get("BENCH_DATA_DIR", ROOT.parent / "shared" / "data")) / "ptb" / "treebank.zip"
    rows, ranges = [], []
    for _, line in read_treebank(treebank)[:args.sentences]:
        words = " ".join(Tree.fromstring(line).leaves())
        ids = np.asarray(mlm.tokenizer(words, add_special_tokens=False)["input_ids"][:126])
        rng = np.random.default_rng(len(ids))
        for _ in range(max(1, len(ids) // 4)):
            start = int(rng.integers(0, max(1, len(ids) - 3)))
            rows.append(ids)
            ranges.append((start, min(len(ids), start + int(rng.integers(1, 4)))))
    lengths = np.asarray([len(r) + 2 for r in rows])  # with [CLS] and [SEP]; the first step has one beam per slot
    print(f"{len(rows)} slots over {args.sentences} sentences; padded area of the first step: "
          f"{padded_area(lengths, module.BEAM_ROWS):.2f} in job order, "
          f"{padded_area(np.sort(lengths), module.BEAM_ROWS):.2f} grouped by length; with k beams: "
          f"{padded_area(np.repeat(lengths, args.k), module.BEAM_ROWS):.2f} and "
          f"{padded_area(np.sort(np.repeat(lengths, args.k)), module.BEAM_ROWS):.2f}")
    if args.no_search:
        return
    started = time.perf_counter()
    if not hasattr(module, "_beam_fill"):
        sys.exit(f"{args.module} has no beam search (span-recovery 2 scores candidates): pass --module with a "
                 "version-1 file (see the docstring).")
    module._beam_fill(mlm, rows, ranges, args.k)
    print(f"beam search (k = {args.k}): {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
