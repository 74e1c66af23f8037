"""The figures behind the limits that component docstrings state.

    python scripts/known_limits.py santext-vocabulary     # defenses/santext.py: V_S over the WordPiece table
    python scripts/known_limits.py gradient-signs         # attacks/gradient_matching.py: why the update carries
                                                          # the client layer (the head's alone hides signs)
    python scripts/known_limits.py gradient-stalls        # attacks/gradient_matching.py: masked attacks that fail
                                                          # stall before the step budget

Each prints what the docstring quotes. SST-2 runs at the defaults: 8,000 training sentences, the 872 of dev, seed 0.
It needs BENCH_DATA_DIR.
"""

import argparse

import numpy as np


def sst2_split():
    """The SST-2 split of the default cell (seed 0) and the packaged encoder."""
    from bench.core.registry import TASKS
    from bench.engine import runner  # noqa: F401  (registers the shipped components)
    from bench.models.loading import load_encoder

    return TASKS.get("sst2")().load(8000, 1000, 0), load_encoder("minilm", "cpu")


def santext_vocabulary() -> None:
    """SanText+'s V_S at w = 0.9 over the WordPiece table (as shipped) and over the client's own pieces."""
    from bench.privacy.mechanisms import client_token_ids, least_frequent, regular_token_ids, token_counts

    data, encoder = sst2_split()
    ids = client_token_ids(encoder, list(data.train.texts) + list(data.eval.texts))
    regular = regular_token_ids(encoder.tokenizer.get_vocab())
    counts = token_counts(ids, len(encoder.tokenizer.get_vocab()))
    own = regular[counts[regular] > 0]
    table_set, own_set = least_frequent(counts, regular, 0.9), least_frequent(counts, own, 0.9)
    flat = np.concatenate(ids)
    print(f"regular pieces {len(regular)}, used by the client {len(own)}; V_S over the table {len(table_set)}, "
          f"of which unused {int((counts[table_set] == 0).sum())}")
    print(f"token occurrences non-sensitive: over the table {(~np.isin(flat, table_set)).mean():.3f}, over the "
          f"client's pieces {(~np.isin(flat, own_set)).mean():.3f}")


def gradient_signs() -> None:
    """DLG on the head-only update of gradient-matching versions 1-2 (the head's gradient on a masked input): the
    gradient is matched, magnitudes recovered, signs at chance."""
    import torch

    from bench.models.gradient_inversion import MatchingSettings, match_gradients, success
    from bench.models.training import loss_fn

    torch.manual_seed(0)
    d = 16
    head = torch.nn.Sequential(torch.nn.Linear(d, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2)).eval()
    mask = torch.randint(0, 2, (1, d)).float() * 2 - 1
    for attempt in range(6):
        e, target = torch.randn(1, d) * 0.3, torch.tensor([[1.0, 0.0]])
        grads = torch.autograd.grad(loss_fn(head(e * mask), target, False), list(head.parameters()))
        found, distance = match_gradients(head, [g.numpy() for g in grads], target.numpy(), False, True,
                                          MatchingSettings(steps=60), seed=attempt)
        mse, _ = success(found[None], e.numpy(), 1e-3)
        signs = float((np.sign(found) == np.sign(e.numpy()[0])).mean())
        magnitudes = float(((np.abs(found) - np.abs(e.numpy()[0])) ** 2).mean())
        print(f"gradient distance {distance:.1e}, mse {float(mse[0]):.4f}, mse of magnitudes {magnitudes:.1e}, "
              f"signs agreeing {signs:.2f}")


def gradient_stalls() -> None:
    """DLG on the mimic's masked single-example updates (client layer, mask, head; Gaussian representations, seed
    0): each attack's result at 300 and at 1,200 steps, and how far the dummy grew past the true representation."""
    import torch

    from bench.models.gradient_inversion import MatchingSettings, match_gradients, success
    from bench.models.training import TrainingConfig, initial_client_layer, initial_head, loss_fn

    config = TrainingConfig(activation="tanh", head_layers=2)
    for d, count in ((16, 8), (64, 4)):
        client, head = initial_client_layer(d, config, 0).eval(), initial_head(d, 2, config, 0).eval()
        generator = torch.Generator().manual_seed(d)
        mask = torch.randint(0, 2, (1, d), generator=generator).float() * 2 - 1
        parameters = list(client.parameters()) + list(head.parameters())
        for attack in range(count):
            e, target = torch.randn(1, d, generator=generator), torch.tensor([[1.0, 0.0]] if attack % 2 else [[0.0, 1.0]])
            grads = torch.autograd.grad(loss_fn(head(client(e) * mask), target, False), parameters)
            line = []
            for steps in (300, 1200):
                found, distance = match_gradients(head, [g.numpy() for g in grads], target.numpy(), False, True,
                                                  MatchingSettings(steps=steps), seed=attack, client=client)
                mse, _ = success(found[None], e.numpy(), 1e-3)
                line.append(f"{steps} steps: distance {distance:.1e}, mse {float(mse[0]):.1e}")
            growth = float(np.linalg.norm(found) / np.linalg.norm(e.numpy()))
            print(f"d {d} attack {attack}: {'; '.join(line)}; dummy / true norm {growth:.1f}")


CHECKS = {"santext-vocabulary": santext_vocabulary, "gradient-signs": gradient_signs,
          "gradient-stalls": gradient_stalls}

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("check", choices=sorted(CHECKS))
    CHECKS[parser.parse_args().check]()
