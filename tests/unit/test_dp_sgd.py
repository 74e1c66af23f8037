"""DP-SGD as a server option: the library's accountant, per-example clipping, epsilon = inf as the plain server,
and bad input refused in one sentence."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core.errors import BenchError
from bench.engine.runner import make_spec, run_cell
from bench.models.dp_sgd import DPSGD, noise_multiplier, spent_epsilon
from bench.models.servers import HiddenBatches, PredictionServer, SentenceServer, TaggingServer
from bench.models.training import TrainingConfig, cosine_schedule, make_head, targets_for
from tests.conftest import files_under


def test_rdp_epsilon_and_noise_match_the_published_values():
    # Opacus' published accountant tests (opacus/tests/accountants_test.py): sigma 1.5, q 0.04, 90 epochs (2250
    # steps), delta 1e-5 -> epsilon 7.32911117143; the noise for epsilon 8 at q 0.04 over 90 epochs -> 1.416, over
    # 2000 steps -> 1.3562 (both to four places)
    assert spent_epsilon(1.5, 0.04, 2250, 1e-5, "rdp") == pytest.approx(7.32911117143, abs=1e-6)
    assert noise_multiplier(8.0, 1e-5, 0.04, 2250, "rdp") == pytest.approx(1.416, abs=5e-5)
    assert noise_multiplier(8.0, 1e-5, 0.04, 2000, "rdp") == pytest.approx(1.3562, abs=5e-5)


def test_prv_epsilon_agrees_with_an_independent_pld_accountant():
    import dp_accounting as dpa

    event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.04, dpa.GaussianDpEvent(1.5)), 2250)
    pld = dpa.pld.PLDAccountant(value_discretization_interval=1e-3)
    pld.compose(event)
    prv = spent_epsilon(1.5, 0.04, 2250, 1e-5, "prv")
    assert prv == pytest.approx(pld.get_epsilon(1e-5), abs=0.03)  # both near-exact (6.77); RDP's bound is 7.33
    assert prv < spent_epsilon(1.5, 0.04, 2250, 1e-5, "rdp") - 0.3


@pytest.mark.parametrize("accountant", ["rdp", "prv"])
def test_the_noise_found_spends_at_most_the_target(accountant):
    sigma = noise_multiplier(3.0, 1e-3, 0.1, 300, accountant)
    spent = spent_epsilon(sigma, 0.1, 300, 1e-3, accountant)
    assert 3.0 - 0.02 <= spent <= 3.0


CONFIG = TrainingConfig(epochs=1, lr=1.0, batch_size=8, head_layers=0)  # one full-batch step of 8 examples


def _linear_head():
    torch.manual_seed(0)
    return make_head(5, 2, CONFIG)


def _one_step(features: np.ndarray, labels: np.ndarray, privacy: DPSGD | None) -> torch.Tensor:
    """The change of a linear head's weights after one full-batch SGD step (lr 1), privately or not."""
    config = CONFIG
    x, y = torch.from_numpy(features), torch.from_numpy(targets_for(labels, 2))
    head = _linear_head()
    before = torch.cat([p.detach().clone().ravel() for p in head.parameters()])
    if privacy is None:
        loss = -(y * torch.log_softmax(head(x), dim=-1)).sum(dim=1).mean()
        loss.backward()
        with torch.no_grad():
            for p in head.parameters():
                p -= p.grad
    else:
        head = privacy.train(head, len(x), lambda idx: (x[idx], y[idx]), config, 0, False, torch.optim.SGD,
                             lambda opt, rounds: cosine_schedule(opt, config, rounds))
    return torch.cat([p.detach().ravel() for p in head.parameters()]) - before


def test_per_example_gradients_are_clipped_so_one_huge_example_moves_the_head_by_at_most_the_norm():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(8, 5)).astype(np.float32)
    labels = (features[:, 0] > 0).astype(int)
    huge = features.copy()
    huge[0] *= 1e5  # its gradient would dominate the batch's: it is misclassified with all confidence
    with torch.no_grad():
        labels[0] = 1 - int(_linear_head()(torch.from_numpy(huge[:1])).argmax())
    # neighbouring datasets: the batch with one example replaced; the noise (same seed, same shapes) is the same
    private = [_one_step(f, labels, DPSGD(50.0, 1e-5, clip=1.0, accountant="rdp")) for f in (features, huge)]
    plain = [_one_step(f, labels, None) for f in (features, huge)]
    assert (plain[1] - plain[0]).norm() > 1e3  # without clipping the huge example moves the head far
    # with it, one example changes the summed gradient by at most 2 C, the mean (over q n = 8) by 2 C / 8
    assert (private[1] - private[0]).norm() <= 2 * 1.0 / 8 + 1e-5
    assert (private[1] - private[0]).norm() > 1e-3  # and it does change it (the test can fail)


