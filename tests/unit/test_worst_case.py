"""Privacy on one scale: an attack's advantage over its random guess, each defense setting's strongest attack, the
settings some applicable attack did not reach, and a ranking where a setting that leaks everything is never first."""

import math

import pandas as pd
import pytest

from bench.engine.applicable import applicable_attacks
from bench.results.views import WORST, ranked, ranked_tables, strongest_label
from bench.results.worst_case import advantage, attacks_run, worst_case


def test_advantage_is_zero_at_the_guess_and_one_at_total_recovery():
    assert advantage(0.3, 0.3, 0.0, 1.0) == 0.0
    assert advantage(1.0, 0.3, 0.0, 1.0) == 1.0
    assert advantage(0.65, 0.3, 0.0, 1.0) == pytest.approx(0.5)
    assert advantage(0.0, -1.0, -1.0, 1.0) == pytest.approx(0.5)  # a metric bounded below by -1 (SBERT cosine)


def test_advantage_is_mirrored_for_a_metric_where_lower_means_recovered():
    # an MSE in [0, inf): the guess scores 4, the attack 1, perfect recovery 0
    assert advantage(1.0, 4.0, 0.0, math.inf, higher_is_better=False) == pytest.approx(0.75)
    assert advantage(0.0, 4.0, 0.0, math.inf, higher_is_better=False) == 1.0
    assert advantage(4.0, 4.0, 0.0, math.inf, higher_is_better=False) == 0.0


def test_an_attack_below_its_guess_is_clipped_to_zero():
    """The adversary holds the guess too, so it never does worse than guessing."""
    assert advantage(0.1, 0.4, 0.0, 1.0) == 0.0
    assert advantage(5.0, 4.0, 0.0, math.inf, higher_is_better=False) == 0.0


def test_advantage_is_undefined_without_room_or_reference():
    assert math.isnan(advantage(1.0, 1.0, 0.0, 1.0))  # the guess already recovers everything: nothing to measure
    assert math.isnan(advantage(0.5, math.nan, 0.0, 1.0))  # no random guess recorded
    assert math.isnan(advantage(0.5, None, 0.0, 1.0))
    assert math.isnan(advantage(0.5, 0.1, 0.0, math.inf))  # no best value to measure against


def test_the_applicable_attacks_come_from_what_the_defense_releases_on_the_task():
    assert applicable_attacks("sst2", "texthide") == ("abs-rss", "embedding-inversion", "gradient-matching", "membership", "reprecon", "rss")
    assert applicable_attacks("sst2", "dchi-token") == ("inversion", "membership")
    assert "span-recovery" not in applicable_attacks("sst2", "dchi-text")  # sst2 declares no sensitive spans
    assert "span-recovery" in applicable_attacks("conll2003", "dchi-text")
    assert applicable_attacks("sst2", "no-such-defense") is None


def cell(config, defense, args, attack, utility, value=None, reference=None, encoder="minilm", metric=None, n=3):
    """The leaderboard rows of one configuration (``bench.results.leaderboard.aggregate``'s columns)."""
    base = {"task": "sst2", "encoder": encoder, "defense": defense, "defense_args": args, "server_args": "",
            "attack": attack, "attack_args": "", "mode": "frozen", "n_train": 100, "n_eval": 50,
            "config_hash": config, "std": 0.0, "n": n, "ci95": math.nan, "higher_is_better": True}
    rows = [{**base, "metric": "utility/accuracy", "mean": utility, "order": 0}]
    if attack:
        metric = metric or {"rss": "identity", "reprecon": "identity", "inversion": "token_accuracy",
                            "gradient-matching": "success_rate"}[attack]
        rows.append({**base, "metric": f"privacy/{attack}/{metric}", "mean": value, "order": 1})
        if reference is not None:
            rows.append({**base, "metric": f"random/{attack}/{metric}", "mean": reference, "order": 2})
    return rows


def board(*cells) -> pd.DataFrame:
    return pd.DataFrame([row for rows in cells for row in rows])


def test_a_setting_takes_its_strongest_attack_and_is_incomplete_without_every_applicable_one():
    frame = board(
        cell("a1", "texthide", "m=16,k=4", "rss", 0.78, 0.05, 0.0),
        cell("a2", "texthide", "m=16,k=4", "reprecon", 0.79, 0.30, 0.0, n=5),
        cell("a3", "texthide", "m=16,k=4", "gradient-matching", 0.70, 0.10, 0.0),
        cell("b1", "texthide", "m=256,k=4", "rss", 0.72, 0.0, 0.0),
    )
    def applicable(*setting):  # the attacks of a board before abs-rss, embedding inversion and membership
        return ("gradient-matching", "reprecon", "rss")

    table = worst_case(frame, "sst2", "utility/accuracy", applicable).set_index("defense_args")
    full = table.loc["m=16,k=4"]
    assert full["strongest"] == "reprecon" and full["advantage"] == pytest.approx(0.30)
    assert bool(full["complete"]) and full["missing"] == ""
    assert full["utility/accuracy"] == 0.79  # the setting's cell with the most seeds
    part = table.loc["m=256,k=4"]
    assert not part["complete"] and part["missing"] == "gradient-matching, reprecon"
    ranks = ranked(frame, "sst2", WORST, "utility/accuracy", "", None, applicable)
    ranks = ranks.set_index("defense_args")["rank"]
    assert ranks["m=16,k=4"] == 1 and pd.isna(ranks["m=256,k=4"])


