"""What Li et al.'s NER tables claim, checked on the committed offline records (grids/ndd_conll2003.yaml and
grids/ndd_k_conll2003.yaml: frozen minilm tagger, 500 / 500 CoNLL-03 sentences, minilm-mlm, one seed).

These read records, they run nothing: the records come from `bench run --grid grids/ndd_conll2003.yaml
--results-dir results`, and `bench reproduce li_ndd_table1` prints the same comparisons with the paper's values.

The committed span-recovery records are version 1, an attack weaker than its own frequency reference (it filled only
the slot's length and ignored the prior; docs/attacks/spans.md): where these tests compare it with the frequency
guess they check the records as they stand, not that a defense hides spans. The substitutive ndd records are
version 1 too (substitutes from the client's own spans), superseded by ndd 2 and off the board until re-run: these
tests read them as recorded, with the board's supersession turned off.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.reproduction import reproduce as rep

RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.fixture(autouse=True)
def as_recorded(monkeypatch):
    """The records as they were made: no component version counts as superseding them."""
    from bench.results import record

    monkeypatch.setattr(record, "superseded", lambda _: set())


@pytest.fixture(scope="module")
def records(committed_records):
    return list(committed_records)


def ours(records, table: str) -> dict[str, float | None]:
    """Our mean per row id of a reproduction mapping."""
    return means(rep.reproduce(RESULTS, table, records))


def means(report: dict) -> dict[str, float | None]:
    """Our mean per row id of a reproduce report."""
    return {row["id"]: row["ours"]["mean"] for row in report["rows"]}


def ndd_cells(records, **args):
    """The CoNLL-03 records of ndd with these defense arguments (500 training sentences)."""
    return [r for r in records if r.spec["task"] == "conll2003" and r.spec["defense"] == "ndd"
            and r.spec["n_train"] == 500 and all(r.spec["defense_args"].get(k) == v for k, v in args.items())]


def parse_cell(records, task: str, **args):
    """The one NDD record of the parsing task ``task`` with these defense arguments."""
    [cell] = [r for r in records if r.spec["task"] == task and r.spec["defense"] == "ndd"
              and all(r.spec["defense_args"].get(k) == v for k, v in args.items())]
    return cell


def assert_ndd_chose_lower_and_hid(cell) -> None:
    """NDD's choices have less than 0.6 of the first drawn candidate's NDD, and span-recovery version 1 (weaker than
    its reference, see the module docstring) reads fewer spans back than the frequency guess does."""
    notes, metrics = cell.notes, cell.metrics
    assert notes["ndd_chosen_mean"] < 0.6 * notes["ndd_first_candidate_mean"], notes
    recovered, guess = metrics["privacy/span-recovery/recovered"], metrics["random/span-recovery/recovered"]
    assert recovered < guess, (recovered, guess)


def test_masking_loses_the_most_labelled_f1(records):
    table = ours(records, "li_ndd_table1")
    assert table["masked lf"] is not None and table["unprotected lf"] is not None
    others = {s: table[f"{s} lf"] for s in ("unprotected", "generated_without_ndd", "generated_with_ndd",
                                             "substituted_without_ndd", "substituted_with_ndd")}
    recorded = {s: v for s, v in others.items() if v is not None}
    assert len(recorded) >= 3, others
    assert table["masked lf"] < min(recorded.values()), (table["masked lf"], recorded)


def test_ndd_keeps_candidates_of_lower_ndd_than_the_first_drawn(records):
    cells = ndd_cells(records, select="ndd")
    assert cells, "no committed NDD-selected record"
    for record in cells:
        notes = record.notes
        assert notes["ndd_scored_spans"] > 100
        assert notes["ndd_chosen_mean"] < notes["ndd_first_candidate_mean"], notes


def test_every_ndd_record_that_ran_an_mlm_names_it_and_its_held_out_top1(records):
    """The default offline MLM scores at least 0.25 held-out top-1; Table 6's weaker one (minilm-mlm@100) less."""
    cells = [r for r in ndd_cells(records)
             if r.spec["defense_args"]["select"] == "ndd" or r.spec["defense_args"]["mode"] == "generative"]
    assert cells
    top1 = {}
    for record in cells:
        assert record.notes["mlm"] == record.spec["defense_args"]["mlm"], record.notes
        top1.setdefault(record.notes["mlm"], set()).add(record.notes["mlm_top1"])
    assert min(top1.pop("minilm-mlm")) >= 0.25
    assert set(top1) <= {"minilm-mlm@100"} and all(t < 0.25 for t in top1.get("minilm-mlm@100", ())), top1


def test_rewritten_entities_are_rarely_read_back(records):
    """Span-recovery recovers nearly every entity of the unprotected text and few of a rewritten one."""
    table = {}
    for record in records:
        if record.spec["task"] == "conll2003" and record.spec["attack"] == "span-recovery" \
                and record.spec["n_train"] == 500:
            args = record.spec["defense_args"]
            table[(record.spec["defense"], args.get("mode"), args.get("select"), args.get("k"), args.get("mlm"))] = \
                record.metrics["privacy/span-recovery/recovered"]
    assert table[("none", None, None, None, None)] > 0.95
    rewritten = {key: value for key, value in table.items() if key[0] in ("ndd", "mask")}
    assert len(rewritten) >= 3, table
    for key, value in rewritten.items():
        assert value < 0.2, (key, value)


