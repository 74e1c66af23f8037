"""How far the probe's utility (bench.models.probe) and the MLP head's move when the features do.

For each task, the training and evaluation sentences are encoded four ways, cache bypassed:

* one torch thread and batches of 64 (the reference);
* two torch threads;
* batches of 16 (other padding);
* the sentences in a shuffled order (other batch compositions).

Then the reference features get bf16-sized noise, ``--noise-draws`` times: each value times 1 + u * 2^-8, u uniform
in [-1, 1]. This bounds a different CPU's rounding generously. On every variant, the probe and the MLP head are
fitted on the training features and scored on the evaluation features. The head takes the frozen mode's defaults
and the variant's thread count. The script prints every figure as JSON, with the spread (max - min) per metric over
the re-encodings and over the noise draws. It is a benchmark, not a timed test: docs/probe.md quotes a run.

    PYTHONPATH=. BENCH_DATA_DIR=/work/shared/data HF_HUB_OFFLINE=1 python scripts/probe_tolerance.py \\
        --tasks sst2 --n-train 2000 --n-eval 872 --out /tmp/probe_tolerance.json

A token-tagging task (conll2003, ncbi-disease) runs its whole cell (``bench run --task T --no-save``) per variant.
Its features are the released tokens' states (``Encoder.token_states``), so those are computed the variant's way or
perturbed. ``--encoder mock`` and ``--epochs`` make a small run.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

NOISE = 2.0**-8  # bf16 keeps 8 significant bits: a relative rounding error below 2^-8 (2^-9 to nearest)


def encode(encoder, texts, threads: int, batch_size: int, order=None) -> np.ndarray:
    """Features of ``texts`` with ``threads`` torch threads and ``batch_size``, optionally encoded in ``order``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if order is None:
            return encoder.encode(texts, batch_size=batch_size, use_cache=False)
        features = encoder.encode([texts[i] for i in order], batch_size=batch_size, use_cache=False)
        out = np.empty_like(features)
        out[order] = features
        return out
    finally:
        torch.set_num_threads(before)


def head_scores(task, x, y, x_eval, y_eval, threads: int, seed: int, epochs: int = 0) -> tuple[dict, np.ndarray]:
    """The MLP head's metrics (frozen-mode defaults, seeded), trained with ``threads`` torch threads, and its
    predictions."""
    import torch

    from bench.models.training import TrainingConfig, predict, targets_for, train_head, training_defaults

    config = TrainingConfig(**{**training_defaults("frozen"), **({"epochs": epochs} if epochs else {})})
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        head = train_head(x, targets_for(y, task.num_labels), lambda a, b, g: (a, b), config, seed)
        predictions = predict(head, x_eval, task.num_labels)
        return task.score(predictions, y_eval), predictions
    finally:
        torch.set_num_threads(before)


def probe_scores(task, x, y, x_eval, y_eval) -> tuple[dict, np.ndarray, float, np.ndarray]:
    """The probe's metrics, its predictions, its fit time in seconds, and its rounded training features."""
    from bench.models.probe import fit_probe
    from bench.models.training import targets_for

    started = time.perf_counter()
    probe = fit_probe(x, targets_for(y, task.num_labels), task.num_labels)
    predictions = probe.predict(x_eval)
    seconds = time.perf_counter() - started
    return task.score(predictions, y_eval), predictions, seconds, probe.transform(x)


def spread(rows: list[dict], key: str) -> dict:
    """Per metric, max - min over ``rows[*][key]``."""
    names = rows[0][key].keys()
    return {name: float(max(r[key][name] for r in rows) - min(r[key][name] for r in rows)) for name in names}