def test_a_setting_that_leaks_everything_is_never_first_however_useful():
    """SST-2 × inversion ranked dchi-token at eta 1000 (every token recovered) first by utility alone."""
    frame = board(
        cell("t1", "dchi-token", "eta=1000.0", "inversion", 0.79, 1.0, 0.0, encoder="bilstm"),
        cell("t2", "dchi-token", "eta=60.0", "inversion", 0.55, 0.25, 0.0, encoder="bilstm"),
        cell("t3", "dchi-token", "eta=10.0", "inversion", 0.52, 0.01, 0.0),
        cell("t4", "dchi-token", "eta=100.0", "inversion", 0.60, 0.86, 0.0),
    )
    table = ranked(frame, "sst2", "inversion", "utility/accuracy", "privacy/inversion/token_accuracy")
    # bands of advantage first (≤ 0.05, ≤ 0.5, above), utility within a band
    assert list(table["defense_args"]) == ["eta=10.0", "eta=60.0", "eta=1000.0", "eta=100.0"]
    assert list(table["rank"]) == [1, 2, 3, 4]
    # one frontier per encoder: on minilm eta 10 and 100 each win on one axis, and so do both bilstm settings
    assert list(table["frontier"]) == [1, 1, 1, 1]
    worst = ranked(frame, "sst2", WORST, "utility/accuracy", "")
    assert list(worst["defense_args"]) == list(table["defense_args"])  # inversion is all that applies to dchi-token
    assert list(worst["complete"]) == [True] * 4


def test_the_frontier_is_drawn_per_encoder():
    frame = board(
        cell("e1", "dchi-token", "eta=60.0", "inversion", 0.80, 0.30, 0.0, encoder="bilstm"),
        cell("e2", "dchi-token", "eta=60.0", "inversion", 0.60, 0.40, 0.0),
    )
    table = ranked(frame, "sst2", "inversion", "utility/accuracy", "privacy/inversion/token_accuracy")
    assert list(table["frontier"]) == [1, 1]  # across encoders the minilm setting would be dominated (layer 2)


def test_settings_without_utility_signal_follow_the_others():
    frame = board(cell("s1", "dchi-token", "eta=1.0", "inversion", 0.50, 0.0, 0.0),
                  cell("s2", "dchi-token", "eta=100.0", "inversion", 0.60, 0.9, 0.0))
    majority = {"s1": {"accuracy": 0.51}, "s2": {"accuracy": 0.51}}
    table = ranked(frame, "sst2", "inversion", "utility/accuracy", "privacy/inversion/token_accuracy", majority)
    assert list(table["defense_args"]) == ["eta=100.0", "eta=1.0"]


def test_a_row_without_a_random_guess_is_not_ranked():
    frame = board(cell("r1", "dchi-token", "eta=10.0", "inversion", 0.70, 0.0),
                  cell("r2", "dchi-token", "eta=60.0", "inversion", 0.55, 0.25, 0.0))
    table = ranked(frame, "sst2", "inversion", "utility/accuracy", "privacy/inversion/token_accuracy")
    assert list(table["defense_args"]) == ["eta=60.0", "eta=10.0"] and table["rank"].iloc[0] == 1
    assert pd.isna(table["rank"].iloc[1])


def test_the_worst_case_table_comes_first_and_names_the_missing_attacks():
    frame = board(cell("m1", "texthide", "m=16,k=4", "rss", 0.78, 0.05, 0.0))
    names = [(attack, out) for attack, _, out in ranked_tables(frame, "sst2", None, applicable_attacks)]
    assert [a for a, _ in names] == [WORST, "rss"]
    worst = names[0][1]
    assert worst["missing attacks (incomplete)"].iloc[0] == "abs-rss, embedding-inversion, gradient-matching, membership, reprecon"
    assert worst["rank"].iloc[0] == "" and worst["strongest attack"].iloc[0] == "rss"


def test_without_the_engine_the_attacks_run_on_the_task_stand_in():
    """Readers below the engine count the attacks run on the task that accept what the defense releases."""
    frame = board(cell("x1", "texthide", "m=16,k=4", "rss", 0.78, 0.05, 0.0),
                  cell("x2", "none", "", "inversion", 0.80, 1.0, 0.0))
    applicable = attacks_run(frame)
    assert applicable("sst2", "texthide", "m=16,k=4") == ("rss",)
    assert applicable("sst2", "none", "") == ("inversion", "rss")
    table = worst_case(frame, "sst2", "utility/accuracy").set_index("defense")
    assert bool(table.loc["texthide", "complete"]) and table.loc["none", "missing"] == "rss"


def test_the_applicable_attacks_load_no_model():
    """The dashboard asks the engine which attacks apply; that must not load torch."""
    import subprocess
    import sys

    code = "import sys, bench.engine.applicable; print('torch' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


def test_a_worst_case_read_on_the_inference_queries_names_that_traffic():
    """A setting's worst case spans every release it sends; the shown attack says which traffic it read."""
    rows = cell("t2", "texthide", "m=16,k=4", "rss", 0.78, 1.0, 0.0)
    frame = board(cell("t1", "texthide", "m=16,k=4", "rss", 0.78, 0.05, 0.0),
                  [{**row, "attack_args": "traffic=inference"} for row in rows])
    tables = {attack: out for attack, _, out in ranked_tables(frame, "sst2", applicable=lambda *s: ("rss",))}
    worst = tables[WORST].iloc[0]
    assert worst["strongest attack"] == "rss (inference traffic)" and worst["worst-case advantage ↓ safer"] == 1.0
    assert strongest_label("rss", "sbert=minilm") == "rss" and strongest_label("", "traffic=inference") == ""
