"""Li et al. Table 7's pattern on the committed records of grids/li_ndd_table7.yaml (synthetic clinical corpus).

These tests read ``results/records`` only (no model runs): they skip, saying so, until the grid's records are
committed (``bench mlm prepare && bench run --grid grids/li_ndd_table7.yaml --results-dir results``). They check
the qualitative pattern, not the paper's values: our setting (a synthetic corpus, a 6-layer MLM, 200
further-pretraining steps, 120 samples) differs from the paper's (MIMIC-III, BERT-base at full budget).

- Name insertion (SPL) leaks more names than de-identified notes: a higher A@100 and a higher LastName share.
- NDD substitution of names lowers A@100 and EM in each name setting (never raises them, and lowers their
  sum over the two settings: at this sample size a metric can be 0 in both cells of one setting).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.analysis.reproduce import matches
from bench.results.store import ResultStore

RESULTS = Path(__file__).resolve().parents[2] / "results"
GENERATE = "privacy/name-generation"
CELLS = {
    "deid": {"task": "clinical-deid", "defense": "none", "server.pretrain_steps": 200},
    "deid_ndd": {"task": "clinical-deid", "defense": "ndd", "defense_args.mode": "substitutive"},
    "spl": {"task": "clinical-spl", "defense": "none", "server.pretrain_steps": 200},
    "spl_ndd": {"task": "clinical-spl", "defense": "ndd", "defense_args.mode": "substitutive"},
}


@pytest.fixture(scope="module")
def cells() -> dict[str, dict[str, float]]:
    """The metrics of the newest committed record of each cell (name-generation attack, seed 0)."""
    records, _ = ResultStore(RESULTS).read()
    found = {}
    for name, select in CELLS.items():
        chosen = [r for r in records if matches(r, {**select, "attack": "name-generation"}) and r.seed == 0]
        if not chosen:
            pytest.skip(f"no committed record of the Table 7 cell '{name}' in results/records: run `bench mlm prepare "
                        "&& bench run --grid grids/li_ndd_table7.yaml --results-dir results` and commit the records")
        found[name] = max(chosen, key=lambda r: r.created_at).metrics
    return found


def test_spl_leaks_more_names_than_deidentified_notes(cells):
    assert cells["spl"][f"{GENERATE}/a_at_100"] > cells["deid"][f"{GENERATE}/a_at_100"]
    assert cells["spl"][f"{GENERATE}/last_name"] > cells["deid"][f"{GENERATE}/last_name"]


@pytest.mark.parametrize("metric", ["a_at_100", "em"])
def test_ndd_substitution_lowers_name_and_condition_extraction(cells, metric):
    key = f"{GENERATE}/{metric}"
    for plain, substituted in (("deid", "deid_ndd"), ("spl", "spl_ndd")):
        assert cells[substituted][key] <= cells[plain][key], (plain, metric)
    assert cells["deid_ndd"][key] + cells["spl_ndd"][key] < cells["deid"][key] + cells["spl"][key]
