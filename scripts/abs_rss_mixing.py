"""How far similarity on absolute values goes against TextHide's mixed training release, measured for each k.

Sign masks keep absolute values, so abs-rss re-identifies TextHide's masked, unmixed inference queries. A training
row is |Σ_j λ_j e_j|: k members mixed with |N(0, 1)| weights, then masked. This script hides a task's evaluation
representations as the bench's training traffic is hidden (``release_like_training``, batches of the server's size)
and reads every row's members and weights off the hidden targets: each example's target is its own one-hot row, and
TextHide mixes targets with the representations' weights. For each k it prints, over the rows:

- ``rss``, ``abs``: identity of the signed and the absolute-value search (the owner is the row's first member);
- ``abs_member``: the absolute-value search returns one of the row's members;
- ``abs_top``: it returns the row's heaviest member;
- ``nnls_recall``: members found by a nonnegative fit of the row's absolute values on the absolute values of the
  ``--candidates`` nearest corpus rows (the fit's k largest weights; a member found twice counts once), the step
  toward Carlini et al.'s recovery of mixed members;
- ``nnls_owner``: identity when the guess is the fit's heaviest member;
- ``ceiling``: rows whose owner is their heaviest member, what a one-guess attack that finds the heaviest member
  gets (the owner's weight is one of k i.i.d. draws, so about 1/k).

With ``--scheme inter`` half the members are public sentences (not in the index, not in the targets): "members" and
"heaviest" then mean the private ones.
- ``abs_coverage``, ``nnls_coverage``: evaluation sentences that the search's answer to some row is (that the fit
  finds among some row's members): the share of the client's sentences an eavesdropper recovers from the release.

Usage (SST-2 dev as in the docs; minutes on one core):

    BENCH_DATA_DIR=../shared/data python scripts/abs_rss_mixing.py --task sst2 --n-train 1000 --n-eval 872
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from bench.core.registry import TASKS
from bench.core.seeding import derive_seed
from bench.defenses.texthide import TextHide
from bench.engine.paths.representations import ClientSide, release_like_training
from bench.models.generators import torch_generator
from bench.models.loading import load_encoder
from bench.models.training import training_defaults
from bench.privacy.neighbours import cosine_search


def hide_with_members(reps: np.ndarray, m, k: int, batch_size: int, seed: int, scheme: str = "intra",
                      client: ClientSide | None = None):
    """``reps`` hidden as TextHide training batches: (hidden rows, member weights ``(n, n)``: row i's weight on
    example j; under inter, on the private members only, over their total weight)."""
    import torch

    defense = TextHide(m=m, k=k, scheme=scheme)
    defense.setup(reps.shape[1], torch_generator(seed, "client-secrets"))
    if client is not None:
        defense.prepare(client)  # inter: the public corpus it mixes in
    x = torch.from_numpy(np.ascontiguousarray(reps, dtype=np.float32))
    hidden, weights = release_like_training(defense, x, torch.eye(len(reps)), batch_size,
                                            torch_generator(seed, "client-release"))
    return hidden.numpy(), weights.numpy()


def measure(hidden: np.ndarray, weights: np.ndarray, corpus: np.ndarray, rows: np.ndarray, k: int,
            candidates: int) -> dict[str, float]:
    """The figures of one hidden release: ``rows`` maps example j to its corpus row."""
    from scipy.optimize import nnls

    n = len(hidden)
    owners, heaviest = rows, rows[weights.argmax(axis=1)]
    members = [set(rows[np.flatnonzero(w > 1e-9)]) for w in weights]
    _, signed = cosine_search(corpus, hidden, k=1)
    _, near = cosine_search(np.abs(corpus), np.abs(hidden), k=min(candidates, len(corpus)))
    found, owner_hits, recovered = [], [], set()
    for i in range(n):
        coefficients, _ = nnls(np.abs(corpus[near[i]]).T.astype(np.float64), np.abs(hidden[i]).astype(np.float64))
        picked = {near[i][j] for j in np.argsort(-coefficients)[:k] if coefficients[j] > 0}
        found.append(len(members[i] & picked) / len(members[i]))
        owner_hits.append(near[i][coefficients.argmax()] == owners[i])
        recovered |= picked & members[i]
    return {
        "rss": float(np.mean(signed[:, 0] == owners)),
        "abs": float(np.mean(near[:, 0] == owners)),
        "abs_member": float(np.mean([near[i, 0] in members[i] for i in range(n)])),
        "abs_top": float(np.mean(near[:, 0] == heaviest)),
        "nnls_recall": float(np.mean(found)),
        "nnls_owner": float(np.mean(owner_hits)),
        "ceiling": float(np.mean(heaviest == owners)),
        "abs_coverage": len(set(near[:, 0]) & set(rows)) / n,
        "nnls_coverage": len(recovered) / n,
    }


def main(argv: list[str] | None = None) -> dict[int, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--encoder", default="minilm")
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-eval", type=int, default=872)
    parser.add_argument("--m", default="256", help="TextHide's mask pool (an integer, or inf)")
    parser.add_argument("--ks", default="1,2,4", help="mixing widths to measure")
    parser.add_argument("--candidates", type=int, default=50, help="nearest corpus rows the nonnegative fit takes")
    parser.add_argument("--scheme", default="intra", help="intra, or inter (half the members from a public corpus)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    data = TASKS.get(args.task)().load(args.n_train, args.n_eval, args.seed)
    index = data.index_corpus()[0]
    encoder = load_encoder(args.encoder, "cpu")
    corpus = encoder.encode(index)
    position = {text: i for i, text in enumerate(index)}
    rows = np.array([position[t] for t in data.eval.texts])
    batch_size = training_defaults("frozen", args.encoder)["batch_size"]
    m = args.m if args.m == "inf" else int(args.m)
    figures = {}
    for k in (int(x) for x in args.ks.split(",")):
        client = ClientSide(args.task, args.n_train, args.seed, "frozen", encoder) if args.scheme == "inter" else None
        hidden, weights = hide_with_members(corpus[rows], m, k, batch_size, derive_seed(args.seed, f"k={k}"),
                                            args.scheme, client)
        figures[k] = measure(hidden, weights, corpus, rows, k, args.candidates)
        print(json.dumps({"task": args.task, "scheme": args.scheme, "m": m, "k": k, "rows": len(rows),
                          "corpus": len(corpus),
                          **{name: round(value, 3) for name, value in figures[k].items()}}), flush=True)
    return figures


if __name__ == "__main__":
    main()