def _fit(privacy: DPSGD | None, seed: int = 3):
    rng = np.random.default_rng(1)
    features = rng.normal(size=(120, 16)).astype(np.float32)
    labels = (features[:, :3].sum(axis=1) > 0).astype(int)
    x, y = torch.from_numpy(features), torch.from_numpy(targets_for(labels, 2))
    server = SentenceServer(2, TrainingConfig(epochs=8, lr=2e-2, batch_size=16), seed)
    server.privacy = privacy
    server.fit_hidden(HiddenBatches(len(x), 16, 2, [np.arange(len(x))], lambda idx, c, g: (x[idx], y[idx])))
    server.fit_probe(features, targets_for(labels, 2))
    return server, server.predict_hidden(x), labels


def test_infinite_epsilon_is_the_non_private_server_bit_for_bit():
    plain, plain_predictions, _ = _fit(None)
    infinite, infinite_predictions, _ = _fit(DPSGD(math.inf))
    for (name, a), (_, b) in zip(plain.head.state_dict().items(), infinite.head.state_dict().items()):
        assert torch.equal(a, b), name
    assert np.array_equal(plain_predictions, infinite_predictions)
    assert infinite.privacy.facts["dp_noise_multiplier"] == 0.0 and infinite.privacy.facts["dp_clip"] is None
    private, _, _ = _fit(DPSGD(4.0, accountant="rdp"))
    assert not torch.equal(private.head[-1].weight, plain.head[-1].weight)  # a finite epsilon trains otherwise


def test_a_private_server_is_a_plain_head_with_its_privacy_recorded():
    server, predictions, labels = _fit(DPSGD(1e3, accountant="rdp"))
    assert type(server.head) is torch.nn.Sequential and not server.head._forward_hooks  # hooks removed
    assert not any(hasattr(p, "grad_sample") for p in server.head.parameters())
    assert server.probe is None  # no non-private probe beside a private head
    facts = server.privacy.facts
    assert facts["dp_steps"] == 8 * math.ceil(120 / 16) and facts["dp_sample_rate"] == pytest.approx(16 / 120)
    assert facts["dp_delta"] == pytest.approx(1 / 120) and facts["dp_accountant"] == "rdp"
    assert 1e3 - 0.02 <= facts["dp_epsilon_spent"] <= 1e3 and facts["dp_noise_multiplier"] > 0
    assert (predictions == labels).mean() > 0.9  # clipped, with little noise, it still learns


def test_a_cell_records_the_privacy_spent_and_a_plain_cell_keeps_its_spec(tiny_data):
    plain = make_spec(task="sst2", encoder="mock", n_train=16, n_eval=8, training_args={"epochs": 2})
    assert plain.to_dict()["server"] == {} and "server" not in plain.label()
    spec = make_spec(task="sst2", encoder="mock", n_train=16, n_eval=8, training_args={"epochs": 2},
                     server_args="dp_epsilon=4,dp_accountant=rdp")
    assert spec.to_dict()["server"] == {"dp_epsilon": 4.0, "dp_delta": None, "dp_clip": 1.0, "dp_accountant": "rdp"}
    assert spec.config_hash() != plain.config_hash()
    assert type(spec.from_dict(spec.to_dict()).server) is type(spec.server)
    record = run_cell(spec)  # the runner checks the notes against their schema
    notes = record.notes
    assert notes["dp_epsilon"] == 4.0 and notes["dp_epsilon_spent"] <= 4.0 and notes["dp_steps"] == 2
    assert notes["dp_delta"] == pytest.approx(1 / 16) and notes["dp_clip"] == 1.0
    infinite = run_cell(make_spec(task="sst2", encoder="mock", n_train=16, n_eval=8, training_args={"epochs": 2},
                                  server_args="dp_epsilon=inf"))
    assert infinite.metrics == run_cell(plain).metrics and infinite.notes["dp_epsilon"] == math.inf


