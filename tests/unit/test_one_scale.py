"""Every defense family on one scale: the settings table, the interpolation at matched attack success, the page."""

import math

import pandas as pd
import pytest

from bench.results.curves import bracketing
from bench.results.leaderboard import aggregate, seed_frame
from bench.results.one_scale import audits, matched, page, settings
from tests.unit.test_store import make_record

MEMBER = "privacy/membership/"


def membership_record(seed, defense, args, server, tpr, accuracy, config_hash):
    metrics = {"utility/accuracy": accuracy, f"{MEMBER}tpr_at_fpr_1pct": tpr, f"{MEMBER}auc": 0.6,
               f"{MEMBER}epsilon_lower": 0.5, f"{MEMBER}epsilon_one_run": 0.25,
               "random/membership/tpr_at_fpr_1pct": 0.0, "random/membership/auc": 0.5}
    spec = {**make_record().spec, "defense": defense, "attack": "membership", "defense_args": args,
            **({"server": server} if server else {})}
    return make_record(seed, defense=defense, config_hash=config_hash, spec=spec, metrics=metrics,
                       higher_is_better={m: True for m in metrics})


def board(rows) -> pd.DataFrame:
    records = [membership_record(0, *row, config_hash=f"h{i}") for i, row in enumerate(rows)]
    return aggregate(seed_frame(records), with_order=True)


def test_bracketing_midpoint_and_outside():
    points = [(0.0, "a"), (0.2, "b")]
    assert bracketing(points, 0.1) == ((0.0, "a"), (0.2, "b"), pytest.approx(0.5))
    assert bracketing(points, 0.2)[2] == pytest.approx(1.0)
    assert bracketing(points, 0.3) is None and bracketing(points, -0.1) is None and bracketing([], 0.1) is None


def test_matched_interpolates_inside_the_curve_and_never_outside():
    table = pd.DataFrame({"family": ["f", "f", "g"], "swept": ["eta"] * 3, "value": [1.0, 2.0, 5.0],
                          "advantage": [0.0, 0.2, 0.25], "utility": [0.5, 0.7, 0.9]})
    out = matched(table, "advantage", (0.1, 0.25)).set_index("family")
    assert out.loc["f", "0.1"] == pytest.approx(0.6)  # midway between (0.0, 0.5) and (0.2, 0.7)
    assert math.isnan(out.loc["f", "0.25"])  # beyond the curve's end: blank
    assert out.loc["g", "0.25"] == pytest.approx(0.9) and math.isnan(out.loc["g", "0.1"])  # one point: only there
    assert out.loc["f", "span"] == "0.000 to 0.200" and out.loc["f", "settings"] == 2


def test_settings_put_dp_sgd_beside_a_local_mechanism():
    frame = board([("none", {}, {"dp_epsilon": 1.0}, 0.02, 0.6), ("none", {}, {"dp_epsilon": math.inf}, 0.5, 0.8),
                   ("dchi-token", {"eta": 10.0}, None, 0.1, 0.55), ("dchi-token", {"eta": 100.0}, None, 0.3, 0.7)])
    table = settings(frame, "sst2", "utility/accuracy")
    dp = table[table["defense"] == "dp-sgd"].set_index("value")
    assert list(dp.index) == [1.0, math.inf] and dp.loc[1.0, "formal ε"] == 1.0
    assert dp.loc[1.0, "membership"] == pytest.approx(0.02) and dp.loc[1.0, "ε lower"] == pytest.approx(0.5)
    # membership's headline is TPR at 1% FPR: the worst case is its advantage over the reference 0
    assert dp.loc[math.inf, "advantage"] == pytest.approx(0.5)
    local = table[table["defense"] == "dchi-token"]
    assert local["formal ε"].isna().all() and set(local["swept"]) == {"eta"}  # metric DP: no ε of DP-SGD's meaning
    found = matched(table, "membership", (0.2,)).set_index("family")
    assert found.loc["dchi-token", "0.2"] == pytest.approx(0.625)  # (0.1, 0.55) .. (0.3, 0.7) at 0.2
    assert found.loc["dp-sgd", "0.2"] == pytest.approx(0.6 + (0.18 / 0.48) * 0.2)


def test_page_lists_the_tasks_with_attacked_settings():
    frame = board([("dchi-token", {"eta": 10.0}, None, 0.1, 0.55), ("dchi-token", {"eta": 100.0}, None, 0.3, 0.7)])
    text = page(frame, "results/", "bench report --pages docs/results", {"sst2": "utility/accuracy"})
    assert "## sst2" in text and "accuracy at matched membership TPR at 1% FPR" in text
    assert page(frame[frame["attack"] == ""], "results/", "x", {}) is None


def audit_report(defense="santext", leak=0.0, pairs=((0.5, 2.0, 6.2), (1.2, 3.0, 6.2)), exceeded=0):
    return {"defense": defense, "args": {"eps": 3.0}, "encoder": "minilm", "trials": 10000, "leak": leak,
            "exceeded": exceeded, "pairs": [{"lower": lower, "claim": claim, "ceiling": ceiling}
                                             for lower, claim, ceiling in pairs]}


def test_audits_put_each_mechanism_beside_its_claim_and_leave_out_a_planted_leak():
    table = audits([audit_report(), audit_report(leak=0.05, pairs=((9.0, 3.0, 6.2),), exceeded=1)])
    assert len(table) == 1  # the planted leak checks the audit, it is no mechanism's figure
    row = table.iloc[0]
    assert (row["largest audited"], row["its claim"]) == (1.2, 3.0)  # the largest bound and its own pair's claim
    assert row["audited / claim"] == pytest.approx(0.4) and row["pairs above claim"] == 0
    assert audits([audit_report(pairs=(("inf", 3.0, 6.2),))]).iloc[0]["audited / claim"] == math.inf  # JSON's "inf"
    text = page(aggregate(seed_frame([])), "results/", "bench report", {}, audit_reports=[audit_report()])
    assert "own guarantee, audited" in text and "| santext | eps=3.0 | minilm | 2 | 10000 | 1.20 | 3.00 |" in text