def measure(task_name: str, n_train: int, n_eval: int, seed: int, draws: int, encoder_name: str = "minilm",
            epochs: int = 0) -> dict:
    """Every variant's probe and head figures on one task, and the spreads."""
    import bench.engine.runner  # noqa: F401  (registers the tasks)
    from bench.core.params import build_component
    from bench.core.registry import TASKS
    from bench.models.encoders import Encoder, mock_dimension
    from bench.models.loading import load_encoder

    task = build_component(TASKS.get(task_name), {})
    data = task.load(n_train, n_eval, seed)
    texts_train, texts_eval = list(data.train.texts), list(data.eval.texts)
    y, y_eval = np.asarray(data.train.labels), np.asarray(data.eval.labels)
    encoder = load_encoder(encoder_name) if mock_dimension(encoder_name) else Encoder(encoder_name, cache=False)
    shuffle = np.random.default_rng(seed + 1).permutation
    encodings = {  # name -> (threads, batch size, order of the training / evaluation sentences)
        "1 thread, batch 64": (1, 64, None, None),
        "2 threads, batch 64": (2, 64, None, None),
        "1 thread, batch 16": (1, 16, None, None),
        "1 thread, batch 64, shuffled": (1, 64, shuffle(len(texts_train)), shuffle(len(texts_eval))),
    }
    variants = []
    reference = reference_z = scale = None
    answers: dict = {}  # the reference variant's predictions of the probe and of the head

    def changed(kind: str, predictions: np.ndarray) -> float:
        """Evaluation predictions that differ from the reference's (regression: largest absolute change)."""
        answers.setdefault(kind, predictions)
        if task.num_labels == 1:
            return float(np.max(np.abs(predictions - answers[kind])))
        return int(np.count_nonzero(predictions != answers[kind]))
    for name, (threads, batch, order_train, order_eval) in encodings.items():
        started = time.perf_counter()
        x = encode(encoder, texts_train, threads, batch, order_train)
        x_eval = encode(encoder, texts_eval, threads, batch, order_eval)
        encoding_s = time.perf_counter() - started
        probe, probe_found, probe_s, z = probe_scores(task, x, y, x_eval, y_eval)
        if reference is None:
            reference, reference_z, scale = (x, x_eval), z, np.maximum(x.std(axis=0), 1e-6)
        head, head_found = head_scores(task, x, y, x_eval, y_eval, threads, seed, epochs)
        row = {"variant": name, "kind": "encoding", "threads": threads, "probe": probe, "probe_s": round(probe_s, 3),
               "head": head, "encoding_s": round(encoding_s, 1),
               "probe_predictions_changed": changed("probe", probe_found),
               "head_predictions_changed": changed("head", head_found),
               "max_feature_change_in_stds": float(np.max(np.abs(x - reference[0]) / scale)),
               "rounded_values_changed": int(np.count_nonzero(z != reference_z))}
        variants.append(row)
        print(json.dumps(row), flush=True)
    x, x_eval = reference
    for draw in range(draws):
        rng = np.random.default_rng(1000 + draw)
        noisy = (x * (1 + NOISE * rng.uniform(-1, 1, x.shape))).astype(np.float32)
        noisy_eval = (x_eval * (1 + NOISE * rng.uniform(-1, 1, x_eval.shape))).astype(np.float32)
        probe, probe_found, probe_s, z = probe_scores(task, noisy, y, noisy_eval, y_eval)
        head, head_found = head_scores(task, noisy, y, noisy_eval, y_eval, 1, seed, epochs)
        row = {"variant": f"bf16-sized noise, draw {draw}", "kind": "noise", "threads": 1, "probe": probe,
               "probe_s": round(probe_s, 3), "head": head,
               "probe_predictions_changed": changed("probe", probe_found),
               "head_predictions_changed": changed("head", head_found),
               "rounded_values_changed": int(np.count_nonzero(z != reference_z))}
        variants.append(row)
        print(json.dumps(row), flush=True)
    return summary(task_name, len(y), len(y_eval), seed, variants)


def summary(task_name: str, n_train: int, n_eval: int, seed: int, variants: list[dict]) -> dict:
    """A task's measurement: every variant, and the spreads of the probe and of the head over the re-encodings
    and over the noise draws (each beside the reference, the first variant)."""
    encoded = [r for r in variants if r["kind"] == "encoding"]
    with_noise = [variants[0], *(r for r in variants if r["kind"] == "noise")]
    return {"task": task_name, "n_train": n_train, "n_eval": n_eval, "seed": seed, "variants": variants,
            "spread": {"encodings": {"probe": spread(encoded, "probe"), "head": spread(encoded, "head")},
                       "bf16 noise": {"probe": spread(with_noise, "probe"), "head": spread(with_noise, "head")}},
            "load_average": os.getloadavg()}