def test_adaptation_and_dp_sgd_combine(tiny_data):
    spec = make_spec(task="sst2", defense="dchi-token", encoder="mock", n_train=16, n_eval=8,
                     server_args="adapt=prob,dp_epsilon=2")
    assert spec.server.adapt == "prob" and spec.server.dp_epsilon == 2.0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--server-args", "dp_epsilon=0"], "dp_epsilon must be positive"),
        (["--server-args", "dp_epsilon=-1"], "dp_epsilon must be positive"),
        (["--server-args", "dp_epsilon=1,dp_delta=1"], "dp_delta must lie strictly between 0 and 1"),
        (["--server-args", "dp_epsilon=1,dp_delta=0"], "dp_delta must lie strictly between 0 and 1"),
        (["--server-args", "dp_epsilon=1,dp_clip=0"], "dp_clip must be a positive finite norm"),
        (["--server-args", "dp_epsilon=1,dp_clip=-2"], "dp_clip must be a positive finite norm"),
        (["--server-args", "dp_epsilon=1,dp_accountant=moments"], "dp_accountant must be prv or rdp"),
        (["--server-args", "dp_clip=2"], "need dp_epsilon="),
        (["--server-args", "dp_epsilon=nan"], "must be a finite number"),
        (["--task", "clinical-deid", "--server-args", "dp_epsilon=1"], "no server trains on its release"),
        (["--task", "ptb", "--server-args", "dp_epsilon=1"], "does not train by DP-SGD here"),
        (["--task", "squad", "--server-args", "dp_epsilon=1"], "does not train by DP-SGD here"),
        (["--task", "blog", "--defense", "nasty-teacher", "--server-args", "dp_epsilon=1"],
         "its own distillation loop, not by DP-SGD"),
        (["--server-args", "dp_epsilon=1", "--mode", "finetune"], "run it with --mode frozen"),
        (["--defense", "texthide", "--server-args", "dp_epsilon=1"], "DP-SGD does not apply to it"),
    ],
)
def test_bad_privacy_options_exit_2_with_one_sentence(tiny_data, results, args, message):
    result = CliRunner().invoke(app, ["run", *args, "--encoder", "mock"])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert files_under(results) == []


def test_a_target_no_noise_can_meet_is_refused():
    with pytest.raises(BenchError, match="raise dp_epsilon"):
        noise_multiplier(1e-9, 1e-5, 1.0, 10**6, "rdp")


def test_a_grid_sweeps_epsilon_through_its_servers(tiny_data, tmp_path):
    from bench.engine.grid import load_grid

    grid = tmp_path / "dp.yaml"
    grid.write_text("tasks: [sst2]\nencoders: [mock]\ndefenses: [none]\n"
                    "servers: [{}, {dp_epsilon: 1}, {dp_epsilon: .inf, dp_accountant: rdp}]\n"
                    "settings: {n_train: 16, n_eval: 8}\n")
    plain, one, infinite = load_grid(grid)
    assert plain.server is None and one.server.dp_epsilon == 1.0 and one.server.dp_accountant == "prv"
    assert infinite.server.dp_epsilon == math.inf and len({s.config_hash() for s in (plain, one, infinite)}) == 3


def _grouped_step(sentences: list[np.ndarray], tags: list[np.ndarray]) -> torch.Tensor:
    """The change of a linear tagger's weights after one full-lot DP-SGD step on these sentences (lr 1)."""
    x = torch.from_numpy(np.concatenate(sentences))
    y = torch.from_numpy(targets_for(np.concatenate(tags), 2))
    bounds = np.cumsum([0] + [len(s) for s in sentences])

    def batch(idx):
        rows = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in idx.tolist()])
        owner = np.concatenate([np.full(bounds[i + 1] - bounds[i], k) for k, i in enumerate(idx.tolist())])
        return x[rows], y[rows], owner

    head = _linear_head()
    before = torch.cat([p.detach().clone().ravel() for p in head.parameters()])
    head = DPSGD(50.0, 1e-5, clip=1.0, accountant="rdp").train(head, len(sentences), batch, CONFIG, 0, False,
                                                                torch.optim.SGD)
    return torch.cat([p.detach().ravel() for p in head.parameters()]) - before


