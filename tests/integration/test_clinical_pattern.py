"""Li et al. Table 7's pattern on the committed records of grids/li_ndd_table7.yaml (synthetic clinical corpus).

These tests read ``results/records`` only (no model runs): they skip, saying so, until the grid's records are
committed (``bench mlm prepare && bench run --grid grids/li_ndd_table7.yaml --results-dir results``). They check
the qualitative pattern, not the paper's values: our setting (a synthetic corpus, a 6-layer MLM, 200
further-pretraining steps, 120 samples) differs from the paper's (MIMIC-III, BERT-base at full budget).

What the committed records show, and these tests hold them to:

- Further pretraining on the notes teaches the MLM real patients' names that the general MLM never generates.
- Name insertion (SPL) leaks more names than de-identified notes: more samples with a name, and larger shares of
  generated first and last names that are real patients' names.
- NDD substitution of the names lowers those shares in each name setting (in the paper they rise slightly with
  NDD, 0.94% -> 1.37% and 3.14% -> 5.21% de-identified: our finding, not a reproduction of theirs).
- A@100 (Lehman et al.'s P@100, name-generation version 2): pretraining on the notes raises it above the general
  MLM's, SPL above de-identified notes, and NDD substitution lowers it in each name setting, as in the paper.
- No row ties a name to its conditions beyond chance: EM (0 in every row but SPL-Deidentified's 0.036, 2 of 55
  samples) never beats EM of the same samples with the patients' conditions reassigned among them (em_chance,
  name-generation version 4: 0.063 for that row), and the probe ranks conditions as well against any other
  patient's as against the named one's (auc_chance, condition-probe version 2), with or without the model's
  frequency prior (link and link_centred, version 3: 0 in every 95% interval). So the paper's "NDD lowers EM" has
  nothing to lower here (docs/clinical.md).
- At 32 times the budget (SPL, 6,400 steps) the link appears once the model's frequency prior is removed: the
  centred link's interval excludes 0. Its NDD twin, pretrained the same 6,400 steps on the notes with the names
  substituted, has no link (0 in its interval, whose top is below the SPL row's mean), and its A@100 and
  shares of real names fall as at 200 steps.
"""

from __future__ import annotations

import pytest

from bench.reproduction.reproduce import matches

GENERATE = "privacy/name-generation"
CELLS = {
    "deid": {"task": "clinical-deid", "defense": "none", "server.pretrain_steps": 200},
    "deid_ndd": {"task": "clinical-deid", "defense": "ndd", "defense_args.mode": "substitutive",
                 "server.pretrain_steps": 200},
    "spl": {"task": "clinical-spl", "defense": "none", "server.pretrain_steps": 200},
    "spl_ndd": {"task": "clinical-spl", "defense": "ndd", "defense_args.mode": "substitutive",
                "server.pretrain_steps": 200},
}


def newest(records, select: dict, name: str, attack: str = "name-generation"):
    """The metrics of the newest committed record of the cell under ``attack`` (seed 0), or a skip that says why."""
    chosen = [r for r in records if matches(r, {**select, "attack": attack}) and r.seed == 0]
    if not chosen:
        pytest.skip(f"no committed record of the Table 7 cell '{name}' in results/records: run `bench mlm prepare "
                    "&& bench run --grid grids/li_ndd_table7.yaml --results-dir results` and commit the records")
    return max(chosen, key=lambda r: r.created_at).metrics


@pytest.fixture(scope="module")
def general(committed_records) -> dict[str, float]:
    """The general-domain MLM's row (released as it is; the same model for both tasks)."""
    general_mlm = {"task": "clinical-deid", "defense": "none", "server.pretrain_steps": 0}
    return newest(committed_records, general_mlm, "general")


@pytest.fixture(scope="module")
def cells(committed_records) -> dict[str, dict[str, float]]:
    """The metrics of the newest committed record of each cell (name-generation attack, seed 0)."""
    return {name: newest(committed_records, select, name) for name, select in CELLS.items()}


def test_pretraining_on_notes_teaches_real_names_the_general_mlm_lacks(cells, general):
    for name in ("deid", "spl"):
        for metric in ("first_name", "last_name", "a_at_100"):
            assert cells[name][f"{GENERATE}/{metric}"] > general[f"{GENERATE}/{metric}"], (name, metric)