def measure_tagging(task_name: str, n_train: int, n_eval: int, seed: int, draws: int,
                    encoder_name: str = "minilm", epochs: int = 0) -> dict:
    """The probe's and the head's metrics of a token-tagging cell (undefended) under each re-encoding and noise draw
    of the per-token states, and their spreads."""
    import torch

    from bench.engine.runner import make_spec, run_cell
    from bench.models.encoders import Encoder

    original = Encoder.token_states
    spec = make_spec(task=task_name, defense="none", encoder=encoder_name, n_train=n_train, n_eval=n_eval, seed=seed,
                     training_args=f"epochs={epochs}" if epochs else "")

    def states_with(threads: int, batch: int, shuffled: bool, noise_draw: int | None):
        def token_states(self, items, batch_size: int = 64):
            order = np.random.default_rng(seed + 1).permutation(len(items)) if shuffled else np.arange(len(items))
            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                found = original(self, [items[i] for i in order], batch_size=batch)
            finally:
                torch.set_num_threads(before)
            states = [None] * len(items)
            for position, index in enumerate(order):
                states[index] = found[position]
            if noise_draw is not None:  # one generator per call: training and evaluation states get their own noise
                rng = np.random.default_rng([1000 + noise_draw, len(items)])
                states = [(s * (1 + NOISE * rng.uniform(-1, 1, s.shape))).astype(np.float32) for s in states]
            return states
        return token_states

    variants = {"1 thread, batch 64": (1, 64, False, None), "2 threads, batch 64": (2, 64, False, None),
                "1 thread, batch 16": (1, 16, False, None), "1 thread, batch 64, shuffled": (1, 64, True, None),
                **{f"bf16-sized noise, draw {d}": (1, 64, False, d) for d in range(draws)}}
    rows = []
    try:
        for name, setting in variants.items():
            Encoder.token_states = states_with(*setting)
            started = time.perf_counter()
            record = run_cell(spec)
            utility = {k.removeprefix("utility/"): v for k, v in record.metrics.items() if k.startswith("utility/")}
            row = {"variant": name, "kind": "noise" if setting[3] is not None else "encoding", "threads": setting[0],
                   "probe": {k.removeprefix("probe_"): v for k, v in utility.items() if k.startswith("probe_")},
                   "head": {k: v for k, v in utility.items() if not k.startswith("probe_")},
                   "probe_iterations": record.notes.get("probe_iterations"),
                   "cell_s": round(time.perf_counter() - started, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        Encoder.token_states = original
    return summary(task_name, n_train, n_eval, seed, rows)


TAGGING = ("conll2003", "ncbi-disease")  # token-tagging tasks: measured by whole cells (measure_tagging)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="sst2",
                        help="comma-separated class-label or regression GLUE tasks, or token-tagging tasks")
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-eval", type=int, default=872)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise-draws", type=int, default=3)
    parser.add_argument("--out", default="")
    parser.add_argument("--encoder", default="minilm", help="minilm, or mock for a smoke run")
    parser.add_argument("--epochs", type=int, default=0, help="the head's epochs (default: the frozen mode's)")
    args = parser.parse_args()
    results = []
    for task in args.tasks.split(","):
        run = measure_tagging if task in TAGGING else measure
        result = run(task, args.n_train, args.n_eval, args.seed, args.noise_draws, args.encoder, args.epochs)
        print(json.dumps({"task": task, "spread": result["spread"], "load_average": result["load_average"]}),
              flush=True)
        results.append(result)
        if args.out:  # after every task, so an interrupted run keeps the tasks it finished
            with open(args.out, "w", encoding="utf-8") as handle:
                json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