def test_a_sentence_is_clipped_whole_however_many_tokens_it_has():
    rng = np.random.default_rng(2)
    sentences = [rng.normal(size=(3, 5)).astype(np.float32) for _ in range(8)]
    tags = [(s[:, 0] > 0).astype(int) for s in sentences]
    long = list(sentences)
    long[0] = np.repeat(rng.normal(size=(1, 5)).astype(np.float32) * 1e5, 60, axis=0)  # 60 huge tokens
    with torch.no_grad():
        wrong = 1 - int(_linear_head()(torch.from_numpy(long[0][:1])).argmax())
    long_tags = list(tags)
    long_tags[0] = np.full(60, wrong)
    change = (_grouped_step(long, long_tags) - _grouped_step(sentences, tags)).norm()
    assert 1e-3 < change <= 2 * 1.0 / 8 + 1e-5  # one sentence, all its tokens: at most 2 C over the lot of 8


class _TokenFeatures:
    """An encoder stand-in: each released sentence is already its token features."""

    dim = 6

    def token_states(self, released):
        return [np.asarray(r, dtype=np.float32) for r in released]


def _tagger(privacy):
    rng = np.random.default_rng(4)
    released = [rng.normal(size=(int(rng.integers(1, 6)), 6)) for _ in range(40)]
    tags = [(r[:, 0] > 0).astype(int) for r in released]
    server = TaggingServer(2, TrainingConfig(epochs=3, batch_size=8), 0, _TokenFeatures(), privacy=privacy)
    server.fit_tokens(released, tags)
    return server, server.predict_tokens(released)


def test_the_tagger_trains_by_dp_sgd_per_sentence_and_infinite_epsilon_is_the_plain_tagger():
    plain, plain_tags = _tagger(None)
    infinite, infinite_tags = _tagger(DPSGD(math.inf))
    for (name, a), (_, b) in zip(plain.head.state_dict().items(), infinite.head.state_dict().items()):
        assert torch.equal(a, b), name
    assert all(np.array_equal(a, b) for a, b in zip(plain_tags, infinite_tags))
    private, _ = _tagger(DPSGD(2.0, accountant="rdp"))
    facts = private.privacy.facts
    assert facts["dp_steps"] == 3 * math.ceil(40 / 8) and facts["dp_sample_rate"] == pytest.approx(8 / 40)
    assert facts["dp_delta"] == pytest.approx(1 / 40) and facts["dp_epsilon_spent"] <= 2.0
    assert private.probe is None and not torch.equal(private.head[-1].weight, plain.head[-1].weight)


def test_the_board_labels_a_dp_cell_by_what_it_changed():
    from bench.results.leaderboard import format_args, server_changes

    assert format_args(server_changes({"dp_epsilon": 8.0, "dp_delta": None, "dp_clip": 1.0,
                                       "dp_accountant": "prv"})) == "dp_epsilon=8.0"
    assert format_args(server_changes({"dp_epsilon": 1.0, "dp_delta": None, "dp_clip": 0.5,
                                       "dp_accountant": "rdp"})) == "dp_epsilon=1.0,dp_clip=0.5,dp_accountant=rdp"


class _Features:
    """An encoder stand-in: each item is already its feature vector."""

    def encode(self, items):
        return np.asarray(items, dtype=np.float32)


def test_a_prediction_api_answers_from_a_victim_trained_by_dp_sgd():
    rng = np.random.default_rng(5)
    features = rng.normal(size=(60, 6)).astype(np.float32)
    labels = (features[:, 0] > 0).astype(int)
    config = TrainingConfig(epochs=3, batch_size=8)
    plain = PredictionServer(2, config, 0, _Features())
    plain.fit_released(list(features), labels)
    infinite = PredictionServer(2, config, 0, _Features(), privacy=DPSGD(math.inf))
    infinite.fit_released(list(features), labels)
    assert np.array_equal(plain.logits(list(features)), infinite.logits(list(features)))
    private = PredictionServer(2, config, 0, _Features(), privacy=DPSGD(2.0, accountant="rdp"))
    private.fit_released(list(features), labels)
    assert private.privacy.facts["dp_steps"] == 3 * math.ceil(60 / 8)
    assert not np.array_equal(plain.logits(list(features)), private.logits(list(features)))
