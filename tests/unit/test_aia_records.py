"""What holds offline in the committed Li et al. Table 4 records (grids/aia_li_table4.yaml, seed 0).

The offline setting differs from the paper (frozen minilm instead of fine-tuned BERT-base, 400 training examples,
an imitation whose own hidden layer is attacked), so these tests check the qualitative pattern, not the paper's
numbers: the undefended API leaks at least one attribute beyond its majority rate, the argmax-preserving defenses
(softening, most-least) leave the victim's accuracy unchanged, and Table 4's figure is 100 * (1 - X) of the
recorded attacker scores.
"""

from pathlib import Path

import pytest

from bench.results.store import ResultStore

RESULTS = Path(__file__).resolve().parents[2] / "results"
TASKS = ("agnews", "blog", "trustpilot")
OUTPUT_DEFENSES = ("softening", "perturbation", "reverse-sigmoid", "nasty-teacher", "most-least")


@pytest.fixture(scope="module")
def cells():
    records, _ = ResultStore(RESULTS).read()
    found = {}
    for record in records:
        spec = record.spec
        if spec.get("attack") == "aia" and spec["seed"] == 0:
            found[(spec["task"], spec["defense"])] = record
    return found


def test_every_output_defense_row_is_recorded(cells):
    for task in TASKS:
        for defense in ("none", *OUTPUT_DEFENSES):
            assert (task, defense) in cells, f"no committed aia record for {task} / {defense}"


def test_without_defense_the_attacker_beats_the_majority_rate_on_some_attribute(cells):
    beaten = []
    for task in TASKS:
        metrics = cells[(task, "none")].metrics
        attributes = {k.split("/")[-1][: -len("_accuracy")] for k in metrics
                      if k.startswith("privacy/aia/") and k.endswith("_accuracy") and k != "privacy/aia/accuracy"}
        beaten += [(task, a) for a in attributes
                   if metrics[f"privacy/aia/{a}_accuracy"] > metrics[f"privacy/aia/{a}_majority"]]
    assert beaten, "the undefended attacker beat no attribute's majority rate on any task"


@pytest.mark.parametrize("defense", ["most-least", "softening"])
def test_argmax_preserving_defenses_keep_the_victims_accuracy(cells, defense):
    for task in TASKS:
        assert cells[(task, defense)].metrics["utility/accuracy"] == pytest.approx(
            cells[(task, "none")].metrics["utility/accuracy"], abs=1e-9)


def test_table4_is_one_minus_the_recorded_attacker_score(cells):
    for (task, _), record in cells.items():
        m = record.metrics
        x = m["privacy/aia/micro_f1"] if task == "agnews" else m["privacy/aia/accuracy"]
        assert m["privacy/aia/table4"] == pytest.approx(100 * (1 - x))
        assert 0.0 <= record.notes["extraction_agreement"] <= 1.0
