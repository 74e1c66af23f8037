"""The condition probe's frequency baseline (its ``random/`` figures) with the prior counted two ways.

Usage:

    python scripts/condition_baseline.py [--n-train 1000] [--n-eval 200] [--seed 0]

The baseline ranks every condition by its frequency, the same ranking for every probed patient
(``ConditionProbe.random_guess``, ties broken by the runner's seeded generator), scored as the attack is. The prior
is counted over the held-out patients (condition-probe version 4: neither pretrained on nor probed) and, for
comparison, over every patient of the corpus (version 3, the probed ones included). The baseline reads no weights,
so this prints what a re-run cell records. The figures are in docs/clinical.md.
"""

from __future__ import annotations

import argparse

import numpy as np

from bench import Release, ReleaseKind, Truth
from bench.attacks.condition_probe import ConditionProbe
from bench.core.registry import TASKS
from bench.core.releases import ModelRelease
from bench.core.seeding import numpy_generator
from bench.engine import runner  # noqa: F401  (registers the shipped components)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-eval", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name in ("clinical-deid", "clinical-spl"):
        task = TASKS.get(name)()
        task.load(args.n_train, args.n_eval, args.seed)
        probed = task.patients()
        firsts, lasts, *held_out = task.public_knowledge()
        priors = {"held-out patients (version 4)": held_out,
                  "every patient (version 3)": task.corpus.condition_vocabulary()}
        attack, truth = ConditionProbe(), Truth([], np.zeros(0), np.zeros(0), records=probed)
        for label, (conditions, counts) in priors.items():
            data = ModelRelease("", firsts, lasts, conditions, counts, [(p.first, p.last) for p in probed])
            release = Release(ReleaseKind.MODEL, data, owners=np.arange(len(probed)))
            scores = attack.score(attack.random_guess(release, None, numpy_generator(args.seed, "random-guess")),
                                  truth, None)
            print(f"{name}, prior over {label}: auc {scores['auc']:.3f}, p_at_10 {scores['p_at_10']:.3f} "
                  f"({len(probed)} probed, {len(task.corpus.patients) - len(probed)} held out)")


if __name__ == "__main__":
    main()