def test_a_third_of_the_noun_phrases_substituted_keeps_the_parser(records):
    """Li et al. Table 2's 33% NP row on the committed PTB cells (grids/ndd_ptb.yaml, 1,500 / 400 sentences, chart
    parser on frozen minilm, k = 8): labelled F1 within 0.01 of the unprotected parser (measured 0.709 against
    0.715, one seed each; the unprotected parser's seeds 0-2 give 0.715 / 0.713 / 0.713), NDD's choices of lower
    NDD than the first candidate drawn (1.08 against 2.41), and the substituted phrases no more recoverable than the
    frequency guess's (0.055 against 0.054, where every phrase of the unprotected text is in the release)."""
    table = ours(records, "li_ndd_table2")
    assert abs(table["substituted_with_ndd_33pct_np lf"] - table["unprotected lf"]) <= 0.01, table
    cell = parse_cell(records, "ptb", fraction=0.33)
    notes = cell.notes
    assert notes["ndd_spans"] > 2000 and notes["ndd_chosen_mean"] < 0.6 * notes["ndd_first_candidate_mean"], notes
    recovered, guess = cell.metrics["privacy/span-recovery/recovered"], cell.metrics["random/span-recovery/recovered"]
    assert recovered < guess + 0.02, (recovered, guess)


def test_every_noun_phrase_substituted_costs_the_parser_more_than_a_third_of_them_and_hides_them(records):
    """Li et al. Table 2's 100% NP row on the full PTB slice (grids/ndd_ptb.yaml, 1,500 / 400 sentences, k = 8):
    substituting all 8,765 gold NPs of the training text with NDD costs the parser labelled F1 (measured 0.715 to
    0.665; the paper 90.47 to 88.86), more than a third of the NPs does (0.709), but not a tenth; NDD's choices have
    less than half the NDD of the first candidate drawn (1.08 against 2.37), and span-recovery reads fewer NPs back
    than the frequency guess does without the release (0.023 against 0.058; 1.0 undefended)."""
    table = ours(records, "li_ndd_table2")
    unprotected, every_np, third = (table[f"{row} lf"] for row in (
        "unprotected", "substituted_with_ndd_100pct_np", "substituted_with_ndd_33pct_np"))
    assert every_np < third <= unprotected and unprotected - every_np < 0.1, table
    cell = parse_cell(records, "ptb", kinds="NP", fraction=1.0)
    notes = cell.notes
    assert notes["spans_rewritten"] == notes["ndd_spans"] == notes["ndd_scored_spans"] > 8000, notes
    assert_ndd_chose_lower_and_hid(cell)


def test_every_phrase_substituted_on_the_full_slice_costs_the_parser_and_hides_the_phrases(records):
    """Li et al. Table 2's 100% P row on the full PTB slice (grids/ndd_ptb.yaml, 1,500 / 400 sentences, k = 8):
    substituting all 10,468 innermost gold phrases of the training text with NDD costs the parser labelled F1
    (measured 0.715 to 0.651; the paper 90.47 to 87.59) but not a tenth, more than every NP does (0.665); NDD's
    choices have less than half the NDD of the first candidate drawn (1.05 against 2.34), and span-recovery reads
    fewer phrases back than the frequency guess does without the release (0.049 against 0.112; 1.0 undefended)."""
    table = ours(records, "li_ndd_table2")
    drop = table["unprotected lf"] - table["substituted_with_ndd_100pct_p lf"]
    assert 0.0 < drop < 0.1, table
    claims = {c["id"]: c for c in rep.reproduce(RESULTS, "li_ndd_table2", records)["claims"]}
    assert claims["NDD T2: the less is substituted, the more parsing utility is kept"]["verdict"] == "holds"
    cell = parse_cell(records, "ptb", kinds="all")
    notes = cell.notes
    assert notes["spans_rewritten"] == notes["ndd_spans"] == 10468, notes
    # a span of a kind with no other phrase in the pool has no candidate and is masked instead (2 here)
    assert notes["ndd_scored_spans"] + notes["ndd_masked_for_want_of_candidates"] == 10468, notes
    assert_ndd_chose_lower_and_hid(cell)


def test_every_phrase_substituted_on_ptb20_costs_the_parser_a_little_and_hides_the_phrases(records):
    """Li et al. Table 2's 100% P row on ptb-20 (grids/ndd_ptb20.yaml: every sentence of at most 20 words, 1,401 /
    204, chart parser on frozen minilm, k = 8): substituting all 5,888 gold phrases of the training text with NDD
    costs the parser some labelled F1 but not a tenth (measured 0.769 to 0.729; the paper 0.905 to 0.876), and
    span-recovery reads fewer phrases back from the release than the frequency guess does without it (0.039
    against 0.108; 1.0 undefended)."""
    table = ours(records, "li_ndd_table2")
    drop = table["ptb-20 unprotected lf"] - table["ptb-20 substituted_with_ndd_100pct_p lf"]
    assert 0.0 < drop < 0.1, table
    cell = parse_cell(records, "ptb-20", kinds="all")
    notes = cell.notes
    assert notes["spans_rewritten"] == notes["ndd_spans"] > 5000, notes
    assert_ndd_chose_lower_and_hid(cell)


