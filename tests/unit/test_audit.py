"""The empirical audit of the local token mechanisms: it stays below the claims of the real mechanisms, and it finds
a planted leak."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.privacy.audit import (
    UNPROTECTED,
    LeakyMechanism,
    audit,
    claimed_loss,
    event_bound,
    neighbour_pairs,
    sensitive_set,
    unprotected_violations,
)
from bench.privacy.public import DchiNearestToken, DchiTokenNoise, ExponentialMechanism

runner = CliRunner()
TRIALS = 4000


def toy_space(size=200, dim=8, seed=0):
    """A small WordPiece-like space: the mechanisms only read ``table``, ``candidates`` and ``format``."""
    table = (np.random.default_rng(seed).standard_normal((size, dim)) / 3).astype(np.float32)
    return SimpleNamespace(table=table, candidates=np.arange(size), format="wordpiece",
                           client_ids=lambda texts, rng=None: [np.arange(size)])


def mechanisms(space, eps=2.0, eta=3.0):
    """The four mechanisms at parameters whose claims (about 1-5 on the toy table) the audit can reach."""
    counts = [np.random.default_rng(3).zipf(1.5, size=3000) % len(space.candidates)]
    santext, plus = ExponentialMechanism(eps), ExponentialMechanism(eps, p=0.3, w=0.5)
    santext.fit(counts, space)
    plus.fit(counts, space)
    return {"santext": santext, "santext-plus": plus, "dchi-text": DchiNearestToken(eta),
            "dchi-token": DchiTokenNoise(eta)}


def run(mechanism, space, seed=1, ranks=(1, 100), anchors=2):
    pairs = neighbour_pairs(space, anchors, ranks, np.random.default_rng(seed), sensitive_set(mechanism))
    return audit(mechanism, space, pairs, TRIALS, 0.05, np.random.default_rng(seed + 1))


@pytest.mark.parametrize("name", ["santext", "santext-plus", "dchi-text", "dchi-token"])
def test_real_mechanisms_stay_below_their_claim(name):
    space = toy_space()
    results = run(mechanisms(space)[name], space)
    assert not any(r.exceeds for r in results), [(r.claim, r.lower) for r in results]
    assert max(r.lower for r in results) > 0.3  # not vacuous: the audit bounds a loss well above 0
    assert all(r.lower <= r.ceiling for r in results)


@pytest.mark.parametrize("name", ["santext", "santext-plus", "dchi-text", "dchi-token"])
def test_the_audit_finds_a_planted_leak(name):
    space = toy_space()
    leaky = LeakyMechanism(mechanisms(space, eps=1.0, eta=2.0)[name], 0.05)
    results = run(leaky, space, ranks=(1,), anchors=4)
    assert any(r.exceeds for r in results), [(r.claim, r.lower) for r in results]


def test_the_bound_stays_below_the_exact_loss_of_the_exponential_mechanism():
    space = toy_space()
    for name in ("santext", "santext-plus"):
        for r in run(mechanisms(space)[name], space, ranks=(1, 10, 100)):
            assert r.exact is not None and r.exact <= r.claim + 1e-6  # the distribution keeps its promise
            assert r.lower <= r.exact, (name, r)


def test_santext_plus_claims_ln_1_over_p_more_for_a_mixed_pair():
    space = toy_space()
    plus = mechanisms(space)["santext-plus"]
    inside = int(plus.sensitive[0])
    outside = int(np.setdiff1d(space.candidates, plus.sensitive)[0])
    assert claimed_loss(plus, inside, outside, 1.0) == (pytest.approx(2.0 + np.log(1 / 0.3)), "S/N")
    assert claimed_loss(plus, inside, int(plus.sensitive[1]), 1.0) == (2.0, "S/S")
    assert claimed_loss(mechanisms(space)["santext"], inside, outside, 1.0) == (2.0, "")


def test_an_unprotected_output_from_another_input_is_a_violation():
    space = toy_space()
    plus = mechanisms(space)["santext-plus"]
    outside = np.setdiff1d(space.candidates, plus.sensitive)
    x, y = int(outside[0]), int(outside[1])
    assert unprotected_violations(plus, x, y, np.array([x, x]), np.array([y, y])) == 0
    assert unprotected_violations(plus, x, y, np.array([x, y]), np.array([y, y])) == 1


def test_randomized_response_bound_covers_and_approaches_its_epsilon():
    """Two outputs with ratio e^eps: the bound is below eps at 95% confidence, and within 0.3 of it."""
    eps, n, below, bounds = 1.0, 5000, 0, []
    keep = np.exp(eps) / (1 + np.exp(eps))
    for seed in range(40):
        rng = np.random.default_rng(seed)
        first = (rng.random(n) > keep).astype(int)  # output 0 with probability keep
        second = (rng.random(n) < keep).astype(int)
        lower, _ = event_bound(first, second, np.array([0]), 0.05)
        below += lower <= eps
        bounds.append(lower)
    assert below >= 38 and np.median(bounds) > eps - 0.3


def test_unprotected_outputs_are_in_no_event():
    first, second = np.array([UNPROTECTED] * 10 + [3]), np.array([3] * 11)
    lower, estimate = event_bound(first, second, np.array([3]), 0.05)
    assert estimate < 0


@pytest.fixture
def toy_cli(monkeypatch):
    from bench.reproduction import audit as driver

    space = toy_space()
    monkeypatch.setattr(driver, "load_space", lambda defense, encoder: space)
    monkeypatch.setattr(driver, "check_encoder", lambda name: None)
    monkeypatch.setattr(driver, "fit_ids", lambda space, sentences, seed: [np.random.default_rng(seed).zipf(
        1.5, size=3000) % len(space.candidates)])
    return space


def test_command_prints_the_table_and_writes_json(toy_cli, tmp_path):
    path = tmp_path / "audits" / "santext.json"
    result = runner.invoke(app, ["audit", "--defense", "santext", "--defense-args", "eps=2", "--anchors", "2",
                                 "--ranks", "1,10", "--trials", "2000", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert "claimed ε·d" in result.output and "ok" in result.output
    report = json.loads(path.read_text())
    assert len(report["pairs"]) == 4 and report["exceeded"] == 0
    assert all(p["lower"] <= p["claim"] for p in report["pairs"])


def test_a_written_audit_prints_from_the_results_folder(toy_cli, tmp_path):
    path = tmp_path / "audits" / "santext-eps2.json"
    result = runner.invoke(app, ["audit", "--defense", "santext", "--defense-args", "eps=2", "--anchors", "2",
                                 "--ranks", "1,10", "--trials", "2000", "--json", str(path), "--markdown"])
    assert result.exit_code == 0, result.output
    report = json.loads(path.read_text())
    assert report["versions"]["git_sha"] and report["hardware"]["cpu_count"]
    printed = runner.invoke(app, ["report", "--results-dir", str(tmp_path), "--audit", "santext-eps2"])
    assert printed.exit_code == 0, printed.output
    caption, table = printed.output.split("\n\n", 1)
    assert "`santext` (eps=2.0" in caption and "4 pairs, 2,000 releases of each token" in caption
    assert table.startswith("| pair") and table in result.output  # the table the audit printed, from its JSON
    missing = runner.invoke(app, ["report", "--results-dir", str(tmp_path), "--audit", "santext"])
    assert missing.exit_code == 2 and "its audits: santext-eps2" in missing.output


def test_publishing_an_audit_needs_committed_code(toy_cli, monkeypatch):
    from bench.engine import provenance
    from bench.results import store

    monkeypatch.setattr(provenance, "git_sha", lambda: "abc-dirty")
    path = store.published_results_dir() / "audits" / "never-written.json"
    result = runner.invoke(app, ["audit", "--defense", "santext", "--anchors", "2", "--ranks", "1", "--trials", "200",
                                 "--json", str(path)])
    assert result.exit_code == 2 and "uncommitted changes" in result.output
    assert not path.exists()


def test_command_exits_1_on_a_planted_leak(toy_cli):
    result = runner.invoke(app, ["audit", "--defense", "dchi-text", "--defense-args", "eta=3", "--anchors", "2",
                                 "--ranks", "1", "--trials", "4000", "--leak", "0.1"])
    assert result.exit_code == 1, result.output
    assert "EXCEEDS" in result.output and "audit failed" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--defense", "nope"], "unknown defense 'nope'"),
        (["--defense", "texthide"], "no token mechanism with a claim"),
        (["--defense", "santext", "--defense-args", "eps=-1"], "eps must be > 0"),
        (["--defense", "santext", "--trials", "1"], "at least 2"),
        (["--defense", "santext", "--alpha", "1"], "--alpha must be in (0, 1)"),
        (["--defense", "santext", "--leak", "1"], "--leak must be in [0, 1)"),
        (["--defense", "santext", "--ranks", "a,b"], "--ranks must be positive integers"),
        (["--defense", "santext", "--ranks", "500"], "ranks must lie in"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(toy_cli, tmp_path, args, message):
    path = tmp_path / "audit.json"
    result = runner.invoke(app, ["audit", *args, "--json", str(path)])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not path.exists()


def test_command_audits_a_word_vector_space(tmp_path, monkeypatch):
    """``vectors=<GloVe file>``: pairs, claims and releases in the file's words (the encoder is not used)."""
    from bench.reproduction import audit as driver

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(60)]
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("".join(f"{w} " + " ".join(f"{v:.4f}" for v in rng.standard_normal(5) / 3) + "\n"
                               for w in words))
    text = " ".join(words[i] for i in rng.zipf(1.5, size=500) % 60)
    monkeypatch.setattr(driver, "fit_ids", lambda space, sentences, seed: space.client_ids([text]))
    path = tmp_path / "words.json"
    result = runner.invoke(app, ["audit", "--defense", "santext-plus", "--defense-args", f"eps=2,vectors={vectors}",
                                 "--encoder", "mock", "--anchors", "2", "--ranks", "1,5", "--trials", "2000",
                                 "--json", str(path)])
    assert result.exit_code == 0, result.output
    report = json.loads(path.read_text())
    assert report["space"] == "words" and report["tokens"] == 60
    assert {p["token"] for p in report["pairs"]} <= set(words) and report["exceeded"] == 0
    assert {p["kind"] for p in report["pairs"]} & {"S/N", "N/S"}
