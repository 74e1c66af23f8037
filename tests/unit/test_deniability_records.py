"""The committed plausible-deniability files (results/analysis/deniability-*.json): each file's selections are
what its own per-token counts give, a whole-vocabulary file covers every regular token, and where a mechanism
has both a seeded sample and a whole-vocabulary run, the two agree on the sampled tokens within binomial noise
and the sample never selects a smaller eta than the whole vocabulary (its tokens are a subset)."""

import json
from pathlib import Path

import numpy as np
import pytest

import bench.reproduction.deniability as den

ANALYSIS = Path(__file__).resolve().parents[2] / "results" / "analysis"
FILES = sorted(ANALYSIS.glob("deniability-*.json"))
WHOLE = [f for f in FILES if f.stem.endswith("-all")]


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def counts(report: dict) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    return {row["eta"]: (np.asarray(row["n_w"]), np.asarray(row["s_w"])) for row in report["per_eta"]}


def test_there_are_committed_files():
    assert FILES, "no deniability file under results/analysis"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_files_selections_are_what_its_counts_give(path):
    report = load(path)
    stats = counts(report)
    assert sorted(stats) == sorted(report["etas"])
    assert all(len(n_w) == len(s_w) == report["tokens"] for n_w, s_w in stats.values())
    assert den.select_etas(stats, report["trials"], den.Thresholds(**report["thresholds"])) == report["selections"]


@pytest.mark.parametrize("path", WHOLE, ids=lambda p: p.name)
def test_a_whole_vocabulary_file_covers_every_regular_token(path):
    report = load(path)
    assert report["token_sample"] == "all"
    assert report["tokens"] == report["vocabulary"] == len(set(report["token_ids"]))


@pytest.mark.parametrize("path", WHOLE, ids=lambda p: p.name)
def test_the_sample_and_the_whole_vocabulary_measure_the_same_thing(path):
    sample_path = path.with_name(path.name.removesuffix("-all.json") + ".json")
    if not sample_path.is_file():
        pytest.skip(f"{sample_path.name} is not committed")
    sample, whole = load(sample_path), load(path)
    assert (sample["trials"], sample["thresholds"]) == (whole["trials"], whole["thresholds"])
    position = {token: i for i, token in enumerate(whole["token_ids"])}
    rows = np.array([position[t] for t in sample["token_ids"]])
    trials = whole["trials"]
    sample_counts, whole_counts = counts(sample), counts(whole)
    shared = sorted(set(sample_counts) & set(whole_counts))
    assert shared, "the two files share no eta"
    for eta in shared:
        ours, theirs = sample_counts[eta][0], whole_counts[eta][0][rows]
        # each token's N_w is binomial(T, p_w) in both runs, drawn independently: the mean difference over the
        # sampled tokens has variance sum 2 p_w (1 - p_w) T / n^2 at most; five of its deviations (plus 0.5 for
        # the integer counts) bound it
        p = (ours + theirs) / (2 * trials)
        spread = np.sqrt(np.sum(2 * p * (1 - p) * trials)) / len(ours)
        assert abs(ours.mean() - theirs.mean()) <= 5 * spread + 0.5, (eta, ours.mean(), theirs.mean())
    chosen = {name: report["selections"]["worst_case"]["eta"] for name, report in (("sample", sample),
                                                                                      ("whole", whole))}
    if chosen["sample"] is not None and chosen["whole"] is not None and chosen["sample"] in whole_counts:
        assert chosen["whole"] <= chosen["sample"]