def test_on_ptb20_the_less_is_substituted_the_more_the_parser_keeps(records):
    """Li et al. Table 2's three rows on ptb-20 (grids/ndd_ptb20.yaml, one seed each). Labelled F1 rises from every
    phrase (measured 0.729) to every NP (0.732) to a third of the NPs (0.758), against 0.769 unprotected, as in the
    paper (87.59 / 88.86 / 90.44 against 90.47). The first two differ by less than a seed can separate, so the gate
    is on the ordering's verdict and on the third of the NPs losing less than half of what every phrase loses. Every
    NDD rewrite leaves span-recovery below the frequency guess, and NDD's choice below the first candidate drawn."""
    report = rep.reproduce(RESULTS, "li_ndd_table2", records)
    table = means(report)
    claims = {c["id"]: c for c in report["claims"]}
    assert claims["NDD T2 (ptb-20): the less is substituted, the more parsing utility is kept"]["verdict"] == "holds"
    unprotected = table["ptb-20 unprotected lf"]
    every_phrase, third = (table[f"ptb-20 substituted_with_ndd_{m} lf"] for m in ("100pct_p", "33pct_np"))
    assert 0.0 < unprotected - third < 0.5 * (unprotected - every_phrase), table
    cells = [r for r in records if r.spec["task"] == "ptb-20" and r.spec["defense"] == "ndd"]
    assert {(c.spec["defense_args"]["kinds"], c.spec["defense_args"]["fraction"]) for c in cells} == {
        ("all", 1.0), ("NP", 1.0), ("NP", 0.33)}
    for cell in cells:
        assert_ndd_chose_lower_and_hid(cell)


def test_squad_ndd_selection_keeps_the_reader_and_hides_the_entities(records):
    """Li et al. Table 3's dev rows on the committed SQuAD cells (grids/ndd_squad.yaml: 2,000 / 500 questions, frozen
    minilm reader, spaCy entities, k = 8, NDD within 16 words, the client's MLM in bf16). Both of the table's claims
    hold as recorded: F1 0.301 with NDD selection against 0.277 without and 0.299 unprotected. All 17,954 entities
    are scored, NDD's choices average 0.93 against 2.61 for the first drawn, and span-recovery reads back fewer
    entities than the frequency guess."""
    report = rep.reproduce(RESULTS, "li_ndd_table3", records)
    assert all(row["ours"]["mean"] is not None for row in report["rows"]), report["rows"]
    verdicts = {c["id"]: c["verdict"] for c in report["claims"]}
    assert set(verdicts.values()) == {"holds"}, verdicts
    [cell] = [r for r in records if r.spec["task"] == "squad" and r.spec["defense"] == "ndd"
              and r.spec["defense_args"]["select"] == "ndd"]
    assert cell.notes["ndd_scored_spans"] == cell.notes["spans_declared"] == 17954, cell.notes
    assert cell.notes["ndd_mlm_precision"] == "bf16" and cell.notes["ndd_masked_for_want_of_candidates"] == 0
    assert cell.notes["mlm"] == "minilm-mlm" and cell.notes["mlm_top1"] >= 0.25, cell.notes
    assert_ndd_chose_lower_and_hid(cell)


def test_a_weaker_mlm_computing_ndd_changes_ner_little_and_still_hides(records):
    """Table 6's PLM axis offline (grids/ndd_k_conll2003.yaml): NDD computed by minilm-mlm@100 (held-out top-1
    0.156, against 0.305 at 800 steps) at k = 8. Labelled F1 0.571 against 0.564, within 0.02 as the paper's three
    PLMs are within 0.7 points (the ordering, stronger above weaker, is reversed here by less than a seed
    separates); NDD still keeps candidates below the first drawn and span-recovery stays below the guess."""
    report = rep.reproduce(RESULTS, "li_ndd_table6", records)
    verdicts = {c["id"]: c["verdict"] for c in report["claims"]}
    assert verdicts["NDD T6 (ours, offline MLM axis): the MLM computing NDD changes labelled F1 little"] == "holds"
    [weak] = ndd_cells(records, mode="substitutive", select="ndd", k=8, mlm="minilm-mlm@100")
    [strong] = ndd_cells(records, mode="substitutive", select="ndd", k=8, mlm="minilm-mlm")
    assert weak.notes["mlm"] == "minilm-mlm@100" and weak.notes["mlm_top1"] < strong.notes["mlm_top1"] - 0.1
    assert weak.notes["ndd_scored_spans"] == strong.notes["ndd_scored_spans"]
    assert_ndd_chose_lower_and_hid(weak)
