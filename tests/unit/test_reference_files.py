"""Structure of results/reference/*.json, and their numbers against the papers' text files.

Offline. The structural checks always run; the transcription checks read the plain-text papers in
../shared/papers (beside the repository) and skip when that folder is absent. A reference file holds one
table (``source.table``, ``setting``, ``values``) or several (``source.tables.<key>``, ``setting.<key>``,
``values.<key>``); each table names its text file and a locator (the text just before and just after the
table) so every transcribed number can be looked up in the table's region of the text.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "results" / "reference"
PAPERS = Path(__file__).resolve().parents[2].parent / "shared" / "papers"
FILES = sorted(REFERENCE.glob("*.json"))
PAPER_FILES = {"huang2020_texthide.txt", "qu2021_privacy_preserving_bert.txt",
               "slides_dp_nlp_qu2021_yue2021_santext.txt", "li_ndd_semantics_preserved_distortion.txt"}
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def load(name: str) -> dict:
    return json.loads((REFERENCE / name).read_text(encoding="utf-8"))


def tables(doc: dict) -> list[tuple[str, dict, dict, object]]:
    """(key, source entry with its file, setting, values) of every table of a reference file."""
    source = doc["source"]
    if "tables" in source:
        return [(key, {"file": source["file"], **entry}, doc["setting"][key], doc["values"][key])
                for key, entry in source["tables"].items()]
    return [(source["table"], source, doc["setting"], doc["values"])]


def numbers(tree) -> list[float]:
    """Every number in a values tree (means and stds included)."""
    if isinstance(tree, dict):
        return [x for value in tree.values() for x in numbers(value)]
    if tree is None:
        return []
    return [tree]


def paper(name: str) -> str:
    if not PAPERS.is_dir():
        pytest.skip(f"the papers' text files are not at {PAPERS}")
    return (PAPERS / name).read_text(encoding="utf-8")


def region(name: str, locator: dict) -> str:
    """The text from the locator's start to its end (both included); both must be found."""
    text = paper(name)
    start = text.index(locator["start"])
    end = text.index(locator["end"], start + len(locator["start"]))
    return text[start:end + len(locator["end"])]


def printed(text: str) -> set[float]:
    return {round(float(token), 6) for token in NUMBER.findall(text)}


TABLES = [(path.name, key) for path in FILES for key, *_ in tables(json.loads(path.read_text(encoding="utf-8")))]


# -- structure -----------------------------------------------------------------------------------------------------