@pytest.mark.parametrize("metric", ["with_name", "first_name", "last_name", "a_at_100"])
def test_spl_leaks_more_names_than_deidentified_notes(cells, metric):
    assert cells["spl"][f"{GENERATE}/{metric}"] > cells["deid"][f"{GENERATE}/{metric}"]


@pytest.mark.parametrize("setting", ["deid", "spl"])
def test_ndd_substitution_lowers_the_share_of_real_names(cells, setting):
    def real(metrics):
        return metrics[f"{GENERATE}/first_name"] + metrics[f"{GENERATE}/last_name"]

    assert real(cells[f"{setting}_ndd"]) < real(cells[setting])


@pytest.mark.parametrize("setting", ["deid", "spl"])
def test_ndd_substitution_lowers_a_at_100(cells, setting):
    key = f"{GENERATE}/a_at_100"
    assert cells[f"{setting}_ndd"][key] < cells[setting][key]


@pytest.mark.parametrize("setting", ["deid", "deid_ndd", "spl", "spl_ndd"])
def test_no_row_ties_names_to_conditions_beyond_chance(committed_records, setting):
    """EM against the same samples with the conditions reassigned, and the probe's AUC against other patients'
    conditions: at this budget the released MLMs know names and conditions apart, not whose conditions are whose,
    so the paper's 'NDD lowers EM' has nothing to lower (bench reproduce: not applicable). The probe's name link,
    raw and with the model's frequency prior removed (condition-probe version 3), holds 0 in its 95% interval."""
    generate = newest(committed_records, CELLS[setting], setting)
    probe = newest(committed_records, CELLS[setting], setting, "condition-probe")
    assert generate[f"{GENERATE}/em"] <= generate[f"{GENERATE}/em_chance"] + 0.02
    assert abs(probe["privacy/condition-probe/auc"] - probe["privacy/condition-probe/auc_chance"]) <= 0.02
    for link in ("link", "link_centred"):
        assert abs(probe[f"privacy/condition-probe/{link}"]) <= probe[f"privacy/condition-probe/{link}_ci95"], link


def test_at_6400_steps_spl_ties_names_to_conditions_once_the_prior_is_removed(committed_records):
    """The budget sweep's end (docs/clinical.md): after 6,400 further-pretraining steps on the SPL notes the probe's
    centred link excludes 0 from its 95% interval, while its raw ranking (the attack as an adversary runs it
    without centring) stays within its interval of 0; the frequency guess, which knows no names, has neither."""
    spl = {**CELLS["spl"], "server.pretrain_steps": 6400}
    probe = newest(committed_records, spl, "spl at 6,400 steps", "condition-probe")
    centred, raw = "privacy/condition-probe/link_centred", "privacy/condition-probe/link"
    assert probe[centred] > probe[f"{centred}_ci95"] > 0
    assert abs(probe[raw]) <= probe[f"{raw}_ci95"]
    random = "random/condition-probe/link_centred"
    assert abs(probe[random]) <= probe[f"{random}_ci95"]


def test_at_6400_steps_ndd_substitution_removes_the_link_and_the_names(committed_records):
    """NDD T7 at 32 times the budget (docs/clinical.md): where the SPL row's centred link excludes 0, the NDD twin's
    interval holds 0 and lies wholly below the SPL row's mean; A@100 and the shares of real first and last names
    fall below the SPL row's."""
    spl = {**CELLS["spl"], "server.pretrain_steps": 6400}
    twin = {**CELLS["spl_ndd"], "server.pretrain_steps": 6400}
    centred = "privacy/condition-probe/link_centred"
    probe = newest(committed_records, spl, "spl at 6,400 steps", "condition-probe")
    substituted = newest(committed_records, twin, "spl + ndd at 6,400 steps", "condition-probe")
    assert probe[centred] - probe[f"{centred}_ci95"] > 0
    assert abs(substituted[centred]) <= substituted[f"{centred}_ci95"]
    assert substituted[centred] + substituted[f"{centred}_ci95"] < probe[centred]
    names, substituted_names = (newest(committed_records, cell, name) for cell, name in
                                ((spl, "spl at 6,400 steps"), (twin, "spl + ndd at 6,400 steps")))
    for metric in ("a_at_100", "first_name", "last_name"):
        assert substituted_names[f"{GENERATE}/{metric}"] < names[f"{GENERATE}/{metric}"], metric
