"""PTB parsing cell on the real encoder: the chart parser trained on released training text beats right branching.

A small slice (300 training and 100 evaluation sentences, the task's training defaults), defense none. The
right-branching baseline is scored by the same evalb on the same evaluation sample. Measured (2026-11, seed 0,
one torch thread, 56 s on 2 shared CPU cores): parser lf 0.444 (lp 0.735, lr 0.318), uf 0.473; right branching
uf 0.333 (lf 0.084 with every bracket labelled S).
"""

from __future__ import annotations

import pytest

from bench.core.examples import data_dir
from bench.engine.runner import make_spec, run_cell

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not (data_dir() / "ptb" / "treebank.zip").is_file(), reason="ptb/treebank.zip missing"),
]
SIZES = {"n_train": 300, "n_eval": 100}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread: on 2 shared cores the parser's small steps thrash with two."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_undefended_parser_beats_right_branching_on_the_original_evaluation_text():
    from nltk import Tree

    from bench.core.evalb import evalb
    from bench.tasks.ptb import PTB, right_branching

    record = run_cell(make_spec(task="ptb", defense="none", **SIZES))
    metrics = record.metrics
    assert record.notes["protocol"] == "tokens"
    assert record.notes["evaluation_data"].startswith("original")
    assert set(metrics) == {f"utility/{m}" for m in ("lf", "lp", "lr", "uf", "up", "ur")}
    data = PTB().load(SIZES["n_train"], SIZES["n_eval"], 0)  # the cell's evaluation sample (seed 0)
    baseline = evalb([Tree.fromstring(label) for label in data.eval.labels],
                     [right_branching(len(text.split(" "))) for text in data.eval.texts])
    assert metrics["utility/uf"] > baseline["uf"] + 0.05  # measured 0.473 against 0.333
    assert metrics["utility/lf"] > baseline["uf"]
    assert metrics["utility/uf"] >= metrics["utility/lf"]  # a labelled hit is an unlabelled hit