def test_reference_files_exist():
    names = {path.name for path in FILES}
    for required in ("texthide.json", "texthide_table1.json", "texthide_table2.json", "texthide_table8.json",
                     "qu2021_dchi.json", "qu2021_adaptation.json", "yue2021_santext.json",
                     "li_ndd_table4.json", "li_ndd_table7.json"):
        assert required in names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_structure(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    for key in ("source", "setting", "values", "value_format", "scale", "status"):
        assert key in doc, key
    assert doc["source"]["file"] in PAPER_FILES
    assert doc["scale"] in (1, 100)
    assert isinstance(doc["value_format"], str) and "as printed" in doc["value_format"]
    assert "not transcribed" not in doc["status"]
    for key, source, setting, values in tables(doc):
        assert source["file"] in PAPER_FILES, key
        assert re.fullmatch(r"Table \d+", source["table"]), key
        assert len(source["caption"]) > 20, key
        assert source["locator"]["start"] and source["locator"]["end"], key
        assert isinstance(setting, dict) and setting, key
        assert numbers(values), key


def check_tree(tree, where: str) -> None:
    """Leaves are finite numbers or null; a spread is {mean, std}, never a string such as '72.0(0.86)'."""
    if isinstance(tree, dict):
        if "mean" in tree or "std" in tree:
            assert set(tree) == {"mean", "std"}, where
            for part in ("mean", "std"):
                value = tree[part]
                assert isinstance(value, (int, float)) and not isinstance(value, bool), where
                assert math.isfinite(value), where
            assert tree["std"] >= 0, where
            return
        for key, value in tree.items():
            check_tree(value, f"{where}.{key}")
        return
    if tree is None:
        return
    assert isinstance(tree, (int, float)) and not isinstance(tree, bool), (where, tree)
    assert math.isfinite(tree), where


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_values_finite_with_means_and_stds_apart(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    check_tree(doc["values"], "values")
    for entry in doc.get("text_claims", []):
        assert math.isfinite(entry["value"])


def test_table_layouts():
    """Spot checks of the keys the reproduce tests read."""
    table1 = load("texthide_table1.json")
    assert table1["values"]["rte"]["baseline"]["accuracy"] == {"mean": 72.0, "std": 0.86}
    assert table1["values"]["mnli"]["inter"] is None and table1["setting"]["runs"] == 5
    assert table1["defense_args_by_task"]["rte"] == {"m": 16, "k": 4}
    assert set(table1["values"]["mrpc"]["intra"]) == {"f1", "accuracy"}
    assert set(table1["values"]["stsb"]["inter"]) == {"pearson", "spearman"}
    assert set(table1["values"]["mnli"]["baseline"]) == {"matched", "mismatched"}
    assert set(load("texthide_table8.json")["values"]["cola"]) == {"baseline", "mix_only", "texthide", "rand"}
    assert "LeNet-5" in load("texthide_table2.json")["deviation"]
    dchi = load("qu2021_dchi.json")
    assert set(dchi["values"]["table4"]) == {"sst2"} and set(dchi["values"]["table5"]) == {"qqp"}
    for table in ("table4", "table5"):
        for cells in dchi["values"][table].values():
            assert set(cells["bert"]) == set(cells["bilstm"]) == {"token_rep", "text_to_text"}
    assert dchi["text_claims"][0]["eta"] == 175
    adaptation = load("qu2021_adaptation.json")
    assert None not in adaptation["pretraining"].values()
    assert (adaptation["pretraining"]["steps"], adaptation["pretraining"]["batch_size"]) == (1000000, 256)
    yue = load("yue2021_santext.json")
    assert set(yue["values"]) == {"sst2", "medsts", "qnli"}
    assert set(yue["values"]["sst2"]) == {"random", "feyisetan", "santext", "santext_plus", "unsanitized"}


# -- consistency inside and across tables (offline) -----------------------------------------------------------------


def test_qu_orig_columns_repeat_tables_4_and_5():
    dchi, adaptation = load("qu2021_dchi.json")["values"], load("qu2021_adaptation.json")["values"]
    fine_tuning = {"sst2": dchi["table4"]["sst2"]["bert"], "qqp": dchi["table5"]["qqp"]["bert"]}
    for table, privatization in (("table6", "token_rep"), ("table7", "text_to_text")):
        for task, bert in fine_tuning.items():
            assert adaptation[table][task]["orig"] == bert[privatization], (table, task)


def test_qu_significance_refers_to_cells():
    for name, tables_with_values in (("qu2021_dchi.json", ("table4", "table5")),
                                     ("qu2021_adaptation.json", ("table6", "table7"))):
        doc = load(name)
        for table in tables_with_values:
            def walk(marks, cells, where):
                for key, value in marks.items():
                    assert key in cells, where + "." + key
                    if isinstance(value, list):
                        assert value and all(1 <= column <= 4 for column in value), where
                    else:
                        walk(value, cells[key], where + "." + key)
            walk(doc["significance"].get(table, {}), doc["values"][table], f"{name}:{table}")


def test_texthide_public_corpus_row_repeats_table1():
    table1 = load("texthide_table1.json")["values"]
    assert load("texthide_table6.json")["values"]["sst2"]["mnli"] == table1["sst2"]["inter"]["accuracy"]


def test_readme_names_every_file():
    readme = (REFERENCE / "README.md").read_text(encoding="utf-8")
    for path in FILES:
        assert path.name in readme, path.name


# -- transcription against the text files ----------------------------------------------------------------------------


@pytest.mark.parametrize("name,key", TABLES)
def test_every_value_is_printed_in_its_table(name, key):
    """Each transcribed number occurs among the numbers of the table's region of the text (and of its second copy)."""
    doc = load(name)
    _, source, _, values = next(entry for entry in tables(doc) if entry[0] == key)
    found = printed(region(source["file"], source["locator"]))
    missing = sorted({round(v, 6) for v in numbers(values)} - found)
    assert not missing, f"{name} {key}: not in {source['file']}'s table region: {missing}"
    if "also_in" in source:
        copy = source["also_in"]
        subset = {task: values[task] for task in copy.get("tasks", values)}
        found = printed(region(copy["file"], copy["locator"]))
        missing = sorted({round(v, 6) for v in numbers(subset)} - found)
        assert not missing, f"{name} {key}: not in {copy['file']}'s copy: {missing}"


def test_text_claims_are_in_the_text():
    for name in (path.name for path in FILES):
        doc = load(name)
        text = paper(doc["source"]["file"])
        for claim in doc.get("text_claims", []):
            for raw in claim.get("raw", [f"{claim['value']}"]):
                assert raw in text, (name, raw)


def line(text: str, prefix: str, occurrence: int = 0) -> str:
    lines = [row.strip() for row in text.splitlines() if row.strip().startswith(prefix)]
    return lines[occurrence]


def decimals(row: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![\d.])\d+\.\d+(?![\d.])", row)]


def test_rows_in_order():
    """A handful of whole rows, in the order printed, against the transcription."""
    texthide = paper("huang2020_texthide.txt")
    t1 = load("texthide_table1.json")
    table = region("huang2020_texthide.txt", t1["source"]["locator"])
    pairs = [(float(m), float(s)) for m, s in re.findall(r"(\d+\.\d+)\((\d+\.\d+)\)", line(table, "RTE"))]
    assert pairs == [tuple(t1["values"]["rte"][s]["accuracy"].values()) for s in ("baseline", "intra", "inter")]
    pairs = [(float(m), float(s)) for m, s in re.findall(r"(\d+\.\d+)\((\d+\.\d+)\)", line(table, "QQP"))]
    qqp = t1["values"]["qqp"]
    assert pairs == [tuple(qqp[s][m].values()) for s in ("baseline", "intra", "inter") for m in ("f1", "accuracy")]

    t2 = load("texthide_table2.json")
    table = region("huang2020_texthide.txt", t2["source"]["locator"])
    assert decimals(line(table, "111")) == list(t2["values"]["texthide"]["1"].values())
    assert decimals(line(table, "0.82"))[0] == t2["values"]["baseline"]

    t3 = load("texthide.json")
    table = region("huang2020_texthide.txt", t3["source"]["locator"])
    schemes = ("baseline", "mix_only", "texthide", "rand")
    assert decimals(line(table, "Identity", 0)) == [t3["values"]["cola"][s]["identity"] for s in schemes]
    assert decimals(line(table, "SBERTsim", 1)) == [t3["values"]["sst2"][s]["sbert"] for s in schemes]

    t8 = load("texthide_table8.json")
    table = region("huang2020_texthide.txt", t8["source"]["locator"])
    assert decimals(line(table, "Label", 1)) == [t8["values"]["sst2"][s]["label"] for s in schemes]
    assert decimals(line(table, "ID", 0)) == [t8["values"]["cola"][s]["identity"] for s in schemes]
    assert "CIFAR-10" in texthide and "LeNet-5" in texthide

    dchi = load("qu2021_dchi.json")
    slides = region("slides_dp_nlp_qu2021_yue2021_santext.txt", dchi["source"]["tables"]["table3"]["locator"])
    assert decimals(line(slides, "SST")) == list(dchi["values"]["table3"]["sst2"].values())
    text = region("qu2021_privacy_preserving_bert.txt", dchi["source"]["tables"]["table3"]["also_in"]["locator"])
    assert decimals(line(text, "QQP")) == list(dchi["values"]["table3"]["qqp"].values())
    text = region("qu2021_privacy_preserving_bert.txt", dchi["source"]["tables"]["table5"]["also_in"]["locator"])
    cells = dchi["values"]["table5"]["qqp"]
    assert decimals(line(text, "150 |")) == [cells[e][p]["150"] for e in ("bert", "bilstm")
                                             for p in ("token_rep", "text_to_text")]

    adaptation = load("qu2021_adaptation.json")
    text = region("qu2021_privacy_preserving_bert.txt", adaptation["source"]["tables"]["table7"]["locator"])
    cells = adaptation["values"]["table7"]
    assert decimals(line(text, "100 |")) == [cells[t][o]["100"] for t in ("sst2", "qqp")
                                             for o in ("orig", "vanilla", "prob", "denoising")]

    yue = load("yue2021_santext.json")
    table = region("slides_dp_nlp_qu2021_yue2021_santext.txt", yue["source"]["locator"])
    assert decimals(line(table, "SANTEXT <sup>+</sup>")) == [yue["values"][t]["santext_plus"][e]
                                                             for t in ("sst2", "medsts", "qnli") for e in "123"]
    assert decimals(line(table, "Unsanitized")) == [yue["values"][t]["unsanitized"] for t in ("sst2", "medsts", "qnli")]

    ndd = "li_ndd_semantics_preserved_distortion.txt"
    t1 = load("li_ndd_table1.json")
    table = region(ndd, t1["source"]["locator"])
    assert decimals(line(table, "Substituted w/ NDD")) == list(t1["values"]["substituted_with_ndd"].values())
    t4 = load("li_ndd_table4.json")
    table = region(ndd, t4["source"]["locator"])
    row = t4["values"]["reverse_sigmoid"]
    assert decimals(line(table, "Reverse Sigmoid")) == [row[d][m] for d in ("agnews", "blog", "tp_us")
                                                        for m in ("utility", "aia")]
    t7 = load("li_ndd_table7.json")
    table = region(ndd, t7["source"]["locator"])
    row = t7["values"]["spl_deidentified"]
    assert [float(x) for x in re.findall(r"\d+(?:\.\d+)?", line(table, "SPL-Deidentified").split("}")[-1])] \
        == list(row.values())


QU_COLUMNS = {
    "table4": [("sst2", "bert", "token_rep"), ("sst2", "bert", "text_to_text"),
               ("sst2", "bilstm", "token_rep"), ("sst2", "bilstm", "text_to_text")],
    "table5": [("qqp", "bert", "token_rep"), ("qqp", "bert", "text_to_text"),
               ("qqp", "bilstm", "token_rep"), ("qqp", "bilstm", "text_to_text")],
    "table6": [(t, o) for t in ("sst2", "qqp") for o in ("orig", "vanilla", "prob", "denoising")],
    "table7": [(t, o) for t in ("sst2", "qqp") for o in ("orig", "vanilla", "prob", "denoising")],
}


@pytest.mark.parametrize("table", sorted(QU_COLUMNS))
def test_qu_cells_and_significance_marks_match_the_paper_text(table):
    """Every cell of Qu et al.'s Tables 4-7, with its ▲ marks, read from the paper text's grid."""
    doc = load("qu2021_dchi.json" if table in ("table4", "table5") else "qu2021_adaptation.json")
    entry = doc["source"]["tables"][table]
    copy = entry["also_in"] if entry["file"] != "qu2021_privacy_preserving_bert.txt" else entry
    text = region("qu2021_privacy_preserving_bert.txt", copy["locator"])
    seen = 0
    for row in text.splitlines():
        eta = row.split("|")[0].strip()
        if eta not in ("50", "75", "100", "125", "150", "175") or "0." not in row:
            continue
        cells = [cell.strip() for cell in row.split("|")[1:] if cell.strip()]
        assert len(cells) == len(QU_COLUMNS[table]), row
        for cell, column in zip(cells, QU_COLUMNS[table]):
            value, marks = re.fullmatch(r"(?:\\ul)?(0\.\d{4})(?:▲([\d,]+))?", cell).groups()
            node, sig = doc["values"][table], doc["significance"].get(table, {})
            for part in column:
                node, sig = node[part], sig.get(part, {})
            assert node[eta] == float(value), (table, column, eta)
            assert sig.get(eta, []) == ([int(c) for c in marks.split(",")] if marks else []), (table, column, eta)
            seen += 1
    assert seen == 6 * len(QU_COLUMNS[table])
