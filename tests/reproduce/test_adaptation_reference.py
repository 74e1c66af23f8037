"""Qu et al. (2021) Tables 6 and 7 in the paper's setting: privacy-adaptive pretraining, then fine-tuning.

Each published cell runs `dchi-token` (Table 6) or `dchi-text` (Table 7) at its eta on the task's full
GLUE splits (SST-2, QQP) with bert-base-uncased fine-tuned, unadapted ('orig') or adapted with the cell's
objective and the paper's pretraining budget (results/reference/qu2021_adaptation.json: steps, batch size,
learning rate; the corpus is the file's harness_corpus). Tolerance 0.02 absolute. Cells skip without the
hub and a GPU.
"""

import pytest

from .conftest import fraction, hub_and_gpu, load_reference

TOLERANCE = 0.02


def server_args(reference: dict, objective: str) -> dict:
    """The server options of one published cell: the adaptation with the paper's budget, if the cell has one."""
    adapt = reference["objectives"][objective]
    if not adapt:
        return {}
    budget = reference["pretraining"]
    return {"adapt": adapt, "adapt_steps": budget["steps"], "adapt_batch_size": budget["batch_size"],
            "adapt_lr": budget["lr"], "adapt_corpus": budget["harness_corpus"]}


def cells(reference: dict, table: str, task: str) -> list[tuple[str, str, float]]:
    """(objective, eta, published fraction) of one task's column group."""
    return [(objective, eta, fraction(value, reference["scale"]))
            for objective, by_eta in reference["values"][table][task].items() for eta, value in by_eta.items()]


@pytest.mark.parametrize("task", ["sst2", "qqp"])
@pytest.mark.parametrize("table", ["table6", "table7"])
def test_adaptation_table(table, task):
    reference = load_reference("qu2021_adaptation.json")
    published = cells(reference, table, task)
    assert published, (table, task)
    assert None not in (reference["pretraining"][key] for key in ("steps", "batch_size", "lr", "harness_corpus"))
    if not hub_and_gpu("bert-base-uncased"):
        pytest.skip("needs the Hugging Face hub and a CUDA GPU")
    from bench.engine.runner import make_spec, run_cell

    scheme = reference["schemes"][table]
    for objective, eta, value in published:
        spec = make_spec(task=task, defense=scheme["defense"], defense_args={"eta": float(eta)},
                         server_args=server_args(reference, objective), encoder="bert-base-uncased",
                         mode="finetune", n_train=10**7, n_eval=10**7)
        measured = run_cell(spec).metrics[scheme["metric"]]
        assert abs(measured - value) <= TOLERANCE, (task, objective, eta, measured, value)


def test_reference_cells_map_to_server_options():
    """Runs offline: every objective of the reference file, with the paper's budget, is a valid cell setting."""
    from bench.engine.runner import make_spec

    reference = load_reference("qu2021_adaptation.json")
    budget = reference["pretraining"]
    for table, scheme in reference["schemes"].items():
        assert set(reference["values"][table]["sst2"]) == set(reference["objectives"])
        for objective in reference["objectives"]:
            spec = make_spec(defense=scheme["defense"], defense_args={"eta": 100.0}, attack="inversion",
                             server_args=server_args(reference, objective), encoder="mock")
            assert getattr(spec.server, "adapt", "") == reference["objectives"][objective]
            if spec.server:
                assert (spec.server.adapt_steps, spec.server.adapt_batch_size, spec.server.adapt_lr) == (
                    budget["steps"], budget["batch_size"], budget["lr"])
