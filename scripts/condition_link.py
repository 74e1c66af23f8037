"""How far a released clinical MLM ties patients' names to their conditions, with its frequency prior removed.

Usage:

    python scripts/condition_link.py [--task clinical-spl] [--results-dir results]

For every committed ``condition-probe`` record of the task whose released checkpoint is still in the cache
(``$BENCH_CACHE_DIR/pretrained/<pretrain_key>``, the key in the record's notes), the probe's scores are recomputed
(``attacks.condition_probe.fill_scores``, the record's template and patient count) and read two ways, each as the
mean over probed patients of (AUC of the patient's ranking against their own conditions) minus (its mean AUC against
every other probed patient's), with a 95% Student-t interval over patients (``attacks.condition_probe.name_link``;
condition-probe version 3 records both readings as ``link`` and ``link_centred``, so this script is for records of
earlier versions):

* ``raw``: the attack's own ranking, i.e. the record's ``auc - auc_chance`` with its interval;
* ``centred``: each condition's mean score over the probed names subtracted first, so that what the model knows of
  how common a condition is cancels and only what the name adds remains. An adversary can do this too (it needs
  only the weights and the names it probes).

Below the table, each defended record is paired with the undefended record of the same task, server options and
probe (the same patients, names and conditions): the difference of their centred links taken per patient, with a
95% interval over patients (``attacks.condition_probe.paired_link_difference``). This is the reading of "the
defense lowers the link": two models probed on the same patients are compared patient by patient, and what both
share per patient drops out of the interval.

The figures are in docs/clinical.md. A record whose checkpoint is not cached says so: rerunning its cell rebuilds
it.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def record_scores(record):
    """The probe's ``(patients, conditions)`` scores under the record's released checkpoint, and the truth."""
    import bench.engine.runner  # noqa: F401  (registers the tasks and attacks)
    from bench.attacks.condition_probe import ConditionProbe, condition_truth, fill_scores
    from bench.core.cache import cache_root
    from bench.core.registry import TASKS
    from bench.models.mlm import load_mlm

    spec = record.spec
    folder = cache_root() / "pretrained" / record.notes["pretrain_key"]
    if not folder.is_dir():
        return None, folder
    task = TASKS.get(spec["task"])()
    task.load(spec["n_train"], spec["n_eval"], spec["seed"])
    probe = ConditionProbe(**spec.get("attack_args", {}))
    patients = task.patients()[: probe.patients]
    _, _, conditions, _ = task.public_knowledge()  # first names, last names, conditions, their counts
    conditions = list(conditions)
    scores = fill_scores(load_mlm(str(folder)), probe.template, [f"{p.first} {p.last}" for p in patients],
                         conditions, probe.batch_size)
    return (scores, condition_truth(conditions, patients)), folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="clinical-spl")
    parser.add_argument("--results-dir", default="results", type=Path)
    args = parser.parse_args()

    from bench.attacks.condition_probe import name_link, paired_link_difference
    from bench.results.store import ResultStore

    records, _ = ResultStore(args.results_dir).read()
    cells = {}  # the newest record of each configuration
    for record in records:
        if (record.spec["task"] == args.task and record.spec["attack"] == "condition-probe"
                and "pretrain_key" in record.notes):  # the general MLM's row has nothing pretrained
            cells[record.config_hash] = record
    print("| defense | server | raw: own − chance AUC | centred: own − chance AUC |")
    print("|---|---|---|---|")
    probed = {}  # config hash -> (scores, truth) of the records whose checkpoint is cached
    for record in cells.values():
        found, folder = record_scores(record)
        if found is None:
            print(f"| {describe(record)} | {server_of(record)} | checkpoint {folder.name} not cached: "
                  "rerun the cell | |")
            continue
        scores, truth = probed[record.config_hash] = found
        raw = name_link(scores, truth)
        centred = name_link(scores - scores.mean(axis=0, keepdims=True), truth)
        print(f"| {describe(record)} | {server_of(record)} | {raw[0]:+.3f} [{raw[0] - raw[1]:+.3f}, "
              f"{raw[0] + raw[1]:+.3f}] | {centred[0]:+.3f} [{centred[0] - centred[1]:+.3f}, "
              f"{centred[0] + centred[1]:+.3f}] |")
    undefended = {pairing_key(r): r for r in cells.values() if r.spec["defense"] == "none" and r.config_hash in probed}
    pairs = [(r, undefended[pairing_key(r)]) for r in cells.values()
             if r.spec["defense"] != "none" and r.config_hash in probed and pairing_key(r) in undefended]
    if pairs:
        print("\n| defense | server | centred link minus the undefended one's, paired per patient | patients |")
        print("|---|---|---|---|")
    for record, reference in pairs:
        (scores, truth), (base, _) = probed[record.config_hash], probed[reference.config_hash]
        mean, half, n = paired_link_difference(scores, base, truth)
        print(f"| {describe(record)} | {server_of(record)} | {mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}] "
              f"| {n} |")


def describe(record) -> str:
    """The record's defense with its mode and selection, e.g. ``ndd substitutive ndd``."""
    args = record.spec.get("defense_args") or {}
    return " ".join(str(x) for x in (record.spec["defense"], args.get("mode"), args.get("select")) if x)


def server_of(record) -> str:
    """The record's pretraining budget, e.g. ``pretrain_steps=6400``."""
    return f"pretrain_steps={record.spec.get('server', {}).get('pretrain_steps', '?')}"


def pairing_key(record) -> str:
    """What two records must share to be paired: task, data, seed, server options and the probe's arguments."""
    import json

    spec = record.spec
    return json.dumps([spec["task"], spec["n_train"], spec["n_eval"], record.seed, spec.get("server"),
                       spec.get("attack_args")], sort_keys=True)


if __name__ == "__main__":
    main()
