"""Qu et al. (2021) Table 3 in the paper's setting: d_chi token inversion with bert-base-uncased.

Tolerance 0.02 absolute per eta (the issue's bar). Each published cell runs `dchi-token` against
`inversion` on the task's full GLUE splits; the numbers are results/reference/qu2021_dchi.json's
values.table3 (SST-2 and QQP); cells skip without the hub and a GPU.
"""

import pytest

from .conftest import fraction, hub_and_gpu, load_reference

TOLERANCE = 0.02


def published(table: str, task: str) -> dict[str, float]:
    """eta (as printed) -> published number as a fraction."""
    reference = load_reference("qu2021_dchi.json")
    return {eta: fraction(value, reference["scale"]) for eta, value in reference["values"][table][task].items()}


@pytest.mark.parametrize("task", ["sst2", "qqp"])
def test_table3_inversion(task):
    values = published("table3", task)
    assert values, f"qu2021_dchi.json has no Table 3 values for {task}"
    if not hub_and_gpu("bert-base-uncased"):
        pytest.skip("needs the Hugging Face hub and a CUDA GPU")
    from bench.engine.runner import make_spec, run_cell

    scheme = load_reference("qu2021_dchi.json")["schemes"]["inversion"]
    for eta, value in values.items():
        spec = make_spec(task=task, defense=scheme["defense"], defense_args={"eta": float(eta)},
                         attack=scheme["attack"], encoder="bert-base-uncased", mode="finetune", n_train=10**7,
                         n_eval=10**7)
        measured = run_cell(spec).metrics[scheme["metric"]]
        assert abs(measured - value) <= TOLERANCE, (eta, measured, value)
